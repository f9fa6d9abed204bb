"""Readers of the lake: pandas DataFrames, empty (with columns) on a missing lake.

A v2 lake is read through its state manifest, the newest status file, the change log and the
incidents; each reader's cost follows the fleet and the changes in its window, not the number
of polls. A v1 lake that was not migrated yet (no poller has run the new code on it) is read
with the v1 readers (`_v1_*`), which scan its snapshot history.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from backend.store import state
from backend.store.lake import Lake, LakeFile, poll_id_time
from backend.store.schemas import (
    BROKER_SNAPSHOTS,
    CHANGES,
    CLUSTER_SNAPSHOTS,
    FLEET_ALERTS,
    INCIDENTS,
    LEGACY_TABLES,
    STATE_TABLES,
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


def _v1_latest_poll_id(lake: LakeLike) -> str | None:
    """Return the id of the newest poll in cluster_snapshots, or None for an empty lake."""
    files = open_lake(lake).files(CLUSTER_SNAPSHOTS, _last_days(open_lake(lake), CLUSTER_SNAPSHOTS, 1))
    return files[-1].poll_id if files else None


def _last_days(lake: Lake, table: str, count: int) -> list[str]:
    return lake.days(table)[-count:] if count > 0 else []


def _v1_latest_clusters(lake: LakeLike, *, lookback_days: int = 2, with_data: bool = False) -> pd.DataFrame:
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


def _v1_latest_brokers(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the brokers of each cluster's latest poll."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, BROKER_SNAPSHOTS, _v1_latest_clusters(lk, with_data=with_data), cluster_name)


def _v1_latest_topics(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the topics of each cluster's latest poll (one cluster when cluster_name is given)."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, TOPIC_SNAPSHOTS, _v1_latest_clusters(lk, with_data=with_data), cluster_name)


def _v1_latest_fleet_state(lake: LakeLike, *, with_data: bool = False) -> FleetState:
    """Return the latest cluster row per cluster with that poll's brokers, topics and zk nodes.

    with_data=True picks, per cluster, the newest poll that returned data (not down/auth_failed);
    the poller uses it as the previous snapshot for checks across restarts.
    """
    lk = open_lake(lake)
    clusters = _v1_latest_clusters(lk, with_data=with_data)
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


def _v1_alerts(
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


def _v1_version_timeline(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
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


def _v1_topic_id_changes(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
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


def _v1_latest_zk_nodes(lake: LakeLike, cluster_name: str | None = None) -> pd.DataFrame:
    """Return the ZooKeeper nodes read in each cluster's latest poll."""
    lk = open_lake(lake)
    return _rows_of_polls(lk, ZK_SNAPSHOTS, _v1_latest_clusters(lk), cluster_name)


# ---------------------------------------------------------------------------------------------
# v2 readers: state manifest, newest status file, change log, incidents
# ---------------------------------------------------------------------------------------------

CHANGE_COLUMNS = schema_for(CHANGES).names
INCIDENT_COLUMNS = schema_for(INCIDENTS).names
ALERT_EXTRA_COLUMNS = ["status", "one_off", "last_seen_at", "last_poll_id", "resolved_at", "polls_seen",
                       "latest_evidence_json", "incident_id"]


def _is_v1(lk: Lake) -> bool:
    """A lake with v1 snapshot tables and no v2 state (not migrated yet)."""
    return state.read_manifest(lk) is None and any(lk.days(t) for t in LEGACY_TABLES)


def latest_poll_id(lake: LakeLike) -> str | None:
    """Return the id of the newest poll in cluster_snapshots, or None for an empty lake."""
    lk = open_lake(lake)
    days = lk.days(CLUSTER_SNAPSHOTS)
    files = lk.files(CLUSTER_SNAPSHOTS, days[-1:]) if days else []
    return files[-1].poll_id if files else None


