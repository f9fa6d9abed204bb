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
from backend.search.ops import NetOps, segment_column
from backend.search.rows import SEP
from backend.search.store import read_base, read_delta, read_manifest, table_ops
from backend.search.tables import DELETED, PARTS, TABLES, tables_of
from backend.store.lake import Lake
from backend.store.location import LakeLocation

log = logging.getLogger(__name__)
CHECK_EVERY_S = 2.0
FALLBACK_EVERY_S = 60.0


@dataclass(frozen=True)
class Values:
    """One searched column of a piece: the values to match (lowercased; a repetitive column's distinct values, with
    each row's index into them, -1 for null), or for a unique id column its rows' values and the same values sorted
    (with the row of each), so an id is found by binary search."""

    values: pa.Array
    indices: np.ndarray | None = None
    sorted: pa.Array | None = None
    order: np.ndarray | None = None

    @property
    def rows(self) -> int:
        """Rows of the piece."""
        return len(self.values) if self.indices is None else len(self.indices)


Pieces = list[Values]


def _numpy(values: pa.ChunkedArray | pa.Array, fill: Any, dtype: Any) -> np.ndarray:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return np.asarray(pc.fill_null(array, fill).to_numpy(zero_copy_only=False), dtype=dtype)


@dataclass
class Piece:
    """One base file (or the standing rows of the deltas) of a table, indexed once for queries and deltas: never
    changed after; deltas that remove some of its rows are an `alive` mask beside it."""

    rows: pa.Table
    segments: list[Any]  # its own dictionary of segments (cluster names or ids)
    codes: np.ndarray  # per row, into `segments` (-1: none)
    deleted: np.ndarray
    at_us: np.ndarray
    columns: dict[str, Pieces]
    seg_keys: pa.Array  # segment + key per row: what a delta's delete or upsert names
    seg_parents: pa.Array | None

    @classmethod
    def of(cls, name: str, rows: pa.Table) -> Piece:
        """Index rows of the table's full schema."""
        rows = rows.combine_chunks()
        n = rows.num_rows
        seg = rows.column(segment_column(name)).combine_chunks() if n else pa.array([], pa.string())
        encoded = pc.dictionary_encode(seg)
        columns: dict[str, Pieces] = {}
        for f in TABLES[name].fields:
            lower = pc.utf8_lower(rows.column(f.column).combine_chunks() if n else pa.array([], pa.string()))
            if f.unique:
                order = pc.sort_indices(lower, null_placement="at_end")
                columns[f.column] = [Values(lower, None, lower.take(order), _numpy(order, 0, np.int64))]
            else:
                dictionary = pc.dictionary_encode(lower)
                columns[f.column] = [Values(dictionary.dictionary, _numpy(dictionary.indices, -1, np.int64))]
        keys = rows.column("key").combine_chunks() if n else pa.array([], pa.string())
        parents = rows.column("parent").combine_chunks() if "parent" in rows.column_names and n else None
        return cls(rows, encoded.dictionary.to_pylist(), _numpy(encoded.indices, -1, np.int32),
                   _numpy(pc.equal(rows.column("state"), DELETED), False, bool) if n else np.zeros(0, dtype=bool),
                   _numpy(rows.column("at").cast(pa.int64()), 0, np.int64) if n else np.zeros(0, dtype=np.int64),
                   columns, _joined(seg, keys), None if parents is None else _joined(seg, parents))

    def removed(self, net: NetOps) -> np.ndarray | None:
        """Which of its rows the deltas folded into `net` remove (None: none)."""
        if net.empty or not self.rows.num_rows:
            return None
        touched = np.array([s in net.segments for s in self.segments] + [False], dtype=bool)[self.codes]
        if not touched.any():
            return None
        gone = np.zeros(self.rows.num_rows, dtype=bool)
        if net.clears:
            gone |= np.array([s in net.clears for s in self.segments] + [False], dtype=bool)[self.codes]
        if net.keys:
            gone |= _numpy(pc.is_in(self.seg_keys, value_set=pa.array(sorted(net.keys), pa.string())), False, bool)
        if net.parents and self.seg_parents is not None:
            gone |= _numpy(pc.is_in(self.seg_parents, value_set=pa.array(sorted(net.parents), pa.string())), False,
                           bool)
        gone &= touched
        return gone if gone.any() else None


