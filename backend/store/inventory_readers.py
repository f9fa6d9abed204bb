"""Readers of the stored client inventory: one state file per cluster asked for, whatever the number of polls."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from backend.store import state
from backend.store.lake import Lake
from backend.store.readers import LakeLike, empty_frame, open_lake
from backend.store.schemas import INVENTORY_RUNS, INVENTORY_STATE


def _read(lk: Lake, kind: str, clusters: Sequence[str] | None) -> pa.Table:
    manifest = state.read_manifest(lk)
    if not manifest:
        return state.empty_state(kind)
    if clusters is None:
        return state.read_state(lk, kind, None, manifest)
    known = manifest.get("clusters", {})
    parts = [state.read_state(lk, kind, name, manifest) for name in dict.fromkeys(clusters) if name in known]
    return pa.concat_tables(parts) if parts else state.empty_state(kind)


def inventory_rows(lake: LakeLike, clusters: Sequence[str] | None = None, *, kind: str | None = None) -> pd.DataFrame:
    """Current inventory rows of the given clusters (all when None): kind `connections` and `deprecated`."""
    table = _read(open_lake(lake), "inventory", clusters)
    if table.num_rows == 0:
        return empty_frame(INVENTORY_STATE)
    frame = table.to_pandas()
    if kind is not None:
        frame = frame[frame["kind"] == kind]
    return frame.reset_index(drop=True)


def inventory_runs(lake: LakeLike, clusters: Sequence[str] | None = None) -> pd.DataFrame:
    """The last inventory read of each of the given clusters: when, from where, with what status."""
    table = _read(open_lake(lake), "inventory_runs", clusters)
    return table.to_pandas() if table.num_rows else empty_frame(INVENTORY_RUNS)