def _newest_status(lk: Lake) -> pd.DataFrame:
    """The newest status row per cluster: read from the newest status file only."""
    days = lk.days(CLUSTER_SNAPSHOTS)
    files = lk.files(CLUSTER_SNAPSHOTS, days[-1:]) if days else []
    if not files:
        return empty_frame(CLUSTER_SNAPSHOTS)
    newest = files[-1]
    if newest.merged:
        # A compacted file holds many polls: keep only its last poll's rows.
        table = lk.read(CLUSTER_SNAPSHOTS, [newest])
        last = pc.max(table["poll_id"]).as_py()
        frame = table.filter(pc.equal(table["poll_id"], last)).to_pandas()
    else:
        frame = lk.read(CLUSTER_SNAPSHOTS, [newest]).to_pandas()
    frame = frame.sort_values(["cluster_name", "poll_id"]).drop_duplicates("cluster_name", keep="last")
    return frame.sort_values("cluster_name").reset_index(drop=True)


def latest_clusters(lake: LakeLike, *, lookback_days: int = 2, with_data: bool = False) -> pd.DataFrame:
    """Return the newest status row per cluster (with_data: a cluster without data now gets its state row)."""
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_latest_clusters(lk, lookback_days=lookback_days, with_data=with_data)
    frame = _newest_status(lk)
    if not with_data:
        return frame
    no_data = frame["status"].isin(NO_DATA_STATUSES)
    stored = state.read_state(lk, "clusters").to_pandas()
    if not stored.empty:
        stored = stored[stored["cluster_name"].isin(set(frame.loc[no_data, "cluster_name"])) | ~stored[
            "cluster_name"].isin(set(frame["cluster_name"]))]
    out = pd.concat([frame[~no_data], stored], ignore_index=True) if not stored.empty else frame[~no_data]
    return out.sort_values("cluster_name").reset_index(drop=True)


def known_clusters(lake: LakeLike) -> pd.DataFrame:
    """Every cluster the lake knows, with its last known id: the state rows and the newest status rows.

    Oldest first, so `id_to_name` lets the newest name of an id win. A v1 lake gives its whole
    poll history (what callers used before).
    """
    lk = open_lake(lake)
    if _is_v1(lk):
        return poll_history(lk)
    stored = state.read_state(lk, "clusters").to_pandas()
    newest = _newest_status(lk)
    frame = pd.concat([stored, newest], ignore_index=True) if not stored.empty else newest
    return frame.sort_values(["polled_at", "cluster_name"]).reset_index(drop=True)


def _state_rows(lk: Lake, kind: str, clusters: pd.DataFrame, cluster_name: str | None) -> pd.DataFrame:
    """Current state rows of the given clusters, stamped with each cluster's newest poll id and time."""
    table = STATE_TABLES[kind]
    if cluster_name is not None:
        clusters = clusters[clusters["cluster_name"] == cluster_name]
    if clusters.empty:
        return empty_frame(table).assign(state_poll_id=pd.Series(dtype="object"))
    manifest = state.read_manifest(lk)
    names = sorted(set(clusters["cluster_name"]))
    parts = [state.read_state(lk, kind, n, manifest) for n in names] if len(names) < 4 else [
        state.read_state(lk, kind, None, manifest)]
    frame = pa.concat_tables(parts).to_pandas() if parts else empty_frame(table)
    frame = frame[frame["cluster_name"].isin(names)]
    stamp = clusters.set_index("cluster_name")
    frame = frame.assign(
        state_poll_id=frame["poll_id"],
        poll_id=frame["cluster_name"].map(stamp["poll_id"]),
        polled_at=frame["cluster_name"].map(stamp["polled_at"]),
    )
    return frame.reset_index(drop=True)


def _with_data_clusters(lk: Lake, with_data: bool) -> pd.DataFrame:
    clusters = latest_clusters(lk, with_data=with_data)
    return clusters[~clusters["status"].isin(NO_DATA_STATUSES)]


