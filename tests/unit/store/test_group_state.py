"""Groups in the lake: change rows, state files rewritten only when they change, a read rebuilt after a restart."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.store import group_readers, group_state
from backend.store.fleet_writer import FleetWriter
from backend.store.group_model import GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.lake import Lake
from backend.store.model import ClusterSnapshot, FleetPoll
from backend.store.stats import read_stats

T0 = datetime.now(UTC).replace(microsecond=0)


def _snapshot(at: datetime, *, state: str = "Stable", group_type: str = "classic", members: int = 2,
              committed: int = 10, extra_group: bool = False) -> GroupSnapshot:
    ms = tuple(GroupMember(f"m{i}", f"app-{i}", f"/10.0.0.{i}", assignment=(("orders", i),)) for i in range(members))
    snap = GroupSnapshot(collected_at=at, listed=1, brokers_answered=3, versions={"ListGroups": 5})
    snap.groups["app"] = GroupState("app", group_type=group_type, protocol_type="consumer", protocol="range",
                                    state=state, coordinator_id=1, members=members, topics=1, partitions=1,
                                    topic_names=("orders",), lag=5, lag_partitions=1, max_partition_lag=5,
                                    status="ok", status_since=T0, evidence={"lag": 5}, last_commit_at=T0,
                                    first_seen_at=T0, window_at=(T0, at), window_lag=(0, 5),
                                    window_committed=(5, committed))
    if members:
        snap.members["app"] = ms
    snap.offsets["app"] = (PartitionLag("orders", 0, committed, committed + 5, "m0", "tid", T0, at),)
    if extra_group:
        snap.groups["other"] = GroupState("other", group_type="consumer", state="Empty", first_seen_at=at)
    return snap


def test_the_change_log_names_what_changed_in_groups_and_members() -> None:
    first = _snapshot(T0)
    assert group_state.diff(None, first, "c1") == [
        ("groups_first_seen", "c1", None, {"groups": 1, "by_type": {"classic": 1}, "members": 2})]
    second = _snapshot(T0 + timedelta(minutes=1), state="Empty", group_type="consumer", members=1, extra_group=True)
    kinds = [(k, s) for k, s, _b, _a in group_state.diff(first, second, "c1")]
    assert ("group_created", "other") in kinds
    assert ("group_protocol_changed", "app") in kinds and ("group_state_changed", "app") in kinds
    assert ("member_left", "app: app-1 (m1)") in kinds
    assert not any(k == "group_assignor_changed" for k, _s in kinds)  # the type changed: no separate assignor row
    gone = group_state.diff(second, _snapshot(T0 + timedelta(minutes=2), group_type="consumer", members=1), "c1")
    assert [(k, s) for k, s, _b, _a in gone if k == "group_deleted"] == [("group_deleted", "other")]


def test_a_member_storm_is_one_row() -> None:
    a = _snapshot(T0, members=0)
    b = _snapshot(T0, members=group_state.MEMBER_ROWS_MAX + 5)
    rows = group_state.diff(a, b, "c1")
    assert [r[0] for r in rows] == ["members_changed"] and rows[0][3]["joined"] == group_state.MEMBER_ROWS_MAX + 5


def test_state_tables_round_trip_and_only_changed_kinds_are_rewritten() -> None:
    snap = _snapshot(T0)
    tables = group_state.state_tables("p1", T0, "c1", "id1", None, snap)
    assert set(tables) == {"groups", "group_members", "group_offsets", "group_runs"}
    back = group_state.snapshots_from_tables(tables["groups"], tables["group_members"], tables["group_offsets"],
                                             tables["group_runs"])["c1"]
    assert back.groups == snap.groups and back.members == snap.members and back.offsets == snap.offsets
    same = replace(snap, collected_at=T0 + timedelta(minutes=1))  # the same groups, members and offsets objects
    assert set(group_state.state_tables("p2", T0, "c1", "id1", snap, same)) == {"group_runs"}


def _poll(poll_id: str, at: datetime, groups: GroupSnapshot | None) -> FleetPoll:
    cluster = ClusterSnapshot(cluster_name="c1", status="ok", polled_at=at, poll_id=poll_id, cluster_id="id1",
                              groups=groups)
    return FleetPoll(poll_id=poll_id, polled_at=at, clusters=[cluster], alerts=[], duration_ms=1.0)


def test_the_writer_stores_groups_and_a_new_writer_reloads_them(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    writer = FleetWriter(lake)
    first = _snapshot(T0)
    writer.write(_poll("20260101T000000000000Z-00000001", T0, first))
    result = writer.write(_poll("20260101T000100000000Z-00000002", T0 + timedelta(minutes=1), first))
    assert result.changes == 0  # the same read: nothing written for groups
    second = _snapshot(T0 + timedelta(minutes=2), committed=20)
    second.members = first.members
    result = writer.write(_poll("20260101T000200000000Z-00000003", T0 + timedelta(minutes=2), second))
    assert result.changes == 0 and result.clusters_rewritten == ["c1"]
    frame = group_readers.read_groups(lake, ["c1"])
    assert list(frame["group_id"]) == ["app"] and frame.loc[0, "group_type"] == "classic"
    assert list(frame.loc[0, "topic_names"]) == ["orders"]
    offsets = group_readers.group_offsets(lake)
    assert offsets.loc[0, "committed_offset"] == 20 and offsets.loc[0, "lag"] == 5
    assert len(group_readers.group_members(lake)) == 2
    reloaded = FleetWriter(lake).groups["c1"]
    assert reloaded.groups == second.groups and reloaded.offsets == second.offsets
    assert group_readers.load_groups(lake)["c1"].members == second.members


def test_read_groups_costs_one_state_file_per_cluster_asked_whatever_the_polls(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    writer = FleetWriter(lake)
    snap = _snapshot(T0)
    for i in range(30):
        at = T0 + timedelta(minutes=i)
        snap = replace(_snapshot(at, committed=10 + i), members=snap.members)
        writer.write(_poll(f"20260101T00{i:02d}00000000Z-{i:08x}", at, snap))
    with read_stats() as stats:
        frame = group_readers.read_groups(lake, ["c1"])
    assert len(frame) == 1
    assert stats.by_table["state/groups"] == [1, 1]
    assert set(group_readers.read_groups(lake, ["nope"])["group_id"]) == set()


def test_one_scoped_reader_reads_a_groups_row_and_its_offsets_of_the_same_poll(tmp_path: Path) -> None:
    """A poll committed between a caller's read of the groups and of their offsets does not mix two polls in one
    answer (the API's group detail read lag 3,540 beside partitions summing to 3,545 before)."""
    from backend.views.scoped import ScopedLake

    lake = Lake(tmp_path / "lake")
    writer = FleetWriter(lake)
    writer.write(_poll("20260101T000000000000Z-00000001", T0, _snapshot(T0, committed=10)))
    scoped = ScopedLake.open(str(tmp_path / "lake"), None)
    assert scoped.groups()["group_id"].tolist() == ["app"]
    later = T0 + timedelta(minutes=1)
    writer.write(_poll("20260101T000100000000Z-00000002", later, _snapshot(later, committed=20)))
    assert scoped.group_offsets(["c1"])["committed_offset"].tolist() == [10]  # the poll its groups came from
    assert scoped.group_members(["c1"])["member_id"].tolist() == ["m0", "m1"]
    fresh = ScopedLake.open(str(tmp_path / "lake"), None)  # a new reader sees the new poll
    assert fresh.group_offsets(["c1"])["committed_offset"].tolist() == [20]
    assert group_readers.group_offsets(str(tmp_path / "lake"), ["c1"])["committed_offset"].tolist() == [20]
