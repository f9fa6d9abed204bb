"""The pipeline's incremental state under lake/_state/pipeline: three small tables the driver keeps.

- ``g<generation>-<hex>/heads.parquet``: one row per client instance, its latest snapshot (backend.pipeline.heads);
- ``g<generation>-<hex>/counts.parquet``: instances per (cluster, client type, group.id, key, spelling, type,
  is_default) over every instance's latest entries (what the value and group counts are made of);
- ``g<generation>-<hex>/alerts.parquet``: the per-instance rules' alerts of every instance (instance, rule, values);
- ``g<generation>-<hex>/values.parquet``: every instance's normalised value of each watched key it reports (the keys
  the client-config policies name: backend.pipeline.watched), what results/client_instances is made of;
- ``state.json`` (format 8): the current generation, its tables' directory, the client_configs files folded in,
  the broker versions CC018 last saw, the watched keys values.parquet covers, and the generation whose results
  tables are current. It is the commit: written
  last and conditionally, over the version the run read (S3 If-Match, a compare-and-rename locally), so a run that
  stops anywhere leaves the previous state current, and of two runs that read the same state only one commits (the
  other gets PipelineConflict and removes its generation directory). The results tables are switched after the
  commit, each to the run's generation only if older (backend.store.tables); a run that finds them behind the state
  (a crash between the two) writes them again from the state.

A generation directory is written whole before state.json names it and is never changed after; older ones are
deleted after a commit (never a newer one: another run may be writing it).
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.pipeline.heads import HEAD_SCHEMA
from backend.store.atomic import commit_json, create_parquet, read_json, read_json_versioned, remove_stale_temps
from backend.store.commit import CommitConflict, delete_quietly
from backend.store.config_schemas import SCHEMA_VERSION
from backend.store.location import parse_lake

STATE_DIR = "_state/pipeline"
STATE = "state.json"
# 8: values.parquet and the watched keys (the instances behind client findings, issue 39). 7: the processed files and
# broker versions inside state.json (one commit), results switched after it. Older formats (6: processed_files.json
# and broker_versions.json beside it; 5: Spark-written heads, entries and tallies) are rebuilt by a full run.
STATE_FORMAT = 8
COUNT_SCHEMA = pa.schema([
    ("cluster_id", pa.string()), ("client_type", pa.string()), ("group_id", pa.string()), ("key", pa.string()),
    ("raw_value", pa.string()), ("type", pa.string()), ("is_default", pa.bool_()), ("n", pa.int64()),
])
ALERT_SCHEMA = pa.schema([("client_instance_id", pa.string()), ("rule_id", pa.string()),
                          ("observed_json", pa.string())])
VALUE_SCHEMA = pa.schema([("client_instance_id", pa.string()), ("key", pa.string()), ("value", pa.string())])
SCHEMAS = {"heads": HEAD_SCHEMA, "counts": COUNT_SCHEMA, "alerts": ALERT_SCHEMA, "values": VALUE_SCHEMA}
_GENERATION_DIR = re.compile(r"^g(\d+)-[0-9a-f]+$")


class PipelineConflict(CommitConflict):
    """Another analyze run committed the pipeline's state first; this run's state and results were dropped."""


@dataclass
class PipelineState:
    """The current incremental state, as recorded in state.json."""

    generation: int
    tables: str  # the generation directory holding heads, counts and alerts
    window_days: float | None
    processed_files: list[str] = field(default_factory=list)  # client_configs files folded in (relative paths)
    broker_versions: list[list[str]] = field(default_factory=list)  # what CC018 last compared with
    results_generation: int = 0  # the generation whose results tables are current
    watched_keys: list[str] = field(default_factory=list)  # the keys values.parquet covers

    def to_json(self) -> dict[str, object]:
        return {"format": STATE_FORMAT, "schema_version": SCHEMA_VERSION, "generation": self.generation,
                "tables": self.tables, "window_days": self.window_days, "processed_files": self.processed_files,
                "broker_versions": self.broker_versions, "results_generation": self.results_generation,
                "watched_keys": self.watched_keys}


@dataclass
class StateRead:
    """What a run found in state.json: the usable state (None: a full run), the version to commit over, and the
    generation stored there whatever its format (the next one is above it)."""

    state: PipelineState | None
    version: str | None
    generation: int


class LakePaths:
    """Paths of one lake for pyarrow (listing, state files) and for Spark."""

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


def read_state(paths: LakePaths) -> StateRead:
    """The recorded state with its version; ``state`` is None when absent, of another format or incomplete."""
    meta, version = read_json_versioned(paths.where, paths.path(STATE_DIR, STATE))
    generation = 0
    if isinstance(meta, dict):
        try:
            generation = max(0, int(meta.get("generation") or 0))
        except (TypeError, ValueError):
            generation = 0
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT or meta.get("schema_version") != SCHEMA_VERSION:
        return StateRead(None, version, generation)
    try:
        state = PipelineState(int(meta["generation"]), str(meta["tables"]), meta.get("window_days"),
                              [str(f) for f in meta.get("processed_files") or []],
                              [list(map(str, v)) for v in meta.get("broker_versions") or []],
                              int(meta.get("results_generation") or 0),
                              sorted(str(k) for k in meta.get("watched_keys") or []))
    except (KeyError, TypeError, ValueError):
        return StateRead(None, version, generation)
    if not all(paths.exists(STATE_DIR, state.tables, f"{name}.parquet") for name in SCHEMAS):
        return StateRead(None, version, generation)
    return StateRead(state, version, generation)


def load_state(paths: LakePaths) -> PipelineState | None:
    """The recorded incremental state, or None when absent, of another format or incomplete."""
    return read_state(paths).state


def commit_state(paths: LakePaths, state: PipelineState, expected: str | None) -> str:
    """Commit state.json over the version the run read (None: only if there is none); PipelineConflict otherwise."""
    try:
        return commit_json(paths.where, paths.path(STATE_DIR, STATE), state.to_json(), expected)
    except CommitConflict as exc:
        raise PipelineConflict(exc.path, f"another analyze run committed the pipeline's state first ({exc.detail}); "
                               f"generation {state.generation} of this run was not committed and its files were "
                               "removed. Is a second analyze (serve, a cron job, spark-submit) running on this "
                               "lake?") from None


def empty_tables() -> dict[str, pa.Table]:
    """The state of a lake nothing has been folded into."""
    return {name: schema.empty_table() for name, schema in SCHEMAS.items()}


def read_tables(paths: LakePaths, state: PipelineState) -> dict[str, pa.Table]:
    """A generation's heads, counts, alerts and values."""
    return {name: pq.read_table(paths.path(STATE_DIR, state.tables, f"{name}.parquet"), filesystem=paths.fs,
                                schema=schema) for name, schema in SCHEMAS.items()}


