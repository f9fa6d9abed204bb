"""What an update does to the index: upserts, deletes, deletes of every row of a parent, and clears of a cluster.

A delta file holds one table's operations (its columns plus `_op`). Rows are matched by their segment (the cluster
name; the cluster id for tables keyed by id) and key, or segment and parent. `NetOps` folds a sequence of deltas into
one net change (what is removed, and the rows that stand), so a reader applies any number of deltas to the base in
one pass, and the compaction folds them into new base files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backend.search.rows import SEP, with_keys
from backend.search.tables import TABLES

OP = "_op"
SEG_KEY = "__sk"  # in memory: segment + key, made once per loaded file (ops.with_segment_keys)
SEG_PARENT = "__sp"
UPSERT = "upsert"
DELETE = "delete"
DELETE_PARENT = "delete_parent"
CLEAR = "clear"


def segment_column(name: str) -> str:
    """The column that says which cluster a row belongs to (its segment)."""
    return "cluster_id" if TABLES[name].by_cluster_id else "cluster"


def ops_schema(name: str) -> pa.Schema:
    """The schema of a delta file of one table."""
    return TABLES[name].schema.append(pa.field(OP, pa.string()))


def ops_table(name: str, *, upserts: pa.Table | None = None, deletes: Iterable[Mapping[str, Any]] = (),
              parents: Iterable[Mapping[str, Any]] = (), clears: Iterable[str] = ()) -> pa.Table:
    """The operations of one table in one update, in the order they apply: clears (a segment), parent deletes (rows
    with the natural parent columns and the segment), deletes (rows with the natural key columns), upserts."""
    spec = TABLES[name]
    seg = segment_column(name)
    parts: list[pa.Table] = []

    def add(op: str, rows: list[Mapping[str, Any]]) -> None:
        if rows:
            table = with_keys(name, pa.Table.from_pydict({f.name: [r.get(f.name) for r in rows] for f in spec.schema},
                                                         schema=spec.schema))
            parts.append(table.append_column(OP, pa.array([op] * len(rows), pa.string())))

    add(CLEAR, [{seg: c} for c in dict.fromkeys(clears)])
    add(DELETE_PARENT, _distinct(parents))
    add(DELETE, _distinct(deletes))
    if upserts is not None and upserts.num_rows:
        parts.append(upserts.cast(spec.schema).append_column(OP, pa.array([UPSERT] * upserts.num_rows, pa.string())))
    if not parts:
        return ops_schema(name).empty_table()
    return pa.concat_tables(parts)


def _distinct(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    seen: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for row in rows:
        seen.setdefault(tuple(sorted(row.items())), row)
    return list(seen.values())


def _composite(first: pa.ChunkedArray | pa.Array, second: pa.ChunkedArray | pa.Array) -> pa.Array:
    joined = pc.binary_join_element_wise(first.cast(pa.string()), second, SEP)
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def with_segment_keys(name: str, table: pa.Table) -> pa.Table:
    """The table with its segment + key (and segment + parent) columns, which deltas are matched against."""
    seg = table.column(segment_column(name))
    table = table.append_column(SEG_KEY, _composite(seg, table.column("key")))
    if "parent" in table.column_names:
        table = table.append_column(SEG_PARENT, _composite(seg, table.column("parent")))
    return table


def _as_array(values: set[str]) -> pa.Array:
    return pa.array(sorted(values), pa.string())


class NetOps:
    """The net effect of a sequence of deltas of one table: removals (clears, parents, keys) and the rows that stand."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seg = segment_column(name)
        self.has_parent = "parent" in TABLES[name].schema.names
        self.clears: set[str] = set()
        self.parents: set[str] = set()
        self.keys: set[str] = set()
        self.segments: set[str] = set()  # every segment an operation touched
        self.upserts: pa.Table = TABLES[name].schema.empty_table()
        self.deltas = 0

    @property
    def empty(self) -> bool:
        """True when no operation was added."""
        return not (self.clears or self.parents or self.keys or self.upserts.num_rows)

    def add(self, ops: pa.Table) -> None:
        """Fold one delta (its operations apply after everything added before)."""
        self.deltas += 1
        if not ops.num_rows:
            return
        kind = ops.column(OP)
        seg = ops.column(self.seg).cast(pa.string())
        clears = {v for v in pc.filter(seg, pc.equal(kind, CLEAR)).to_pylist() if v is not None}
        parents: set[str] = set()
        if self.has_parent:
            mask = pc.equal(kind, DELETE_PARENT)
            parents = set(pc.drop_null(_composite(pc.filter(seg, mask), pc.filter(ops.column("parent"), mask))).to_pylist())
        keyed = pc.or_(pc.equal(kind, DELETE), pc.equal(kind, UPSERT))
        keys = set(pc.drop_null(_composite(pc.filter(seg, keyed), pc.filter(ops.column("key"), keyed))).to_pylist())
        touched = {v for v in pc.unique(seg).to_pylist() if v is not None}
        self.upserts = remove(self.upserts, self.name, clears, parents, keys, segments=touched)
        self.clears |= clears
        self.parents |= parents
        self.keys |= keys
        self.segments |= touched
        new = ops.filter(pc.equal(kind, UPSERT)).drop_columns([OP])
        if new.num_rows:
            self.upserts = pa.concat_tables([self.upserts, new.cast(self.upserts.schema)])

    def removed(self, base: pa.Table) -> pa.Table:
        """The base rows with the removals applied (the standing rows not appended); other columns are kept."""
        return remove(base, self.name, self.clears, self.parents, self.keys, segments=self.segments)

    def apply(self, base: pa.Table) -> pa.Table:
        """The base rows with the removals applied and the standing rows appended."""
        out = remove(base, self.name, self.clears, self.parents, self.keys, segments=self.segments)
        if not self.upserts.num_rows:
            return out
        return pa.concat_tables([out, self.upserts.cast(out.schema)]) if out.num_rows else self.upserts.cast(out.schema)


