"""Ingest's writes to the lake: client_configs, quarantine, ingest_stats and reader progress."""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Iterable
from datetime import datetime

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.configs.record import Rejected, Snapshot
from backend.pipeline.schema import SCHEMA_VERSION, arrow_schema, empty_table

STATE_DIR = "_state/ingest"


def lake_filesystem(lake: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow filesystem and root path of a lake given as a path or URI (s3a:// works)."""
    if "://" not in lake:
        local = pafs.LocalFileSystem()
        return local, posixpath.abspath(lake)
    if lake.startswith("s3a://"):
        lake = "s3://" + lake[len("s3a://"):]
    if lake.startswith("file://"):
        return pafs.LocalFileSystem(), lake[len("file://"):]
    fs, path = pafs.FileSystem.from_uri(lake)
    return fs, path


def write_atomic(fs: pafs.FileSystem, path: str, table: pa.Table) -> None:
    """Write a Parquet file to a hidden temp name in the same directory, then rename it."""
    directory = posixpath.dirname(path)
    fs.create_dir(directory, recursive=True)
    tmp = posixpath.join(directory, f".tmp-{uuid.uuid4().hex}.parquet")
    with fs.open_output_stream(tmp) as sink:
        pq.write_table(table, sink, compression="zstd")
    fs.move(tmp, path)


def snapshot_rows(snapshots: Iterable[Snapshot], ingested_at: datetime) -> pa.Table:
    """Explode snapshots into client_configs rows (one per key)."""
    cols: dict[str, list[object]] = {f.name: [] for f in arrow_schema("client_configs")}
    for snap in snapshots:
        for entry in snap.configs:
            cols["snapshot_id"].append(snap.snapshot_id)
            cols["received_at"].append(snap.received_at)
            cols["cluster_id"].append(snap.cluster_id)
            cols["broker_id"].append(snap.broker_id)
            cols["client_instance_id"].append(snap.client_instance_id)
            cols["client_id"].append(snap.client_id)
            cols["client_type"].append(snap.client_type)
            cols["client_type_inferred"].append(snap.client_type_inferred)
            cols["client_software_name"].append(snap.client_software_name)
            cols["client_software_version"].append(snap.client_software_version)
            cols["principal"].append(snap.principal)
            cols["client_address"].append(snap.client_address)
            cols["key"].append(entry.key)
            cols["value"].append(entry.value)
            cols["type"].append(entry.type)
            cols["is_default"].append(entry.is_default)
            cols["source"].append(snap.source)
            cols["source_position"].append(snap.position)
            cols["ingested_at"].append(ingested_at)
            cols["schema_version"].append(SCHEMA_VERSION)
    return pa.table(cols, schema=arrow_schema("client_configs"))


def write_snapshots(lake: str, snapshots: list[Snapshot], ingested_at: datetime) -> list[str]:
    """Append snapshots to lake/client_configs, one file per received day; returns the paths."""
    fs, root = lake_filesystem(lake)
    by_day: dict[str, list[Snapshot]] = {}
    for snap in snapshots:
        by_day.setdefault(snap.received_at.date().isoformat(), []).append(snap)
    written = []
    for day, day_snaps in sorted(by_day.items()):
        table = snapshot_rows(day_snaps, ingested_at)
        if table.num_rows == 0:
            continue
        path = posixpath.join(root, "client_configs", f"date={day}", f"{uuid.uuid4().hex}.parquet")
        write_atomic(fs, path, table)
        written.append(path)
    return written


def write_quarantine(lake: str, rejected: list[Rejected], at: datetime) -> str | None:
    """Append rejected records to lake/quarantine; returns the file written, if any."""
    if not rejected:
        return None
    fs, root = lake_filesystem(lake)
    table = pa.table(
        {
            "quarantined_at": [at] * len(rejected),
            "source": [r.source for r in rejected],
            "position": [r.position for r in rejected],
            "reason": [r.reason for r in rejected],
            "detail": [r.detail for r in rejected],
            "raw_excerpt": [r.raw_excerpt for r in rejected],
            "schema_version": [SCHEMA_VERSION] * len(rejected),
        },
        schema=arrow_schema("quarantine"),
    )
    path = posixpath.join(root, "quarantine", f"date={at.date().isoformat()}",
                          f"{uuid.uuid4().hex}.parquet")
    write_atomic(fs, path, table)
    return path


def read_table(lake: str, name: str) -> pa.Table:
    """Read lake/<name> (a table or results/<name>); an empty table when it does not exist."""
    fs, root = lake_filesystem(lake)
    path = posixpath.join(root, name)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return empty_table(name.rsplit("/", 1)[-1])
    schema = arrow_schema(name.rsplit("/", 1)[-1])
    dataset = ds.dataset(path, filesystem=fs, format="parquet", schema=schema,
                         partitioning="hive", ignore_prefixes=[".", "_"])
    return dataset.to_table()


def append_ingest_stats(lake: str, rows: pa.Table) -> None:
    """Add one run's counters to results/ingest_stats (rewritten atomically)."""
    fs, root = lake_filesystem(lake)
    current = read_table(lake, "results/ingest_stats")
    merged = pa.concat_tables([current, rows.cast(arrow_schema("ingest_stats"))])
    write_atomic(fs, posixpath.join(root, "results", "ingest_stats", "part-0.parquet"), merged)


def load_state(lake: str, name: str) -> dict[str, object]:
    """Reader progress saved under lake/_state/ingest/<name>.json ({} when absent)."""
    fs, root = lake_filesystem(lake)
    path = posixpath.join(root, STATE_DIR, f"{name}.json")
    if fs.get_file_info(path).type != pafs.FileType.File:
        return {}
    with fs.open_input_stream(path) as src:
        return json.loads(src.read().decode("utf-8"))


def save_state(lake: str, name: str, state: dict[str, object]) -> None:
    """Atomically replace lake/_state/ingest/<name>.json."""
    fs, root = lake_filesystem(lake)
    directory = posixpath.join(root, STATE_DIR)
    fs.create_dir(directory, recursive=True)
    tmp = posixpath.join(directory, f".tmp-{uuid.uuid4().hex}.json")
    with fs.open_output_stream(tmp) as sink:
        sink.write(json.dumps(state, sort_keys=True).encode("utf-8"))
    fs.move(tmp, posixpath.join(directory, f"{name}.json"))
