"""The index's files in the lake, under `_state/search/<part>/` (part `fleet`, written by the poller; part `clients`,
written by the Spark job: one writer each, like `_state/fleet` and `_state/pipeline`).

- `manifest.json` (replaced last, the commit): the format, a generation, the lake generation the part reflects
  (`source_generation`), and per table its base files (one per bucket: the table's clusters hashed into a few
  buckets, each sorted by cluster and key) and its deltas (one file per update that changed the table, in order);
- `<table>/b<bucket>-<generation>.parquet`: base files; `<table>/d-<generation>.parquet`: deltas.

An update writes one small delta per changed table and the manifest, whatever the size of the fleet. When a table's
deltas pass a quarter of its base rows (or 64 files), the compaction folds them into new base files of the buckets
they touch (and drops deleted rows older than the retention). Every file goes through backend.store's atomic writer,
so the index inherits how the lake commits on an object store.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from backend.search.ops import OP, NetOps, ops_schema, segment_column
from backend.search.rows import with_keys
from backend.search.tables import DELETED, TABLES, TS, tables_of
from backend.store.atomic import commit_json, create_bytes, create_parquet, read_json, read_json_versioned
from backend.store.commit import CommitConflict, delete_quietly
from backend.store.location import LakeLocation
from backend.store.progress import STATE_ROOT
from backend.store.stats import count_read

log = logging.getLogger(__name__)

AREA = "search"
MANIFEST = "manifest.json"
FORMAT = 1
ROWS_PER_BUCKET = 250_000
MAX_BUCKETS = 64
COMPACT_FRACTION = 0.25
COMPACT_MIN_ROWS = 20_000
COMPACT_MAX_DELTAS = 64


def part_path(where: LakeLocation, part: str, *parts: str) -> str:
    """A path under the index part's directory."""
    return where.path(STATE_ROOT, AREA, part, *parts)


