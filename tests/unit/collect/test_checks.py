"""Every fleet check rule, firing and not firing, on hand-built snapshots."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.collect import checks
from backend.store.model import Alert, BrokerSnapshot, ClusterSnapshot, TopicSnapshot

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def broker(
    broker_id: int,
    version: str | None = "3.9.0",
    *,
    name: str = "Kafka",
    provenance: str = "reported",
    reachable: bool = True,
) -> BrokerSnapshot:
    return BrokerSnapshot(
        broker_id=broker_id,
        host="h",
        port=9092,
        reachable=reachable,
        software_name=name if version else None,
        software_version=version,
        version_provenance=provenance if version else "unknown",
    )


def topic(name: str, topic_id: str | None = "id-1", **kw: int | str | None) -> TopicSnapshot:
    return TopicSnapshot(topic=name, topic_id=topic_id, partitions=3, replication_factor=3, **kw)  # type: ignore[arg-type]


def cluster(
    name: str = "c1",
    *,
    status: str = "ok",
    cluster_id: str | None = "CID",
    zk_cluster_id: str | None = None,
    brokers: list[BrokerSnapshot] | None = None,
    topics: list[TopicSnapshot] | None = None,
    controller_id: int | None = 1,
    missing: list[int] | None = None,
) -> ClusterSnapshot:
    return ClusterSnapshot(
        cluster_name=name,
        status=status,
        polled_at=NOW,
        cluster_id=cluster_id,
        zk_cluster_id=zk_cluster_id,
        controller_id=controller_id,
        brokers=brokers if brokers is not None else [broker(1), broker(2)],
        topics=topics if topics is not None else [topic("orders")],
        missing_broker_ids=missing or [],
    )


def rules(alerts: list[Alert]) -> list[str]:
    return [a.rule for a in alerts]


def test_zk_cluster_id_mismatch() -> None:
    alerts = checks.zk_cluster_id_mismatch(cluster(cluster_id="A", zk_cluster_id="B"))
    assert rules(alerts) == ["zk_cluster_id_mismatch"]
    assert alerts[0].evidence == {"metadata_cluster_id": "A", "zk_cluster_id": "B"}
    assert alerts[0].severity == "critical"
    assert checks.zk_cluster_id_mismatch(cluster(cluster_id="A", zk_cluster_id="A")) == []
    assert checks.zk_cluster_id_mismatch(cluster(cluster_id="A", zk_cluster_id=None)) == []


def test_duplicate_cluster_id() -> None:
    alerts = checks.duplicate_cluster_id(
        [
            cluster("a", cluster_id="X"),
            cluster("b", cluster_id="X"),
            cluster("c", cluster_id="Y"),
        ]
    )
    assert sorted(a.cluster_name for a in alerts) == ["a", "b"]
    assert alerts[0].evidence["clusters"] == ["a", "b"]
    assert checks.duplicate_cluster_id([cluster("a", cluster_id="X"), cluster("b", cluster_id="Y")]) == []
    # A down cluster carries no id from this poll and cannot collide.
    assert checks.duplicate_cluster_id([cluster("a", cluster_id="X"), cluster("b", cluster_id="X", status="down")]) == []


def test_version_skew_compares_facts_only() -> None:
    skewed = cluster(brokers=[broker(1, "3.9.0"), broker(2, "4.0.0")])
    alerts = checks.version_skew(skewed)
    assert rules(alerts) == ["version_skew"]
    assert alerts[0].evidence["brokers_by_version"] == {
        "Kafka 3.9.0": [1],
        "Kafka 4.0.0": [2],
    }
    software = checks.version_skew(cluster(brokers=[broker(1, "3.9.0"), broker(2, "24.1", name="Redpanda")]))
    assert "different software" in software[0].explanation
    assert checks.version_skew(cluster(brokers=[broker(1), broker(2)])) == []
    guessed = cluster(brokers=[broker(1, "3.9.0"), broker(2, "3.7", provenance="guessed")])
    assert checks.version_skew(guessed) == []


def test_broker_upgraded() -> None:
    before = cluster(brokers=[broker(1, "3.9.0"), broker(2, "3.9.0")])
    after = cluster(brokers=[broker(1, "4.0.0"), broker(2, "3.9.0")])
    alerts = checks.broker_upgraded(before, after)
    assert rules(alerts) == ["broker_upgraded"]
    assert alerts[0].evidence["old_software_version"] == "3.9.0"
    assert alerts[0].evidence["new_software_version"] == "4.0.0"
    assert checks.broker_upgraded(before, before) == []
    assert checks.broker_upgraded(None, after) == []
    unreachable_now = cluster(brokers=[broker(1, None, reachable=False), broker(2, "3.9.0")])
    assert checks.broker_upgraded(before, unreachable_now) == []


def test_topic_recreated_once_with_both_ids() -> None:
    before = cluster(topics=[topic("orders", "OLD"), topic("stable", "S")])
    after = cluster(topics=[topic("orders", "NEW"), topic("stable", "S")])
    alerts = checks.topic_recreated(before, after)
    assert len(alerts) == 1
    assert alerts[0].evidence == {
        "topic": "orders",
        "old_topic_id": "OLD",
        "new_topic_id": "NEW",
    }
    assert checks.topic_recreated(before, before) == []
    assert checks.topic_recreated(None, after) == []
    # Recreation is not also reported as a deletion plus a creation.
    assert checks.topic_created(before, after) == [] and checks.topic_deleted(before, after) == []


def test_zk_topic_id_mismatch() -> None:
    alerts = checks.zk_topic_id_mismatch(cluster(topics=[topic("t", "A", zk_topic_id="B")]))
    assert rules(alerts) == ["zk_topic_id_mismatch"]
    assert alerts[0].evidence["zk_topic_id"] == "B"
    assert checks.zk_topic_id_mismatch(cluster(topics=[topic("t", "A", zk_topic_id="A")])) == []
    assert checks.zk_topic_id_mismatch(cluster(topics=[topic("t", "A")])) == []


def test_topic_created_and_deleted() -> None:
    before = cluster(topics=[topic("a", "1"), topic("b", "2")])
    after = cluster(topics=[topic("b", "2"), topic("c", "3")])
    assert [a.subject for a in checks.topic_created(before, after)] == ["c"]
    assert [a.subject for a in checks.topic_deleted(before, after)] == ["a"]
    assert checks.topic_created(before, before) == [] and checks.topic_deleted(before, before) == []
    assert checks.topic_created(None, after) == []


def test_controller_changed() -> None:
    alerts = checks.controller_changed(cluster(controller_id=1), cluster(controller_id=2))
    assert alerts[0].evidence == {"old_controller_id": 1, "new_controller_id": 2}
    assert checks.controller_changed(cluster(controller_id=1), cluster(controller_id=1)) == []
    assert checks.controller_changed(cluster(controller_id=-1), cluster(controller_id=2)) == []


def test_broker_missing_from_previous_poll_and_from_replicas() -> None:
    before = cluster(brokers=[broker(1), broker(2), broker(3)])
    after = cluster(brokers=[broker(1), broker(2)])
    assert [a.subject for a in checks.broker_missing(before, after)] == ["broker 3"]
    still_assigned = cluster(brokers=[broker(1), broker(2), broker(3, None, reachable=False)], missing=[3])
    assert [a.subject for a in checks.broker_missing(None, still_assigned)] == ["broker 3"]
    assert checks.broker_missing(before, before) == []


def test_under_replicated_and_offline_partitions() -> None:
    sick = cluster(
        topics=[
            topic("a", under_replicated=2),
            topic("b", offline_partitions=1),
            topic("c"),
        ]
    )
    urp = checks.under_replicated(sick)
    assert rules(urp) == ["under_replicated"] and urp[0].evidence["partitions"] == 2
    offline = checks.offline_partitions(sick)
    assert rules(offline) == ["offline_partitions"] and offline[0].severity == "critical"
    assert offline[0].evidence["sample"] == {"b": 1}
    healthy = cluster()
    assert checks.under_replicated(healthy) == [] and checks.offline_partitions(healthy) == []


def test_run_checks_skips_clusters_without_data_and_covers_all_rules() -> None:
    previous = {"c1": cluster(topics=[topic("orders", "OLD")])}
    current = [
        cluster(topics=[topic("orders", "NEW")]),
        cluster("c2", status="down", cluster_id=None),
    ]
    assert rules(checks.run_checks(previous, current)) == ["topic_recreated"]
    # A previous poll without data is no baseline: nothing is "created" against it.
    assert checks.run_checks({"c1": cluster(status="down", topics=[])}, current[:1]) == []
    documented = {name for name in dir(checks) if name in checks.RULES}
    assert documented == set(checks.RULES)


@pytest.mark.parametrize("rule", checks.RULES)
def test_every_rule_has_doc_url_and_explanation(rule: str) -> None:
    scenarios = {
        "zk_cluster_id_mismatch": ({}, [cluster(zk_cluster_id="OTHER")]),
        "duplicate_cluster_id": ({}, [cluster("a"), cluster("b")]),
        "version_skew": ({}, [cluster(brokers=[broker(1, "1"), broker(2, "2")])]),
        "broker_upgraded": (
            {"c1": cluster(brokers=[broker(1, "1")])},
            [cluster(brokers=[broker(1, "2")])],
        ),
        "topic_recreated": (
            {"c1": cluster(topics=[topic("t", "A")])},
            [cluster(topics=[topic("t", "B")])],
        ),
        "zk_topic_id_mismatch": (
            {},
            [cluster(topics=[topic("t", "A", zk_topic_id="B")])],
        ),
        "topic_created": ({"c1": cluster(topics=[])}, [cluster(topics=[topic("t")])]),
        "topic_deleted": ({"c1": cluster(topics=[topic("t")])}, [cluster(topics=[])]),
        "controller_changed": (
            {"c1": cluster(controller_id=1)},
            [cluster(controller_id=2)],
        ),
        "broker_missing": (
            {"c1": cluster(brokers=[broker(1), broker(2)])},
            [cluster(brokers=[broker(1)])],
        ),
        "under_replicated": ({}, [cluster(topics=[topic("t", under_replicated=1)])]),
        "offline_partitions": (
            {},
            [cluster(topics=[topic("t", offline_partitions=1)])],
        ),
    }
    previous, current = scenarios[rule]
    alerts = [a for a in checks.run_checks(previous, current) if a.rule == rule]
    assert alerts, f"{rule} did not fire"
    for alert in alerts:
        assert alert.doc_url.startswith("https://")
        assert alert.explanation and "\n" not in alert.explanation
        assert alert.severity in ("critical", "warning", "info")
