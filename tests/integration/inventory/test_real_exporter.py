"""The client inventory against real parts: a Kafka 3.9.2 broker with the real Prometheus JMX exporter agent
(its default rules, then Strimzi-style, Strimzi-style with the documented KIP-896 rule, Confluent-style: the agent
reloads its rules file), real clients of several generations connected at once (kafka-clients 0.10.2.2, 2.8.2,
3.9.2, 4.3.1, confluent-kafka, kcat), and Debian's Prometheus scraping the exporter for the `prometheus` source.

One broker for the module; the agent's rules change under it. The inventory must equal what the exporter's own
/metrics says; readiness must be blocked by the 0.10.2.2 client's requests (software `unknown`) and turn ready for
the client items once it stopped and the window passed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from backend.collect.client_metrics import ClientMetricsCollector
from backend.collect.configs import ConfigCollector
from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.store.lake import Lake
from backend.views import frames, readiness
from tests.rig.kafka import KafkaZkCluster, ZooKeeperServer
from tests.rig.procs import REPO, RigError, free_port, log_tail

AGENT = REPO / ".cache" / "inventory" / "agent" / "jmx_prometheus_javaagent-1.0.1.jar"
OLD_CLIENTS = REPO / ".cache" / "inventory" / "clients"
CLIENTS = REPO / ".cache" / "clients"
PROGRAM = REPO / "tests" / "clients" / "InventoryClient.java"
RULES = Path(__file__).with_name("exporter")
WINDOW_S = 6.0
KIP511 = {"kafka_server_socket_server_metrics_connections", "kafka_server_socket_server_metrics_connections_software",
          "kafka_server_socketservermetrics_connections"}


class Exporter:
    """The broker's exporter: its port and its rules file (the agent reloads the file when it changes)."""

    def __init__(self, port: int, rules: Path) -> None:
        self.port = port
        self.rules = rules

    @property
    def source(self) -> str:
        """The fleet file's [clusters.broker_metrics] line for this exporter ({host} filled from Metadata)."""
        return 'metrics_url = "http://{host}:' + str(self.port) + '/metrics"'

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def use(self, *names: str) -> None:
        text = "".join((RULES / f"{n}.yaml").read_text(encoding="utf-8") for n in names)
        self.rules.write_text(text, encoding="utf-8")
        time.sleep(1.1)  # the agent compares the file's modification time, in seconds

    def page(self) -> str:
        with urllib.request.urlopen(self.url, timeout=10) as response:
            return str(response.read().decode("utf-8"))


