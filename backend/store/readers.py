"""Readers of the snapshot lake: pandas DataFrames, empty (with columns) on a missing lake."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from backend.store.lake import Lake, LakeFile, poll_id_time
from backend.store.schemas import (
    BROKER_SNAPSHOTS,
    CLUSTER_SNAPSHOTS,
    FLEET_ALERTS,
    TOPIC_SNAPSHOTS,
    ZK_SNAPSHOTS,
    schema_for,
    time_column,
)

LakeLike = Lake | str | os.PathLike[str]

# Statuses whose poll produced no broker/topic data.
NO_DATA_STATUSES = frozenset({"down", "auth_failed"})

VERSION_TIMELINE_COLUMNS = [
    "cluster_name",
    "cluster_id",
    "broker_id",
    "poll_id",
    "polled_at",
    "change",
    "software_name",
    "software_version",
    "version_provenance",
    "version_min",
    "version_max",
    "previous_software_name",
    "previous_software_version",
    "previous_version_provenance",
]
TOPIC_ID_CHANGE_COLUMNS = [
    "cluster_name",
    "topic",
    "old_topic_id",
    "new_topic_id",
    "old_first_seen",
    "old_last_seen",
    "new_first_seen",
]


@dataclass(frozen=True)
class FleetState:
    """Latest rows per cluster: one cluster row each, with that poll's brokers, topics, zk nodes."""

    clusters: pd.DataFrame
    brokers: pd.DataFrame
    topics: pd.DataFrame
    zk_nodes: pd.DataFrame


def open_lake(lake: LakeLike) -> Lake:
    """Return a Lake for a Lake, path or URI."""
    return lake if isinstance(lake, Lake) else Lake(lake)


def empty_frame(table: str) -> pd.DataFrame:
    """Return an empty DataFrame with a table's columns and dtypes."""
    return schema_for(table).empty_table().to_pandas()


def _since_days(lake: Lake, table: str, since: datetime | None) -> list[str]:
    days = lake.days(table)
    if since is None:
        return days
    first = since.astimezone(UTC).date().isoformat()
    return [d for d in days if d >= first]


def _time_filter(table: str, since: datetime | None, until: datetime | None) -> ds.Expression | None:
    col = ds.field(time_column(table))
    expr: ds.Expression | None = None
    if since is not None:
        expr = col >= pa.scalar(since.astimezone(UTC), pa.timestamp("us", tz="UTC"))
    if until is not None:
        upper = col <= pa.scalar(until.astimezone(UTC), pa.timestamp("us", tz="UTC"))
        expr = upper if expr is None else expr & upper
    return expr


def _and(*parts: ds.Expression | None) -> ds.Expression | None:
    out: ds.Expression | None = None
    for part in parts:
        if part is not None:
            out = part if out is None else out & part
    return out


def latest_poll_id(lake: LakeLike) -> str | None:
    """Return the id of the newest poll in cluster_snapshots, or None for an empty lake."""
    files = open_lake(lake).files(CLUSTER_SNAPSHOTS, _last_days(open_lake(lake), CLUSTER_SNAPSHOTS, 1))
    return files[-1].poll_id if files else None


def _last_days(lake: Lake, table: str, count: int) -> list[str]:
    return lake.days(table)[-count:] if count > 0 else []


def latest_clusters(lake: LakeLike, *, lookback_days: int = 2, with_data: bool = False) -> pd.DataFrame:
    """Return the newest cluster_snapshots row per cluster (optionally the newest that had data)."""
    lk = open_lake(lake)
    files = lk.files(CLUSTER_SNAPSHOTS, _last_days(lk, CLUSTER_SNAPSHOTS, lookback_days))
    filt = None
    if with_data:
        filt = ~ds.field("status").isin(pa.array(sorted(NO_DATA_STATUSES)))
    table = lk.read(CLUSTER_SNAPSHOTS, files, filter=filt) if files else None
    if table is None or table.num_rows == 0:
        return empty_frame(CLUSTER_SNAPSHOTS)
    frame = table.to_pandas()
    frame = frame.sort_values(["cluster_name", "poll_id"]).drop_duplicates("cluster_name", keep="last")
    return frame.sort_values("cluster_name").reset_index(drop=True)