def bucket_of(segment: object, buckets: int) -> int:
    """The bucket a cluster's rows live in (stable for a given number of buckets)."""
    if buckets <= 1:
        return 0
    digest = hashlib.sha1(str(segment).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % buckets


def bucket_count(rows: int) -> int:
    """How many buckets a table of this many rows is spread over."""
    return max(1, min(MAX_BUCKETS, -(-rows // ROWS_PER_BUCKET)))


def read_manifest(where: LakeLocation, part: str) -> dict[str, Any] | None:
    """A part's manifest, or None when missing or of another format."""
    value = read_json(where, part_path(where, part, MANIFEST))
    count_read(f"search/{part}/manifest", 1 if value is not None else 0, 0)
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        return None
    return value


def read_file(where: LakeLocation, part: str, relative: str, schema: pa.Schema) -> pa.Table:
    """One base or delta file of the index."""
    with where.fs.open_input_file(part_path(where, part, relative)) as handle:
        table = pq.read_table(handle, schema=schema)
    count_read(f"search/{part}", 1, table.num_rows)
    return table


def read_base(where: LakeLocation, part: str, name: str, relative: str) -> pa.Table:
    """One base file of a table, in the table's full schema (its keys made from its natural columns)."""
    return with_keys(name, read_file(where, part, relative, TABLES[name].stored))


def _stored(name: str, table: pa.Table) -> pa.Table:
    return table.select(TABLES[name].stored.names)


def _sorted(table: pa.Table, name: str) -> pa.Table:
    return table.sort_by([(segment_column(name), "ascending"), ("key", "ascending")]) if table.num_rows else table


def _split(table: pa.Table, name: str, buckets: int) -> dict[int, pa.Table]:
    """A table's rows per bucket (each sorted by cluster and key); every bucket present, empty ones included."""
    seg = table.column(segment_column(name))
    encoded = pc.dictionary_encode(seg.combine_chunks() if isinstance(seg, pa.ChunkedArray) else seg)
    of_value = pa.array([bucket_of(v, buckets) for v in encoded.dictionary.to_pylist()], pa.int32())
    bucket = pc.take(of_value, encoded.indices)
    out = {}
    for b in range(buckets):
        out[b] = _sorted(table.filter(pc.fill_null(pc.equal(bucket, b), False)), name)
    return out


def expired(table: pa.Table, now: datetime, retention_days: int) -> pa.Array:
    """Deleted rows older than the retention."""
    cutoff = pa.scalar(now - timedelta(days=retention_days), TS)
    return pc.fill_null(pc.and_(pc.equal(table.column("state"), DELETED), pc.less(table.column("at"), cutoff)), False)


class PartStore:
    """Writes one part of the index: whole rebuilds, deltas, compaction. One writer per part.

    Its files are created under names no other writer uses and its manifest is committed over the version this store
    read (backend/store/commit.py), so of two writers of a part one commits and the other gets CommitConflict, its
    files removed.
    """

    def __init__(self, where: LakeLocation, part: str) -> None:
        """Open the part (nothing is read until `load`)."""
        self.where = where
        self.part = part
        self.manifest: dict[str, Any] | None = None
        self.version: str | None = None  # of the stored manifest this store read or committed
        self._written: list[str] = []

    def load(self) -> dict[str, Any] | None:
        """Read the committed manifest (None: no usable index)."""
        value, self.version = read_json_versioned(self.where, part_path(self.where, self.part, MANIFEST))
        count_read(f"search/{self.part}/manifest", 1 if value is not None else 0, 0)
        self.manifest = value if isinstance(value, dict) and value.get("format") == FORMAT else None
        return self.manifest

    def moved(self) -> bool:
        """Whether another writer committed the part since this store read or committed it."""
        return read_json_versioned(self.where, part_path(self.where, self.part, MANIFEST))[1] != self.version

    @property
    def source_generation(self) -> int | None:
        """The generation of the lake state this part reflects."""
        return None if self.manifest is None else self.manifest.get("source_generation")

    def _write(self, relative: str, table: pa.Table) -> None:
        path = part_path(self.where, self.part, relative)
        create_parquet(self.where, path, table)
        self._written.append(path)

    def _commit(self, manifest: dict[str, Any], replaced: list[str]) -> None:
        written, self._written = self._written, []
        try:
            self.version = commit_json(self.where, part_path(self.where, self.part, MANIFEST), manifest, self.version)
        except CommitConflict:
            delete_quietly(self.where, written)
            self.manifest = None  # the caller rebuilds from what the other writer committed
            raise
        self.manifest = manifest
        for relative in replaced:
            try:
                self.where.fs.delete_file(part_path(self.where, self.part, relative))
            except FileNotFoundError:
                pass

    def replace(self, tables: Mapping[str, pa.Table], *, source_generation: int | None, retention_days: int,
                now: datetime | None = None) -> dict[str, Any]:
        """Write the whole part anew (a rebuild): every table's base files, then the manifest; old files deleted."""
        old = self.load() or {}
        generation = int(old.get("generation", 0)) + 1
        token = uuid.uuid4().hex[:8]
        entries: dict[str, Any] = {}
        for spec in tables_of(part=self.part):
            table = tables.get(spec.name, spec.schema.empty_table()).cast(spec.schema)
            buckets = bucket_count(table.num_rows)
            base = {}
            for b, rows in _split(table, spec.name, buckets).items():
                relative = f"{spec.name}/b{b:03d}-{generation:012d}-{token}.parquet"
                self._write(relative, _stored(spec.name, rows))
                base[str(b)] = relative
            entries[spec.name] = {"buckets": buckets, "base": base, "base_rows": table.num_rows, "delta_rows": 0}
        manifest = {"format": FORMAT, "part": self.part, "generation": generation, "deltas": [],
                    "source_generation": source_generation, "retention_days": retention_days,
                    "built_at": (now or datetime.now(UTC)).isoformat(), "updated_at": (now or datetime.now(UTC)).isoformat(),
                    "tables": entries}
        self._commit(manifest, _files(old))
        return manifest

    def append(self, deltas: Mapping[str, pa.Table], *, source_generation: int | None,
               now: datetime | None = None, commit: bool = True) -> dict[str, int]:
        """Write one delta file holding every changed table's operations, then the manifest; returns the rows
        written per table. With nothing to write and `commit` false, only the in-memory manifest moves on."""
        if self.manifest is None:
            raise RuntimeError("append to an index part that was never built")
        generation = int(self.manifest["generation"]) + 1
        tables = {name: dict(entry) for name, entry in self.manifest["tables"].items()}
        written = {name: ops.num_rows for name, ops in deltas.items() if ops.num_rows}
        files = list(self.manifest.get("deltas", []))
        if written:
            relative = f"d-{generation:012d}-{uuid.uuid4().hex[:8]}.parquet"
            # lz4, not the lake's zstd: a delta lives until the next compaction, and it is written at every poll.
            sink = pa.BufferOutputStream()
            pq.write_table(delta_table(deltas), sink, compression="lz4")
            path = part_path(self.where, self.part, relative)
            create_bytes(self.where, path, sink.getvalue().to_pybytes())
            self._written.append(path)
            files.append(relative)
            for name, rows in written.items():
                tables[name]["delta_rows"] = int(tables[name].get("delta_rows", 0)) + rows
        manifest = {**self.manifest, "source_generation": source_generation, "tables": tables, "deltas": files}
        if written:
            manifest["generation"] = generation
        if written or commit:
            manifest["updated_at"] = (now or datetime.now(UTC)).isoformat()
            self._commit(manifest, [])
        else:
            self.manifest = manifest
        return written

    def compaction_due(self) -> bool:
        """Whether the deltas should be folded into the base files (a table's past a quarter of its rows, or many)."""
        manifest = self.manifest or {}
        if not manifest.get("deltas"):
            return False
        if len(manifest["deltas"]) >= COMPACT_MAX_DELTAS:
            return True
        return any(int(e.get("delta_rows", 0)) >= max(COMPACT_MIN_ROWS, COMPACT_FRACTION * int(e["base_rows"]))
                   for e in manifest.get("tables", {}).values())

    def compact(self, *, now: datetime | None = None) -> dict[str, int]:
        """Fold every delta into new base files of the buckets they touch; returns the buckets rewritten per table."""
        assert self.manifest is not None
        now = now or datetime.now(UTC)
        deltas = [read_delta(self.where, self.part, relative) for relative in self.manifest.get("deltas", [])]
        generation = int(self.manifest["generation"]) + 1
        token = uuid.uuid4().hex[:8]
        retention = int(self.manifest.get("retention_days", 30))
        replaced = list(self.manifest.get("deltas", []))
        tables = dict(self.manifest["tables"])
        rewritten: dict[str, int] = {}
        for name, entry in self.manifest["tables"].items():
            net = NetOps(name)
            for delta in deltas:
                net.add(table_ops(delta, name))
            if net.empty:
                continue
            buckets = int(entry["buckets"])
            touched = {bucket_of(s, buckets) for s in net.segments}
            base, rows = dict(entry["base"]), int(entry["base_rows"])
            upserts = _split(net.upserts, name, buckets) if net.upserts.num_rows else {}
            net.upserts = TABLES[name].schema.empty_table()  # added per bucket below
            for b in sorted(touched):
                old = read_base(self.where, self.part, name, base[str(b)])
                new = net.apply(old)
                if b in upserts and upserts[b].num_rows:
                    new = pa.concat_tables([new, upserts[b]])
                new = new.filter(pc.invert(expired(new, now, retention)))
                rows += new.num_rows - old.num_rows
                relative = f"{name}/b{b:03d}-{generation:012d}-{token}.parquet"
                self._write(relative, _stored(name, _sorted(new, name)))
                replaced.append(base[str(b)])
                base[str(b)] = relative
            tables[name] = {**entry, "base": base, "base_rows": rows, "delta_rows": 0}
            rewritten[name] = len(touched)
        tables = {name: {**entry, "delta_rows": 0} for name, entry in tables.items()}
        self._commit({**self.manifest, "generation": generation, "tables": tables, "deltas": [],
                      "updated_at": now.isoformat()}, replaced)
        return rewritten


def delta_schema() -> pa.Schema:
    """The schema of a delta file: every table's columns (a column of the same name is the same type in each),
    the table a row belongs to, and its operation."""
    fields: dict[str, pa.Field] = {}
    for spec in TABLES.values():
        for f in spec.schema:
            fields.setdefault(f.name, f)
    return pa.schema([*fields.values(), pa.field(TABLE, pa.string()), pa.field(OP, pa.string())])


TABLE = "_table"
DELTA_SCHEMA = delta_schema()


def delta_table(deltas: Mapping[str, pa.Table]) -> pa.Table:
    """One update's operations of every table as one table (the delta file)."""
    parts = []
    for name, ops in deltas.items():
        if not ops.num_rows:
            continue
        columns = {c: ops.column(c) for c in ops.column_names}
        columns[TABLE] = pa.array([name] * ops.num_rows, pa.string())
        parts.append(pa.table({f.name: columns[f.name].cast(f.type) if f.name in columns
                               else pa.nulls(ops.num_rows, f.type) for f in DELTA_SCHEMA}, schema=DELTA_SCHEMA))
    return pa.concat_tables(parts) if parts else DELTA_SCHEMA.empty_table()


def read_delta(where: LakeLocation, part: str, relative: str) -> pa.Table:
    """One delta file."""
    return read_file(where, part, relative, DELTA_SCHEMA)


def table_ops(delta: pa.Table, name: str) -> pa.Table:
    """One table's operations of a delta file, in its ops schema."""
    mine = delta.filter(pc.fill_null(pc.equal(delta.column(TABLE), name), False))
    return mine.select(ops_schema(name).names)


def _files(manifest: Mapping[str, Any]) -> list[str]:
    out: list[str] = list(manifest.get("deltas", []))
    for entry in manifest.get("tables", {}).values():
        out += list(entry.get("base", {}).values())
    return out
