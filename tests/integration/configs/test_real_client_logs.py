"""Config blocks as real Java clients write them: built from the 3.9.2 and 4.3.1 jars, ingested, analysed.

Real producers, consumers, share consumers (4.3.1), admin clients and a Streams app are constructed
(no broker: a client logs its `XConfig values:` block when constructed) under two real logging setups
(slf4j-simple, and log4j2 with Kafka's own pattern). Their logs go through the real ingest entry point
and the real Spark job; the types, versions, values and the rules that must and must not fire are
checked per client. Some combinations make the real client refuse to start (a ConfigException): those
never reach a log, and the rules that catch them matter for other clients' pushed configs.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from backend.configs.ingest import IngestResult, ingest_java_log
from backend.pipeline.job import run_analysis
from backend.store.tables import read_table
from tests.rig.clients import LOGGINGS, ClientRun, run_clients, unused_bootstrap

VERSIONS = ("3.9.2", "4.3.1")
BOTH = frozenset(VERSIONS)
FOUR = frozenset({"4.3.1"})
THREE = frozenset({"3.9.2"})


@dataclass(frozen=True)
class Case:
    """One client to build: its settings, and what the real client and the product must make of it."""

    type: str
    config: dict[str, str]
    rules: frozenset[str] = frozenset()  # exactly the instance rules that fire on its record
    refused: dict[str, str] = field(default_factory=dict)  # version -> text of the refusal
    versions: frozenset[str] = BOTH
    values: dict[str, str | None] = field(default_factory=dict)  # logged values the product keeps
    logged_anyway: bool = False  # refused only after logging its config block
    version_logged: bool = True  # False: refused before AppInfoParser logs `Kafka version:`

    def logs(self, version: str) -> bool:
        """Whether the client writes a config block under this version."""
        return version in self.versions and (version not in self.refused or self.logged_anyway)


CASES: dict[str, Case] = {
    # acks=all is logged as -1; idempotence is on by default.
    "p-all": Case("producer", {"acks": "all"}, values={"acks": "-1", "enable.idempotence": "true"}),
    # acks=1 without asking for idempotence silently turns it off (3.0.1+): retries can then reorder.
    "p-acks1": Case("producer", {"acks": "1"}, frozenset({"CC007"}),
                    values={"acks": "1", "enable.idempotence": "false"}),
    "p-acks0": Case("producer", {"acks": "0"}, frozenset({"CC004"}), values={"enable.idempotence": "false"}),
    "p-retries0": Case("producer", {"retries": "0"}, frozenset({"CC003"}),
                       values={"retries": "0", "enable.idempotence": "false"}),
    "p-nobatch": Case("producer", {"batch.size": "0"}, frozenset({"CC006"})),
    "p-smallbuf": Case("producer", {"buffer.memory": "1000"}, frozenset({"CC008"})),
    # 3.x turns implicit idempotence off with a warning; 4.x refuses.
    "p-inflight6": Case("producer", {"max.in.flight.requests.per.connection": "6"}, frozenset({"CC007"}),
                        refused={"4.3.1": "at most 5"}, values={"enable.idempotence": "false"}),
    # What CC001, CC002 and CC005 describe, a real Java producer refuses to start with.
    "p-idem-acks1": Case("producer", {"enable.idempotence": "true", "acks": "1"},
                         refused={"3.9.2": "Must set acks to all", "4.3.1": "Must set acks to all"}),
    "p-idem-inflight6": Case("producer", {"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"},
                             refused={"3.9.2": "at most 5", "4.3.1": "at most 5"}),
    # The producer logs its config and then refuses: the log shows what CC005 describes.
    "p-delivery": Case("producer", {"delivery.timeout.ms": "1000"}, frozenset({"CC005"}),
                       refused={v: "delivery.timeout.ms should be equal to or larger" for v in VERSIONS},
                       logged_anyway=True, version_logged=False),
    "p-noid": Case("producer", {}, frozenset({"CC015"})),
    "c-default": Case("consumer", {"group.id": "g-default"}),
    "c-heartbeat": Case("consumer", {"group.id": "g-heartbeat", "session.timeout.ms": "10000",
                                     "heartbeat.interval.ms": "4000"}, frozenset({"CC009"})),
    "c-reset-none": Case("consumer", {"group.id": "g-reset", "auto.offset.reset": "none"}, frozenset({"CC011"})),
    "c-poll": Case("consumer", {"group.id": "g-poll", "max.poll.records": "1", "max.poll.interval.ms": "5000"},
                   frozenset({"CC012", "CC013"})),
    "c-session": Case("consumer", {"group.id": "g-session", "session.timeout.ms": "3000",
                                   "heartbeat.interval.ms": "1000"}, frozenset({"CC014"})),
    "c-fetchwait": Case("consumer", {"group.id": "g-fetch", "fetch.max.wait.ms": "30000"}, frozenset({"CC010"})),
    "c-hb-over": Case("consumer", {"group.id": "g-over", "session.timeout.ms": "10000",
                                   "heartbeat.interval.ms": "10000"}, frozenset({"CC009"}),
                      refused={v: "Heartbeat must be set lower than the session timeout" for v in VERSIONS},
                      logged_anyway=True, version_logged=False),
    # KIP-848: the broker owns session and heartbeat; 3.9 logs and ignores them, 4.x refuses them.
    "c-848": Case("consumer", {"group.id": "g-848", "group.protocol": "consumer", "session.timeout.ms": "3000",
                               "heartbeat.interval.ms": "1000"},
                  refused={"4.3.1": "cannot be set when group.protocol=CONSUMER"}, values={"group.protocol": "consumer"}),
    "c-848-default": Case("consumer", {"group.id": "g-848d", "group.protocol": "consumer"}),
    "c-noid": Case("consumer", {"group.id": "g-noid"}, frozenset({"CC015"})),
    "c-billing-a": Case("consumer", {"group.id": "billing"}),
    "c-billing-b": Case("consumer", {"group.id": "billing", "session.timeout.ms": "30000"}),
    "s-default": Case("share_consumer", {"group.id": "sg-default"}, versions=FOUR),
    "s-poll": Case("share_consumer", {"group.id": "sg-poll", "max.poll.records": "1"}, frozenset({"CC012"}),
                   versions=FOUR),
    "a-named": Case("admin", {}),
    "a-noid": Case("admin", {}, frozenset({"CC015"})),
    "orders-streams": Case("streams", {"application.id": "orders-app"}),
    # Keys Kafka 4.x clients removed (CC019, CC022): named where the release still defines and logs them.
    "p-jmx-off": Case("producer", {"auto.include.jmx.reporter": "false"}, frozenset({"CC019"}), versions=THREE,
                      values={"auto.include.jmx.reporter": "false"}),
    "p-jmx-off-4": Case("producer", {"auto.include.jmx.reporter": "false"}, versions=FOUR,
                        values={"auto.include.jmx.reporter": None}),  # not in the 4.x block: nothing to name
    "c-stay": Case("consumer", {"group.id": "g-stay", "internal.leave.group.on.close": "false"}, frozenset({"CC022"}),
                   versions=THREE, values={"internal.leave.group.on.close": "false"}),
    "c-stay-4": Case("consumer", {"group.id": "g-stay4", "internal.leave.group.on.close": "false"}, versions=FOUR,
                     values={"internal.leave.group.on.close": None}),  # 4.2+ no longer define it
    # A reporter list without JmxReporter (CC020): 3.9 adds JMX itself, 4.x does not.
    "p-quiet": Case("producer", {"metric.reporters": "RealClients$QuietReporter"}, frozenset({"CC020"})),
}
NO_CLIENT_ID = {"p-noid", "c-noid", "a-noid"}
# Clients the Streams app builds itself, by the suffix of their client.id.
# 4.x restores state on a StateUpdater thread; its restore consumer has no group and auto.offset.reset=none.
STREAMS_EMBEDDED = {"-StreamThread-1-consumer": "consumer", "-StreamThread-1-restore-consumer": "consumer",
                    "-StateUpdater-1-restore-consumer": "consumer", "-StreamThread-1-producer": "producer",
                    "-admin": "admin"}
# Generated ids as logged; an admin client logs an empty client.id (it names itself adminclient-N later).
GENERATED = {"p-noid": r"producer-\d+", "c-noid": r"consumer-g-noid-\d+", "a-noid": r""}
# Consumer keys a share consumer refuses: a 4.x consumer logs them next to share.* keys.
CONSUMER_ONLY = ("auto.offset.reset", "enable.auto.commit", "session.timeout.ms", "heartbeat.interval.ms",
                 "group.protocol", "partition.assignment.strategy")


def _specs(version: str, bootstrap: str, state_dir: Path) -> list[str]:
    specs = []
    for name, case in CASES.items():
        if version not in case.versions:
            continue
        config = {"bootstrap.servers": bootstrap, **case.config}
        if name not in NO_CLIENT_ID:
            config["client.id"] = name
        if case.type == "streams":
            config["state.dir"] = str(state_dir)
        specs.append(";".join([case.type, name, *(f"{k}={v}" for k, v in config.items())]))
    return specs


@dataclass
class Fleet:
    """The real clients' runs, their ingest, and the lake after the Spark job."""

    runs: dict[tuple[str, str], ClientRun]
    ingests: dict[tuple[str, str], IngestResult]
    rows: list[dict[str, Any]]
    alerts: list[dict[str, Any]]

    def records(self, version: str, setup: str) -> dict[str, dict[str, Any]]:
        """client_id ("" when none) -> {type, version, configs} of one log's records (one record per client_id)."""
        out: dict[str, dict[str, Any]] = {}
        for row in self.rows:
            if row["cluster_id"] != _cluster(version, setup):
                continue
            record = out.setdefault(row["client_id"] or "", {"type": row["client_type"], "inferred": row["client_type_inferred"],
                                                       "version": row["client_software_version"], "configs": {},
                                                       "instance": row["client_instance_id"]})
            assert record["instance"] == row["client_instance_id"], f"two records for {row['client_id']}"
            record["configs"][row["key"]] = row["value"]
        return out


