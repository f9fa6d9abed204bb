"""Spark settings sized from the input for any master, and the job's module layout (issue 12, items 4-5)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from backend.pipeline import job, state_store
from backend.pipeline.spark import (
    MAX_PARTITIONS,
    PARTITIONS_ENV,
    SMALL_RUN_BYTES,
    SMALL_RUN_PARTITIONS,
    size_session,
    sized_settings,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("input_bytes", "cores", "expected"), [
    (0, 2, SMALL_RUN_PARTITIONS),    # nothing to read: a small run
    (SMALL_RUN_BYTES, 64, SMALL_RUN_PARTITIONS),  # small whatever the cores
    (10 * 2**20, 2, 4),              # a few MiB: 2 x cores
    (400 * 2**20, 2, 50),            # 400 MiB of Parquet x 8 / 64 MiB
    (400 * 2**20, 64, 128),          # a big cluster: never fewer than 2 x cores
    (100 * 2**30, 8, MAX_PARTITIONS),  # capped; AQE coalesces what is too small
])
def test_shuffle_partitions_follow_the_input_and_the_cores(input_bytes: int, cores: int, expected: int) -> None:
    assert sized_settings(input_bytes, cores).shuffle_partitions == expected


def test_size_session_sets_the_sql_settings_and_honours_the_override(spark: Any, monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    sized = size_session(spark, 400 * 2**20)
    assert spark.conf.get("spark.sql.shuffle.partitions") == str(sized.shuffle_partitions)
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled") == "true"
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == str(sized.broadcast_bytes)
    monkeypatch.setenv(PARTITIONS_ENV, "7")
    assert size_session(spark, 400 * 2**20).shuffle_partitions == 7
    assert spark.conf.get("spark.sql.shuffle.partitions") == "7"


def test_small_inputs_get_the_small_run_settings_and_large_ones_do_not(spark: Any) -> None:
    small, large = sized_settings(SMALL_RUN_BYTES, 2), sized_settings(SMALL_RUN_BYTES + 1, 2)
    assert small.small and not small.whole_stage_codegen and small.shuffle_partitions == SMALL_RUN_PARTITIONS
    assert not large.small and large.whole_stage_codegen and large.shuffle_partitions == 4
    # the job decides on its input plus its state: a small read over a large state is not small
    assert not sized_settings(0, 2, small=False).small
    try:
        size_session(spark, 0)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        assert spark.conf.get("spark.sql.shuffle.partitions") == str(SMALL_RUN_PARTITIONS)
    finally:
        size_session(spark, 400 * 2**20)
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "50"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_job_does_not_import_the_cli_and_nothing_under_backend_edits_sys_path() -> None:
    assert "backend.pipeline.cli" not in _imports(ROOT / "backend" / "pipeline" / "job.py")
    edits = [str(p.relative_to(ROOT)) for p in (ROOT / "backend").rglob("*.py")
             if "sys.path.insert" in p.read_text(encoding="utf-8") or "sys.path.append" in p.read_text(encoding="utf-8")]
    assert edits == []
    assert "backend.pipeline.cli" in _imports(ROOT / "spark_analyze.py")  # the spark-submit entry file


def test_the_state_store_names_every_count_table_the_job_writes() -> None:
    assert tuple(job.COUNT_TABLES) == state_store.COUNT_TABLE_NAMES


def test_the_driver_listens_on_loopback_unless_the_fleet_file_names_an_address() -> None:
    from backend.config import parse_fleet
    from backend.pipeline.spark import LOOPBACK, driver_address

    assert driver_address("local[*]", None) == LOOPBACK == "127.0.0.1"
    assert driver_address("spark://10.0.0.9:7077", None) == LOOPBACK  # a remote master needs the explicit setting
    assert driver_address("spark://10.0.0.9:7077", "10.0.0.5") == "10.0.0.5"
    assert driver_address(None, None) is None  # spark-submit chose the driver's address itself
    fleet = parse_fleet('[settings]\nspark_driver_host = "10.0.0.5"\n', source="f.toml")
    assert fleet.settings.spark_driver_host == "10.0.0.5"
    assert parse_fleet("", source="f.toml").settings.spark_driver_host is None
