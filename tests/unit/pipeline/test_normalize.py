"""Value normalisation: equal-to-the-client spellings count as one value, raw spellings kept."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from backend.pipeline.normalize import normalize_value, normalized_value_col
from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import frame, rows_for

CASES = [
    ("acks", "-1", "all"), ("acks", "all", "all"), ("acks", "ALL", "all"), ("acks", "1", "1"),
    ("linger.ms", "-1", "-1"),  # only acks maps -1
    ("enable.idempotence", "True", "true"), ("enable.idempotence", " FALSE ", "false"),
    ("bootstrap.servers", "a:9092, b:9092", "a:9092,b:9092"),
    ("bootstrap.servers", "[a:9092, b:9092]", "a:9092,b:9092"),
    ("bootstrap.servers", "a:9092,b:9092", "a:9092,b:9092"),
    ("interceptor.classes", "[]", ""), ("client.id", "[x]", "x"),
    ("client.id", " padded ", " padded "), ("client.id", None, None),
]


@pytest.mark.parametrize(("key", "raw", "expected"), CASES)
def test_python_rule(key: str, raw: str | None, expected: str | None) -> None:
    assert normalize_value(key, raw) == expected


def test_spark_column_equals_python(spark: SparkSession) -> None:
    df = spark.createDataFrame([(k, v) for k, v, _ in CASES], "key string, value string")
    got = [(r["key"], r["value"], r["n"]) for r in
           df.select("key", "value", normalized_value_col().alias("n")).collect()]
    assert got == [(k, v, normalize_value(k, v)) for k, v, _ in CASES]


def _fleet() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    spellings = [("-1", "True", "a:1, b:2"), ("all", "true", "[a:1, b:2]"),
                 ("all", "TRUE", "a:1,b:2"), ("1", "false", "a:1,b:2")]
    for i, (acks, idem, boot) in enumerate(spellings):
        rows += rows_for(f"N{i}", {"acks": acks, "enable.idempotence": idem,
                                   "bootstrap.servers": boot, "group.id": "g"})
    return rows


def test_pipeline_counts_normalised_values_and_keeps_raw(spark: SparkSession) -> None:
    latest = T.latest_snapshots(frame(spark, _fleet()))
    for dist in (T.distributions(latest), T.distributions_from_counts(T.value_counts(latest))):
        got = {(r["key"], r["value"]): (r["instance_count"], r["raw_values"])
               for r in dist.collect()}
        assert got[("acks", "all")] == (3, ["-1", "all"])
        assert got[("acks", "1")] == (1, ["1"])
        assert ("acks", "-1") not in got
        assert got[("enable.idempotence", "true")] == (3, ["TRUE", "True", "true"])
        assert got[("bootstrap.servers", "a:1,b:2")] == (4, ["[a:1, b:2]", "a:1, b:2", "a:1,b:2"])
    # Group members that only spell a value differently do not disagree.
    drift = T.group_drift_from_counts(T.group_counts(latest))
    assert {r["key"] for r in drift.collect()} == {"acks", "enable.idempotence"}
    (row,) = drift.where(F.col("key") == "acks").collect()
    assert (row["members"], row["distinct_values"]) == (4, 2)
    # The rules see the normalised value.
    cfg = {r["client_id"]: r["cfg"]["acks"] for r in T.instance_configs(latest).collect()}
    assert cfg == {"N0": "all", "N1": "all", "N2": "all", "N3": "1"}


def test_duckdb_sql_equals_python() -> None:
    import duckdb

    from backend.pipeline.normalize import normalized_value_sql

    con = duckdb.connect()
    con.execute("CREATE TABLE t(i INTEGER, key VARCHAR, value VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, k, v) for i, (k, v, _) in enumerate(CASES)])
    got = con.execute(f"SELECT key, value, {normalized_value_sql()} FROM t ORDER BY i").fetchall()
    assert got == [(k, v, normalize_value(k, v)) for k, v, _ in CASES]


def test_docs_list_every_rule() -> None:
    from pathlib import Path

    from backend.pipeline.normalize import markdown

    assert markdown() in Path("docs/normalisation.md").read_text(encoding="utf-8")
