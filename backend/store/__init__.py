"""The snapshot lake: schemas, atomic day-partitioned Parquet writes, retention and readers."""

from __future__ import annotations

from backend.store.lake import Lake, LakeError, LakeFile, new_poll_id, poll_id_time
from backend.store.schemas import SCHEMA_VERSION, SCHEMAS, TABLES, schema_for

__all__ = [
    "SCHEMAS",
    "SCHEMA_VERSION",
    "TABLES",
    "Lake",
    "LakeError",
    "LakeFile",
    "new_poll_id",
    "poll_id_time",
    "schema_for",
]
