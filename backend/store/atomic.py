"""The one atomic writer of the lake: Parquet and JSON files appear whole or not at all."""

from __future__ import annotations

import json
import os
import posixpath
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.store.location import LakeLocation

TEMP_PREFIX = ".tmp-"
STALE_TEMP_AGE_S = 3600.0


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(lake: LakeLocation, path: str, data: bytes) -> None:
    """Write bytes to path atomically: temp file, fsync, rename locally; one upload on object stores."""
    directory = posixpath.dirname(path)
    lake.fs.create_dir(directory, recursive=True)
    if not lake.local:
        # Object stores publish an object only when its upload completes.
        with lake.fs.open_output_stream(path) as out:
            out.write(data)
        return
    tmp = posixpath.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)


def parquet_bytes(table: pa.Table) -> bytes:
    """Encode a table as one zstd-compressed Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def write_parquet_atomic(lake: LakeLocation, path: str, table: pa.Table) -> None:
    """Write one Parquet file atomically (readers see the old state or the whole new file)."""
    write_bytes_atomic(lake, path, parquet_bytes(table))


def write_json_atomic(lake: LakeLocation, path: str, value: Any) -> None:
    """Replace a JSON state file atomically."""
    write_bytes_atomic(lake, path, json.dumps(value, sort_keys=True, default=str).encode("utf-8"))


def read_json(lake: LakeLocation, path: str, default: Any = None) -> Any:
    """Read a JSON state file; default when it does not exist."""
    if lake.fs.get_file_info(path).type != pafs.FileType.File:
        return default
    with lake.fs.open_input_stream(path) as src:
        return json.loads(src.read().decode("utf-8"))


def remove_stale_temps(lake: LakeLocation, directory: str, *, max_age_s: float = STALE_TEMP_AGE_S) -> list[str]:
    """Delete temp files older than max_age_s left in directory by a crashed writer (local lakes only)."""
    if not lake.local:
        return []
    removed: list[str] = []
    now = time.time()
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for name in names:
        if not name.startswith(TEMP_PREFIX):
            continue
        path = os.path.join(directory, name)
        try:
            if now - os.path.getmtime(path) > max_age_s:
                os.unlink(path)
                removed.append(path)
        except FileNotFoundError:
            continue
    return removed