def _joined(seg: pa.Array, values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(seg.cast(pa.string()), values, SEP)


@dataclass
class LoadedTable:
    """One index table in memory: its pieces side by side (no copy), with per row its segment (a code into
    `segments`), whether it still stands (`alive`: deltas remove rows of the pieces they touch), whether it is a
    deleted row, when it was deleted (µs since the epoch; 0 for current rows), and each searched column as pieces to
    match."""

    name: str
    rows: pa.Table
    codes: np.ndarray
    segments: list[Any]
    deleted: np.ndarray
    at_us: np.ndarray
    alive: np.ndarray
    columns: dict[str, Pieces] = field(default_factory=dict)

    @classmethod
    def of(cls, name: str, rows: pa.Table) -> LoadedTable:
        """One table from whole rows (a rebuild in memory)."""
        return cls.combine(name, [Piece.of(name, rows)], [None])

    @classmethod
    def combine(cls, name: str, pieces: list[Piece], removed: list[np.ndarray | None]) -> LoadedTable:
        """The table made of pieces, less the rows removed from each."""
        segments: dict[Any, int] = {}
        codes, deleted, at_us, alive = [], [], [], []
        columns: dict[str, Pieces] = {f.column: [] for f in TABLES[name].fields}
        for piece, gone in zip(pieces, removed, strict=True):
            mapping = np.array([segments.setdefault(s, len(segments)) for s in piece.segments] + [-1], dtype=np.int32)
            codes.append(mapping[piece.codes])
            deleted.append(piece.deleted)
            at_us.append(piece.at_us)
            alive.append(np.ones(piece.rows.num_rows, dtype=bool) if gone is None else ~gone)
            for column, parts in piece.columns.items():
                columns[column].extend(parts)
        schema = TABLES[name].schema
        rows = pa.concat_tables([p.rows.select(schema.names) for p in pieces]) if pieces else schema.empty_table()

        def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        return cls(name, rows, cat(codes, np.int32), list(segments), cat(deleted, bool), cat(at_us, np.int64),
                   cat(alive, bool), columns)

    @property
    def num_rows(self) -> int:
        """Rows in the table (removed ones included: `alive` says which stand)."""
        return self.rows.num_rows

    def live_rows(self) -> pa.Table:
        """The rows that stand."""
        return self.rows if self.alive.all() else self.rows.filter(pa.array(self.alive))


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
        """Rows in the whole index (those that stand)."""
        return sum(int(t.alive.sum()) for t in self.tables.values())

    def cluster_ids(self) -> dict[str, list[str]]:
        """Cluster id -> the names of the clusters that report it (current cluster rows of the index)."""
        table = self.tables.get("cluster")
        out: dict[str, list[str]] = {}
        if table is None or not table.num_rows:
            return out
        rows = table.live_rows()
        for name, cid in zip(rows.column("cluster").to_pylist(), rows.column("cluster_id").to_pylist(), strict=True):
            if cid:
                out.setdefault(str(cid), []).append(str(name))
        return out


def snapshot_of(tables: Mapping[str, pa.Table], *, retention_days: int = build.DEFAULT_RETENTION_DAYS,
                notes: tuple[str, ...] = ()) -> IndexSnapshot:
    """An in-memory index from whole tables (the rebuild's output): what a reader serves when the index is missing."""
    loaded = {name: LoadedTable.of(name, tables.get(name, spec.schema.empty_table())) for name, spec in TABLES.items()}
    return IndexSnapshot(loaded, retention_days=retention_days, notes=notes)


class _TableCache:
    """One table of one part: its base files (each indexed once) and the deltas folded so far."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bases: dict[str, Piece] = {}
        self.deltas: list[str] = []
        self.net = NetOps(name)
        self.standing: Piece | None = None
        self.loaded: LoadedTable | None = None
        self.key: tuple[Any, ...] | None = None

    def refresh(self, where: LakeLocation, part: str, entry: Mapping[str, Any], deltas: list[str],
                read: Any) -> LoadedTable:
        """The table as of the manifest: base files (loaded once each) with the part's deltas folded in."""
        base_files = [entry["base"][b] for b in sorted(entry["base"], key=int)]
        key = (tuple(base_files), tuple(deltas))
        if key == self.key and self.loaded is not None:
            return self.loaded
        self.bases = {f: self.bases[f] if f in self.bases else Piece.of(self.name, read_base(where, part, self.name, f))
                      for f in base_files}
        if deltas[: len(self.deltas)] != self.deltas or self.key is None or self.key[0] != tuple(base_files):
            self.net, self.deltas = NetOps(self.name), []
        added = deltas[len(self.deltas):]
        for relative in added:
            self.net.add(table_ops(read(relative), self.name))
            self.deltas.append(relative)
        if added or self.standing is None:
            self.standing = Piece.of(self.name, self.net.upserts)
        pieces = [self.bases[f] for f in base_files] + [self.standing]
        self.loaded = LoadedTable.combine(self.name, pieces, [p.removed(self.net) for p in pieces[:-1]] + [None])
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
                        LoadedTable.of(spec.name, spec.schema.empty_table())
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
        loaded = {spec.name: LoadedTable.of(spec.name, tables.get(spec.name, spec.schema.empty_table()))
                  for spec in tables_of(part=part)}
        self._fallback[part] = (now, loaded)
        return loaded
