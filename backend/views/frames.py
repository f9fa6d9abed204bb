"""Read lake tables as pandas frames for the dashboard and the report (no Streamlit, no Spark)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from backend.store import config_readers, inventory_readers, readers
from backend.store.commit import missing
from backend.store.config_schemas import RESULT_TABLES, arrow_schema
from backend.store.lake import Lake
from backend.store.schemas import schema_for
from backend.store.tables import table_files

ZK_LOOKBACK_POLLS = 5
_log = logging.getLogger(__name__)
SNAPSHOT_TABLES = ("cluster_snapshots", "broker_snapshots", "topic_snapshots", "zk_snapshots", "fleet_alerts")


def lake_error(location: str) -> str | None:
    """Why the lake location cannot be opened (bad URI, unknown filesystem), or None when it can."""
    try:
        Lake(location).fs.get_file_info(Lake(location).root)
    except (ValueError, OSError, pa.ArrowException) as exc:  # LakeError is a ValueError
        return f"cannot open the lake {location!r}: {exc}"
    return None


def lake_exists(location: str) -> bool:
    """True when the lake holds at least one cluster snapshot."""
    return bool(Lake(location).files("cluster_snapshots"))


def results_exist(location: str) -> bool:
    """True when the pipeline has written at least one results table."""
    return any(result_files(location, name) for name in RESULT_TABLES)


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


def changes(location: str, cluster: str | None = None, *, days: int = 7) -> pd.DataFrame:
    """Change-log rows of the last `days` days (v2 lake), oldest first."""
    since = datetime.now(UTC) - timedelta(days=days)
    return readers.changes(location, cluster, since=since)


def is_v2(location: str) -> bool:
    """Whether the lake has v2 state (current state + change log)."""
    return readers.state.read_manifest(Lake(location)) is not None


def zk_nodes_last_seen(location: str, cluster: str) -> pd.DataFrame:
    """ZooKeeper nodes of the cluster's newest poll that read any (even if the cluster is down now)."""
    if is_v2(location):
        return readers.latest_zk_nodes(location, cluster, with_data=True)
    recent = set(poll_history(location, cluster)["poll_id"].tail(ZK_LOOKBACK_POLLS))
    nodes = read_snapshots(location, "zk_snapshots", recent, cluster)
    if nodes.empty:
        return nodes.reset_index(drop=True)
    return nodes[nodes["poll_id"] == nodes["poll_id"].max()].reset_index(drop=True)


def known_clusters(location: str) -> pd.DataFrame:
    """Cluster rows with each cluster's last known id (v2: state + newest status; v1: the whole history)."""
    return readers.known_clusters(location)


def poll_history(location: str, cluster: str | None = None) -> pd.DataFrame:
    """cluster_snapshots rows over time, oldest first."""
    return readers.poll_history(location, cluster)


def broker_configs(location: str, clusters: Iterable[str]) -> pd.DataFrame:
    """Stored broker configs and topic overrides of the clusters asked for (one state file each)."""
    return config_readers.latest_configs(location, list(clusters))


def config_runs(location: str, clusters: Iterable[str]) -> pd.DataFrame:
    """When each of the clusters asked for had its configs read, and what could not be."""
    return config_readers.config_runs(location, list(clusters))


def inventory_rows(location: str, clusters: Iterable[str] | None = None) -> pd.DataFrame:
    """Stored client inventory rows (connections, deprecated requests) of the clusters asked for (all: None)."""
    return inventory_readers.inventory_rows(location, None if clusters is None else list(clusters))


def inventory_runs(location: str, clusters: Iterable[str] | None = None) -> pd.DataFrame:
    """The last client-inventory read of each cluster asked for (all: None)."""
    return inventory_readers.inventory_runs(location, None if clusters is None else list(clusters))


def version_timeline(location: str) -> pd.DataFrame:
    """Every first sighting and version change of every broker."""
    return readers.version_timeline(location)


def fleet_alerts(location: str) -> pd.DataFrame:
    """All fleet alerts, newest first."""
    return readers.alerts(location)


def result_files(location: str, name: str) -> list[str]:
    """The finished Parquet files of results/<name> now (its switch's file; hidden, temp and marker files never)."""
    return table_files(Lake(location).where, f"results/{name}")


def unreadable_results(location: str) -> list[str]:
    """Result files whose Parquet footer cannot be read (truncated or foreign files)."""
    bad = []
    for name in RESULT_TABLES:
        for path in result_files(location, name):
            try:
                pq.read_metadata(path, filesystem=Lake(location).fs)
            except (pa.ArrowInvalid, OSError):
                bad.append(path)
    return bad


def read_result(location: str, name: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Read results/<name> with its declared schema; unreadable files are skipped (see unreadable_results)."""
    schema = arrow_schema(name)
    cols = columns or schema.names
    fs = Lake(location).fs
    for _attempt in range(3):
        tables = []
        switched = False
        for path in result_files(location, name):
            try:
                present = set(pq.read_schema(path, filesystem=fs).names)
                tables.append(pq.read_table(path, columns=[c for c in cols if c in present], filesystem=fs))
            except (pa.ArrowInvalid, OSError) as exc:
                if missing(exc):
                    switched = True  # the pipeline switched the table while we read it: read the new one
                    break
                _log.warning("skipping unreadable result file %s: %s", path, exc)
        if not switched:
            break
    if not tables:
        return schema.empty_table().select(cols).to_pandas()
    table = pa.concat_tables(tables, promote_options="permissive")
    for column in cols:
        if column not in table.column_names:
            table = table.append_column(column, pa.nulls(table.num_rows, schema.field(column).type))
    frame = table.select(cols).to_pandas()
    for column in frame.columns:
        if pd.api.types.is_datetime64_dtype(frame[column]) and frame[column].dt.tz is None:
            frame[column] = frame[column].dt.tz_localize("UTC")  # Spark writes naive UTC
    return frame
