"""Readers of the stored consumer groups: one state file per cluster and kind asked for.

Their cost follows the clusters asked for and their groups, never the number of polls or reads: a cluster's groups
are state files rewritten when they change. ``read_groups`` is the public reader other features build on (issue
30's upgrade readiness counts the groups still on the classic protocol per cluster with it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from backend.store import state
from backend.store.group_model import GroupSnapshot
from backend.store.group_schemas import GROUP_MEMBERS, GROUP_OFFSETS, GROUP_RUNS, GROUP_STATE
from backend.store.group_state import snapshots_from_tables
from backend.store.readers import LakeLike, empty_frame, open_lake

GROUP_KINDS = {"groups": GROUP_STATE, "group_members": GROUP_MEMBERS, "group_offsets": GROUP_OFFSETS,
               "group_runs": GROUP_RUNS}




def _frame(lake: LakeLike, kind: str, clusters: Sequence[str] | None, columns: Sequence[str] | None = None,
           manifest: Mapping[str, Any] | None = None) -> pd.DataFrame:
    table = state.read_clusters_state(open_lake(lake), kind, clusters, manifest)
    if columns is not None:
        table = table.select(list(columns))
    if table.num_rows == 0:
        frame = empty_frame(GROUP_KINDS[kind])
        return frame[list(columns)] if columns is not None else frame
    return table.to_pandas()


def read_groups(location: LakeLike, clusters: Sequence[str] | None = None,
                manifest: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The current groups of the given clusters (all when None), one row per group.

    Columns (at least): cluster_name, cluster_id, group_id, group_type (classic | consumer | share | streams |
    unknown), protocol_type, protocol (assignor), state, coordinator_id, members, topics, partitions, lag (sum of
    positive partition lags, null when unknown), lag_partitions, max_partition_lag, status (ok | lagging | stalled |
    stopped | empty_with_lag | unknown), status_since, evidence_json, last_commit_at, first_seen_at, window_at,
    window_lag, window_committed, error, collected_at.
    """
    return _frame(location, "groups", clusters, manifest=manifest).reset_index(drop=True)


def group_members(location: LakeLike, clusters: Sequence[str] | None = None,
                  manifest: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The current members of the given clusters' groups, one row per member."""
    return _frame(location, "group_members", clusters, manifest=manifest).reset_index(drop=True)


def group_offsets(location: LakeLike, clusters: Sequence[str] | None = None,
                  manifest: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Committed and end offsets and lag per group and partition of the given clusters."""
    return _frame(location, "group_offsets", clusters, manifest=manifest).reset_index(drop=True)


def group_runs(location: LakeLike, clusters: Sequence[str] | None = None,
               manifest: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The last read of each of the given clusters' groups: when, how many, what failed."""
    return _frame(location, "group_runs", clusters, manifest=manifest).reset_index(drop=True)


def load_groups(location: LakeLike) -> dict[str, GroupSnapshot]:
    """Every cluster's stored groups (the collector's baseline after a restart)."""
    lk = open_lake(location)
    return snapshots_from_tables(*(state.read_clusters_state(lk, kind, None) for kind in ("groups", "group_members", "group_offsets",
                                                                         "group_runs")))


def state_manifest(location: LakeLike) -> dict[str, Any] | None:
    """The current state's manifest, to read several kinds of one poll through (None: a lake without state)."""
    return state.read_manifest(open_lake(location))
