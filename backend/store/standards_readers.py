"""Readers of the stored policy results: one state file per cluster and kind, and the status history's window.

Their cost follows the clusters asked for and their (policy, cluster) pairs: the current results are state files
rewritten when they change, and the history holds a baseline per pair and day plus the changes, whatever the number
of polls. The policy file in use (its catalog, where it came from, the last refusal) is `_state/standards/
policy_file.json`, written by the poller.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pandas as pd
import pyarrow.dataset as ds

from backend.store import state
from backend.store.progress import load_state
from backend.store.readers import LakeLike, empty_frame, open_lake
from backend.store.schemas import POLICY_RESULTS, POLICY_STATUS
from backend.store.standards_model import StandardsSnapshot
from backend.store.standards_state import instances_table, items_table, snapshots_from_tables

KINDS = {"policy_results": POLICY_RESULTS}
FILE_STATE = ("standards", "policy_file")


def policy_results(location: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The current result of every policy on the given clusters (all when None), one row per (policy, cluster)
    (the findings are `policy_items`)."""
    table = state.read_clusters_state(open_lake(location), "policy_results", clusters).drop_columns(
        ["items", "instances"])
    if table.num_rows == 0:
        return empty_frame(POLICY_RESULTS).drop(columns=["items", "instances"])
    return table.to_pandas().reset_index(drop=True)


def policy_items(location: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The subjects that did not pass (violation, unknown, waived, upcoming) of the given clusters' policies: one row
    per finding (cluster_name, policy_id, kind, name, outcome, seen, wanted, reason, count, since, waiver)."""
    table = state.read_clusters_state(open_lake(location), "policy_results", clusters)
    return items_table(table.select(["cluster_name", "policy_id", "items"])).to_pandas().reset_index(drop=True)


def policy_instances(location: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The client instances behind the client findings of the given clusters' policies: one row per (finding,
    instance): cluster_name, policy_id, finding, instance_id, client_type, client_id, group_id, software_name,
    software_version, principal, client_address, last_seen."""
    table = state.read_clusters_state(open_lake(location), "policy_results", clusters)
    return instances_table(table.select(["cluster_name", "policy_id", "instances"])).to_pandas().reset_index(drop=True)


def load_standards(location: LakeLike, clusters: Sequence[str] | None = None) -> dict[str, StandardsSnapshot]:
    """The stored results as typed snapshots per cluster."""
    return snapshots_from_tables(state.read_clusters_state(open_lake(location), "policy_results", clusters))


def policy_history(location: LakeLike, since: datetime, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """`policy_status` rows from the day of ``since`` on (baselines and changes), oldest first."""
    lk = open_lake(location)
    first = since.astimezone(UTC).date().isoformat()
    files = [f for f in lk.files(POLICY_STATUS, [d for d in lk.days(POLICY_STATUS) if d >= first])]
    wanted = ds.field("cluster_name").isin(list(clusters)) if clusters is not None else None
    table = lk.read(POLICY_STATUS, files, filter=wanted) if files else None
    if table is None or table.num_rows == 0:
        return empty_frame(POLICY_STATUS)
    return table.to_pandas().sort_values(["polled_at", "cluster_name", "policy_id"], kind="stable").reset_index(
        drop=True)


def policy_file_state(location: LakeLike) -> dict[str, Any]:
    """What the poller loaded last: path, digest, loaded_at, the last refusal (error, error_at), the catalog."""
    return load_state(open_lake(location).where, *FILE_STATE)
