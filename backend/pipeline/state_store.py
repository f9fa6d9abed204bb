"""The pipeline's incremental state store under lake/_state/pipeline: paths, state.json, instance rows, tallies.

``job.py`` orchestrates a run; this module owns where its state lives and how it is read, written and
cleaned up (docs/spark.md, "Incremental refresh").
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from backend.pipeline.instances import ENTRY_SCHEMA, HEAD_SCHEMA
from backend.pipeline.tally import STAT
from backend.store.atomic import read_json, write_json_atomic
from backend.store.config_schemas import SCHEMA_VERSION
from backend.store.location import parse_lake

STATE_DIR = "_state/pipeline"
MANIFEST = "processed_files.json"
BROKER_VERSIONS = "broker_versions.json"  # the broker versions the last run's CC018 saw
STATE = "state.json"  # which instance base/segments and tally are current
# 5: per instance one head row (backend.pipeline.instances.HEAD_SCHEMA) with its entry rows
# beside it (ENTRY_SCHEMA), and one tally holding every count table. Older formats (4: entries in
# an array on the instance row; 3: one row per key) are rebuilt by a full run.
STATE_FORMAT = 5
LATEST = "instances"  # one base plus appended segments, each with HEADS and ENTRIES
HEADS = "heads"  # one row per instance
ENTRIES = "entries"  # one row per (instance, key) of that instance's head snapshot
AGG = "agg"  # the tally and the too-old index, one directory per generation
COUNTS = "counts"  # every count table (backend.pipeline.instances.COUNT_LAYOUT) and the run's stats
TOO_OLD = "too_old_clients"
# Compact (rewrite the base from base + segments) when the segments hold more rows than this
# fraction of the base, or when there are more than MAX_SEGMENTS of them.
COMPACT_FRACTION = 0.25
MAX_SEGMENTS = 32
COUNT_TABLE_NAMES = ("value_counts", "group_counts", "version_counts", "client_id_counts")


@dataclass
class PipelineState:
    """The current incremental state, as recorded in state.json."""

    generation: int
    base: str
    base_rows: int
    segments: list[str]
    segment_rows: int
    agg: str
    window_days: float | None

    def to_json(self) -> dict[str, object]:
        return {"format": STATE_FORMAT, "schema_version": SCHEMA_VERSION,
                "generation": self.generation, "base": self.base, "base_rows": self.base_rows,
                "segments": self.segments, "segment_rows": self.segment_rows, "agg": self.agg,
                "window_days": self.window_days}


class LakePaths:
    """Paths of one lake for pyarrow (listing, state files, renames) and for Spark."""

    def __init__(self, lake: str) -> None:
        self.where = parse_lake(lake)
        self.fs, self.root, self.spark_root = self.where.fs, self.where.root, self.where.spark_uri

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def spark_path(self, *parts: str) -> str:
        return "/".join([self.spark_root, *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def config_files(self) -> list[str]:
        """client_configs Parquet files relative to the table (hidden and temp files skipped)."""
        return sorted(self.config_file_sizes())

    def config_file_sizes(self) -> dict[str, int]:
        """config_files() with their sizes in bytes (from the same listing)."""
        base = self.path("client_configs")
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return {}
        selector = pafs.FileSelector(base, recursive=True)
        found: dict[str, int] = {}
        for info in self.fs.get_file_info(selector):
            rel = posixpath.relpath(info.path, base)
            if info.type == pafs.FileType.File and rel.endswith(".parquet") and not any(
                part.startswith((".", "_")) for part in rel.split("/")
            ):
                found[rel] = int(info.size or 0)
        return found

    def tree_bytes(self, *parts: str) -> int:
        """Total size of the files under a directory (0 when absent), from one listing."""
        base = self.path(*parts)
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return 0
        return sum(int(i.size or 0) for i in self.fs.get_file_info(pafs.FileSelector(base, recursive=True))
                   if i.type == pafs.FileType.File)

    def read_json(self, *parts: str) -> object:
        return read_json(self.where, self.path(*parts))

    def write_json(self, obj: object, *parts: str) -> None:
        write_json_atomic(self.where, self.path(*parts), obj)

    def replace_dir(self, df: DataFrame, *parts: str) -> None:
        """Write df as Parquet next to the target, then swap it into place."""
        self._swap_in(lambda tmp: df.write.mode("overwrite").parquet(self.spark_path(*tmp)), parts)

    def replace_dir_table(self, table: pa.Table, *parts: str) -> None:
        """Write an Arrow table as one Parquet file in a directory next to the target, then swap it in."""

        def write(tmp: list[str]) -> None:
            self.fs.create_dir(self.path(*tmp), recursive=True)
            pq.write_table(table, self.path(*tmp, "part-0.parquet"), filesystem=self.fs,
                           compression="zstd")

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
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        return None
    if meta.get("schema_version") != SCHEMA_VERSION:
        return None
    try:
        state = PipelineState(int(meta["generation"]), str(meta["base"]), int(meta["base_rows"]),
                       [str(x) for x in meta["segments"]], int(meta["segment_rows"]),
                       str(meta["agg"]), meta.get("window_days"))
    except (KeyError, TypeError, ValueError):
        return None
    dirs = [(LATEST, d, part) for d in (state.base, *state.segments) for part in (HEADS, ENTRIES)]
    dirs += [(AGG, state.agg, name) for name in (COUNTS, TOO_OLD)]
    if not all(paths.exists(STATE_DIR, *parts) for parts in dirs):
        return None
    return state


def cleanup(paths: LakePaths, state: PipelineState) -> None:
    """Delete latest-row and count-table directories the committed state no longer names."""
    keep = {LATEST: {state.base, *state.segments}, AGG: {state.agg}}
    for sub, names in keep.items():
        base = paths.path(STATE_DIR, sub)
        if paths.fs.get_file_info(base).type != pafs.FileType.Directory:
            continue
        for info in paths.fs.get_file_info(pafs.FileSelector(base)):
            if info.base_name in names:
                continue
            if info.type == pafs.FileType.Directory:
                paths.fs.delete_dir(info.path)
            else:
                paths.fs.delete_file(info.path)


def read_heads(spark: SparkSession, paths: LakePaths, dirs: list[str]) -> DataFrame:
    """The head rows of the base and segments named by dirs, as one DataFrame."""
    return spark.read.schema(HEAD_SCHEMA).parquet(*[paths.spark_path(STATE_DIR, LATEST, d, HEADS) for d in dirs])


def read_entries(spark: SparkSession, paths: LakePaths, dirs: list[str]) -> DataFrame:
    """The entry rows of the base and segments named by dirs, as one DataFrame."""
    return spark.read.schema(ENTRY_SCHEMA).parquet(*[paths.spark_path(STATE_DIR, LATEST, d, ENTRIES)
                                                     for d in dirs])


def write_part(paths: LakePaths, name: str, part: str, frame: DataFrame) -> None:
    """Write the HEADS or ENTRIES of base or segment ``name`` (replaced atomically)."""
    paths.replace_dir(frame, STATE_DIR, LATEST, name, part)


def read_agg(spark: SparkSession, paths: LakePaths, agg: str, name: str) -> DataFrame:
    """The tally (COUNTS) or the too-old index of a generation."""
    return spark.read.parquet(paths.spark_path(STATE_DIR, AGG, agg, name))


def write_agg(paths: LakePaths, frames: dict[str, DataFrame], agg: str) -> None:
    """Write a generation's tables, each replaced atomically."""
    for name, frame in frames.items():
        paths.replace_dir(frame.repartition(1), STATE_DIR, AGG, agg, name)


def read_counts(paths: LakePaths, agg: str) -> pa.Table:
    """A generation's tally (every count table and the run's statistics), read with pyarrow."""
    import pyarrow.dataset as ds

    return ds.dataset(paths.path(STATE_DIR, AGG, agg, COUNTS), filesystem=paths.fs,
                      format="parquet").to_table()


def read_stats(paths: LakePaths, agg: str) -> dict[str, int]:
    """The statistics a run wrote into its tally, and ``instances`` (sum of version_counts).

    Read with pyarrow from the written file: no Spark job.
    """
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    data = ds.dataset(paths.path(STATE_DIR, AGG, agg, COUNTS), filesystem=paths.fs, format="parquet")
    table = data.to_table(columns=["t", "n"], filter=pc.starts_with(pc.field("t"), STAT)
                          | (pc.field("t") == "version_counts"))
    stats: dict[str, int] = {}
    for t, n in zip(table.column("t").to_pylist(), table.column("n").to_pylist(), strict=True):
        name = t[len(STAT):] if t.startswith(STAT) else "instances"
        stats[name] = stats.get(name, 0) + int(n)
    return stats


