"""Lag edge cases that must never read as healthy: a commit past the end of the log, records on partitions without a
commit, a share group's lag (its coordinator's), and an unknown lag on /metrics (no series, never 0); the lake keeps
what the pages need (share start offsets, uncommitted records, a KIP-848 member's regex)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from backend.collect.group_checks import status_alerts
from backend.collect.groups import build_snapshot
from backend.collect.metrics import FleetMetrics
from backend.config import Settings
from backend.kafka import groups as kg
from backend.store import group_state
from backend.store.group_model import SHARE_START, GroupSnapshot
from backend.store.model import ClusterSnapshot, FleetPoll
from backend.views import group_views as gv

T0 = datetime(2031, 5, 6, 7, 0, tzinfo=UTC)
SETTINGS = Settings(group_window=3, group_stopped_after_s=3600)


def _group(name: str, group_type: str = "classic", members: tuple[kg.Member, ...] = ()) -> kg.Group:
    return kg.Group(name, coordinator=1, protocol_type="share" if group_type == "share" else "consumer",
                    state="Stable" if members else "Empty", group_type=group_type, described=True, members=members)


def _read() -> kg.GroupsRead:
    rx_member = kg.Member("m-1", "py-rx", "/10.0.0.1", assignment=(("rx-a", 0), ("rx-b", 0)),
                          subscribed_regex="^rx-.*", member_type="consumer")
    return kg.GroupsRead(
        groups={"ahead": _group("ahead"), "rx": _group("rx", "consumer", (rx_member,)), "share": _group("share", "share"),
                "gone": _group("gone")},
        committed={"ahead": {("t", 0): 500}, "rx": {("rx-a", 0): 20}, "share": {("s", 0): 35},
                   "gone": {("deleted", 0): 5}},
        share_lags={"share": {("s", 0): 15}},
        end_offsets={("t", 0): 10, ("rx-a", 0): 50, ("rx-b", 0): 80, ("s", 0): 50},
        start_offsets={("rx-b", 0): 0}, missing_topics={"deleted"},
        topic_ids={"t": "tTopicIdAAAAAAAAAAAAAA", "rx-a": "aTopicIdAAAAAAAAAAAAAA", "rx-b": "bTopicIdAAAAAAAAAAAAAA",
                   "s": "sTopicIdAAAAAAAAAAAAAA"}, listed=4, brokers_answered=1)


def _snaps(n: int) -> list[GroupSnapshot]:
    out: list[GroupSnapshot] = []
    prev = None
    for i in range(n):
        prev = build_snapshot(_read(), prev, SETTINGS, T0 + timedelta(seconds=60 * i))
        out.append(prev)
    return out


def test_a_commit_past_the_end_is_offset_ahead_never_ok_with_its_evidence_and_an_incident() -> None:
    snap = _snaps(1)[0]
    g = snap.groups["ahead"]
    assert (g.status, g.lag, g.partitions_ahead) == ("offset_ahead", None, 1)
    assert g.evidence["sample"] == {"t[0]": {"committed": 500, "end": 10, "lag": -490}}
    assert snap.offsets["ahead"][0].lag == -490  # as kafka-consumer-groups.sh prints it
    alerts = status_alerts(ClusterSnapshot("c", "ok", T0, "p", groups=snap), snap)
    mine = [a for a in alerts if a.subject == "group ahead"]
    assert [a.rule for a in mine] == ["group_offset_ahead"] and mine[0].severity == "critical"
    assert "past the end of the log" in mine[0].explanation


def test_records_on_uncommitted_partitions_sit_beside_the_lag_and_the_status_sees_them() -> None:
    snaps = _snaps(4)
    g = snaps[0].groups["rx"]
    assert (g.lag, g.uncommitted_records, g.uncommitted_partitions, g.waiting) == (30, 80, 1, 110)
    assert g.status == "ok" and g.window_lag == (110,)
    b = next(p for p in snaps[0].offsets["rx"] if p.topic == "rx-b")
    assert b.committed is None and b.lag is None and b.uncommitted_records == 80
    last = snaps[-1].groups["rx"]  # assigned since before the window, records waiting, still nothing committed
    assert last.status == "stalled" and last.evidence["uncommitted_records"] == 80
    assert last.evidence["sample"]["rx-b[0]"] == {"committed": None, "lag": 80}
    assert {m.subscribed_regex for m in snaps[-1].members["rx"]} == {"^rx-.*"}


def test_a_share_groups_lag_is_its_coordinators_and_its_committed_offset_is_its_start_offset() -> None:
    g = _snaps(1)[0]
    part = g.offsets["share"][0]
    assert (part.kind, part.committed, part.end, part.lag) == (SHARE_START, 35, 50, 15)
    assert g.groups["share"].lag == 15 and g.groups["share"].status == "empty_with_lag"  # nobody reads the 15
    told_none = _read()
    told_none.share_lags = {"share": {}}  # DescribeShareGroupOffsets v0: no lag
    snap = build_snapshot(told_none, None, SETTINGS, T0)
    assert snap.offsets["share"][0].lag is None and snap.groups["share"].lag is None
    assert snap.groups["share"].status == "unknown"  # not end - start: that is not a share group's lag


def test_an_unknown_lag_has_no_series_on_metrics_never_zero(tmp_path: Path) -> None:
    snap = _snaps(1)[0]
    assert snap.groups["gone"].lag is None and snap.groups["gone"].status == "unknown"
    metrics = FleetMetrics(str(tmp_path / "lake"))
    metrics.update(FleetPoll("p", T0, [ClusterSnapshot("c", "ok", T0, "p", groups=snap)], [], 1.0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    samples: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if "group" in s.labels:
                samples.setdefault(s.name, {})[s.labels["group"]] = s.value
    assert samples["kafka_fleet_group_lag_records"] == {"rx": 30.0, "share": 15.0}  # no "gone", no "ahead"
    assert samples["kafka_fleet_group_uncommitted_records"] == {"rx": 80.0}
    assert "gone" in samples["kafka_fleet_group_members"]  # the group itself is there
    topics = {s.labels["topic"] for f in text_string_to_metric_families(generate_latest(registry).decode())
              for s in f.samples if s.name == "kafka_fleet_group_topic_lag_records"}
    assert "t" not in topics and "deleted" not in topics


def test_the_lake_keeps_what_the_pages_show_and_the_tool_shows_dashes(tmp_path: Path) -> None:
    snap = _snaps(1)[0]
    tables = group_state.state_tables("p", T0, "c", "id", None, snap)
    back = group_state.snapshots_from_tables(tables["groups"], tables["group_members"], tables["group_offsets"],
                                             tables["group_runs"])["c"]
    assert back.groups == snap.groups and back.offsets == snap.offsets and back.members == snap.members
    groups = tables["groups"].to_pandas()
    offsets = tables["group_offsets"].to_pandas()
    members = tables["group_members"].to_pandas()
    parts = gv.partitions_table(offsets, members, "c", "rx")
    assert parts.set_index("topic").loc["rx-b", "uncommitted_records"] == 80
    shown = gv.as_the_tool_shows(parts)
    row = shown.set_index("topic").loc["rx-b"]
    assert (row["committed_offset"], row["lag"], row["end_offset"]) == ("-", "-", "80")
    assert "None" not in shown.astype(str).to_numpy().ravel().tolist()
    share = gv.as_the_tool_shows(gv.partitions_table(offsets, members, "c", "share"), share=True)
    assert share.loc[0, "start_offset"] == "35" and share.loc[0, "lag"] == "15"
    table = gv.as_the_tool_shows(gv.members_table(members, "c", "rx"))
    assert table.loc[0, "instance_id"] == "-" and table.loc[0, "subscribed"] == "regex ^rx-.*"
    frame = gv.export_frame(groups, offsets, members)
    assert {"member_id", "group_instance_id", "uncommitted_records", "offset_kind"} <= set(frame.columns)
    assert set(frame.loc[frame["group_id"] == "share", "offset_kind"]) == {SHARE_START}
    assert list(frame.loc[frame["group_id"] == "rx", "member_id"]) == ["m-1", "m-1"]
    rows = gv.list_rows(gv.worst_first(groups))
    assert rows.iloc[0]["group"] == "ahead" and rows.set_index("group").loc["rx", "uncommitted"] == 80


def test_assign_only_groups_are_not_to_migrate() -> None:
    groups = pd.DataFrame({"cluster_name": ["c"] * 4, "group_id": ["sub", "assign", "new", "conn"],
                           "group_type": ["classic", "classic", "consumer", "classic"],
                           "protocol_type": ["consumer", "", "consumer", "connect"],
                           "state": ["Stable", "Empty", "Stable", "Stable"]})
    table = gv.migration_table(groups, pd.DataFrame(columns=["cluster_name"]), ["c"]).set_index("cluster")
    assert (table.loc["c", "classic"], table.loc["c", "assign-only"], table.loc["c", "to migrate"]) == (1, 1, 1)
    assert table.loc["c", "on consumer protocol"] == "50%"
