"""Read lake tables as pandas frames for the dashboard and the report (no Streamlit, no Spark)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from backend.pipeline.schema import arrow_schema
from backend.store import readers
from backend.store.lake import Lake
from backend.store.schemas import schema_for

DEFAULT_LAKE = "lake"
ZK_LOOKBACK_POLLS = 5
SNAPSHOT_TABLES = ("cluster_snapshots", "broker_snapshots", "topic_snapshots", "zk_snapshots", "fleet_alerts")


def lake_location(explicit: str | None = None) -> str:
    """The lake to read: explicit argument, else env FLEETVIEW_LAKE, else ./lake."""
    return explicit or os.environ.get("FLEETVIEW_LAKE") or DEFAULT_LAKE


def lake_exists(location: str) -> bool:
    """True when the lake holds at least one cluster snapshot."""
    return bool(Lake(location).files("cluster_snapshots"))


def results_exist(location: str) -> bool:
    """True when the pipeline has written at least one results table."""
    folder = Path(location) / "results"
    return folder.is_dir() and any(folder.iterdir())


def read_snapshots(location: str, table: str, poll_ids: Iterable[str] | None = None,
                   cluster: str | None = None) -> pd.DataFrame:
    """Read a snapshot table (all polls, or only the files of the given poll ids; one cluster or all)."""
    lake = Lake(location)
    files = None
    if poll_ids is not None:
        wanted = set(poll_ids)
        files = [f for f in lake.files(table) if f.poll_id in wanted]
        if not files:
            return schema_for(table).empty_table().to_pandas()
    where = ds.field("cluster_name") == cluster if cluster is not None else None
    return lake.read(table, files, filter=where).to_pandas()


def latest_clusters(location: str) -> pd.DataFrame:
    """Newest cluster_snapshots row per cluster."""
    return readers.latest_clusters(location)


def latest_rows(location: str, table: str, cluster: str | None = None, *, with_data: bool = False) -> pd.DataFrame:
    """Brokers, topics or ZooKeeper nodes of each cluster's latest poll (with_data: latest poll that had data)."""
    if table == "broker_snapshots":
        return readers.latest_brokers(location, cluster, with_data=with_data)
    if table == "topic_snapshots":
        return readers.latest_topics(location, cluster, with_data=with_data)
    if table == "zk_snapshots":
        return readers.latest_zk_nodes(location, cluster)
    raise ValueError(f"no latest view of {table!r}")


def zk_nodes_last_seen(location: str, cluster: str) -> pd.DataFrame:
    """ZooKeeper nodes of the cluster's newest poll that read any (even if the cluster is down now)."""
    recent = set(poll_history(location, cluster)["poll_id"].tail(ZK_LOOKBACK_POLLS))
    nodes = read_snapshots(location, "zk_snapshots", recent, cluster)
    if nodes.empty:
        return nodes.reset_index(drop=True)
    return nodes[nodes["poll_id"] == nodes["poll_id"].max()].reset_index(drop=True)


def poll_history(location: str, cluster: str | None = None) -> pd.DataFrame:
    """cluster_snapshots rows over time, oldest first."""
    return readers.poll_history(location, cluster)


def version_timeline(location: str) -> pd.DataFrame:
    """Every first sighting and version change of every broker."""
    return readers.version_timeline(location)


def fleet_alerts(location: str) -> pd.DataFrame:
    """All fleet alerts, newest first."""
    return readers.alerts(location)


def read_result(location: str, name: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Read results/<name> with its declared schema; empty frame with the columns when missing."""
    schema = arrow_schema(name)
    folder = Path(location) / "results" / name
    files = sorted(str(p) for p in folder.glob("*.parquet")) if folder.is_dir() else []
    cols = columns or schema.names
    if not files:
        return schema.empty_table().select(cols).to_pandas()
    table = ds.dataset(files, format="parquet").to_table(columns=[c for c in cols if c in _names(files[0])])
    for name_ in cols:
        if name_ not in table.column_names:
            table = table.append_column(name_, pa.nulls(table.num_rows, schema.field(name_).type))
    frame = table.select(cols).to_pandas()
    for column in frame.columns:
        if pd.api.types.is_datetime64_dtype(frame[column]) and frame[column].dt.tz is None:
            frame[column] = frame[column].dt.tz_localize("UTC")  # Spark writes naive UTC
    return frame


def _names(path: str) -> list[str]:
    return pq.read_schema(path).names
