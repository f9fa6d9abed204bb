"""Group views: worst first, server-side filters and pages, the KIP-848 table, side by side, exports."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pandas as pd

from backend.views import group_views as gv

NOW = pd.Timestamp(datetime.now(UTC))


def _groups(n_per_cluster: int = 30) -> pd.DataFrame:
    rows = []
    statuses = ["ok", "lagging", "stalled", "stopped", "empty_with_lag", "unknown"]
    for cluster in ("eu", "us"):
        for i in range(n_per_cluster):
            rows.append({"cluster_name": cluster, "group_id": f"{cluster}-group-{i:03d}",
                         "group_type": "consumer" if i % 3 == 0 else "classic", "protocol_type": "consumer",
                         "protocol": "range", "state": "Empty" if i % 5 == 0 else "Stable", "coordinator_id": 1,
                         "members": 0 if i % 5 == 0 else 2, "topics": 1, "partitions": 3,
                         "topic_names": [f"topic-{i % 4}"], "lag": float(i * 10), "status": statuses[i % 6],
                         "status_since": NOW, "error": None, "evidence_json": json.dumps({"lag": i * 10}),
                         "window_at": [NOW], "window_lag": [i * 10], "collected_at": NOW})
    return pd.DataFrame(rows)


def test_pages_are_worst_first_filtered_server_side_and_only_one_page_is_returned() -> None:
    groups = _groups()
    page = gv.group_page(groups, page=1, page_size=7)
    assert (page.total, page.pages, len(page.rows)) == (60, 9, 7)
    assert list(page.rows["status"][:2]) == ["stalled", "stalled"] and page.rows["lag"].iloc[0] >= page.rows["lag"].iloc[1]
    last = gv.group_page(groups, page=99, page_size=7)
    assert last.page == 9 and len(last.rows) == 4
    only = gv.group_page(groups, clusters=["us"], statuses=["lagging"], types=["classic"], states=["Stable"],
                         topic="topic-1", query="GROUP-0")
    assert set(only.rows["cluster"]) == {"us"} and set(only.rows["status"]) == {"lagging"}
    assert all(g.startswith("us-group-0") for g in only.rows["group"])
    assert only.by_status == {"lagging": only.total}


def test_a_group_is_found_again_by_its_key_and_long_ids_are_cut_for_display_only() -> None:
    groups = _groups(3)
    long_id = "=HYPERLINK(\"http://x\")" + "g" * 10_000
    groups.loc[len(groups)] = {**groups.iloc[0].to_dict(), "group_id": long_id}
    row = gv.list_rows(groups[groups["group_id"] == long_id])
    assert len(row.loc[0, "group"]) == gv.DISPLAY_CHARS and row.loc[0, "group"].endswith("…")
    found = gv.find_group(groups, "eu", row.loc[0, "key"])
    assert found is not None and found["group_id"] == long_id
    assert gv.find_group(groups, "us", row.loc[0, "key"]) is None


def test_fleet_counts_compare_and_migration_tables() -> None:
    groups = _groups(6)
    table = pd.DataFrame({"cluster": ["eu", "us", "never"], "topics": [1, 2, 3], "under_replicated": [0, 0, 0],
                          "last_poll": ["1 s", "1 s", "1 s"]})
    counted = gv.with_group_counts(table, groups)
    assert list(counted.columns) == ["cluster", "topics", "under_replicated", "group_summary", "last_poll", "groups",
                                     "lagging_groups"]
    assert list(counted["group_summary"]) == ["4 / 6", "4 / 6", "—"]
    assert counted.set_index("cluster").loc["eu", "groups"] == 6 and counted.set_index("cluster").loc["eu",
                                                                                                     "lagging_groups"] == 4
    assert pd.isna(counted.set_index("cluster").loc["never", "groups"])
    side = gv.compare_groups(groups, ["eu", "us"])
    assert list(side.columns) == ["type", "state", "eu", "us"] and side["eu"].sum() == 6
    statuses = gv.compare_statuses(groups, ["eu", "us"]).set_index("status")
    assert statuses.loc["stalled", "eu"] == 1
    brokers = pd.DataFrame({"cluster_name": ["eu"], "software_name": ["Apache Kafka"], "software_version": ["4.1.0"],
                            "version_provenance": ["reported"], "version_min": ["4.1.0"], "version_max": ["4.1.0"],
                            "reachable": [True]})
    migration = gv.migration_table(groups, brokers, ["eu", "us"]).set_index("cluster")
    assert migration.loc["eu", "classic"] == 4 and migration.loc["eu", "consumer"] == 2
    assert migration.loc["eu", "on consumer protocol"] == "33%" and "4.1.0" in migration.loc["eu", "broker versions"]


def test_detail_tables_and_the_csv_frame() -> None:
    groups = _groups(2)
    members = pd.DataFrame([{"cluster_name": "eu", "group_id": "eu-group-001", "member_id": "m1", "instance_id": None,
                             "client_id": "app-1", "client_host": "/10.0.0.1", "rack": None, "member_type": None,
                             "assigned_partitions": 2, "assignment_json": json.dumps({"orders": [0, 1]}),
                             "subscribed_json": "[\"orders\"]"}])
    offsets = pd.DataFrame([{"cluster_name": "eu", "group_id": "eu-group-001", "topic": "orders", "partition": p,
                             "committed_offset": 5, "end_offset": 5 + p * 10, "lag": p * 10, "member_id": "m1",
                             "topic_id": "t", "last_moved_at": NOW, "lag_since": None} for p in range(2)])
    table = gv.members_table(members, "eu", "eu-group-001")
    assert table.loc[0, "assignment"] == "orders: 0,1"
    parts = gv.partitions_table(offsets, members, "eu", "eu-group-001")
    assert list(parts["partition"]) == [1, 0] and parts.loc[0, "client_id"] == "app-1"
    assert gv.topic_lag(parts).loc[0, "lag"] == 10
    frame = gv.export_frame(groups, offsets, members)
    assert len(frame) == 5  # one row per group without partitions, one per partition of eu-group-001
    mine = frame[frame["group_id"] == "eu-group-001"]
    assert list(mine["lag"]) == [0, 10] and list(mine["client_id"]) == ["app-1", "app-1"]


def test_a_topic_filter_that_matches_nothing_keeps_the_columns() -> None:
    groups = _groups(3)
    nothing = gv.filter_groups(groups, clusters=["nowhere"], topic="topic-1")
    assert nothing.empty and list(nothing.columns) == list(groups.columns)
    page = gv.group_page(groups.iloc[0:0], topic="topic-1")
    assert page.total == 0 and list(page.rows.columns) == gv.LIST_COLUMNS
