"""Every rule fires on a crafted instance and stays quiet on its near miss."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from backend.pipeline.catalog import render_rules_markdown
from backend.pipeline.rules import RULES
from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, frame, instance_id, rows_for
from tests.unit.pipeline.reference import compile_condition, evaluate_rules

P, C = "producer", "consumer"
# name -> (configs, client_type, expected rule ids)
CASES: dict[str, tuple[dict[str, str | None], str, set[str]]] = {
    "CC001-fire": ({"enable.idempotence": "true", "acks": "1"}, P, {"CC001"}),
    "CC001-quiet": ({"enable.idempotence": "true", "acks": "all"}, P, set()),
    "CC002-fire": ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"}, P, {"CC002"}),
    "CC002-quiet": ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": "5"}, P, set()),
    "CC003-fire": ({"retries": "0"}, P, {"CC003"}),
    # StreamsConfig's own retries (2.8-3.9, default 0) is not its producer's setting.
    "CC003-quiet-streams": ({"retries": "0", "application.id": "app"}, "streams", set()),
    "CC003-quiet": ({"retries": "3"}, P, set()),
    "CC004-fire": ({"acks": "0"}, P, {"CC004"}),
    "CC004-quiet": ({"acks": "-1"}, P, set()),
    "CC005-fire": ({"delivery.timeout.ms": "1000", "linger.ms": "500", "request.timeout.ms": "30000"}, P, {"CC005"}),
    "CC005-quiet": ({"delivery.timeout.ms": "120000", "linger.ms": "5", "request.timeout.ms": "30000"}, P, set()),
    "CC006-fire": ({"batch.size": "0"}, P, {"CC006"}),
    "CC006-quiet": ({"batch.size": "16384"}, P, set()),
    "CC007-fire": ({"enable.idempotence": "false", "retries": "3", "max.in.flight.requests.per.connection": "5"}, P, {"CC007"}),
    "CC007-quiet": ({"enable.idempotence": "false", "retries": "3", "max.in.flight.requests.per.connection": "1"}, P, set()),
    # acks=0 never retries, so nothing can be reordered (it is CC004's case).
    "CC007-quiet-acks0": ({"enable.idempotence": "false", "retries": "3", "max.in.flight.requests.per.connection": "5",
                           "acks": "0"}, P, {"CC004"}),
    "CC007-fire-acks1": ({"enable.idempotence": "false", "retries": "2147483647",
                          "max.in.flight.requests.per.connection": "5", "acks": "1"}, P, {"CC007"}),
    "CC008-fire": ({"buffer.memory": "1000", "batch.size": "16384"}, P, {"CC008"}),
    "CC008-quiet": ({"buffer.memory": "33554432", "batch.size": "16384"}, P, set()),
    "CC009-fire": ({"session.timeout.ms": "10000", "heartbeat.interval.ms": "4000"}, C, {"CC009"}),
    "CC009-quiet": ({"session.timeout.ms": "45000", "heartbeat.interval.ms": "3000"}, C, set()),
    # KIP-848 consumers take session timeout and heartbeat from the broker.
    "CC009-quiet-kip848": ({"session.timeout.ms": "10000", "heartbeat.interval.ms": "4000", "group.protocol": "consumer"},
                           C, set()),
    "CC009-fire-classic": ({"session.timeout.ms": "10000", "heartbeat.interval.ms": "4000", "group.protocol": "classic"},
                           C, {"CC009"}),
    "CC010-fire": ({"fetch.max.wait.ms": "30000", "request.timeout.ms": "30000"}, C, {"CC010"}),
    "CC010-quiet": ({"fetch.max.wait.ms": "500", "request.timeout.ms": "30000"}, C, set()),
    "CC011-fire": ({"auto.offset.reset": "none", "group.id": "orders"}, C, {"CC011"}),
    # Kafka Streams' restore and global consumers: no group, auto.offset.reset=none on purpose.
    "CC011-quiet-no-group": ({"auto.offset.reset": "none", "group.id": None}, C, set()),
    "CC011-quiet": ({"auto.offset.reset": "earliest"}, C, set()),
    "CC012-fire": ({"max.poll.records": "20000"}, C, {"CC012"}),
    "CC012-fire-one": ({"max.poll.records": "1"}, C, {"CC012"}),
    "CC012-quiet": ({"max.poll.records": "500"}, C, set()),
    "CC013-fire": ({"max.poll.interval.ms": "5000"}, C, {"CC013"}),
    "CC013-quiet": ({"max.poll.interval.ms": "300000"}, C, set()),
    "CC014-fire": ({"session.timeout.ms": "3000"}, C, {"CC014"}),
    "CC014-quiet-kip848": ({"session.timeout.ms": "3000", "group.protocol": "CONSUMER"}, C, set()),
    "CC014-quiet": ({"session.timeout.ms": "45000"}, C, set()),
    "CC001-wrong-type": ({"enable.idempotence": "true", "acks": "1"}, C, set()),  # consumer: n/a
    # Keys Kafka 4.x clients removed: named when set to something other than their old default.
    "CC019-fire": ({"auto.include.jmx.reporter": "FALSE"}, P, {"CC019"}),
    "CC019-quiet": ({"auto.include.jmx.reporter": "true"}, P, set()),
    "CC020-fire": ({"metric.reporters": "[com.example.StatsdReporter]"}, C, {"CC020"}),
    "CC020-fire-auto-jmx": ({"metric.reporters": "com.example.StatsdReporter", "auto.include.jmx.reporter": "true"},
                            "admin", {"CC020"}),
    "CC020-quiet-with-jmx": ({"metric.reporters": "com.example.StatsdReporter, org.apache.kafka.common.metrics.JmxReporter"},
                             P, set()),
    "CC020-quiet-default": ({"metric.reporters": "[]"}, P, set()),  # 3.x's default: 4.x defaults to JmxReporter
    # JMX already off on 3.x: nothing lost by the move (CC019 names the ignored key).
    "CC020-quiet-jmx-off": ({"metric.reporters": "com.example.StatsdReporter", "auto.include.jmx.reporter": "false"},
                            P, {"CC019"}),
    "CC021-fire": ({"retries": "3", "application.id": "app"}, "streams", {"CC021"}),
    "CC021-quiet": ({"retries": "0", "application.id": "app"}, "streams", set()),
    "CC022-fire": ({"internal.leave.group.on.close": "false", "group.id": "g"}, C, {"CC022"}),
    "CC022-quiet": ({"internal.leave.group.on.close": "true", "group.id": "g"}, C, set()),
    # Kafka Streams sets it on its own consumers (2.8-4.1); 4.2 Streams close them with CloseOptions.
    "CC022-quiet-streams-own": ({"internal.leave.group.on.close": "false",
                                 "client.id": "app-1-StreamThread-1-consumer"}, C, set()),
    "CC022-quiet-state-updater": ({"internal.leave.group.on.close": "false",
                                   "client.id": "app-1-StateUpdater-1-restore-consumer"}, C, set()),
}
NEUTRAL = {"client.dns.lookup": "use_all_dns_ips"}


def _fleet() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, (configs, ctype, _) in CASES.items():
        rows += rows_for(name, configs, client_type=ctype)
    rows += rows_for("CC015-fire", NEUTRAL, client_id=None)
    rows += rows_for("CC015-fire-generated", NEUTRAL, client_id="producer-3")
    rows += rows_for("CC015-quiet", NEUTRAL, client_id="billing-api")
    for i in range(11):
        rows += rows_for(f"CC016-shared-{i}", NEUTRAL, client_id="shared", cluster="many")
    for i in range(10):
        rows += rows_for(f"CC016-ten-{i}", NEUTRAL, client_id="ten", cluster="many")
    for name, session, fetch in (("g1a", "45000", "1"), ("g1b", "30000", "1"),
                                 ("g2a", "45000", "1"), ("g2b", "45000", "1024")):
        group = "g1" if name.startswith("g1") else "g2"
        rows += rows_for(name, {"group.id": group, "session.timeout.ms": session,
                                "fetch.min.bytes": fetch}, client_type=C, cluster="groups")
    java_old, java_ok = ("apache-kafka-java", "2.0.1"), ("apache-kafka-java", "2.1.0")
    rd_old, rd_ok = ("confluent-kafka-python", "1.7.0-rdkafka-1.7.0"), ("librdkafka", "2.3.0")
    for name, cluster, software in (("CC018-java-old", "k4", java_old), ("CC018-java-ok", "k4", java_ok),
                                    ("CC018-rd-old", "k4", rd_old), ("CC018-rd-ok", "k4", rd_ok),
                                    ("CC018-java-old-on-3x", "k3", java_old)):
        rows += rows_for(name, NEUTRAL, cluster=cluster, software=software)
    return rows


# broker rows of two clusters: k4 runs 4.x since its latest poll, k3 runs 3.9
BROKERS = [("k4", T0 - timedelta(days=1), "3.9.0", None, "reported"),
           ("k4", T0, "4.1.0", None, "reported"),
           ("k4", T0, None, "4.0", "guessed"),
           ("k3", T0, "3.9.0", None, "zookeeper")]


@pytest.fixture(scope="module")
def alerts(spark: SparkSession) -> list[dict[str, Any]]:
    latest = T.latest_snapshots(frame(spark, _fleet()))
    brokers = spark.createDataFrame(BROKERS, T.BROKER_COLUMNS)
    result = evaluate_rules(T.instance_configs(latest), group_drift=T.group_drift(latest),
                            brokers=T.broker_major_versions(brokers))
    return [row.asDict() for row in result.collect()]


def test_catalog_has_at_least_15_complete_rules() -> None:
    assert len(RULES) >= 15
    assert len({r.id for r in RULES}) == len(RULES)
    for rule in RULES:
        assert rule.severity in ("critical", "warning", "info")
        assert rule.title and rule.rationale and rule.doc_url.startswith("https://")
        assert (rule.condition is None) != (rule.fleet is None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_instance_rule_cases(alerts: list[dict[str, Any]], name: str) -> None:
    fired = {a["rule_id"] for a in alerts if a["client_instance_id"] == instance_id(name)}
    assert fired == CASES[name][2]


def test_alert_names_cluster_instance_client_keys_and_values(alerts: list[dict[str, Any]]) -> None:
    (alert,) = [a for a in alerts if a["rule_id"] == "CC001"]
    assert alert["cluster_id"] == "east"
    assert alert["client_instance_id"] == instance_id("CC001-fire")
    assert alert["client_id"] == "CC001-fire"
    assert alert["keys"] == "enable.idempotence,acks"
    assert json.loads(alert["observed_json"]) == {"enable.idempotence": "true", "acks": "1"}
    assert alert["severity"] == "critical" and alert["doc_url"].startswith("https://kafka.apache.org")


def test_missing_client_id(alerts: list[dict[str, Any]]) -> None:
    fired = {a["client_instance_id"] for a in alerts if a["rule_id"] == "CC015"}
    assert fired == {instance_id("CC015-fire"), instance_id("CC015-fire-generated")}


def test_shared_client_id(alerts: list[dict[str, Any]]) -> None:
    fired = [a for a in alerts if a["rule_id"] == "CC016"]
    assert [(a["cluster_id"], a["client_id"]) for a in fired] == [("many", "shared")]
    assert json.loads(fired[0]["observed_json"])["instances"] == "11"


def test_group_disagreement(alerts: list[dict[str, Any]]) -> None:
    fired = [a for a in alerts if a["rule_id"] == "CC017"]
    assert [(a["cluster_id"], a["group_id"], a["keys"]) for a in fired] == [
        ("groups", "g1", "session.timeout.ms")]
    assert "45000" in fired[0]["observed_json"] and "30000" in fired[0]["observed_json"]


def test_client_too_old_for_kafka4(alerts: list[dict[str, Any]]) -> None:
    fired = {a["client_instance_id"] for a in alerts if a["rule_id"] == "CC018"}
    assert fired == {instance_id("CC018-java-old"), instance_id("CC018-rd-old")}
    sample = next(a for a in alerts if a["rule_id"] == "CC018")
    assert json.loads(sample["observed_json"])["broker_version"] == "4.1.0"


def test_no_unexpected_alerts(alerts: list[dict[str, Any]]) -> None:
    expected = sum(len(ids) for _, _, ids in CASES.values()) + 2 + 1 + 1 + 2
    assert len(alerts) == expected
    assert len({a["alert_id"] for a in alerts}) == len(alerts)


def test_compile_condition() -> None:
    assert compile_condition("{num:a.b} > 1 AND {str:c} = 'x' AND {has:d}") == (
        "try_cast(cfg['a.b'] AS DOUBLE) > 1 AND lower(cfg['c']) = 'x' AND map_contains_key(cfg, 'd')")


def test_committed_rules_doc_is_generated() -> None:
    from pathlib import Path

    committed = (Path(__file__).resolve().parents[3] / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == render_rules_markdown()