def _cluster(version: str, setup: str) -> str:
    return f"real-{version}-{setup}"


def _name(client_id: str) -> str:
    for case, pattern in GENERATED.items():
        if re.fullmatch(pattern, client_id):
            return case
    return client_id


@pytest.fixture(scope="module")
def fleet(spark: Any, real_clients_classes: Path, tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    assert spark is not None  # the shared session; run_analysis reuses it
    work = tmp_path_factory.mktemp("real-clients")
    classes = real_clients_classes
    lake = str(work / "lake")
    runs, ingests = {}, {}
    for version in VERSIONS:
        for setup in LOGGINGS:
            specs = _specs(version, unused_bootstrap(), work / f"state-{version}-{setup}")
            run = run_clients(classes, version, setup, specs, work / f"{version}-{setup}")
            runs[(version, setup)] = run
            ingests[(version, setup)] = ingest_java_log(lake, run.log, _cluster(version, setup))
    run_analysis(lake)
    return Fleet(runs, ingests, read_table(lake, "client_configs").to_pylist(),
                 read_table(lake, "results/config_alerts").to_pylist())


PARAMS = [(v, s) for v in VERSIONS for s in LOGGINGS]


@pytest.mark.parametrize(("version", "setup"), PARAMS)
def test_the_real_clients_start_or_refuse_as_expected(fleet: Fleet, version: str, setup: str) -> None:
    run = fleet.runs[(version, setup)]
    expected_refused = {n: c.refused[version] for n, c in CASES.items() if version in c.versions and version in c.refused}
    assert set(run.refused) == set(expected_refused), run.refused
    for name, text in expected_refused.items():
        assert text in run.refused[name], (name, run.refused[name])
    assert set(run.built) == {n for n, c in CASES.items() if version in c.versions} - set(expected_refused)


@pytest.mark.parametrize(("version", "setup"), PARAMS)
def test_the_logs_are_what_kafka_writes(fleet: Fleet, version: str, setup: str) -> None:
    text = fleet.runs[(version, setup)].log.read_text(encoding="utf-8")
    # 4.x logs every block through AbstractConfig's logger; 3.9 through the config class's own.
    logger = ("org.apache.kafka.common.config.AbstractConfig" if version.startswith("4.")
              else "org.apache.kafka.clients.producer.ProducerConfig")
    if setup == "slf4j-simple":
        assert f"[main] INFO {logger} - ProducerConfig values: \n" in text
    else:
        assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] INFO ProducerConfig values: $", text, re.M)
        assert f"\n ({logger})\n" in text  # Kafka's pattern closes the multi-line message with the logger
    assert f"Kafka version: {version}" in text