def remove(table: pa.Table, name: str, clears: set[str], parents: set[str], keys: set[str], *,
           segments: set[str]) -> pa.Table:
    """The rows of `table` that no clear, parent delete or key (delete or upsert) removes; `segments`: every segment
    the operations name (only rows of those are looked at)."""
    if not table.num_rows or not (clears or parents or keys):
        return table
    seg_name = segment_column(name)
    seg = table.column(seg_name)
    candidates = pc.fill_null(pc.is_in(seg, value_set=_as_array(segments)), False)
    rows = np.flatnonzero(np.asarray(candidates.to_numpy(zero_copy_only=False) if isinstance(candidates, pa.Array)
                                     else candidates.combine_chunks().to_numpy(zero_copy_only=False)))
    if not len(rows):
        return table
    whole = len(rows) > table.num_rows // 2  # most rows are candidates: look at all of them rather than copy them
    picked = table if whole else table.take(pa.array(rows))
    gone = np.zeros(picked.num_rows, dtype=bool)
    if clears:
        gone |= _mask(pc.is_in(picked.column(seg_name), value_set=_as_array(clears)))
    if parents and "parent" in table.column_names:
        composite = picked.column(SEG_PARENT) if SEG_PARENT in picked.column_names else _composite(
            picked.column(seg_name), picked.column("parent"))
        gone |= _mask(pc.is_in(composite, value_set=_as_array(parents)))
    if keys:
        composite = picked.column(SEG_KEY) if SEG_KEY in picked.column_names else _composite(
            picked.column(seg_name), picked.column("key"))
        gone |= _mask(pc.is_in(composite, value_set=_as_array(keys)))
    if whole:
        return table.filter(pa.array(~gone)) if gone.any() else table
    if not gone.any():
        return table
    keep = np.ones(table.num_rows, dtype=bool)
    keep[rows[gone]] = False
    return table.filter(pa.array(keep))


def _mask(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)