def write_tables(paths: LakePaths, tables: dict[str, pa.Table], generation: int) -> str:
    """Write a new generation directory (each file created whole, under a name of this run's); returns its name."""
    name = f"g{generation:06d}-{uuid.uuid4().hex[:8]}"
    for table, schema in SCHEMAS.items():
        create_parquet(paths.where, paths.path(STATE_DIR, name, f"{table}.parquet"),
                       tables[table].select(schema.names).cast(schema))
    return name


def drop_tables(paths: LakePaths, name: str) -> None:
    """Remove a generation directory this run wrote and did not commit."""
    delete_quietly(paths.where, [paths.path(STATE_DIR, name, f"{table}.parquet") for table in SCHEMAS])
    try:
        paths.fs.delete_dir(paths.path(STATE_DIR, name))
    except (FileNotFoundError, OSError):
        pass


def cleanup(paths: LakePaths, state: PipelineState) -> None:
    """Delete what the committed state no longer names: older generations and older formats' files.

    Never a generation above the committed one (another run may be writing it), never a lock file.
    """
    base = paths.path(STATE_DIR)
    remove_stale_temps(paths.where, base)
    for info in paths.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True)):
        name = info.base_name
        if name in (STATE, state.tables) or name.startswith("."):
            continue  # lock files, and temp files of a write in progress (stale ones: remove_stale_temps)
        match = _GENERATION_DIR.match(name)
        if match is not None and int(match.group(1)) >= state.generation:
            continue
        try:
            if info.type == pafs.FileType.Directory:
                paths.fs.delete_dir(info.path)
            else:
                paths.fs.delete_file(info.path)
        except FileNotFoundError:
            pass