@pytest.mark.parametrize(("version", "setup"), PARAMS)
def test_ingest_types_versions_and_values(fleet: Fleet, version: str, setup: str) -> None:
    result = fleet.ingests[(version, setup)]
    assert result.quarantined_total == 0 and result.untyped == 0 and result.unparsed_lines == 0
    records = fleet.records(version, setup)
    logged = {n for n, c in CASES.items() if c.logs(version)}
    assert logged - {n for n, c in CASES.items() if c.logged_anyway} == set(fleet.runs[(version, setup)].built)
    streams_clients = {cid for cid in records if cid.startswith("orders-streams-")}
    # One record per logged block (the Streams app also logs its own clients' blocks); a client that refuses
    # its config before logging it leaves no record.
    assert {_name(cid) for cid in records} - streams_clients == logged
    assert len(records) == result.records_written == len(logged) + len(streams_clients)
    for client_id, record in records.items():
        case = None if client_id in streams_clients else CASES[_name(client_id)]
        assert record["version"] == (version if case is None or case.version_logged else None), client_id
        assert record["inferred"] is False, client_id  # the block header names the type
        if case is None:
            suffix = client_id.removeprefix("orders-streams")
            assert record["type"] == STREAMS_EMBEDDED[suffix], client_id
            continue
        assert record["type"] == case.type, (client_id, record["type"])
        for key, value in case.values.items():
            assert record["configs"].get(key) == value, (client_id, key, record["configs"].get(key))
    assert records["orders-streams"]["configs"]["application.id"] == "orders-app"
    restore = next(r for cid, r in records.items() if cid.endswith("-restore-consumer"))
    assert restore["configs"]["auto.offset.reset"] == "none" and restore["configs"]["group.id"] is None