@pytest.fixture(scope="module")
def broker(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaZkCluster, Exporter]]:
    """A 3.9.2 ZooKeeper-mode broker started with the real jmx_prometheus_javaagent (default rules first)."""
    assert AGENT.is_file(), "the JMX exporter agent is missing: run `make inventory-jars`"
    work = tmp_path_factory.mktemp("inventory-broker")
    exporter = Exporter(free_port(), work / "exporter.yaml")
    exporter.rules.write_text((RULES / "jmx-default.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    cluster = KafkaZkCluster(work, zookeeper, zk_chroot="/inventory39", auto_create_topics=True,
                             jvm_args=[f"-javaagent:{AGENT}=127.0.0.1:{exporter.port}:{exporter.rules}"])
    cluster.start()
    try:
        yield cluster, exporter
    finally:
        cluster.stop()


class Client:
    """One real client process kept connected until stopped."""

    def __init__(self, cmd: list[str], log: Path) -> None:
        self.log = log
        self.out = log.open("wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=self.out, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def wait_for(self, text: str, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log.read_text(encoding="utf-8", errors="replace"):
                return
            if self.proc.poll() is not None:
                raise RigError(f"client exited:\n{log_tail(self.log)}")
            time.sleep(0.3)
        raise RigError(f"client did not print {text!r}:\n{log_tail(self.log)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.out.close()


def _java_client(jars: Path, bootstrap: str, name: str, log_dir: Path) -> Client:
    assert any(jars.glob("kafka-clients-*.jar")), f"client jars missing in {jars}: run `make client-jars inventory-jars`"
    return Client(["java", "-Xmx96m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{jars}/*", str(PROGRAM),
                   bootstrap, "inventory", "20", name], log_dir / f"{name}.log")


@pytest.fixture(scope="module")
def clients(broker: tuple[KafkaZkCluster, Exporter], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Client]]:
    """Real clients of several generations, connected at the same time."""
    cluster, _ = broker
    logs = tmp_path_factory.mktemp("inventory-clients")
    started: dict[str, Client] = {}
    try:
        started["old"] = _java_client(OLD_CLIENTS / "0.10.2.2", cluster.bootstrap, "old", logs)
        started["old"].wait_for("SENT 20")  # first: it auto-creates the topic the others use
        for name, jars in (("java28", OLD_CLIENTS / "2.8.2"), ("java39", CLIENTS / "3.9.2" / "libs"),
                           ("java43", CLIENTS / "4.3.1" / "libs")):
            started[name] = _java_client(jars, cluster.bootstrap, name, logs)
        kcat = shutil.which("kcat")
        assert kcat, "kcat is not installed: run `make deps-system`"
        started["kcat"] = Client([kcat, "-C", "-b", cluster.bootstrap, "-t", "inventory", "-o", "end", "-u", "-q"],
                                 logs / "kcat.log")
        for name in ("java28", "java39", "java43"):
            started[name].wait_for("SENT 20")
        yield started
    finally:
        for client in started.values():
            client.stop()


@pytest.fixture(scope="module")
def librdkafka(broker: tuple[KafkaZkCluster, Exporter]) -> Iterator[Producer]:
    """A confluent-kafka (librdkafka) producer kept connected."""
    producer = Producer({"bootstrap.servers": broker[0].bootstrap, "topic.metadata.refresh.interval.ms": 2000})
    producer.produce("inventory", b"x")
    producer.flush(30)
    yield producer
    producer.flush(5)


def _fleet(tmp: Path, source: str, window_s: float = WINDOW_S) -> Path:
    path = tmp / "clusters.toml"
    path.write_text(f"""
[settings]
client_metrics_interval_s = 0.5
client_metrics_window_s = {window_s}
config_interval_s = 0
[[clusters]]
name = "inv39"
bootstrap_servers = "{{bootstrap}}"
[clusters.broker_metrics]
{source}
""", encoding="utf-8")
    return path


def _exporter_software(page: str) -> dict[tuple[str, str], int]:
    """Connections per (software, version) as the exporter's page says, read without the product's code."""
    out: dict[tuple[str, str], int] = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name in KIP511:
                labels = {k.lower().replace("_", ""): v for k, v in s.labels.items()}
                key = (labels["clientsoftwarename"], labels["clientsoftwareversion"])
                out[key] = out.get(key, 0) + int(s.value)
    return {k: v for k, v in out.items() if v > 0}


def _poll(fleet_file: Path, bootstrap: str, lake: Path, collector: ClientMetricsCollector) -> readiness.Readiness:
    fleet_file.write_text(fleet_file.read_text(encoding="utf-8").replace("{bootstrap}", bootstrap), encoding="utf-8")
    fleet = load_fleet(fleet_file)
    time.sleep(0.6)  # the collector's interval
    run_poller(fleet, Lake(lake), once=True, client_metrics=collector, configs=ConfigCollector())
    return readiness.readiness(frames.latest_clusters(str(lake)), frames.latest_rows(str(lake), "broker_snapshots"),
                               frames.inventory_rows(str(lake)), frames.inventory_runs(str(lake)))


def _stable_inventory(exporter: Exporter, fleet_file: Path, bootstrap: str, lake: Path,
                      collector: ClientMetricsCollector) -> tuple[readiness.Readiness, dict[tuple[str, str], int]]:
    """Poll until the inventory equals the exporter's own page read just before and after (connections settle)."""
    last: tuple[dict[tuple[str, str], int], ...] = ()
    for _ in range(8):
        before = _exporter_software(exporter.page())
        report = _poll(fleet_file, bootstrap, lake, collector)
        after = _exporter_software(exporter.page())
        inventory = collector.last("inv39")
        assert inventory is not None
        ours = {k: v for k, v in inventory.software().items()}
        if before == after == ours:
            return report, ours
        last = (before, ours, after)
        time.sleep(1)
    raise AssertionError(f"inventory never matched the exporter's page: {last}")


def _poll_until(done: Callable[[readiness.Readiness], bool], fleet_file: Path, bootstrap: str, lake: Path,
                collector: ClientMetricsCollector, timeout_s: float = 90.0,
                never: Callable[[readiness.Readiness], bool] | None = None) -> readiness.Readiness:
    """Poll until `done(report)`; every report on the way must not satisfy `never` (when given)."""
    deadline = time.monotonic() + timeout_s
    while True:
        report = _poll(fleet_file, bootstrap, lake, collector)
        if never is not None:
            assert not never(report), report.items.to_dict("records")
        if done(report):
            return report
        assert time.monotonic() < deadline, report.items.to_dict("records")
        time.sleep(0.5)


def _protocol(report: readiness.Readiness) -> tuple[str, str]:
    row = report.items[(report.items["cluster_name"] == "inv39") & (report.items["item"] == "removed protocol versions")]
    return str(row["status"].iloc[0]), str(row["detail"].iloc[0])


@pytest.mark.slow
def test_inventory_and_readiness_from_the_real_exporter(broker: tuple[KafkaZkCluster, Exporter],
                                                        clients: dict[str, Client], librdkafka: Producer,
                                                        tmp_path: Path, prometheus_bin: str) -> None:
    cluster, exporter = broker
    collector = ClientMetricsCollector()
    lake = tmp_path / "lake"

    # 1. The exporter's default rules.
    report, software = _stable_inventory(exporter, _fleet(tmp_path, exporter.source), cluster.bootstrap, lake, collector)
    names = {name for name, _ in software}
    assert {"unknown", "apache-kafka-java", "confluent-kafka-python"} <= names, software
    java_versions = {v for n, v in software if n == "apache-kafka-java"}
    assert {"2.8.2", "3.9.2", "4.3.1"} <= java_versions, software
    assert "librdkafka" in names, software  # kcat names itself by its librdkafka
    inventory = collector.last("inv39")
    assert inventory is not None and inventory.dialect == "jmx-default" and inventory.kip896 == "reported"
    status, detail = _protocol(report)
    assert status == "fail" and "Produce v2 by unknown unknown" in detail, detail
    verdict = report.verdicts.set_index("cluster_name").loc["inv39", "verdict"]
    assert verdict == "blocked"

    # 2. Strimzi-style rules, as published: RequestMetrics dropped -> a clear status naming the rule to add; the use
    # seen within the window stays a blocker until the window ends, and never turns into a pass.
    exporter.use("strimzi-style")
    report, _ = _stable_inventory(exporter, _fleet(tmp_path, exporter.source),
                                  cluster.bootstrap, lake, collector)
    inventory = collector.last("inv39")
    assert inventory is not None and inventory.dialect == "strimzi" and inventory.kip896 == "not_exported"
    assert "DeprecatedRequestsPerSec" in (inventory.message or "") and "client-inventory.md" in (inventory.message or "")
    status, detail = _protocol(report)
    assert status == "unknown" or (status == "fail" and "went away" in detail), detail
    report = _poll_until(lambda r: _protocol(r)[0] != "fail", _fleet(tmp_path, exporter.source), cluster.bootstrap,
                         lake, collector)
    assert _protocol(report)[0] == "unknown"

    # 3. Strimzi-style plus the documented KIP-896 rule; 4. Confluent-style rules (request and version in the name).
    for rules, dialect in ((("strimzi-style", "kip896-rule"), "strimzi"), (("confluent-style",), "confluent")):
        exporter.use(*rules)
        _stable_inventory(exporter, _fleet(tmp_path, exporter.source), cluster.bootstrap, lake, collector)
        inventory = collector.last("inv39")
        assert inventory is not None and inventory.dialect == dialect and inventory.kip896 == "reported", rules
        # a count met again after rules that hid it is judged once it grows between two reads
        report = _poll_until(lambda r: _protocol(r)[0] == "fail", _fleet(tmp_path, exporter.source),
                             cluster.bootstrap, lake, collector)
        status, detail = _protocol(report)
        assert status == "fail" and "by unknown unknown" in detail, (rules, detail)

    # 5. The same answers through a real Prometheus scraping the exporter (default rules).
    exporter.use("jmx-default")
    prom_port = free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kafka\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter.port}']\n        labels: {{cluster: inv39}}\n", encoding="utf-8")
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        prometheus = subprocess.Popen([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                                       f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                       f"--web.listen-address=127.0.0.1:{prom_port}"],
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        prom_lake = tmp_path / "prom-lake"
        prom_collector = ClientMetricsCollector()
        source = f'prometheus = "http://127.0.0.1:{prom_port}"\nmatchers = \'job="kafka", cluster="inv39"\''
        deadline = time.monotonic() + 90
        while True:
            expected = _exporter_software(exporter.page())
            report = _poll(_fleet(tmp_path, source), cluster.bootstrap, prom_lake, prom_collector)
            inventory = prom_collector.last("inv39")
            assert inventory is not None
            # (a fresh collector: a count is judged once it grew between two of its reads)
            if (inventory.status == "ok" and inventory.software() == expected and inventory.kip896 == "reported"
                    and _protocol(report)[0] == "fail"):
                break
            assert time.monotonic() < deadline, (inventory.status, inventory.message, inventory.software(), expected,
                                                 log_tail(log))
            time.sleep(2)
        assert all(c.broker_id == 0 for c in inventory.connections)  # the instance label mapped to the broker
        status, detail = _protocol(report)
        assert status == "fail" and "by unknown unknown" in detail
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=20)

    # 6. The old client stops; once the window passed without its count growing, the client items are ready.
    clients["old"].stop()
    fleet_file = _fleet(tmp_path, exporter.source)
    deadline = time.monotonic() + WINDOW_S + 60
    while True:
        report = _poll(fleet_file, cluster.bootstrap, lake, collector)
        fleet_file = _fleet(tmp_path, exporter.source)
        if readiness.client_items_ready(report, "inv39"):
            break
        assert time.monotonic() < deadline, report.items.to_dict("records")
        time.sleep(1)
    inventory = collector.last("inv39")
    assert inventory is not None
    assert any(d.request == "Produce" and d.version == 2 for d in inventory.deprecated)  # counted, no longer growing
    # The brokers' ZooKeeper mode still blocks the whole upgrade: readiness never says ready by omission.
    assert report.verdicts.set_index("cluster_name").loc["inv39", "verdict"] == "blocked"


class SwitchableProxy:
    """A plain HTTP proxy in front of the exporter whose port can be closed (connection refused) and opened again."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.port = free_port()
        self.server: ThreadingHTTPServer | None = None

    def open(self) -> None:
        target = self.target

        class Forward(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with urllib.request.urlopen(target, timeout=10) as response:
                    body = response.read()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Forward)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def _old_kcat(bootstrap: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    """Debian's kcat (librdkafka 2.0.2) speaking the 0.9 protocol (no ApiVersions, no software name): a producer
    writing a record every half second and a group consumer."""
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed: run `make deps-system`"
    old = "-X api.version.request=false -X broker.version.fallback=0.9.0"
    cmds = [f"while :; do echo old; sleep 0.5; done | {kcat} -P -b {bootstrap} -t inventory {old}",
            f"{kcat} -C -b {bootstrap} -G inventory-old-protocol inventory {old} -q"]
    return [subprocess.Popen(["bash", "-c", cmd], stdout=(logs / f"kcat-old-{i}.log").open("wb"),
                             stderr=subprocess.STDOUT, start_new_session=True) for i, cmd in enumerate(cmds)]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.mark.slow
def test_removed_versions_never_pass_without_a_proof_of_absence(broker: tuple[KafkaZkCluster, Exporter],
                                                                 tmp_path: Path, prometheus_bin: str) -> None:
    """An old librdkafka (kcat, api.version.request=false) producing and consuming on the real 3.9.2 broker with the
    exporter agent: `fail` with the default rules; never `pass` with rules that drop DeprecatedRequestsPerSec, with an
    exporter that cannot be read, or after a broker restart inside the window (then `unknown`, never `pass`); nor
    through a real Prometheus whose scrape keeps only the KIP-511 series."""
    cluster, exporter = broker
    exporter.use("jmx-default")
    proxy = SwitchableProxy(exporter.url)
    proxy.open()
    source = 'metrics_url = "http://{host}:' + str(proxy.port) + '/metrics"'
    lake, collector = tmp_path / "lake", ClientMetricsCollector()
    old = _old_kcat(cluster.bootstrap, tmp_path)
    passes = lambda r: _protocol(r)[0] == "pass"  # noqa: E731
    try:
        # 1. Default rules: the old client's requests block the upgrade, named.
        report = _poll_until(lambda r: _protocol(r)[0] == "fail" and "by unknown unknown" in _protocol(r)[1],
                             _fleet(tmp_path, source), cluster.bootstrap, lake, collector, never=passes)
        detail = _protocol(report)[1]
        assert any(f"{r} v" in detail for r in ("Produce", "Fetch", "ListOffsets")), detail
        assert "0.00" not in detail and f"blocks until {int(WINDOW_S)} s" in detail

        # 2. Rules that keep the connections and RequestsPerSec but drop DeprecatedRequestsPerSec, the old client
        # still running: held as `fail` within the window, then `unknown` naming the rule to add; never `pass`.
        exporter.use("subset")
        # (an `unknown` on the way for another reason, e.g. counts older than the product's first read of the
        # exporter's new page, is not the one looked for)
        report = _poll_until(lambda r: _protocol(r)[0] == "unknown" and "DeprecatedRequestsPerSec" in _protocol(r)[1],
                             _fleet(tmp_path, source), cluster.bootstrap, lake, collector, never=passes)
        inventory = collector.last("inv39")
        assert inventory is not None and inventory.kip896 == "not_exported" and inventory.dialect == "jmx-default"
        assert "DeprecatedRequestsPerSec" in _protocol(report)[1] and "exports_deprecated_requests" in _protocol(report)[1]
        assert any(c.software_name == "unknown" and c.connections for c in inventory.connections)  # still there

        # 2b. A real Prometheus whose scrape keeps only the KIP-511 series (and each JVM's start): `unknown`.
        exporter.use("jmx-default")
        prom_port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kafka\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporter.port}']\n        labels: {{cluster: inv39}}\n"
            "    metric_relabel_configs:\n      - source_labels: [__name__]\n"
            "        regex: 'kafka_server_socket_server_metrics_connections|process_start_time_seconds'\n"
            "        action: keep\n", encoding="utf-8")
        with (tmp_path / "prometheus.log").open("wb") as out:
            prometheus = subprocess.Popen([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                                           f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                           f"--web.listen-address=127.0.0.1:{prom_port}"],
                                          stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            prom = f'prometheus = "http://127.0.0.1:{prom_port}"\nmatchers = \'job="kafka", cluster="inv39"\''
            prom_collector = ClientMetricsCollector()

            def scraped(_report: readiness.Readiness) -> bool:
                read = prom_collector.last("inv39")
                return read is not None and read.status == "ok"

            report = _poll_until(scraped, _fleet(tmp_path, prom), cluster.bootstrap, tmp_path / "prom-lake",
                                 prom_collector, never=passes)
            inventory = prom_collector.last("inv39")
            assert inventory is not None and inventory.kip896 == "not_exported" and inventory.connections
            assert _protocol(report)[0] == "unknown"
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=20)

        # 3. The default rules again, then the exporter's port closed: held, then `unknown`; never `pass`.
        _poll_until(lambda r: _protocol(r)[0] == "fail", _fleet(tmp_path, source), cluster.bootstrap, lake, collector,
                    never=passes)
        proxy.close()
        report = _poll(_fleet(tmp_path, source), cluster.bootstrap, lake, collector)
        inventory = collector.last("inv39")
        assert inventory is not None and inventory.status == "error" and str(proxy.port) in (inventory.message or "")
        report = _poll_until(lambda r: _protocol(r)[0] == "unknown", _fleet(tmp_path, source), cluster.bootstrap,
                             lake, collector, never=passes)
        assert "could not be read" in _protocol(report)[1]
        proxy.open()

        # 4. A broker restart inside the window: the counters vanish with the old process; what was counted holds.
        wide = _fleet(tmp_path, source, window_s=120)
        _poll_until(lambda r: _protocol(r)[0] == "fail", wide, cluster.bootstrap, lake, collector, never=passes)
        _stop(old)
        cluster.restart()
        report = _poll(_fleet(tmp_path, source, window_s=120), cluster.bootstrap, lake, collector)
        inventory = collector.last("inv39")
        assert inventory is not None
        assert inventory.status == "ok", inventory.message
        assert inventory.deprecated and all(d.last_seen_at is not None and d.last_seen_at < inventory.collected_at
                                            for d in inventory.deprecated)  # gone from the new process's page
        status, detail = _protocol(report)
        assert status == "fail" and "went away" in detail, detail
        # once the window has passed (a shorter one here; the restart may have been quicker than it): held as
        # `fail` until then, then nothing proves absence on the new process's page; never `pass`
        report = _poll_until(lambda r: _protocol(r)[0] != "fail", _fleet(tmp_path, source), cluster.bootstrap, lake,
                             collector, never=passes)
        assert _protocol(report)[0] == "unknown", _protocol(report)
    finally:
        _stop(old)
        proxy.close()


@pytest.fixture(scope="module")
def prometheus_bin() -> str:
    """Debian's prometheus (make deps-system); missing is a failure, not a skip."""
    path = shutil.which("prometheus") or "/usr/bin/prometheus"
    assert Path(path).is_file(), "prometheus is not installed: run `make deps-system` as root"
    return path
