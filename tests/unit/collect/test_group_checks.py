"""Every consumer-group rule fires on its condition and stays silent without it; the catalog documents them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from backend.collect import group_checks as gc
from backend.collect.catalog import render_fleet_rules_markdown
from backend.collect.checks import run_checks
from backend.store.group_model import GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.model import BrokerSnapshot, ClusterSnapshot, TopicSnapshot

NOW = datetime.now(UTC)


def _cluster(groups: GroupSnapshot, *, version: str = "4.1.0", provenance: str = "reported",
             topics: tuple[tuple[str, str], ...] = (("orders", "idNowAAAAAAAAAAAAAAAAA"),)) -> ClusterSnapshot:
    broker = BrokerSnapshot(1, "h", 1, reachable=True, software_name="Apache Kafka", software_version=version,
                            version_provenance=provenance, version_min=version)
    return ClusterSnapshot(cluster_name="c1", status="ok", polled_at=NOW, brokers=[broker],
                           topics=[TopicSnapshot(t, i, partitions=1) for t, i in topics], groups=groups)


def _groups(**states: GroupState) -> GroupSnapshot:
    return GroupSnapshot(collected_at=NOW, groups=dict(states))


def _rules(snapshot: ClusterSnapshot) -> set[tuple[str, str]]:
    return {(a.rule, a.subject) for a in gc.group_alerts(snapshot)}


def test_each_burrow_status_but_ok_is_an_alert_of_its_own_rule() -> None:
    groups = _groups(**{s: GroupState(s, status=s, lag=5, group_type="consumer") for s in
                        ("ok", "lagging", "stalled", "stopped", "empty_with_lag", "unknown")})
    found = _rules(_cluster(groups))
    assert found == {("group_lagging", "group lagging"), ("group_stalled", "group stalled"),
                     ("group_stopped", "group stopped"), ("group_empty_with_lag", "group empty_with_lag")}


def test_mixed_members_by_client_id_family_protocol_subscription_and_configured_assignor() -> None:
    alike = (GroupMember("a", "consumer-orders-1", "/h1", subscribed=("orders",)),
             GroupMember("b", "consumer-orders-2", "/h2", subscribed=("orders",)))
    two_apps = (GroupMember("a", "orders-service", "/h1"), GroupMember("b", "billing-job", "/h2"))
    protocols = (GroupMember("a", "x-1", "/h", member_type="classic"), GroupMember("b", "x-2", "/h", member_type="consumer"))
    subs = (GroupMember("a", "x-1", "/h", subscribed=("orders",)), GroupMember("b", "x-2", "/h", subscribed=("pay",)))
    groups = _groups(alike=GroupState("alike"), apps=GroupState("apps"), proto=GroupState("proto"),
                     subs=GroupState("subs"), cfg=GroupState("cfg"))
    groups.members = {"alike": alike, "apps": two_apps, "proto": protocols, "subs": subs}
    groups.client_configs = {"cfg": {"partition.assignment.strategy": {"range": 2, "cooperative-sticky": 1}}}
    found = {s for r, s in _rules(_cluster(groups)) if r == "group_mixed_members"}
    assert found == {"group apps", "group proto", "group subs", "group cfg"}
    assert gc.client_family("consumer-orders-12") == gc.client_family("consumer-orders-3")
    assert gc.client_family("app-3f2a9c81d0") == gc.client_family("app-77bb12ffe0")
    assert gc.client_family("orders-service") != gc.client_family("billing-job")


def test_classic_groups_on_a_4x_cluster_are_one_info_incident_and_silent_before_4() -> None:
    groups = _groups(a=GroupState("a", group_type="classic", protocol_type="consumer"),
                     b=GroupState("b", group_type="consumer", protocol_type="consumer"),
                     c=GroupState("c", group_type="classic", protocol_type="connect"))
    alerts = [a for a in gc.group_alerts(_cluster(groups)) if a.rule == "group_classic_on_4x"]
    assert len(alerts) == 1 and alerts[0].severity == "info"
    assert alerts[0].evidence["classic_groups"] == 1 and alerts[0].evidence["consumer_groups"] == 1
    assert not [a for a in gc.group_alerts(_cluster(groups, version="3.9.1")) if a.rule == "group_classic_on_4x"]
    guessed = _cluster(groups, version="4.0", provenance="guessed")
    assert [a.rule for a in gc.group_alerts(guessed)].count("group_classic_on_4x") == 1


def test_offsets_on_a_deleted_or_recreated_topic() -> None:
    groups = _groups(gone=GroupState("gone"), recreated=GroupState("recreated"), fine=GroupState("fine"))
    groups.offsets = {
        "gone": (PartitionLag("deleted-topic", 0, 5, None),),
        "recreated": (PartitionLag("orders", 0, 5, 9, topic_id="idOldAAAAAAAAAAAAAAAAA"),),
        "fine": (PartitionLag("orders", 0, 5, 9, topic_id="idNowAAAAAAAAAAAAAAAAA"),),
    }
    alerts = {a.subject: a for a in gc.group_alerts(_cluster(groups)) if a.rule == "group_offsets_on_missing_topic"}
    assert set(alerts) == {"group gone", "group recreated"}
    assert alerts["group gone"].evidence["deleted_topics"] == ["deleted-topic"]
    assert alerts["group recreated"].evidence["recreated_topics"] == {
        "orders": {"committed_against": "idOldAAAAAAAAAAAAAAAAA", "topic_id_now": "idNowAAAAAAAAAAAAAAAAA"}}


def test_members_configs_that_disagree_with_their_group() -> None:
    groups = _groups(classic=GroupState("classic", group_type="classic", protocol_type="consumer", protocol="range"),
                     new=GroupState("new", group_type="consumer", protocol_type="consumer", protocol="uniform"),
                     fine=GroupState("fine", group_type="classic", protocol_type="consumer", protocol="range"))
    groups.client_configs = {
        "classic": {"group.protocol": {"consumer": 2}, "partition.assignment.strategy": {"cooperative-sticky": 2}},
        "new": {"group.remote.assignor": {"range": 1}},
        "fine": {"group.protocol": {"classic": 2},
                 "partition.assignment.strategy": {"org.apache.kafka.clients.consumer.RangeAssignor,"
                                                   "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": 2}},
    }
    alerts = {a.subject: a for a in gc.group_alerts(_cluster(groups)) if a.rule == "group_config_mismatch"}
    assert set(alerts) == {"group classic", "group new"}
    assert set(alerts["group classic"].evidence) >= {"group.protocol", "partition.assignment.strategy"}
    assert alerts["group new"].evidence["group.remote.assignor"]["group_uses"] == "uniform"


def test_rules_run_in_every_poll_and_reuse_the_last_evaluation_for_the_same_read() -> None:
    groups = _groups(x=GroupState("x", status="stalled", lag=9))
    snap = _cluster(groups)
    first = [a for a in run_checks({}, [snap]) if a.rule.startswith("group_")]
    again = [a for a in run_checks({}, [snap]) if a.rule.startswith("group_")]
    assert [a.rule for a in first] == ["group_stalled"] and first == again
    assert not gc.group_alerts(ClusterSnapshot(cluster_name="c2", status="ok", polled_at=NOW))


def test_the_fleet_rules_doc_lists_at_least_six_group_rules_and_is_current() -> None:
    text = render_fleet_rules_markdown()
    assert len(gc.RULES) >= 6
    for rule in gc.RULES:
        assert f"### {rule.id}: {rule.title}" in text
    doc = Path(__file__).resolve().parents[3] / "docs" / "fleet-rules.md"
    assert doc.read_text(encoding="utf-8") == text