@pytest.mark.parametrize(("version", "setup"), PARAMS)
def test_consumers_keep_their_consumer_keys(fleet: Fleet, version: str, setup: str) -> None:
    """A 4.x consumer logs share.* keys too; it stays a consumer and keeps every consumer key."""
    consumer = fleet.records(version, setup)["c-default"]
    assert consumer["type"] == "consumer"
    for key in CONSUMER_ONLY:
        assert key in consumer["configs"], key
    assert consumer["configs"]["auto.offset.reset"] == "latest"
    if version.startswith("4."):
        assert consumer["configs"]["share.acquire.mode"] == "batch_optimized".upper()
        share = fleet.records(version, setup)["s-default"]
        assert share["type"] == "share_consumer" and share["configs"]["share.acknowledgement.mode"] == "implicit"
    dropped = fleet.ingests[(version, setup)].sensitive_dropped
    assert dropped["key.deserializer"] > 0 and dropped["value.serializer"] > 0  # CLASS keys never stored
    assert not set(dropped) & {"auto.offset.reset", "session.timeout.ms", "acks", "share.acquire.mode"}


@pytest.mark.parametrize(("version", "setup"), PARAMS)
def test_rules_that_must_and_must_not_fire(fleet: Fleet, version: str, setup: str) -> None:
    records = fleet.records(version, setup)
    by_instance: dict[str, set[str]] = defaultdict(set)
    for alert in fleet.alerts:
        if alert["cluster_id"] == _cluster(version, setup) and alert["client_instance_id"]:
            by_instance[alert["client_instance_id"]].add(alert["rule_id"])
    for client_id, record in records.items():
        expected = set() if client_id.startswith("orders-streams-") else set(CASES[_name(client_id)].rules)
        assert by_instance.get(record["instance"], set()) == expected, client_id
    group = [(a["group_id"], a["keys"]) for a in fleet.alerts
             if a["cluster_id"] == _cluster(version, setup) and a["rule_id"] == "CC017"]
    assert group == [("billing", "session.timeout.ms")]
