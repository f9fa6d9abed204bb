"""The index in memory, for queries: loaded from the lake's index files and refreshed as they change.

A reader keeps each base file it loaded (with its searched columns lowercased once) and folds the deltas into them;
a refresh loads only files it has not seen. When a part of the index is missing (a lake written before the index
existed, or by a poller that never ran), the reader builds that part in memory from the lake and says so; the
poller and the Spark job write it to the lake.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backend.search import build
from backend.search.ops import SEG_KEY, NetOps, segment_column, with_segment_keys
from backend.search.store import read_base, read_delta, read_manifest, table_ops
from backend.search.tables import DELETED, PARTS, TABLES, tables_of
from backend.store.lake import Lake
from backend.store.location import LakeLocation

log = logging.getLogger(__name__)
LOWER = "__lc_"
CHECK_EVERY_S = 2.0
FALLBACK_EVERY_S = 60.0


def with_lower(table: pa.Table, name: str) -> pa.Table:
    """The table with a lowercased copy of every searched column (`__lc_<column>`: dictionary-encoded, so a value
    shared by many rows is matched once, except for unique ids), and its segment + key columns for deltas."""
    for f in TABLES[name].fields:
        column = LOWER + f.column
        if column not in table.column_names:
            lower = pc.utf8_lower(table.column(f.column))
            table = table.append_column(column, lower if f.unique else pc.dictionary_encode(lower))
    if SEG_KEY not in table.column_names:
        table = with_segment_keys(name, table)
    return table


@dataclass
class LoadedTable:
    """One index table in memory: its rows (with lowercased searched columns), and per row its segment (a code into
    `segments`), whether it is a deleted row, and when it was deleted (µs since the epoch; 0 for current rows)."""

    name: str
    rows: pa.Table
    codes: np.ndarray
    segments: list[Any]
    deleted: np.ndarray
    at_us: np.ndarray

    @classmethod
    def of(cls, name: str, rows: pa.Table) -> LoadedTable:
        """Index a table's rows for queries (its chunks kept as they are: no copy of the rows)."""
        if not rows.num_rows:
            empty = np.zeros(0, dtype=bool)
            return cls(name, rows, np.zeros(0, dtype=np.int32), [], empty, np.zeros(0, dtype=np.int64))
        encoded = pc.dictionary_encode(rows.column(segment_column(name)))  # one dictionary for every chunk
        codes = np.concatenate([np.asarray(pc.fill_null(c.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int32)
                                for c in encoded.chunks])
        segments = encoded.chunks[0].dictionary.to_pylist() if encoded.num_chunks else []
        deleted = _flags(pc.equal(rows.column("state"), DELETED))
        at_us = np.concatenate([np.asarray(pc.fill_null(c.cast(pa.int64()), 0).to_numpy(zero_copy_only=False),
                                           dtype=np.int64) for c in rows.column("at").chunks])
        return cls(name, rows, codes, segments, deleted, at_us)

    @property
    def num_rows(self) -> int:
        """Rows in the table."""
        return self.rows.num_rows


def _flags(values: pa.ChunkedArray) -> np.ndarray:
    return np.concatenate([np.asarray(pc.fill_null(c, False).to_numpy(zero_copy_only=False), dtype=bool)
                           for c in values.chunks]) if values.num_chunks else np.zeros(0, dtype=bool)


@dataclass(frozen=True)
class IndexSnapshot:
    """The whole index as of one refresh: what queries run on (never changed after it is made)."""

    tables: Mapping[str, LoadedTable]
    retention_days: int = build.DEFAULT_RETENTION_DAYS
    notes: tuple[str, ...] = ()
    generations: Mapping[str, int | None] = field(default_factory=dict)
    loaded_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def rows(self) -> int:
        """Rows in the whole index."""
        return sum(t.num_rows for t in self.tables.values())

    def cluster_ids(self) -> dict[str, list[str]]:
        """Cluster id -> the names of the clusters that report it (current cluster rows of the index)."""
        table = self.tables.get("cluster")
        out: dict[str, list[str]] = {}
        if table is None or not table.num_rows:
            return out
        for name, cid in zip(table.rows.column("cluster").to_pylist(), table.rows.column("cluster_id").to_pylist(),
                             strict=True):
            if cid:
                out.setdefault(str(cid), []).append(str(name))
        return out


def snapshot_of(tables: Mapping[str, pa.Table], *, retention_days: int = build.DEFAULT_RETENTION_DAYS,
                notes: tuple[str, ...] = ()) -> IndexSnapshot:
    """An in-memory index from whole tables (the rebuild's output): what a reader serves when the index is missing."""
    loaded = {name: LoadedTable.of(name, with_lower(tables.get(name, spec.schema.empty_table()), name))
              for name, spec in TABLES.items()}
    return IndexSnapshot(loaded, retention_days=retention_days, notes=notes)


class _TableCache:
    """One table of one part: its base files (loaded, lowercased) and the deltas folded so far."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bases: dict[str, pa.Table] = {}
        self.deltas: list[str] = []
        self.net = NetOps(name)
        self.loaded: LoadedTable | None = None
        self.key: tuple[Any, ...] | None = None

    def refresh(self, where: LakeLocation, part: str, entry: Mapping[str, Any], deltas: list[str],
                read: Any) -> LoadedTable:
        """The table as of the manifest: base files (loaded once each) with the part's deltas folded in."""
        base_files = [entry["base"][b] for b in sorted(entry["base"], key=int)]
        key = (tuple(base_files), tuple(deltas))
        if key == self.key and self.loaded is not None:
            return self.loaded
        schema = TABLES[self.name].schema
        self.bases = {f: self.bases[f] if f in self.bases else with_lower(read_base(where, part, self.name, f),
                                                                           self.name)
                      for f in base_files}
        if deltas[: len(self.deltas)] != self.deltas or self.key is None or self.key[0] != tuple(base_files):
            self.net, self.deltas = NetOps(self.name), []
        for relative in deltas[len(self.deltas):]:
            self.net.add(table_ops(read(relative), self.name))
            self.deltas.append(relative)
        parts = [self.net.removed(self.bases[f]) for f in base_files]
        if self.net.upserts.num_rows:
            parts.append(with_lower(self.net.upserts, self.name))
        parts = [p for p in parts if p.num_rows] or [with_lower(schema.empty_table(), self.name)]
        self.loaded = LoadedTable.of(self.name, pa.concat_tables(parts))
        self.key = key
        return self.loaded


class IndexReader:
    """A lake's index, kept in memory and refreshed when its manifests change (at most every `check_every_s`)."""

    def __init__(self, lake: str | Lake, *, check_every_s: float = CHECK_EVERY_S,
                 fallback_every_s: float = FALLBACK_EVERY_S) -> None:
        """Open a lake's index (nothing is read until the first `snapshot`)."""
        self.lake = lake if isinstance(lake, Lake) else Lake(lake)
        self.where = self.lake.where
        self.check_every_s = check_every_s
        self.fallback_every_s = fallback_every_s
        self._lock = threading.Lock()
        self._caches: dict[str, _TableCache] = {}
        self._snapshot: IndexSnapshot | None = None
        self._checked_at = -1e18
        self._signature: tuple[Any, ...] | None = None
        self._fallback: dict[str, tuple[float, dict[str, LoadedTable]]] = {}
        self._deltas: dict[str, pa.Table] = {}

    def snapshot(self, *, force: bool = False) -> IndexSnapshot:
        """The index as of now (refreshed when its files changed since the last check)."""
        with self._lock:
            now = time.monotonic()
            if not force and self._snapshot is not None and now - self._checked_at < self.check_every_s:
                return self._snapshot
            self._checked_at = now
            manifests = {part: read_manifest(self.where, part) for part in PARTS}
            signature = tuple((part, (m or {}).get("generation")) for part, m in manifests.items())
            if (self._snapshot is not None and signature == self._signature
                    and all(manifests.values())):
                return self._snapshot
            self._snapshot = self._load(manifests, now)
            self._signature = signature
            return self._snapshot

    def _load(self, manifests: Mapping[str, dict[str, Any] | None], now: float) -> IndexSnapshot:
        loaded: dict[str, LoadedTable] = {}
        notes: list[str] = []
        retention = build.DEFAULT_RETENTION_DAYS
        generations: dict[str, int | None] = {}
        for part in PARTS:
            manifest = manifests[part]
            if manifest is not None:
                retention = int(manifest.get("retention_days", retention)) if part == "fleet" else retention
                generations[part] = manifest.get("source_generation")
                deltas = list(manifest.get("deltas", []))
                self._deltas = {f: t for f, t in self._deltas.items() if f in deltas}

                def read(relative: str, part: str = part) -> pa.Table:
                    if relative not in self._deltas:
                        self._deltas[relative] = read_delta(self.where, part, relative)
                    return self._deltas[relative]

                for spec in tables_of(part=part):
                    cache = self._caches.setdefault(spec.name, _TableCache(spec.name))
                    entry = manifest["tables"].get(spec.name)
                    loaded[spec.name] = cache.refresh(self.where, part, entry, deltas, read) if entry else \
                        LoadedTable.of(spec.name, with_lower(spec.schema.empty_table(), spec.name))
                continue
            built = self._built(part, now)
            if any(t.num_rows for t in built.values()):
                notes.append("The search index of the " + ("fleet" if part == "fleet" else "client configs")
                             + " is not in the lake yet: it was built from the lake's current state for this "
                             "process (the " + ("poller" if part == "fleet" else "Spark job") + " writes it).")
            loaded.update(built)
        return IndexSnapshot(loaded, retention_days=retention, notes=tuple(notes), generations=generations)

    def _built(self, part: str, now: float) -> dict[str, LoadedTable]:
        """A part built in memory from the lake (again at most every `fallback_every_s`)."""
        cached = self._fallback.get(part)
        if cached is not None and now - cached[0] < self.fallback_every_s:
            return cached[1]
        try:
            tables = build.fleet_tables(self.lake)[0] if part == "fleet" else build.client_tables(self.where)[0]
        except (OSError, ValueError, KeyError) as exc:
            log.warning("building the %s search index of %s in memory failed: %s", part, self.lake.location, exc)
            tables = {}
        loaded = {spec.name: LoadedTable.of(spec.name, with_lower(tables.get(spec.name, spec.schema.empty_table()),
                                                                  spec.name)) for spec in tables_of(part=part)}
        self._fallback[part] = (now, loaded)
        return loaded
