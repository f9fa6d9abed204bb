"""Lake v2 through the real write path: cost by counting reads, incidents, compaction, migration, one bad cluster."""

from __future__ import annotations

import shutil
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.collect.checks import run_checks
from backend.store import readers
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot
from backend.store.stats import read_stats

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "lake_v1"
START = datetime(2026, 5, 1, 0, 0, tzinfo=UTC)


class Fleet:
    """A synthetic fleet: two clusters, one with a version skew that never ends."""

    def __init__(self) -> None:
        self.topics = {n: [TopicSnapshot(f"t{i}", f"ID-{n}-{i}", partitions=3, replication_factor=3) for i in range(50)]
                       for n in ("a", "b")}
        self.previous: dict[str, ClusterSnapshot] = {}

    def poll(self, at: datetime, *, bad_port: bool = False) -> FleetPoll:
        poll_id = new_poll_id(at)
        at = poll_id_time(poll_id)
        clusters = []
        for name in ("a", "b"):
            versions = ["3.9.1", "3.9.1", "4.1.0"] if name == "a" else ["4.1.0"] * 3
            brokers = [BrokerSnapshot(i + 1, f"{name}{i}", 2**40 if bad_port and name == "b" else 9092, reachable=True,
                                      software_name="Apache Kafka", software_version=v, version_provenance="reported")
                       for i, v in enumerate(versions)]
            clusters.append(ClusterSnapshot(name, "ok", at, poll_id, cluster_id=f"CID-{name}", controller_id=1,
                                            brokers=brokers, topics=self.topics[name]))
        poll = FleetPoll(poll_id, at, clusters, run_checks(self.previous, clusters), 1.0)
        self.previous = {c.cluster_name: c for c in clusters}
        return poll


