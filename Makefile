# Fleet view for Apache Kafka: `make demo` runs the product, `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMPS := .cache/stamps
KAFKA_VERSIONS := 3.9.2 4.3.1
PYTEST_ARGS ?=

.PHONY: demo test shifted-clock install install-dev deps-system deps-demo-system kafka-jars client-jars inventory-jars oidc-provider lint typecheck unit clean

demo: install deps-demo-system
	$(PY) -m backend demo

test: install-dev deps-system kafka-jars client-jars inventory-jars oidc-provider s3a-jars lint typecheck shifted-clock
	mkdir -p artifacts
	$(PY) -m pytest --junitxml=artifacts/junit.xml $(PYTEST_ARGS)

# No test may depend on the day it runs: the tests that need no broker, browser or JVM run again with the wall clock
# 45 and 400 days ahead (tests/conftest.py --clock-shift, --pure-only). The two runs go side by side (one core
# each); each one's output is printed when both are done, and either failing fails the target.
SHIFTS := 45 400
shifted-clock: install-dev
	mkdir -p artifacts
	@rc=0; pids=""; \
	for d in $(SHIFTS); do \
		$(PY) -m pytest tests/unit --pure-only --clock-shift=$$d -q -p no:cacheprovider \
			--junitxml=artifacts/junit-clock-$${d}d.xml > artifacts/clock-$${d}d.log 2>&1 & pids="$$pids $$!"; \
	done; \
	for p in $$pids; do wait $$p || rc=1; done; \
	for d in $(SHIFTS); do echo "== tests/unit, clock +$$d days"; cat artifacts/clock-$${d}d.log; done; \
	exit $$rc

unit: install-dev
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMPS)/requirements: requirements.txt | $(VENV)/bin/python
	$(PIP) install --quiet -r requirements.txt
	mkdir -p $(STAMPS) && touch $@

$(STAMPS)/requirements-dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PIP) install --quiet -r requirements-dev.txt
	mkdir -p $(STAMPS) && touch $@ $(STAMPS)/requirements

install: $(STAMPS)/requirements

install-dev: $(STAMPS)/requirements-dev

# Debian packages: Chromium (UI tests, PNG/SVG export), kcat (peer in tests and benchmarks), Prometheus
# (a real server scrapes the poller's metrics endpoint in the tests) and systemd (systemd-analyze verify checks
# deploy/fleetview.service).
# Installed when run as root; otherwise they must already be there.
deps-system:
	@bash scripts/install-system-deps.sh chromium kcat prometheus systemd

# The demo registers its ZooKeeper-mode lab cluster in Debian's ZooKeeper server when it can.
deps-demo-system:
	@bash scripts/install-system-deps.sh --optional chromium zookeeper

# Kafka broker jars for the test rig, from Maven Central through tests/pom.xml, cached in .cache/kafka.
# Each release's kafka-tools jar (kafka-consumer-groups.sh's ConsumerGroupCommand) beside them, in .cache/kafka-tools.
kafka-jars: $(foreach v,$(KAFKA_VERSIONS),$(STAMPS)/kafka-$(v) $(STAMPS)/kafka-tools-$(v))

$(STAMPS)/kafka-tools-%: tests/tools/pom.xml
	mvn -B -q -f tests/tools/pom.xml -Dkafka.version=$* dependency:copy
	mkdir -p $(STAMPS) && touch $@

$(STAMPS)/kafka-%: tests/pom.xml
	mvn -B -q -f tests/pom.xml -Dkafka.version=$* dependency:copy-dependencies
	mkdir -p $(STAMPS) && touch $@

# A real OpenID Connect provider for the login tests: npm oidc-provider, pinned in tests/oidc/package-lock.json.
# The marker npm ci writes lives in the checkout itself, so each clone installs its own.
oidc-provider: tests/oidc/node_modules/.package-lock.json

tests/oidc/node_modules/.package-lock.json: tests/oidc/package.json tests/oidc/package-lock.json
	npm ci --prefix tests/oidc --ignore-scripts --no-audit --no-fund

# Java client jars, from Maven Central: the clients the real-client log tests build (tests/clients/pom.xml,
# into .cache/clients/<version>/libs and .cache/clients/logging), and the kafka-clients and kafka-streams jars
# of every release known_keys.json is generated from (tests/known-keys/pom.xml, into .cache/known-keys).
client-jars: $(STAMPS)/known-keys $(foreach v,$(KAFKA_VERSIONS),$(STAMPS)/clients-$(v))

$(STAMPS)/known-keys: tests/known-keys/pom.xml
	mvn -B -q -f tests/known-keys/pom.xml dependency:copy
	mkdir -p $(STAMPS) && touch $@

$(STAMPS)/clients-%: tests/clients/pom.xml
	mvn -B -q -f tests/clients/pom.xml -Dclients.version=$* dependency:copy-dependencies dependency:copy
	mkdir -p $(STAMPS) && touch $@

# The client-inventory tests' parts (tests/client-inventory/pom.xml): the Prometheus JMX exporter Java agent
# (.cache/inventory/agent) and old Java clients with their dependencies (.cache/inventory/clients/<version>).
INVENTORY_CLIENT_VERSIONS := 0.10.2.2 2.8.2
inventory-jars: $(STAMPS)/inventory-agent $(foreach v,$(INVENTORY_CLIENT_VERSIONS),$(STAMPS)/inventory-clients-$(v))

$(STAMPS)/inventory-agent: tests/client-inventory/pom.xml
	mvn -B -q -f tests/client-inventory/pom.xml dependency:copy
	mkdir -p $(STAMPS) && touch $@

$(STAMPS)/inventory-clients-%: tests/client-inventory/pom.xml
	mvn -B -q -f tests/client-inventory/pom.xml -Dclients.version=$* dependency:copy-dependencies
	mkdir -p $(STAMPS) && touch $@

# What Spark needs to read and write a lake in S3 (s3a://), from Maven Central through deploy/spark-s3a/pom.xml:
# hadoop-aws of pyspark's Hadoop, the AWS SDK v2 bundle (about 0.7 GB; ~/.m2 keeps it across clones) and the S3
# analytics accelerator, into .cache/s3a (backend/pipeline/spark.py puts them on the driver's and executors' classpath).
.PHONY: s3a-jars
s3a-jars: $(STAMPS)/s3a-jars

$(STAMPS)/s3a-jars: deploy/spark-s3a/pom.xml
	mvn -B -q -f deploy/spark-s3a/pom.xml dependency:copy
	mkdir -p $(STAMPS) && touch $@

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck: install-dev
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .cache artifacts .pytest_cache .mypy_cache .ruff_cache tests/oidc/node_modules
