"""Lake locations: plain paths and file:// URIs map to the same files for pyarrow and Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.configs.ingest import ingest_sink
from backend.pipeline.spark import DEFAULT_MASTER, MASTER_ENV, resolve_master
from backend.pipeline.state_store import LakePaths as _Lake
from tests.unit.configs.helpers import cfg, record, write_jsonl


def test_plain_path_and_file_uri_are_the_same_lake(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "sink" / "b.jsonl", [record([cfg("acks", "all")])])
    ingest_sink(f"file://{tmp_path / 'lake'}", tmp_path / "sink")
    plain, uri = _Lake(str(tmp_path / "lake")), _Lake(f"file://{tmp_path / 'lake'}")
    assert plain.config_files() == uri.config_files() and len(plain.config_files()) == 1
    assert plain.spark_path("results", "x") == uri.spark_path("results", "x") == (
        f"file://{tmp_path / 'lake'}/results/x")


def test_master_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASTER_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert resolve_master(None) == DEFAULT_MASTER
    assert resolve_master("spark://h:7077") == "spark://h:7077"
    monkeypatch.setenv(MASTER_ENV, "local[3]")
    assert resolve_master(None) == "local[3]"
    monkeypatch.delenv(MASTER_ENV)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1234")
    assert resolve_master(None) is None