def _reader_work(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for name, call in (
        ("latest", lambda: readers.latest_fleet_state(root)),
        ("cluster", lambda: readers.latest_topics(root, "a")),
        ("incidents", lambda: readers.incidents(root, open_only=True)),
        ("known_clusters", lambda: readers.known_clusters(root)),
        ("alerts", lambda: readers.alerts(root)),
    ):
        with read_stats() as stats:
            call()
        out[name] = (stats.files_opened, stats.rows_read)
    return out


def test_reader_work_does_not_grow_with_polls_and_a_lasting_skew_is_one_incident(tmp_path: Path) -> None:
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    at = START
    for i in range(500):
        at = START + timedelta(seconds=30 * i)
        result = writer.write(fleet.poll(at))
        writer.maintain(at, 30)
        if i == 49:
            after_50 = _reader_work(tmp_path)
        if i > 0:
            assert result.changes == 0 and result.clusters_rewritten == []  # unchanged: status rows only
    after_500 = _reader_work(tmp_path)
    assert after_500 == after_50
    assert after_500["latest"][1] > 0
    skew = readers.incidents(tmp_path, rule="version_skew")
    assert len(skew) == 1 and skew.iloc[0]["status"] == "open" and skew.iloc[0]["cluster_name"] == "a"
    writer.close(at)
    assert readers.incidents(tmp_path, rule="version_skew").iloc[0]["polls_seen"] == 500
    assert len(readers.poll_history(tmp_path, "a")) == 500
    # Compaction keeps the status table to one file per hour (+ the newest and those since the
    # last compaction run, every 10 min) whatever the poll count.
    assert len(Lake(tmp_path).files("cluster_snapshots")) <= 5 + 21


def test_compaction_never_shows_a_half_state(tmp_path: Path) -> None:
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    for i in range(240):
        writer.write(fleet.poll(START + timedelta(seconds=30 * i)))
    expected = len(readers.poll_history(tmp_path))
    seen: list[int] = []
    stop = threading.Event()

    def read_loop() -> None:
        while not stop.is_set():
            seen.append(len(readers.poll_history(tmp_path)))

    thread = threading.Thread(target=read_loop)
    thread.start()
    merged = Lake(tmp_path).compact("cluster_snapshots", now=START + timedelta(days=1))
    stop.set()
    thread.join()
    assert merged and len(Lake(tmp_path).files("cluster_snapshots")) == 1
    assert seen and set(seen) == {expected}
    assert len(readers.poll_history(tmp_path)) == expected


def test_one_bad_cluster_gets_a_degraded_row_and_the_others_are_written(tmp_path: Path) -> None:
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    writer.write(fleet.poll(START))
    fleet.topics["a"] = [*fleet.topics["a"], TopicSnapshot("new", "ID-new", partitions=1, replication_factor=1)]
    result = writer.write(fleet.poll(START + timedelta(seconds=30), bad_port=True))
    assert list(result.degraded) == ["b"]
    latest = readers.latest_clusters(tmp_path).set_index("cluster_name")
    assert latest.loc["b", "status"] == "degraded" and "schema" in latest.loc["b", "error"]
    assert latest.loc["a", "status"] == "ok"
    assert "new" in set(readers.latest_topics(tmp_path, "a")["topic"])
    assert list(readers.changes(tmp_path, kinds="topic_created")["subject"]) == ["new"]


def test_fleet_state_at_rebuilds_a_past_fleet(tmp_path: Path) -> None:
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    writer.write(fleet.poll(START))
    fleet.topics["a"] = [TopicSnapshot("t0", "ID-new", partitions=3, replication_factor=3), *fleet.topics["a"][1:]]
    writer.write(fleet.poll(START + timedelta(minutes=10)))
    before = readers.fleet_state_at(tmp_path, START + timedelta(minutes=5)).topics
    after = readers.fleet_state_at(tmp_path, START + timedelta(minutes=15)).topics
    assert before.set_index(["cluster_name", "topic"]).loc[("a", "t0"), "topic_id"] == "ID-a-0"
    assert after.set_index(["cluster_name", "topic"]).loc[("a", "t0"), "topic_id"] == "ID-new"
    changes = readers.topic_id_changes(tmp_path, "a")
    assert changes[["old_topic_id", "new_topic_id"]].values.tolist() == [["ID-a-0", "ID-new"]]


def test_v1_lake_migrates_without_loss(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "lake")
    root = tmp_path / "lake"
    v1 = readers.latest_fleet_state(root)  # read as v1 before any writer touched it
    v1_alerts = readers.alerts(root)
    v1_ids = readers.topic_id_changes(root)
    v1_versions = readers.version_timeline(root)
    FleetWriter(Lake(root))  # the poller's writer migrates on open
    v2 = readers.latest_fleet_state(root)
    key = ["cluster_name", "broker_id", "software_version", "version_provenance", "host", "rack", "api_versions_json"]
    assert v2.brokers[key].sort_values(key).values.tolist() == v1.brokers[key].sort_values(key).values.tolist()
    tkey = ["cluster_name", "topic", "topic_id", "partitions", "replication_factor"]
    assert v2.topics[tkey].sort_values(tkey).values.tolist() == v1.topics[tkey].sort_values(tkey).values.tolist()
    assert v2.clusters[["cluster_name", "cluster_id", "poll_id"]].values.tolist() == \
        v1.clusters[["cluster_name", "cluster_id", "poll_id"]].values.tolist()
    assert v2.zk_nodes[["cluster_name", "path", "value"]].values.tolist() == \
        v1.zk_nodes[["cluster_name", "path", "value"]].values.tolist()
    ids = readers.topic_id_changes(root)
    assert ids[["cluster_name", "topic", "old_topic_id", "new_topic_id"]].values.tolist() == \
        v1_ids[["cluster_name", "topic", "old_topic_id", "new_topic_id"]].values.tolist()
    vkey = ["cluster_name", "broker_id", "change", "software_version", "previous_software_version"]
    assert readers.version_timeline(root)[vkey].fillna("").values.tolist() == v1_versions[vkey].fillna("").values.tolist()
    # Every alert is in an incident: same (rule, cluster, subject), and a repeated one is one incident.
    inc = readers.incidents(root)
    assert set(zip(inc.rule, inc.cluster_name, inc.subject, strict=True)) == set(
        zip(v1_alerts.rule, v1_alerts.cluster_name, v1_alerts.subject, strict=True))
    skew = inc[inc.rule == "version_skew"]
    assert len(skew) == 1 and skew.iloc[0]["polls_seen"] == (v1_alerts.rule == "version_skew").sum()
    assert skew.iloc[0]["opened_poll_id"] == v1_alerts[v1_alerts.rule == "version_skew"].poll_id.min()
    kinds = set(readers.changes(root)["kind"])
    assert {"topic_recreated", "broker_version_changed", "controller_changed", "topic_created"} <= kinds
    assert readers.poll_history(root).shape[0] == 12  # the status rows are kept as they were


def test_open_incidents_survive_a_restart_and_resolve_once(tmp_path: Path) -> None:
    fleet = Fleet()
    writer = FleetWriter(Lake(tmp_path))
    for i in range(3):
        writer.write(fleet.poll(START + timedelta(seconds=30 * i)))
    writer.close(START + timedelta(minutes=2))
    restarted = FleetWriter(Lake(tmp_path))  # a new process: open incidents come from the lake
    restarted.write(fleet.poll(START + timedelta(minutes=3)))
    skew = readers.incidents(tmp_path, rule="version_skew")
    assert len(skew) == 1 and skew.iloc[0]["status"] == "open"
    fleet.previous = {}
    healed = fleet.poll(START + timedelta(minutes=4))
    for broker in healed.clusters[0].brokers:
        broker.software_version = "4.1.0"
    healed.alerts = run_checks({}, healed.clusters)
    restarted.write(healed)
    skew = readers.incidents(tmp_path, rule="version_skew")
    assert len(skew) == 1 and skew.iloc[0]["status"] == "resolved"
    assert skew.iloc[0]["polls_seen"] == 4 and skew.iloc[0]["resolved_poll_id"] == healed.poll_id
    assert readers.incidents(tmp_path, open_only=True).empty
    kinds = readers.changes(tmp_path, "a", entity="broker")["kind"].tolist()
    assert kinds.count("broker_version_changed") == 2


def test_retention_and_compaction_apply_to_every_v2_table(tmp_path: Path) -> None:
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    for day in range(5):
        for i in range(3):
            at = START + timedelta(days=day, seconds=30 * i)
            if day == 2 and i == 1:
                fleet.topics["b"] = [*fleet.topics["b"], TopicSnapshot(f"d{day}", f"ID-d{day}", partitions=1)]
            writer.write(fleet.poll(at))
            writer.maintain(at, 3)
    lake = Lake(tmp_path)
    for table in ("cluster_snapshots", "changes", "incidents"):
        days = lake.days(table)
        assert days == [] or days[0] >= "2026-05-03", (table, days)
        for day in days[:-1]:
            assert len(lake.files(table, [day])) == 1, (table, day)  # closed days: one file
    from backend.store.state import checkpoint_days

    assert checkpoint_days(lake) == ["2026-05-03", "2026-05-04", "2026-05-05"]  # the day at the cutoff is the base
    at = readers.fleet_state_at(tmp_path, START + timedelta(days=2, minutes=5))
    assert "d2" in set(at.topics["topic"]) and set(at.clusters["cluster_name"]) == {"a", "b"}


def test_a_second_writer_on_the_same_lake_is_followed_not_overwritten(tmp_path: Path) -> None:
    fleet = Fleet()
    long_running = FleetWriter(Lake(tmp_path))
    long_running.write(fleet.poll(START))
    fleet.topics["b"] = [*fleet.topics["b"], TopicSnapshot("from-once", "ID-once", partitions=1)]
    FleetWriter(Lake(tmp_path)).write(fleet.poll(START + timedelta(seconds=10)))  # a `poll --once` job
    fleet.topics["a"] = [*fleet.topics["a"], TopicSnapshot("later", "ID-later", partitions=1)]
    long_running.write(fleet.poll(START + timedelta(seconds=30)))
    state = readers.latest_fleet_state(tmp_path)  # every file the manifest lists exists
    assert {"from-once", "later"} <= set(state.topics["topic"])
    created = readers.changes(tmp_path, kinds="topic_created")["subject"].tolist()
    assert sorted(created) == ["from-once", "later"]  # each change logged once


def test_a_copied_lake_reads_its_own_state_files_and_old_absolute_entries_still_resolve(tmp_path: Path) -> None:
    import json

    fleet, origin = Fleet(), tmp_path / "origin"
    writer = FleetWriter(Lake(origin))
    for i in range(3):
        writer.write(fleet.poll(START + timedelta(seconds=30 * i)))
    writer.close(START + timedelta(seconds=60))
    expected = readers.latest_topics(origin, "a")["topic_id"].tolist()
    manifest = json.loads((origin / "_state" / "fleet" / "state.json").read_text())
    entries = [p for c in manifest["clusters"].values() for p in c.values()]
    assert entries and all(not p.startswith("/") and str(tmp_path) not in p for p in entries)
    # A lake restored elsewhere (backup, copy, moved disk) reads the same state, and the origin can go.
    shutil.copytree(origin, tmp_path / "copy")
    shutil.rmtree(origin)
    assert readers.latest_topics(tmp_path / "copy", "a")["topic_id"].tolist() == expected
    # A manifest written with absolute entries (before they were relative) resolves under the lake it is in.
    manifest["clusters"] = {n: {k: f"/elsewhere/lake/_state/fleet/{p}" for k, p in c.items()}
                            for n, c in manifest["clusters"].items()}
    (tmp_path / "copy" / "_state" / "fleet" / "state.json").write_text(json.dumps(manifest))
    assert readers.latest_topics(tmp_path / "copy", "a")["topic_id"].tolist() == expected


def test_a_writers_compaction_leaves_another_writers_recent_files_alone(tmp_path: Path) -> None:
    """A file another writer staged for a commit it may still lose (and then delete) is not merged while it is
    recent: two `poll --once` at once once kept the loser's change row inside the winner's compacted file. The
    writer's own files are merged as before, however fast its polls come."""
    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)  # mid-day: all of it "today"
    fleet, writer = Fleet(), FleetWriter(Lake(tmp_path))
    mine = [now - timedelta(seconds=s) for s in (50, 40, 30, 20)]
    for at in mine:
        writer.write(fleet.poll(at))
    other = FleetWriter(Lake(tmp_path))  # another writer's poll, 10 s ago, then this writer's newest
    other.write(fleet.poll(now - timedelta(seconds=10)))
    writer.write(fleet.poll(now))
    writer.maintain(now, None)
    singles = sorted(poll_id_time(f.poll_id) for f in Lake(tmp_path).files("cluster_snapshots") if not f.first_poll_id)
    assert singles == [now - timedelta(seconds=10), now]  # the other writer's recent file, and the newest
    assert len(readers.poll_history(tmp_path, "a")) == 6
    Lake(tmp_path).compact("cluster_snapshots", now=now + timedelta(seconds=61), own=set())  # later: merged too
    singles = [poll_id_time(f.poll_id) for f in Lake(tmp_path).files("cluster_snapshots") if not f.first_poll_id]
    assert singles == [now]