def latest_brokers(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the current brokers of each cluster (none for a cluster whose newest poll had no data)."""
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_latest_brokers(lk, cluster_name, with_data=with_data)
    return _state_rows(lk, "brokers", _with_data_clusters(lk, with_data), cluster_name)


def latest_topics(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the current topics of each cluster (one cluster when cluster_name is given)."""
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_latest_topics(lk, cluster_name, with_data=with_data)
    return _state_rows(lk, "topics", _with_data_clusters(lk, with_data), cluster_name)


def latest_zk_nodes(lake: LakeLike, cluster_name: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Return the current ZooKeeper nodes of each cluster."""
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_latest_zk_nodes(lk, cluster_name)
    return _state_rows(lk, "zk_nodes", _with_data_clusters(lk, with_data), cluster_name)


def latest_fleet_state(lake: LakeLike, *, with_data: bool = False) -> FleetState:
    """Return the newest status row per cluster with the cluster's current brokers, topics and zk nodes.

    A cluster whose newest poll had no data (down, auth_failed) has no broker/topic rows, unless
    with_data=True, which gives its last known state (the poller's baseline across restarts).
    """
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_latest_fleet_state(lk, with_data=with_data)
    clusters = latest_clusters(lk, with_data=with_data)
    live = clusters[~clusters["status"].isin(NO_DATA_STATUSES)]
    return FleetState(
        clusters=clusters,
        brokers=_state_rows(lk, "brokers", live, None),
        topics=_state_rows(lk, "topics", live, None),
        zk_nodes=_state_rows(lk, "zk_nodes", live, None),
    )


def _day_files(lk: Lake, table: str, since: datetime | None, until: datetime | None) -> list[LakeFile]:
    days = lk.days(table)
    if since is not None:
        days = [d for d in days if d >= since.astimezone(UTC).date().isoformat()]
    if until is not None:
        days = [d for d in days if d <= until.astimezone(UTC).date().isoformat()]
    return lk.files(table, days)


def _values(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def changes(
    lake: LakeLike,
    cluster_name: str | Sequence[str] | None = None,
    *,
    kinds: str | Sequence[str] | None = None,
    entity: str | Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return change-log rows (topics, brokers, cluster ids, controller, ZooKeeper), oldest first."""
    lk = open_lake(lake)
    files = _day_files(lk, CHANGES, since, until)
    if not files:
        return empty_frame(CHANGES)
    parts: list[ds.Expression | None] = [_time_filter(CHANGES, since, until)]
    for column, value in (("cluster_name", cluster_name), ("kind", kinds), ("entity", entity)):
        if value is not None:
            parts.append(ds.field(column).isin(pa.array(_values(value), pa.string())))
    frame = lk.read(CHANGES, files, filter=_and(*parts)).to_pandas()
    return frame.sort_values(["seen_at", "change_id"]).reset_index(drop=True)


def incidents(
    lake: LakeLike,
    cluster_name: str | Sequence[str] | None = None,
    *,
    open_only: bool = False,
    rule: str | Sequence[str] | None = None,
    severity: str | Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> pd.DataFrame:
    """Return incidents open at some time in [since, until] (open ones always), newest opening first."""
    lk = open_lake(lake)
    tables = [state.read_open_incidents(lk)]
    if not open_only:
        tables.append(lk.read(INCIDENTS, _day_files(lk, INCIDENTS, since, None)))
    frame = pa.concat_tables(tables).to_pandas()
    if frame.empty:
        return empty_frame(INCIDENTS)
    for column, value in (("cluster_name", cluster_name), ("rule", rule), ("severity", severity)):
        if value is not None:
            frame = frame[frame[column].isin(_values(value))]
    if since is not None:
        frame = frame[frame["resolved_at"].isna() | (frame["resolved_at"] >= pd.Timestamp(since).tz_convert(UTC))]
    if until is not None:
        frame = frame[frame["opened_at"] <= pd.Timestamp(until).tz_convert(UTC)]
    frame = frame.drop_duplicates("incident_id", keep="last")
    return frame.sort_values(["opened_at", "incident_id"], ascending=False).reset_index(drop=True)


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
    """Return fleet alerts as incidents in the v1 alert columns (raised_at = opened), newest first.

    Extra columns: status (open/resolved), one_off, last_seen_at, last_poll_id, resolved_at,
    polls_seen, latest_evidence_json, incident_id. `poll_id` matches the poll that opened it.
    """
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_alerts(lk, cluster_name=cluster_name, rule=rule, severity=severity, poll_id=poll_id,
                          since=since, until=until)
    frame = incidents(lk, cluster_name, rule=rule, severity=severity, since=since, until=until)
    if poll_id is not None:
        frame = frame[frame["opened_poll_id"] == poll_id]
    out = pd.DataFrame({
        "alert_id": frame["incident_id"],
        "raised_at": frame["opened_at"],
        "poll_id": frame["opened_poll_id"],
        "rule": frame["rule"],
        "severity": frame["severity"],
        "cluster_name": frame["cluster_name"],
        "subject": frame["subject"],
        "evidence_json": frame["evidence_json"],
        "explanation": frame["explanation"],
        "doc_url": frame["doc_url"],
        "schema_version": frame["schema_version"],
    })
    for column in ALERT_EXTRA_COLUMNS:
        out[column] = frame[column]
    if out.empty:
        out = empty_frame(FLEET_ALERTS)
        for column in ALERT_EXTRA_COLUMNS:
            out[column] = pd.Series(dtype="object")
        return out
    return out.sort_values(["raised_at", "alert_id"], ascending=False).reset_index(drop=True)


def _json(text: object) -> dict[str, object]:
    return json.loads(text) if isinstance(text, str) and text else {}


def version_timeline(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
    """Return per broker the first sighting and every software/version change, from the change log."""
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_version_timeline(lk, cluster_name, since=since)
    frame = changes(lk, cluster_name, entity="broker")
    if frame.empty:
        return pd.DataFrame(columns=VERSION_TIMELINE_COLUMNS)
    keys = ("software_name", "software_version", "version_provenance", "version_min", "version_max")
    last: dict[tuple[str, str], dict[str, object]] = {}
    rows = []
    for r in frame.itertuples(index=False):
        after = _json(r.after_json)
        if not after or not after.get("reachable"):
            continue  # unreachable: no version was read; the last reachable version stands
        key = (r.cluster_name, r.subject)
        version = {k: after.get(k) for k in keys}
        before = last.get(key)
        if before == version:
            continue
        last[key] = version
        rows.append({
            "cluster_name": r.cluster_name, "cluster_id": r.cluster_id, "broker_id": int(r.subject),
            "poll_id": r.poll_id, "polled_at": r.seen_at, "change": "first_seen" if before is None else "changed",
            **version,
            "previous_software_name": before["software_name"] if before else None,
            "previous_software_version": before["software_version"] if before else None,
            "previous_version_provenance": before["version_provenance"] if before else None,
        })
    out = pd.DataFrame(rows, columns=VERSION_TIMELINE_COLUMNS)
    if since is not None and not out.empty:
        out = out[out["polled_at"] >= pd.Timestamp(since).tz_convert(UTC)]
    return out.sort_values(["cluster_name", "broker_id", "poll_id"]).reset_index(drop=True)


def topic_id_changes(lake: LakeLike, cluster_name: str | None = None, *, since: datetime | None = None) -> pd.DataFrame:
    """Return topics recreated under the same name: old and new topic ids, from the change log.

    old_first_seen is when the change log first saw the old id (null if before retention);
    old_last_seen is the previous poll time of that cluster (the last status row before the change).
    """
    lk = open_lake(lake)
    if _is_v1(lk):
        return _v1_topic_id_changes(lk, cluster_name, since=since)
    topic_rows = changes(lk, cluster_name, entity="topic", since=None)
    recreated = topic_rows[topic_rows["kind"] == "topic_recreated"]
    if since is not None:
        recreated = recreated[recreated["seen_at"] >= pd.Timestamp(since).tz_convert(UTC)]
    if recreated.empty:
        return pd.DataFrame(columns=TOPIC_ID_CHANGE_COLUMNS)
    first_seen: dict[tuple[str, str, str], object] = {}
    for r in topic_rows.itertuples(index=False):
        tid = _json(r.after_json).get("topic_id")
        if tid:
            first_seen.setdefault((r.cluster_name, r.subject, str(tid)), r.seen_at)
    rows = []
    for r in recreated.itertuples(index=False):
        old_id = _json(r.before_json).get("topic_id")
        new_id = _json(r.after_json).get("topic_id")
        rows.append({
            "cluster_name": r.cluster_name, "topic": r.subject, "old_topic_id": old_id, "new_topic_id": new_id,
            "old_first_seen": first_seen.get((r.cluster_name, r.subject, str(old_id))),
            "old_last_seen": _previous_poll_time(lk, r.cluster_name, r.seen_at),
            "new_first_seen": r.seen_at,
        })
    out = pd.DataFrame(rows, columns=TOPIC_ID_CHANGE_COLUMNS)
    for column in ("old_first_seen", "old_last_seen", "new_first_seen"):
        out[column] = pd.to_datetime(out[column], utc=True)
    return out.sort_values("new_first_seen").reset_index(drop=True)


def _previous_poll_time(lk: Lake, cluster_name: str, at: pd.Timestamp) -> pd.Timestamp | None:
    """The time of a cluster's last poll with data before `at` (reads that day's status rows)."""
    day_start = at.to_pydatetime().replace(hour=0, minute=0, second=0, microsecond=0)
    for lo in (day_start, day_start - timedelta(days=1)):
        frame = poll_history(lk, cluster_name, since=lo, until=at.to_pydatetime() - timedelta(microseconds=1))
        frame = frame[~frame["status"].isin(NO_DATA_STATUSES)]
        if not frame.empty:
            return frame["polled_at"].iloc[-1]
    return None


def fleet_state_at(lake: LakeLike, at: datetime) -> FleetState:
    """Rebuild the fleet at a past time: the newest checkpoint before it plus the change log after.

    Brokers, topics and ZooKeeper nodes come back as they were (every state change is logged with
    the whole row after it); the cluster rows are each cluster's status row of its last poll at or
    before `at`, with cluster id and controller from the replayed state.
    """
    lk = open_lake(lake)
    at = at.astimezone(UTC)
    days = [d for d in state.checkpoint_days(lk) if d <= at.date().isoformat()]
    base_at: datetime | None = None
    tables: dict[str, pa.Table] = {k: state.empty_state(k) for k in state.CHECKPOINTED}
    for day in reversed(days):
        when, read = state.read_checkpoint(lk, day)
        if when <= at:
            base_at, tables = when, read
            break
    cluster_state = {r["cluster_name"]: r for r in tables["clusters"].to_pylist()}
    log_rows = changes(lk, since=base_at + timedelta(microseconds=1) if base_at else None, until=at)
    for r in log_rows[log_rows["entity"] == "cluster"].itertuples(index=False):
        cluster_state.setdefault(r.cluster_name, {"cluster_name": r.cluster_name}).update(_json(r.after_json))
    frames = {}
    for entity, kind, key in (("broker", "brokers", "broker_id"), ("topic", "topics", "topic"),
                              ("zk", "zk_nodes", "path")):
        base = tables[kind].to_pandas()
        columns = schema_for(STATE_TABLES[kind]).names
        # The last change of each entity in the window replaces its checkpoint row (or removes it).
        last = log_rows[log_rows["entity"] == entity].drop_duplicates(["cluster_name", "subject"], keep="last")
        if not last.empty:
            changed = pd.MultiIndex.from_arrays([last["cluster_name"], last["subject"]])
            mine = pd.MultiIndex.from_arrays([base["cluster_name"], base[key].astype(str)])
            base = base[~mine.isin(changed)]
            rows = []
            for r in last[last["after_json"].notna()].itertuples(index=False):
                row = {"cluster_name": r.cluster_name, "cluster_id": r.cluster_id, "poll_id": r.poll_id,
                       "polled_at": r.seen_at, **_json(r.after_json)}
                row[key] = int(r.subject) if key == "broker_id" else r.subject
                rows.append(row)
            if rows:
                base = pd.concat([base, pd.DataFrame(rows).reindex(columns=columns)], ignore_index=True)
        frames[kind] = base.reindex(columns=columns).sort_values(["cluster_name", key]).reset_index(drop=True)
    status = empty_frame(CLUSTER_SNAPSHOTS)
    for window in (timedelta(minutes=10), timedelta(days=1)):  # a short window first: few rows to read
        status = poll_history(lk, since=at - window, until=at)
        if set(cluster_state) <= set(status["cluster_name"]):
            break
    status = status.sort_values("poll_id").drop_duplicates("cluster_name", keep="last")
    clusters = status.copy()
    for column in ("cluster_id", "zk_cluster_id", "controller_id", "tags_json"):
        replayed = clusters["cluster_name"].map(lambda n, c=column: cluster_state.get(n, {}).get(c))
        clusters[column] = replayed.where(replayed.notna(), clusters[column])
    return FleetState(
        clusters=clusters.sort_values("cluster_name").reset_index(drop=True),
        brokers=frames["brokers"], topics=frames["topics"], zk_nodes=frames["zk_nodes"],
    )
