"""Readers of the stored client inventory: one state file per cluster asked for, whatever the number of polls."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from backend.store import state
from backend.store.readers import LakeLike, empty_frame, open_lake
from backend.store.schemas import INVENTORY_RUNS, INVENTORY_STATE


def inventory_rows(lake: LakeLike, clusters: Sequence[str] | None = None, *, kind: str | None = None) -> pd.DataFrame:
    """Current inventory rows of the given clusters (all when None): kind `connections` and `deprecated`."""
    table = state.read_clusters_state(open_lake(lake), "inventory", clusters)
    if table.num_rows == 0:
        return empty_frame(INVENTORY_STATE)
    frame = table.to_pandas()
    if kind is not None:
        frame = frame[frame["kind"] == kind]
    return frame.reset_index(drop=True)


def inventory_runs(lake: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The last inventory read of each of the given clusters: when, from where, with what status."""
    table = state.read_clusters_state(open_lake(lake), "inventory_runs", clusters)
    return table.to_pandas() if table.num_rows else empty_frame(INVENTORY_RUNS)
