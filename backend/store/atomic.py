"""The one atomic writer of the lake: Parquet and JSON files appear whole or not at all.

Plain writes (``write_*_atomic``) replace whatever is there: data files under names no other writer uses. Commit
points (a manifest, a pointer, a progress file) go through ``commit_json`` with the version their writer read, so a
second writer loses with ``CommitConflict`` instead of overwriting (backend/store/commit.py: S3 If-None-Match /
If-Match through boto3, O_EXCL links and flock'ed compare-and-rename on a local disk).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.store import commit
from backend.store.commit import TEMP_PREFIX, CommitConflict
from backend.store.location import LakeLocation

__all__ = ["TEMP_PREFIX", "CommitConflict", "commit_json", "create_bytes", "create_parquet", "json_bytes", "parquet_bytes", "read_json",
           "read_json_versioned", "remove_stale_temps", "write_bytes_atomic", "write_json_atomic",
           "write_parquet_atomic"]
STALE_TEMP_AGE_S = 3600.0


def write_bytes_atomic(lake: LakeLocation, path: str, data: bytes) -> None:
    """Write bytes to path atomically: temp file, fsync, rename locally; one PUT on object stores."""
    commit.put(lake, path, data)


def create_bytes(lake: LakeLocation, path: str, data: bytes) -> None:
    """Write bytes to path only if nothing is there (If-None-Match: *); CommitConflict when another writer was first."""
    commit.create(lake, path, data)


def parquet_bytes(table: pa.Table) -> bytes:
    """Encode a table as one zstd-compressed Parquet file."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def write_parquet_atomic(lake: LakeLocation, path: str, table: pa.Table) -> None:
    """Write one Parquet file atomically (readers see the old state or the whole new file)."""
    write_bytes_atomic(lake, path, parquet_bytes(table))


def create_parquet(lake: LakeLocation, path: str, table: pa.Table) -> None:
    """Write one new Parquet file under a name nobody may have used (CommitConflict if one is there)."""
    create_bytes(lake, path, parquet_bytes(table))


def json_bytes(value: Any) -> bytes:
    """The JSON encoding of every state file."""
    return json.dumps(value, sort_keys=True, default=str).encode("utf-8")


def write_json_atomic(lake: LakeLocation, path: str, value: Any) -> None:
    """Replace a JSON file atomically, whatever is there (not for commit points: see commit_json)."""
    write_bytes_atomic(lake, path, json_bytes(value))


def read_json(lake: LakeLocation, path: str, default: Any = None) -> Any:
    """Read a JSON state file; default when it does not exist."""
    if lake.fs.get_file_info(path).type != pafs.FileType.File:
        return default
    with lake.fs.open_input_stream(path) as src:
        return json.loads(src.read().decode("utf-8"))


def read_json_versioned(lake: LakeLocation, path: str, default: Any = None) -> tuple[Any, str | None]:
    """A JSON commit point and its version (default and None when absent): what commit_json compares."""
    data, version = commit.read_versioned(lake, path)
    if data is None:
        return default, None
    return json.loads(data.decode("utf-8")), version


def commit_json(lake: LakeLocation, path: str, value: Any, expected: str | None) -> str:
    """Replace a JSON commit point only if it is still at version ``expected`` (None: only if absent).

    Raises CommitConflict when another writer committed first; returns the new version.
    """
    return commit.swap(lake, path, json_bytes(value), expected)


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
