"""The broker/topic config rules: each one fires on the configuration it describes and stays silent otherwise."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.collect import config_checks as cc
from backend.collect.checks import run_checks
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, TopicSnapshot

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SAFE = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false", "auto.create.topics.enable": "false",
        "default.replication.factor": "3", "offsets.topic.replication.factor": "3", "log.retention.hours": "168",
        "log.retention.ms": None, "log.retention.minutes": None}


def _cv(value: str | None, source: str = "DEFAULT_CONFIG") -> ConfigValue:
    return ConfigValue(value, source)


def snapshot(*, brokers: int = 3, env: str = "prod", broker_configs: dict[int, dict[str, ConfigValue]] | None = None,
             overrides: dict[str, dict[str, ConfigValue]] | None = None,
             topics: list[TopicSnapshot] | None = None, base: dict[str, str | None] | None = None) -> ClusterSnapshot:
    """A cluster whose configuration is safe except where the arguments say otherwise."""
    configs = {bid: {k: _cv(v) for k, v in (base or SAFE).items()} for bid in range(1, brokers + 1)}
    for bid, entries in (broker_configs or {}).items():
        configs[bid].update(entries)
    return ClusterSnapshot(
        cluster_name="c", status="ok", polled_at=NOW, tags={"env": env},
        brokers=[BrokerSnapshot(b, "h", 9092, reachable=True) for b in range(1, brokers + 1)],
        topics=topics if topics is not None else [TopicSnapshot("orders", "id1", partitions=3, replication_factor=3)],
        configs=ConfigSnapshot(collected_at=NOW, brokers=configs, topics=overrides or {}),
    )


def _rules(s: ClusterSnapshot) -> list[tuple[str, str]]:
    return sorted((a.rule, a.subject) for a in cc.config_alerts(s))


def test_a_safe_configuration_raises_nothing() -> None:
    assert _rules(snapshot()) == []


def test_min_isr_above_rf_for_an_override_and_for_the_inherited_value() -> None:
    over = snapshot(overrides={"orders": {"min.insync.replicas": _cv("4", "DYNAMIC_TOPIC_CONFIG")}})
    assert ("config_min_isr_above_rf", "topic orders") in _rules(over)
    single = [TopicSnapshot("a", "1", partitions=1, replication_factor=1), TopicSnapshot("b", "2", replication_factor=1),
              TopicSnapshot("c", "3", replication_factor=2)]
    inherited = snapshot(topics=single)  # min.insync.replicas = 2 from the brokers, RF 1 topics
    alerts = [a for a in cc.config_alerts(inherited) if a.rule == "config_min_isr_above_rf"]
    assert [(a.subject, a.evidence["topics"]) for a in alerts] == [("topics inheriting min.insync.replicas", 2)]
    assert alerts[0].severity == "critical" and alerts[0].doc_url.startswith("https://kafka.apache.org/")
    equal = snapshot(overrides={"orders": {"min.insync.replicas": _cv("3", "DYNAMIC_TOPIC_CONFIG")}})
    assert not [r for r in _rules(equal) if r[0] == "config_min_isr_above_rf"]


def test_min_isr_one_with_three_replicas() -> None:
    weak = snapshot(broker_configs={b: {"min.insync.replicas": _cv("1", "DYNAMIC_DEFAULT_BROKER_CONFIG")} for b in (1, 2, 3)})
    assert ("config_min_isr_one", "topics inheriting min.insync.replicas") in _rules(weak)
    override = snapshot(overrides={"orders": {"min.insync.replicas": _cv("1", "DYNAMIC_TOPIC_CONFIG")}})
    assert ("config_min_isr_one", "topic orders") in _rules(override)
    two_replicas = snapshot(topics=[TopicSnapshot("t", "1", replication_factor=2)],
                            overrides={"t": {"min.insync.replicas": _cv("1", "DYNAMIC_TOPIC_CONFIG")}})
    assert not [r for r in _rules(two_replicas) if r[0] == "config_min_isr_one"]


def test_unclean_leader_election_on_a_broker_or_a_topic() -> None:
    broker = snapshot(broker_configs={2: {"unclean.leader.election.enable": _cv("true", "DYNAMIC_BROKER_CONFIG")}})
    alerts = [a for a in cc.config_alerts(broker) if a.rule == "config_unclean_leader_election"]
    assert [(a.subject, a.evidence["brokers"]) for a in alerts] == [("brokers", [2])]
    topic = snapshot(overrides={"orders": {"unclean.leader.election.enable": _cv("true", "DYNAMIC_TOPIC_CONFIG")}})
    assert ("config_unclean_leader_election", "topic orders") in _rules(topic)


def test_replication_factor_one_only_in_prod_and_not_for_internal_topics() -> None:
    topics = [TopicSnapshot("scratch", "1", replication_factor=1), TopicSnapshot("__consumer_offsets", "2",
                                                                                  replication_factor=1, internal=True)]
    prod = [a for a in cc.config_alerts(snapshot(topics=topics)) if a.rule == "config_rf1_in_prod"]
    assert [(a.subject, a.evidence["sample"]) for a in prod] == [("topics with replication factor 1", ["scratch"])]
    assert not [r for r in _rules(snapshot(topics=topics, env="staging")) if r[0] == "config_rf1_in_prod"]


def test_auto_create_topics_in_prod() -> None:
    on = {"auto.create.topics.enable": _cv("true")}
    assert ("config_auto_create_in_prod", "brokers") in _rules(snapshot(broker_configs={1: on}))
    assert not [r for r in _rules(snapshot(broker_configs={1: on}, env="dev")) if r[0] == "config_auto_create_in_prod"]


def test_brokers_disagreeing_on_a_static_config_but_not_on_per_host_ones() -> None:
    rolled = snapshot(broker_configs={3: {"log.retention.hours": _cv("72", "STATIC_BROKER_CONFIG")}})
    alerts = [a for a in cc.config_alerts(rolled) if a.rule == "config_static_disagreement"]
    assert [(a.subject, a.evidence["brokers_by_value"]) for a in alerts] == [
        ("log.retention.hours", {"168": [1, 2], "72": [3]})]
    per_host = snapshot(broker_configs={b: {"broker.rack": _cv(f"r{b}", "STATIC_BROKER_CONFIG"),
                                            "listeners": _cv(f"PLAINTEXT://h{b}:9092", "STATIC_BROKER_CONFIG")}
                                        for b in (1, 2, 3)})
    assert not [r for r in _rules(per_host) if r[0] == "config_static_disagreement"]
    dynamic = snapshot(broker_configs={3: {"log.cleaner.threads": _cv("4", "DYNAMIC_BROKER_CONFIG")},
                                       1: {"log.cleaner.threads": _cv("1")}, 2: {"log.cleaner.threads": _cv("1")}})
    assert not [r for r in _rules(dynamic) if r[0] == "config_static_disagreement"]  # shown on the page, no incident
    withheld = snapshot(broker_configs={1: {"ssl.keystore.location": ConfigValue(None, "STATIC_BROKER_CONFIG",
                                                                                 withheld="key_rule")},
                                        2: {"ssl.keystore.location": _cv(None)}})
    assert not [r for r in _rules(withheld) if r[0] == "config_static_disagreement"]


def test_default_replication_factor_below_three_in_prod_with_three_brokers() -> None:
    low = {b: {"default.replication.factor": _cv("1")} for b in (1, 2, 3)}
    assert ("config_default_rf_below_3_in_prod", "brokers") in _rules(snapshot(broker_configs=low))
    two = {b: {"default.replication.factor": _cv("1")} for b in (1, 2)}
    assert not [r for r in _rules(snapshot(brokers=2, broker_configs=two))
                if r[0] == "config_default_rf_below_3_in_prod"]


def test_offsets_topic_replication_below_three() -> None:
    low = {b: {"offsets.topic.replication.factor": _cv("1", "STATIC_BROKER_CONFIG")} for b in (1, 2, 3)}
    assert ("config_offsets_rf_below_3", "__consumer_offsets") in _rules(snapshot(broker_configs=low, env="dev"))
    created_small = [TopicSnapshot("__consumer_offsets", "x", partitions=50, replication_factor=2, internal=True)]
    alerts = [a for a in cc.config_alerts(snapshot(topics=created_small)) if a.rule == "config_offsets_rf_below_3"]
    assert alerts and alerts[0].evidence["__consumer_offsets_replication_factor"] == 2


def test_short_retention_on_brokers_and_as_a_topic_override() -> None:
    hours = {b: {"log.retention.hours": _cv("12", "STATIC_BROKER_CONFIG")} for b in (1, 2, 3)}
    assert ("config_short_retention", "brokers") in _rules(snapshot(broker_configs=hours))
    millis_win = {1: {"log.retention.ms": _cv("3600000", "DYNAMIC_BROKER_CONFIG")}}  # .ms wins over .hours
    alert = next(a for a in cc.config_alerts(snapshot(broker_configs=millis_win)) if a.rule == "config_short_retention")
    assert alert.evidence == {"retention_ms_by_broker": {"1": 3_600_000}}
    unlimited = {b: {"log.retention.ms": _cv("-1", "DYNAMIC_DEFAULT_BROKER_CONFIG")} for b in (1, 2, 3)}
    assert not [r for r in _rules(snapshot(broker_configs=unlimited)) if r[0] == "config_short_retention"]
    topic = snapshot(overrides={"orders": {"retention.ms": _cv("600000", "DYNAMIC_TOPIC_CONFIG")}})
    found = next(a for a in cc.config_alerts(topic) if a.subject == "topic orders")
    assert (found.rule, found.severity) == ("config_short_retention", "info")


def test_every_rule_has_a_test_a_doc_link_and_a_check() -> None:
    assert len(cc.RULES) >= 8
    assert len({r.id for r in cc.RULES}) == len(cc.RULES)
    for rule in cc.RULES:
        assert rule.doc_url.startswith("https://kafka.apache.org/documentation/#"), rule.id
        assert rule.severity in ("critical", "warning", "info") and rule.rationale and rule.when
    tested = {name.removeprefix("test_") for name in globals() if name.startswith("test_")}
    assert len(tested) >= len(cc.RULES) + 1


def test_a_cluster_whose_configs_were_never_read_raises_no_config_alert() -> None:
    s = snapshot(topics=[TopicSnapshot("t", "1", replication_factor=1)])
    s.configs = None
    assert cc.config_alerts(s) == []


def test_run_checks_includes_the_config_rules_and_reuses_them_for_an_unchanged_cluster() -> None:
    s = snapshot(overrides={"orders": {"min.insync.replicas": _cv("5", "DYNAMIC_TOPIC_CONFIG")}})
    first = [a for a in run_checks({}, [s]) if a.rule.startswith("config_")]
    assert [(a.rule, a.subject) for a in first] == [("config_min_isr_above_rf", "topic orders")]
    calls = []
    original = cc.CHECKS
    cc.CHECKS = (lambda snap, cfg: calls.append(1) or [],)  # type: ignore[assignment,func-returns-value]
    try:
        again = [a for a in run_checks({}, [s]) if a.rule.startswith("config_")]
    finally:
        cc.CHECKS = original
    assert again == first and calls == []  # same configuration and topics objects: not evaluated again


@pytest.mark.parametrize("env", ["prod", "Production", " PRD "])
def test_prod_tags(env: str) -> None:
    assert cc.is_prod(snapshot(env=env))


def test_committed_fleet_rules_doc_is_generated() -> None:
    from pathlib import Path

    from backend.collect.catalog import render_fleet_rules_markdown

    committed = (Path(__file__).resolve().parents[3] / "docs" / "fleet-rules.md").read_text(encoding="utf-8")
    assert committed == render_fleet_rules_markdown()
    for rule in cc.RULES:
        assert f"| {rule.id} | {rule.severity} |" in committed and rule.doc_url in committed
