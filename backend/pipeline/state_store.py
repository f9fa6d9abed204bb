"""The pipeline's incremental state under lake/_state/pipeline: three small tables the driver keeps.

- ``<generation>/heads.parquet``: one row per client instance, its latest snapshot (backend.pipeline.heads);
- ``<generation>/counts.parquet``: instances per (cluster, client type, group.id, key, spelling, type,
  is_default) over every instance's latest entries (what the value and group counts are made of);
- ``<generation>/alerts.parquet``: the per-instance rules' alerts of every instance (instance, rule, values);
- ``state.json`` names the current generation; it is written last, so a run that stops anywhere leaves
  the previous state current. ``processed_files.json`` and ``broker_versions.json`` follow it: a crash
  between them makes the next run read files already folded in, which changes nothing.

A generation directory is written whole before state.json names it and is never changed after.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.pipeline.heads import HEAD_SCHEMA
from backend.store.atomic import read_json, write_json_atomic, write_parquet_atomic
from backend.store.config_schemas import SCHEMA_VERSION
from backend.store.location import parse_lake

STATE_DIR = "_state/pipeline"
STATE = "state.json"
MANIFEST = "processed_files.json"
BROKER_VERSIONS = "broker_versions.json"  # the broker versions the last run's CC018 saw
# 6: heads, counts and alerts kept by the driver. Older formats (5: heads and entries written by
# Spark with a tally) are rebuilt by a full run.
STATE_FORMAT = 6
COUNT_SCHEMA = pa.schema([
    ("cluster_id", pa.string()), ("client_type", pa.string()), ("group_id", pa.string()), ("key", pa.string()),
    ("raw_value", pa.string()), ("type", pa.string()), ("is_default", pa.bool_()), ("n", pa.int64()),
])
ALERT_SCHEMA = pa.schema([("client_instance_id", pa.string()), ("rule_id", pa.string()),
                          ("observed_json", pa.string())])
SCHEMAS = {"heads": HEAD_SCHEMA, "counts": COUNT_SCHEMA, "alerts": ALERT_SCHEMA}


@dataclass
class PipelineState:
    """The current incremental state, as recorded in state.json."""

    generation: int
    tables: str  # the generation directory holding heads, counts and alerts
    window_days: float | None

    def to_json(self) -> dict[str, object]:
        return {"format": STATE_FORMAT, "schema_version": SCHEMA_VERSION, "generation": self.generation,
                "tables": self.tables, "window_days": self.window_days}


class LakePaths:
    """Paths of one lake for pyarrow (listing, state files, renames) and for Spark."""

    def __init__(self, lake: str) -> None:
        self.lake = lake
        self.where = parse_lake(lake)
        self.fs, self.root, self.spark_root = self.where.fs, self.where.root, self.where.spark_uri

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def spark_path(self, *parts: str) -> str:
        return "/".join([self.spark_root, *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def config_files(self) -> list[str]:
        """client_configs Parquet files relative to the table (hidden and temp files skipped), sorted."""
        base = self.path("client_configs")
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return []
        found = []
        for info in self.fs.get_file_info(pafs.FileSelector(base, recursive=True)):
            rel = posixpath.relpath(info.path, base)
            if info.type == pafs.FileType.File and rel.endswith(".parquet") and not any(
                part.startswith((".", "_")) for part in rel.split("/")
            ):
                found.append(rel)
        return sorted(found)

    def config_rows(self, files: list[str]) -> int:
        """Rows of client_configs files, from their Parquet footers (what the partitions are sized from)."""
        return sum(pq.read_metadata(self.path("client_configs", f), filesystem=self.fs).num_rows for f in files)

    def read_json(self, *parts: str) -> object:
        return read_json(self.where, self.path(*parts))

    def write_json(self, obj: object, *parts: str) -> None:
        write_json_atomic(self.where, self.path(*parts), obj)

    def replace_dir_table(self, table: pa.Table, *parts: str) -> None:
        """Write an Arrow table as one Parquet file in a directory next to the target, then swap it in."""

        def write(tmp: list[str]) -> None:
            self.fs.create_dir(self.path(*tmp), recursive=True)
            pq.write_table(table, self.path(*tmp, "part-0.parquet"), filesystem=self.fs, compression="zstd")

        self._swap_in(write, parts)

    def _swap_in(self, write: Callable[[list[str]], None], parts: tuple[str, ...]) -> None:
        parent = posixpath.join(*parts[:-1]) if len(parts) > 1 else ""
        tmp_name = f".tmp-{parts[-1]}-{uuid.uuid4().hex}"
        write([p for p in (parent, tmp_name) if p])
        target = self.path(*parts)
        old = self.path(*filter(None, [parent, f".old-{parts[-1]}-{uuid.uuid4().hex}"]))
        if self.exists(*parts):
            self.fs.move(target, old)
        self.fs.move(self.path(*filter(None, [parent, tmp_name])), target)
        if self.fs.get_file_info(old).type != pafs.FileType.NotFound:
            self.fs.delete_dir(old)


def load_state(paths: LakePaths) -> PipelineState | None:
    """The recorded incremental state, or None when absent, of another format or incomplete."""
    meta = paths.read_json(STATE_DIR, STATE)
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT or meta.get("schema_version") != SCHEMA_VERSION:
        return None
    try:
        state = PipelineState(int(meta["generation"]), str(meta["tables"]), meta.get("window_days"))
    except (KeyError, TypeError, ValueError):
        return None
    if not all(paths.exists(STATE_DIR, state.tables, f"{name}.parquet") for name in SCHEMAS):
        return None
    return state


def empty_tables() -> dict[str, pa.Table]:
    """The state of a lake nothing has been folded into."""
    return {name: schema.empty_table() for name, schema in SCHEMAS.items()}


def read_tables(paths: LakePaths, state: PipelineState) -> dict[str, pa.Table]:
    """A generation's heads, counts and alerts."""
    return {name: pq.read_table(paths.path(STATE_DIR, state.tables, f"{name}.parquet"), filesystem=paths.fs,
                                schema=schema) for name, schema in SCHEMAS.items()}


def write_tables(paths: LakePaths, tables: dict[str, pa.Table], generation: int) -> str:
    """Write a new generation directory (each file atomically); returns its name."""
    name = f"g{generation:06d}-{uuid.uuid4().hex[:8]}"
    for table, schema in SCHEMAS.items():
        write_parquet_atomic(paths.where, paths.path(STATE_DIR, name, f"{table}.parquet"),
                             tables[table].select(schema.names).cast(schema))
    return name


def cleanup(paths: LakePaths, state: PipelineState) -> None:
    """Delete what the committed state no longer names (older generations, older formats' directories)."""
    keep = {STATE, MANIFEST, BROKER_VERSIONS, state.tables}
    base = paths.path(STATE_DIR)
    for info in paths.fs.get_file_info(pafs.FileSelector(base)):
        if info.base_name in keep:
            continue
        if info.type == pafs.FileType.Directory:
            paths.fs.delete_dir(info.path)
        else:
            paths.fs.delete_file(info.path)
