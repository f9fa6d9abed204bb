"""The poller's engine: incremental judging, waivers that expire while it runs, incidents held for unknowns, a refused
file that keeps the last good one, and the results stored through the lake writer."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.standards.engine import StandardsEngine
from backend.store import readers, standards_readers
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, FleetPoll, TopicSnapshot

NOW = datetime.now(UTC).replace(microsecond=0)


def policy_text(waiver_expires: datetime) -> str:
    return f"""
[[policies]]
id = "rf"
title = "RF 3 in production"
severity = "critical"
select = {{ env = "prod" }}
check = "topic_shape"
replication_factor = {{ min = 3 }}

[[policies]]
id = "min-isr"
title = "min.insync.replicas 2"
check = "topic_config"
config = "min.insync.replicas"
require = {{ min = 2 }}

[[waivers]]
policy = "rf"
cluster = "c0"
topic = "t1"
owner = "team"
reason = "moving"
expires = {waiver_expires.isoformat()}
"""


def snapshot(name: str, topics: list[TopicSnapshot], configs: ConfigSnapshot | None, at: datetime) -> ClusterSnapshot:
    return ClusterSnapshot(cluster_name=name, status="ok", polled_at=at, tags={"env": "prod"}, cluster_id=f"id-{name}",
                           brokers=[BrokerSnapshot(1, "h", 9092, reachable=True)], topics=topics, configs=configs)


def fleet(n_clusters: int, n_topics: int, at: datetime) -> dict[str, ClusterSnapshot]:
    out = {}
    for c in range(n_clusters):
        topics = [TopicSnapshot(f"t{i}", f"id{i}", partitions=3, replication_factor=2 if i < 2 else 3)
                  for i in range(n_topics)]
        brokers = {1: {"min.insync.replicas": ConfigValue("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")}}
        out[f"c{c}"] = snapshot(f"c{c}", topics, ConfigSnapshot(at, brokers, {}), at)
    return out


def poll_of(snapshots: dict[str, ClusterSnapshot], at: datetime) -> FleetPoll:
    clusters = [replace(s, polled_at=at) for s in snapshots.values()]
    return FleetPoll(new_poll_id(at), at, clusters, [], 0.0)


def test_only_what_changed_is_judged_again(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text(policy_text(NOW + timedelta(days=30)))
    clock = [NOW]
    engine = StandardsEngine(path, clock=lambda: clock[0])
    state = fleet(10, 200, NOW)
    engine.evaluate(poll_of(state, NOW))
    assert engine.evaluations == 20 and engine.topics_judged == 10 * 2 * 200
    # an unchanged poll (the same objects, as the poller and collectors hand them over): nothing judged again
    engine.evaluate(poll_of(state, NOW + timedelta(seconds=30)))
    assert engine.evaluations == 20 and engine.topics_judged == 4000
    # one cluster: one topic's replication factor changed, in a new list (the poller builds one when anything changed)
    topics = list(state["c3"].topics)
    topics[10] = replace(topics[10], replication_factor=1)
    state["c3"] = replace(state["c3"], topics=topics)
    poll = poll_of(state, NOW + timedelta(seconds=60))
    engine.evaluate(poll)
    assert engine.topics_judged == 4000 + 2  # that topic, for each of the two topic policies
    results = poll.cluster("c3").standards.results
    assert results["rf"].violating == 3 and {i.name for i in results["rf"].items if i.outcome == "violation"} == {
        "t0", "t1", "t10"}
    # the standards object of an unchanged cluster is the very one of the last poll: the writer skips it
    again = poll_of(state, NOW + timedelta(seconds=90))
    engine.evaluate(again)
    assert again.cluster("c4").standards is poll.cluster("c4").standards


def test_a_waiver_expires_while_the_engine_runs_and_the_violation_comes_back(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text(policy_text(NOW + timedelta(minutes=5)))
    clock = [NOW]
    engine = StandardsEngine(path, clock=lambda: clock[0])
    state = fleet(1, 3, NOW)
    first = poll_of(state, NOW)
    engine.evaluate(first)
    rf = first.cluster("c0").standards.results["rf"]
    assert rf.status == "violation" and rf.waived == 1 and rf.violating == 1  # t1 waived, t0 not
    clock[0] = NOW + timedelta(minutes=6)
    later = poll_of(state, clock[0])
    engine.evaluate(later)
    rf = later.cluster("c0").standards.results["rf"]
    assert rf.waived == 0 and rf.violating == 2
    t1 = next(i for i in rf.items if i.name == "t1")
    assert t1.outcome == "violation" and "expired on" in t1.reason and t1.waiver.startswith("expired")
    (alert,) = [a for a in later.alerts if a.rule == "policy:rf"]
    assert alert.evidence["violating"] == 2 and alert.evidence["expired_waivers"]
    assert "A waiver expired" in alert.explanation


def test_a_refused_file_keeps_the_last_good_one_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    lake = str(tmp_path / "lake")
    path.write_text(policy_text(NOW + timedelta(days=1)))
    engine = StandardsEngine(path, lake)
    assert [p.id for p in engine.policies.policies] == ["rf", "min-isr"]
    path.write_text(policy_text(NOW + timedelta(days=1)).replace("min = 2", 'min = "two"') + "\n# edited\n")
    poll = poll_of(fleet(1, 2, NOW), NOW)
    engine.evaluate(poll)
    assert [p.id for p in engine.policies.policies] == ["rf", "min-isr"]
    assert "min-isr" in poll.cluster("c0").standards.results
    saved = standards_readers.policy_file_state(lake)
    assert saved["using"] == "file" and "key 'require.min': must be a number" in saved["error"]
    assert saved["error"].startswith(f"{path}:")
    # a restart with the file still broken: the last good copy kept in the lake is used
    restarted = StandardsEngine(path, lake)
    assert [p.id for p in restarted.policies.policies] == ["rf", "min-isr"]
    assert standards_readers.policy_file_state(lake)["using"] == "last_good"
    path.write_text(policy_text(NOW + timedelta(days=1)).replace('id = "min-isr"', 'id = "min-isr-2"'))
    restarted.evaluate(poll_of(fleet(1, 2, NOW), NOW))
    assert [p.id for p in restarted.policies.policies] == ["rf", "min-isr-2"]
    assert standards_readers.policy_file_state(lake)["error"] is None


def test_unknown_holds_the_incident_and_down_clusters_hold_every_policy(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text(policy_text(NOW + timedelta(days=1)))
    engine = StandardsEngine(path)
    state = fleet(2, 3, NOW)
    state["c1"] = replace(state["c1"], configs=None)  # configs not read: min-isr cannot be judged
    state["c0"] = replace(state["c0"], status="down", error="refused")
    poll = poll_of(state, NOW)
    engine.evaluate(poll)
    assert poll.cluster("c1").standards.results["min-isr"].status == "unknown"
    assert ("policy:min-isr", "c1") in poll.hold and ("policy:rf", "c0") in poll.hold
    assert ("policy:rf", "c1") not in poll.hold


def test_results_history_and_incidents_through_the_lake_writer(tmp_path: Path) -> None:
    path = tmp_path / "policies.toml"
    path.write_text(policy_text(NOW + timedelta(days=1)))
    lake = Lake(tmp_path / "lake")
    writer = FleetWriter(lake)
    engine = StandardsEngine(path, str(tmp_path / "lake"))
    state = fleet(2, 3, NOW)
    for seconds in (0, 30, 60):
        at = NOW + timedelta(seconds=seconds)
        poll = poll_of(state, at)
        engine.evaluate(poll)
        writer.write(poll)
    results = standards_readers.policy_results(lake)
    assert sorted(zip(results["cluster_name"], results["policy_id"], results["status"], strict=True)) == [
        ("c0", "min-isr", "pass"), ("c0", "rf", "violation"), ("c1", "min-isr", "pass"), ("c1", "rf", "violation")]
    items = standards_readers.policy_items(lake, ["c1"])
    assert set(zip(items["name"], items["outcome"], strict=True)) == {("t0", "violation"), ("t1", "violation")}
    history = standards_readers.policy_history(lake, NOW - timedelta(days=1))
    assert len(history) == 4 and history["baseline"].all()  # one baseline per pair; nothing changed after
    incidents = readers.incidents(lake, open_only=True)
    assert sorted(zip(incidents["rule"], incidents["cluster_name"], strict=True)) == [("policy:rf", "c0"),
                                                                                      ("policy:rf", "c1")]
    # the violation is fixed on c1: its incident resolves, the history gains one row
    state["c1"] = replace(state["c1"], topics=[replace(t, replication_factor=3) for t in state["c1"].topics])
    poll = poll_of(state, NOW + timedelta(seconds=90))
    engine.evaluate(poll)
    writer.write(poll)
    assert list(readers.incidents(lake, open_only=True)["cluster_name"]) == ["c0"]
    history = standards_readers.policy_history(lake, NOW - timedelta(days=1))
    assert len(history) == 5 and not history.iloc[-1]["baseline"] and history.iloc[-1]["status"] == "pass"
    # after a restart, a finding keeps the date it was first seen
    first_seen = {i.name: i.since for i in poll.cluster("c0").standards.results["rf"].items}
    fresh = StandardsEngine(path)
    fresh.seed(FleetWriter(lake).standards)
    later = poll_of(state, NOW + timedelta(hours=1))
    fresh.evaluate(later)
    assert {i.name: i.since for i in later.cluster("c0").standards.results["rf"].items} == first_seen


def test_a_new_read_of_unchanged_configs_judges_nothing_again(tmp_path: Path) -> None:
    """A config read builds new objects; equal broker configs and overrides leave every topic's outcome as it was."""
    path = tmp_path / "policies.toml"
    path.write_text(policy_text(NOW + timedelta(days=1)))
    engine = StandardsEngine(path)
    state = fleet(3, 100, NOW)
    engine.evaluate(poll_of(state, NOW))
    judged = engine.topics_judged
    reread = {name: replace(s, configs=ConfigSnapshot(NOW + timedelta(minutes=10),
                                                      {b: dict(e) for b, e in s.configs.brokers.items()},
                                                      {t: dict(o) for t, o in s.configs.topics.items()}))
              for name, s in state.items()}
    poll = poll_of(reread, NOW + timedelta(minutes=10))
    engine.evaluate(poll)
    assert engine.topics_judged == judged
    assert poll.cluster("c0").standards.results["min-isr"].status == "pass"
