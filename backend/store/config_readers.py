"""Readers of the stored broker configs and topic overrides: one state file per cluster asked for.

Their cost follows the clusters asked for and their configuration, never the number of polls or
collections: a cluster's configs are one state file rewritten when they change.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from backend.store import state
from backend.store.config_state import snapshots_from_tables
from backend.store.model import ConfigSnapshot
from backend.store.readers import LakeLike, empty_frame, open_lake
from backend.store.schemas import CONFIG_RUNS, CONFIG_STATE


def latest_configs(lake: LakeLike, clusters: Sequence[str] | None = None, *,
                   resource_type: str | None = None) -> pd.DataFrame:
    """Current config rows of the given clusters (all when None): every broker config and topic override."""
    table = state.read_clusters_state(open_lake(lake), "configs", clusters)
    if table.num_rows == 0:
        return empty_frame(CONFIG_STATE)
    frame = table.to_pandas()
    if resource_type is not None:
        frame = frame[frame["resource_type"] == resource_type]
    return frame.reset_index(drop=True)


def config_runs(lake: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The last configuration read of each of the given clusters: when, what failed."""
    table = state.read_clusters_state(open_lake(lake), "config_runs", clusters)
    return table.to_pandas() if table.num_rows else empty_frame(CONFIG_RUNS)


def load_configs(lake: LakeLike) -> dict[str, ConfigSnapshot]:
    """Every cluster's stored configuration (the collector's baseline after a restart)."""
    lk = open_lake(lake)
    return snapshots_from_tables(state.read_clusters_state(lk, "configs", None), state.read_clusters_state(lk, "config_runs", None))