def _rows_of_polls(lake: Lake, table: str, clusters: pd.DataFrame, cluster_name: str | None = None) -> pd.DataFrame:
    """Rows of `table` from each cluster's poll listed in `clusters` (cluster_name, poll_id)."""
    if cluster_name is not None:
        clusters = clusters[clusters["cluster_name"] == cluster_name]
    if clusters.empty:
        return empty_frame(table)
    poll_ids = sorted(set(clusters["poll_id"]))
    days = sorted({poll_id_time(p).date().isoformat() for p in poll_ids})
    wanted = set(poll_ids)
    files: list[LakeFile] = [f for f in lake.files(table, days) if f.poll_id in wanted]
    if not files:
        return empty_frame(table)
    names = sorted(set(clusters["cluster_name"]))
    filt = ds.field("cluster_name").isin(pa.array(names, pa.string()))
    frame = lake.read(table, files, filter=filt).to_pandas()
    pairs = clusters[["cluster_name", "poll_id"]]
    return frame.merge(pairs, on=["cluster_name", "poll_id"], how="inner").reset_index(drop=True)


def latest_brokers(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the brokers of each cluster's latest poll."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, BROKER_SNAPSHOTS, latest_clusters(lk, with_data=with_data), cluster_name)


def latest_topics(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the topics of each cluster's latest poll (one cluster when cluster_name is given)."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, TOPIC_SNAPSHOTS, latest_clusters(lk, with_data=with_data), cluster_name)


def latest_fleet_state(lake: LakeLike, *, with_data: bool = False) -> FleetState:
    """Return the latest cluster row per cluster with that poll's brokers, topics and zk nodes.

    with_data=True picks, per cluster, the newest poll that returned data (not down/auth_failed);
    the poller uses it as the previous snapshot for checks across restarts.
    """
    lk = open_lake(lake)
    clusters = latest_clusters(lk, with_data=with_data)
    return FleetState(
        clusters=clusters,
        brokers=_rows_of_polls(lk, BROKER_SNAPSHOTS, clusters),
        topics=_rows_of_polls(lk, TOPIC_SNAPSHOTS, clusters),
        zk_nodes=_rows_of_polls(lk, ZK_SNAPSHOTS, clusters),
    )


def poll_history(
    lake: LakeLike,
    cluster_name: str | None = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return cluster_snapshots rows over time (status, counts, duration), oldest first."""
    lk = open_lake(lake)
    files = lk.files(CLUSTER_SNAPSHOTS, _since_days(lk, CLUSTER_SNAPSHOTS, since))
    if not files:
        return empty_frame(CLUSTER_SNAPSHOTS)
    name_filter = ds.field("cluster_name") == cluster_name if cluster_name is not None else None
    filt = _and(name_filter, _time_filter(CLUSTER_SNAPSHOTS, since, until))
    frame = lk.read(CLUSTER_SNAPSHOTS, files, filter=filt).to_pandas()
    return frame.sort_values(["polled_at", "cluster_name"]).reset_index(drop=True)


def alerts(
    lake: LakeLike,
    *,
    cluster_name: str | Sequence[str] | None = None,
    rule: str | Sequence[str] | None = None,
    severity: str | Sequence[str] | None = None,
    poll_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return fleet_alerts rows matching the filters, newest first."""
    lk = open_lake(lake)
    files = lk.files(FLEET_ALERTS, _since_days(lk, FLEET_ALERTS, since))
    if poll_id is not None:
        files = [f for f in files if f.poll_id == poll_id]
    if not files:
        return empty_frame(FLEET_ALERTS)
    parts = [_time_filter(FLEET_ALERTS, since, until)]
    for column, value in (
        ("cluster_name", cluster_name),
        ("rule", rule),
        ("severity", severity),
    ):
        if value is None:
            continue
        values = [value] if isinstance(value, str) else list(value)
        parts.append(ds.field(column).isin(pa.array(values, pa.string())))
    if poll_id is not None:
        parts.append(ds.field("poll_id") == poll_id)
    frame = lk.read(FLEET_ALERTS, files, filter=_and(*parts)).to_pandas()
    return frame.sort_values(["raised_at", "alert_id"], ascending=False).reset_index(drop=True)


def version_timeline(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
    """Return per broker the first sighting and every software/version change, oldest first."""
    lk = open_lake(lake)
    files = lk.files(BROKER_SNAPSHOTS, _since_days(lk, BROKER_SNAPSHOTS, since))
    if not files:
        return pd.DataFrame(columns=VERSION_TIMELINE_COLUMNS)
    columns = [
        "cluster_name",
        "cluster_id",
        "broker_id",
        "poll_id",
        "polled_at",
        "reachable",
        "software_name",
        "software_version",
        "version_provenance",
        "version_min",
        "version_max",
    ]
    filt = _and(
        ds.field("cluster_name") == cluster_name if cluster_name is not None else None,
        ds.field("reachable"),
        _time_filter(BROKER_SNAPSHOTS, since, None),
    )
    frame = lk.read(BROKER_SNAPSHOTS, files, columns=columns, filter=filt).to_pandas()
    if frame.empty:
        return pd.DataFrame(columns=VERSION_TIMELINE_COLUMNS)
    frame = frame.sort_values(["cluster_name", "broker_id", "poll_id"]).reset_index(drop=True)
    key_cols = [
        "software_name",
        "software_version",
        "version_provenance",
        "version_min",
        "version_max",
    ]
    key = frame[key_cols].astype("string").fillna("\x00").agg("\x1f".join, axis=1)
    group = frame["cluster_name"].astype(str) + "\x1f" + frame["broker_id"].astype(str)
    prev_key = key.groupby(group).shift(1)
    first = prev_key.isna()
    changed = first | (key != prev_key)
    for col in ("software_name", "software_version", "version_provenance"):
        frame[f"previous_{col}"] = frame[col].groupby(group).shift(1)
    frame["change"] = first.map({True: "first_seen", False: "changed"})
    out = frame[changed].drop(columns=["reachable"])
    return out[VERSION_TIMELINE_COLUMNS].reset_index(drop=True)


def topic_id_changes(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
    """Return topics recreated under the same name: old and new topic ids with when each was seen."""
    lk = open_lake(lake)
    files = lk.files(TOPIC_SNAPSHOTS, _since_days(lk, TOPIC_SNAPSHOTS, since))
    if not files:
        return pd.DataFrame(columns=TOPIC_ID_CHANGE_COLUMNS)
    filt = _and(
        ds.field("cluster_name") == cluster_name if cluster_name is not None else None,
        ds.field("topic_id").is_valid(),
        _time_filter(TOPIC_SNAPSHOTS, since, None),
    )
    table = lk.read(
        TOPIC_SNAPSHOTS,
        files,
        columns=["cluster_name", "topic", "topic_id", "polled_at"],
        filter=filt,
    )
    if table.num_rows == 0:
        return pd.DataFrame(columns=TOPIC_ID_CHANGE_COLUMNS)
    ids = table.group_by(["cluster_name", "topic", "topic_id"]).aggregate([("polled_at", "min"), ("polled_at", "max")])
    counts = ids.group_by(["cluster_name", "topic"]).aggregate([("topic_id", "count")])
    multi = counts.filter(pc.greater(counts["topic_id_count"], 1)).select(["cluster_name", "topic"])
    if multi.num_rows == 0:
        return pd.DataFrame(columns=TOPIC_ID_CHANGE_COLUMNS)
    frame = ids.join(multi, ["cluster_name", "topic"], join_type="inner").to_pandas()
    frame = frame.sort_values(["cluster_name", "topic", "polled_at_min"]).reset_index(drop=True)
    group = frame.groupby(["cluster_name", "topic"], sort=False)
    out = pd.DataFrame(
        {
            "cluster_name": frame["cluster_name"],
            "topic": frame["topic"],
            "old_topic_id": group["topic_id"].shift(1),
            "new_topic_id": frame["topic_id"],
            "old_first_seen": group["polled_at_min"].shift(1),
            "old_last_seen": group["polled_at_max"].shift(1),
            "new_first_seen": frame["polled_at_min"],
        }
    )
    out = out[out["old_topic_id"].notna()]
    return out[TOPIC_ID_CHANGE_COLUMNS].sort_values("new_first_seen").reset_index(drop=True)


def latest_zk_nodes(lake: LakeLike, cluster_name: str | None = None) -> pd.DataFrame:
    """Return the ZooKeeper nodes read in each cluster's latest poll."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, ZK_SNAPSHOTS, latest_clusters(lk), cluster_name)
