"""build_snapshot: reads merged over time (windows, since-when, kept data, deleted groups, budget, hostile strings)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backend.collect import groups as groups_module
from backend.collect.groups import MAX_TEXT_CHARS, build_snapshot, cap
from backend.config import Settings
from backend.kafka import groups as kg
from backend.store.group_model import GroupSnapshot

T0 = datetime.now(UTC).replace(microsecond=0)
SETTINGS = Settings(group_window=4, group_stopped_after_s=600)


def _read(committed: int, end: int, *, members: int = 1, state: str = "Stable", extra: dict[str, int] | None = None,
          errors: dict[str, str] | None = None, group_type: str = "classic") -> kg.GroupsRead:
    group = kg.Group("orders-app", coordinator=1, protocol_type="consumer", state=state, group_type=group_type,
                     protocol="range", described=True,
                     members=tuple(kg.Member(f"m-{i}", f"orders-app-{i}", f"/10.0.0.{i}",
                                             assignment=(("orders", 0),) if i == 0 else ())
                                   for i in range(members)))
    read = kg.GroupsRead(groups={"orders-app": group}, committed={"orders-app": {("orders", 0): committed}},
                         end_offsets={("orders", 0): end}, topic_ids={"orders": "ordersTopicIdAAAAAAAAA"},
                         listed=1, brokers_answered=1, errors=dict(errors or {}))
    for name, offset in (extra or {}).items():
        read.groups[name] = kg.Group(name, coordinator=2, protocol_type="consumer", state="Empty", described=True)
        read.committed[name] = {("orders", 0): offset}
    return read


def _run(reads: list[kg.GroupsRead], step_s: int = 60) -> list[GroupSnapshot]:
    out: list[GroupSnapshot] = []
    prev = None
    for i, read in enumerate(reads):
        prev = build_snapshot(read, prev, SETTINGS, T0 + timedelta(seconds=step_s * i))
        out.append(prev)
    return out


def test_a_consumer_that_stops_while_the_log_grows_goes_lagging_then_stalled_then_ok_when_it_catches_up() -> None:
    ends = [100, 100, 150, 200, 250, 300, 350, 350]
    commits = [100, 100, 100, 100, 100, 100, 100, 350]
    snaps = _run([_read(c, e) for c, e in zip(commits, ends, strict=True)])
    statuses = [s.groups["orders-app"].status for s in snaps]
    assert statuses == ["ok", "ok", "ok", "ok", "lagging", "stalled", "stalled", "ok"]
    g = snaps[5].groups["orders-app"]
    assert g.window_lag == (50, 100, 150, 200) and len(g.window_at) == SETTINGS.group_window
    assert g.lag == 200 and g.lag_partitions == 1 and g.max_partition_lag == 200
    part = snaps[5].offsets["orders-app"][0]
    assert part.last_moved_at == T0 and part.lag_since == T0 + timedelta(seconds=120)
    assert part.member_id == "m-0" and part.topic_id == "ordersTopicIdAAAAAAAAA"
    assert g.status_since == T0 + timedelta(seconds=300)
    assert snaps[6].groups["orders-app"].status_since == g.status_since  # the same status keeps its start
    assert snaps[7].offsets["orders-app"][0].last_moved_at == T0 + timedelta(seconds=420)


def test_no_commit_for_group_stopped_after_s_is_stopped_and_an_empty_group_is_empty_with_lag() -> None:
    snaps = _run([_read(100, 100 + 10 * i) for i in range(12)], step_s=60)
    assert snaps[-1].groups["orders-app"].status == "stopped"  # 11 minutes without a commit, 600 s allowed
    empty = build_snapshot(_read(100, 200, members=0, state="Empty"), None, SETTINGS, T0)
    assert empty.groups["orders-app"].status == "empty_with_lag"
    assert "orders-app" not in empty.members


def test_a_coordinator_that_does_not_answer_keeps_the_groups_it_had_and_a_missing_group_is_deleted() -> None:
    first = build_snapshot(_read(10, 20, extra={"other": 5}), None, SETTINGS, T0)
    assert set(first.groups) == {"orders-app", "other"}
    # broker 2 (other's coordinator) fails: other keeps its row and offsets, with an error
    failed = _read(11, 21, errors={"broker 2": "connection refused"})
    second = build_snapshot(failed, first, SETTINGS, T0 + timedelta(seconds=60))
    assert second.groups["other"].error and "did not answer" in second.groups["other"].error
    assert second.offsets["other"] == first.offsets["other"]
    # every broker answered and nobody lists it: the group is gone
    third = build_snapshot(_read(12, 22), second, SETTINGS, T0 + timedelta(seconds=120))
    assert set(third.groups) == {"orders-app"}


def test_unchanged_membership_keeps_the_same_members_object() -> None:
    snaps = _run([_read(10, 20, members=2), _read(11, 25, members=2), _read(12, 30, members=3)])
    assert snaps[1].members is snaps[0].members
    assert snaps[2].members is not snaps[1].members and len(snaps[2].members["orders-app"]) == 3


def test_groups_over_the_budget_are_rows_that_say_they_were_not_read() -> None:
    read = _read(10, 20)
    read.skipped = ["zz-1", "zz-2"]
    read.listed = 3
    snap = build_snapshot(read, None, SETTINGS, T0)
    assert snap.skipped == 2 and snap.groups["zz-1"].error == "not read: over max_groups_per_cluster"
    assert "max_groups_per_cluster" in snap.errors["groups"]


def test_client_chosen_strings_are_capped_but_group_ids_are_kept_whole() -> None:
    long_id = "g" * 10_000
    read = _read(1, 2)
    read.groups[long_id] = kg.Group(long_id, coordinator=1, protocol_type="consumer", state="Stable", described=True,
                                    members=(kg.Member("m" * 5000, "=HYPERLINK(\"x\")" + "c" * 3000, "<b>h</b>"),))
    snap = build_snapshot(read, None, SETTINGS, T0)
    assert long_id in snap.groups
    member = snap.members[long_id][0]
    assert len(member.member_id) == MAX_TEXT_CHARS and member.member_id.endswith("…")
    assert member.client_id.startswith("=HYPERLINK") and member.client_host == "<b>h</b>"  # plain data, escaped later
    assert cap(None) is None and cap("short") == "short"


def test_a_type_switch_and_the_window_survive_a_new_read() -> None:
    first = build_snapshot(_read(10, 20), None, SETTINGS, T0)
    second = build_snapshot(_read(10, 20, group_type="consumer"), first, SETTINGS, T0 + timedelta(seconds=60))
    assert (first.groups["orders-app"].group_type, second.groups["orders-app"].group_type) == ("classic", "consumer")
    assert second.groups["orders-app"].first_seen_at == T0


def test_an_idle_groups_partitions_are_the_same_objects_from_read_to_read() -> None:
    snaps = _run([_read(10, 20), _read(10, 20), _read(11, 20)])
    assert snaps[1].offsets["orders-app"] is snaps[0].offsets["orders-app"]  # nothing moved: reused as it was
    assert snaps[2].offsets["orders-app"] is not snaps[1].offsets["orders-app"]
    assert snaps[2].offsets["orders-app"][0].last_moved_at == T0 + timedelta(seconds=120)


def test_members_the_memo_handed_back_are_not_converted_again_and_changed_ones_are() -> None:
    reuse: dict = {}
    first = _read(10, 20, members=2)
    snap1 = build_snapshot(first, None, SETTINGS, T0, reuse)
    same = _read(11, 25, members=2)
    same.groups["orders-app"].members = first.groups["orders-app"].members  # the memo's objects, as reused
    snap2 = build_snapshot(same, snap1, SETTINGS, T0 + timedelta(seconds=60), reuse)
    assert snap2.members["orders-app"] is snap1.members["orders-app"]
    assert reuse["orders-app"][0] is first.groups["orders-app"].members
    changed = _read(12, 30, members=2)
    old = changed.groups["orders-app"].members
    changed.groups["orders-app"].members = (kg.Member("m-0", "renamed-client", "/10.0.0.0",
                                                      assignment=(("orders", 0),)), old[1])
    snap3 = build_snapshot(changed, snap2, SETTINGS, T0 + timedelta(seconds=120), reuse)
    assert [m.client_id for m in snap3.members["orders-app"]] == ["renamed-client", "orders-app-1"]
    assert snap3.offsets["orders-app"][0].member_id == "m-0" and snap3.groups["orders-app"].lag == 18


def test_reusing_the_readers_unchanged_objects_judges_exactly_as_a_fresh_build(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    """The memo hands back the same offsets dict and members for an idle group: the snapshot must not differ."""
    built = {"plain": 0, "reused": 0}
    real = groups_module._partitions

    def counted(*args: Any) -> Any:
        built[mode] += 1
        return real(*args)

    monkeypatch.setattr(groups_module, "_partitions", counted)
    reads = [_read(10, 20, members=2)]
    for end in (20, 20, 25, 30, 30, 30, 30):  # idle, then the log grows under a committed offset that stays
        nxt = _read(10, end, members=2)
        nxt.committed["orders-app"] = reads[-1].committed["orders-app"]  # the memo's dict, as reused
        nxt.groups["orders-app"].members = reads[-1].groups["orders-app"].members
        reads.append(nxt)
    reuse: dict = {}
    plain = reused = None
    for i, read in enumerate(reads):
        at = T0 + timedelta(seconds=60 * i)
        mode = "plain"
        plain = build_snapshot(read, plain, SETTINGS, at)
        mode = "reused"
        reused = build_snapshot(read, reused, SETTINGS, at, reuse)
        assert (reused.groups, reused.offsets, reused.members) == (plain.groups, plain.offsets, plain.members), i
    assert reused is not None and reused.groups["orders-app"].status == "stalled"
    assert reused.groups["orders-app"].window_lag == (20, 20, 20, 20)
    # with the reader's objects reused, partitions are rebuilt only at the first read and when the end moved (25, 30)
    assert built == {"plain": 8, "reused": 3}
