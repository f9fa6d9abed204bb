"""Whole-table reads of the client-config side of the lake (client_configs, quarantine, results/<name>)."""

from __future__ import annotations

import posixpath

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from backend.store.atomic import write_parquet_atomic
from backend.store.config_schemas import arrow_schema, empty_table
from backend.store.location import LakeLocation, parse_lake


def _where(lake: str | LakeLocation) -> LakeLocation:
    return lake if isinstance(lake, LakeLocation) else parse_lake(lake)


def read_table(lake: str | LakeLocation, name: str) -> pa.Table:
    """Read lake/<name> (a table or results/<name>) with its declared schema; empty when it does not exist."""
    where = _where(lake)
    path = where.path(name)
    table = name.rsplit("/", 1)[-1]
    if where.fs.get_file_info(path).type != pafs.FileType.Directory:
        return empty_table(table)
    dataset = ds.dataset(path, filesystem=where.fs, format="parquet", schema=arrow_schema(table),
                         partitioning="hive", ignore_prefixes=[".", "_"])
    return dataset.to_table()


def replace_table(lake: str | LakeLocation, name: str, table: pa.Table) -> str:
    """Replace lake/<name> by one Parquet file part-0.parquet, written atomically; return its path."""
    where = _where(lake)
    path = posixpath.join(where.path(name), "part-0.parquet")
    write_parquet_atomic(where, path, table)
    return path
