"""Client policies judged on the real Spark job's results: sink -> ingest -> analyze -> `check` and the poller's
engine, with the pipeline's own normalisation (acks -1 is all) and instances that do not report a key."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from backend.cli import main
from backend.configs.ingest import ingest_sink
from backend.pipeline.job import run_analysis
from backend.standards.engine import StandardsEngine
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll
from tests.unit.configs.helpers import cfg, record, write_jsonl

POLICIES = """
[[policies]]
id = "no-acks-0"
title = "No producer fires and forgets"
severity = "critical"
check = "client_config"
client_type = "producer"
key = "acks"
require = { not_equals = "0" }

[[policies]]
id = "acks-all"
title = "Producers wait for all replicas"
check = "client_config"
client_type = "producer"
key = "acks"
require = "all"
unreported = "pass"

[[policies]]
id = "java-floor"
title = "Java clients 3.0 or later, librdkafka 2.0 or later"
check = "client_software"
floors = { "apache-kafka-java" = "3.0", librdkafka = "2.0" }

[[policies]]
id = "consumer-poll"
title = "Consumers poll at most 1000 records"
check = "client_config"
client_type = "consumer"
key = "max.poll.records"
require = { max = 1000 }
"""


def _records() -> list[dict[str, Any]]:
    at = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    out = []
    for i in range(12):
        acks = ["all", "-1", "0", "1"][i % 4]  # -1 and all are one value for the pipeline and the policy
        configs = [cfg("acks", acks), cfg("client.id", f"app-{i}")] if i != 11 else [cfg("client.id", "app-11")]
        software = ("apache-kafka-java", "2.8.1") if i in (0, 5) else (
            ("confluent-kafka-python", "1.9.2-rdkafka-1.9.2") if i == 7 else ("apache-kafka-java", "3.9.1"))
        out.append(record(configs, cluster_id="east", client_id=f"app-{i}", received_at=at, software=software))
    return out


def test_client_policies_from_the_spark_results(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    assert spark is not None  # the shared session; run_analysis reuses it
    sink, lake = tmp_path / "sink", str(tmp_path / "lake")
    write_jsonl(sink / "east" / "broker-1.jsonl", _records())
    assert ingest_sink(lake, sink).records_written == 12
    assert not run_analysis(lake).skipped
    poll_id = new_poll_id(datetime.now(UTC))
    at = poll_id_time(poll_id)
    cluster = ClusterSnapshot("east-cluster", "ok", at, poll_id, cluster_id="east",
                              brokers=[BrokerSnapshot(1, "b1", 9092, reachable=True)])
    poll = FleetPoll(poll_id, at, [cluster], [], 1.0)
    policies = tmp_path / "policies.toml"
    policies.write_text(POLICIES)
    StandardsEngine(policies, lake).evaluate(poll)  # the poller's engine reads the results the job wrote
    FleetWriter(Lake(lake)).write(poll)
    results = poll.cluster("east-cluster").standards.results
    assert results["no-acks-0"].status == "violation" and results["no-acks-0"].violating == 3
    assert results["acks-all"].passing == 6 + 1  # all and -1 (3 each), and the one not reporting acks (pass)
    assert results["consumer-poll"].status == "unknown"  # no consumer reported its configuration

    code = main(["check", "--policies", str(policies), "--lake", lake, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    by_policy = {r["policy_id"]: r for r in doc["results"]}
    acks0 = by_policy["no-acks-0"]
    assert [(i["name"], i["outcome"], i["count"]) for i in acks0["items"]] == [
        ("producer acks=0", "violation", 3), ("producer acks not reported", "unknown", 1)]
    assert acks0["checked"] == 12 and acks0["passing"] == 8  # all, -1 and 1
    floor = by_policy["java-floor"]
    assert {(i["name"], i["count"]) for i in floor["items"]} == {
        ("apache-kafka-java 2.8.1", 2), ("confluent-kafka-python 1.9.2-rdkafka-1.9.2", 1)}
    assert floor["items"][0]["since"] is not None
    assert by_policy["consumer-poll"]["status"] == "unknown"
