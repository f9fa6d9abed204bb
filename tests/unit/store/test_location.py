"""The one lake-location parser and resolver: plain path == file://, remote schemes, resolution order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backend.store.atomic import read_json, write_json_atomic, write_parquet_atomic
from backend.store.location import DEFAULT_LAKE, LakeLocationError, parse_lake, resolve_lake


def test_plain_path_and_file_uri_give_the_same_root(tmp_path: Path) -> None:
    plain = parse_lake(str(tmp_path / "lake"))
    uri = parse_lake(f"file://{tmp_path}/lake")
    assert plain.root == uri.root == str(tmp_path / "lake")
    assert plain.local and uri.local
    assert plain.spark_uri == uri.spark_uri == f"file://{tmp_path}/lake"
    assert parse_lake("file://localhost" + str(tmp_path)).root == str(tmp_path)


def test_relative_path_is_absolute_from_the_working_directory() -> None:
    assert parse_lake("some/lake").root == os.path.abspath("some/lake")


@pytest.mark.parametrize("bad", ["", "   ", "file://evil.example/tmp/x", "ftp://h/x", "file:///tmp/x?endpoint=1"])
def test_bad_locations_are_refused_with_a_reason(bad: str) -> None:
    with pytest.raises(LakeLocationError):
        parse_lake(bad)


def test_s3a_is_read_as_s3_and_spark_gets_s3a() -> None:
    where = parse_lake("s3a://bucket/lake/?region=us-east-1")
    assert not where.local
    assert where.root == "bucket/lake"
    assert where.spark_uri == "s3a://bucket/lake"


def test_resolution_order_is_flag_then_env_then_fleet_file_then_default() -> None:
    env = {"FLEETVIEW_LAKE": "/env/lake"}
    assert resolve_lake("/flag", fleet_lake_path="/file", environ=env) == "/flag"
    assert resolve_lake(None, fleet_lake_path="/file", environ=env) == "/env/lake"
    assert resolve_lake(None, fleet_lake_path="/file", environ={}) == "/file"
    assert resolve_lake(None, environ={}) == DEFAULT_LAKE
    assert resolve_lake("  ", environ={"FLEETVIEW_LAKE": ""}) == DEFAULT_LAKE


def test_atomic_writes_leave_no_temp_file_and_read_back(tmp_path: Path) -> None:
    import pyarrow as pa

    where = parse_lake(str(tmp_path))
    write_json_atomic(where, where.path("_state", "x.json"), {"a": 1})
    assert read_json(where, where.path("_state", "x.json")) == {"a": 1}
    assert read_json(where, where.path("_state", "missing.json"), {}) == {}
    write_parquet_atomic(where, where.path("t", "f.parquet"), pa.table({"v": [1, 2]}))
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["f.parquet"]
    assert sorted(p.name for p in (tmp_path / "_state").iterdir()) == ["x.json"]
