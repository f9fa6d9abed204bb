"""The one pass per instance equals the row-level reference transforms, and the job takes no extra actions."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from backend.pipeline import instances as I
from backend.pipeline import rules as R
from backend.pipeline import transforms as T
from tests.unit.pipeline.fleet import T0, frame, instance_id, rows_for, small_fleet

ROOT = Path(__file__).resolve().parents[3]


def _fleet() -> list[dict[str, Any]]:
    """small_fleet with rule-breaking producers, a key reported twice, a list spelling and an old client."""
    rows = small_fleet()
    rows += rows_for("B1", {"enable.idempotence": "TRUE", "acks": "1", "retries": "0",
                            "max.in.flight.requests.per.connection": "9", "client.id": "producer-3"},
                     client_id=None)
    rows += rows_for("B2", {"batch.size": "0", "buffer.memory": "10", "acks": "-1"}, cluster="west")
    twice = rows_for("D1", {"acks": "all", "linger.ms": "5"}, cluster="west")
    rows += twice + twice  # one file ingested twice
    rows += rows_for("L1", {"partition.assignment.strategy": "[a, b]", "group.id": "g2",
                            "session.timeout.ms": "1000", "heartbeat.interval.ms": "3000"},
                     client_type="consumer", software=("apache-kafka-java", "2.0.0"))
    rows += rows_for("L1", {"group.id": "g2"}, client_type="consumer",
                     at=T0 - timedelta(minutes=5))  # older: ignored
    rows += rows_for("X1", {"transactional.id": None, "acks": "1"}, client_type=None, cluster="west")
    return rows


@pytest.fixture(scope="module")
def rows(spark: SparkSession) -> DataFrame:
    return frame(spark, _fleet()).cache()


@pytest.fixture(scope="module")
def inst(rows: DataFrame) -> DataFrame:
    return I.instance_rows(rows).cache()


def test_one_row_per_instance_with_the_latest_snapshot_entries(rows: DataFrame, inst: DataFrame) -> None:
    latest = T.latest_snapshots(rows)
    assert inst.count() == inst.select("client_instance_id").distinct().count() == 14
    exploded = inst.select(*T.INSTANCE_COLUMNS, F.explode("entries").alias("e")).select(
        *T.INSTANCE_COLUMNS, "e.key", "e.value", "e.raw_value", "e.type", "e.is_default")
    reference = T.normalized(latest).select(*T.INSTANCE_COLUMNS, "key", "value", "raw_value", "type",
                                            "is_default")
    assertDataFrameEqual(exploded, reference)
    (l1,) = inst.where(F.col("client_instance_id") == instance_id("L1")).collect()
    assert (l1["rows_read"], l1["snapshots_read"]) == (5, 2)
    (d1,) = inst.where(F.col("client_instance_id") == instance_id("D1")).collect()
    assert [e["key"] for e in d1["entries"]] == ["acks", "linger.ms"] and d1["rows_read"] == 4


def test_one_aggregation_gives_every_count_table(rows: DataFrame, inst: DataFrame) -> None:
    latest = T.latest_snapshots(rows)
    frame_ = inst.select(F.struct(*I.INSTANCE_FIELDS).alias("plus"),
                         F.lit(None).cast(I.INSTANCE_SCHEMA).alias("minus"),
                         F.struct(F.col("rows_read")).alias("stats"))
    counts = I.tallies(I.tally_records(frame_)).cache()
    reference = {"value_counts": T.value_counts(latest), "group_counts": T.group_counts(latest),
                 "version_counts": T.version_counts(latest), "client_id_counts": T.client_id_counts(latest)}
    for name, expected in reference.items():
        assert expected.count() > 0, name
        assertDataFrameEqual(I.count_table(counts, name), expected.select(*I.COUNT_LAYOUT[name][0], "n"))
    (stat,) = counts.where(F.col("t") == I.STAT + "rows_read").collect()
    assert stat["n"] == len(_fleet())


def test_a_delta_folds_into_the_stored_tally(spark: SparkSession, rows: DataFrame, inst: DataFrame) -> None:
    later = rows_for("P3", {"acks": "0", "linger.ms": "7"}, at=T0 + timedelta(hours=1))
    before = inst.select(F.struct(*I.INSTANCE_FIELDS).alias("plus"),
                         F.lit(None).cast(I.INSTANCE_SCHEMA).alias("minus"),
                         F.struct(F.lit(1).cast("long").alias("x")).alias("stats"))
    stored = I.tallies(I.tally_records(before))
    new = I.instance_rows(frame(spark, later))
    fields = [F.col(c) for c in I.INSTANCE_FIELDS]
    joined = new.select("client_instance_id", F.struct(*fields).alias("n")).join(
        inst.select("client_instance_id", F.struct(*fields).alias("o")), "client_instance_id", "left")
    delta = joined.select(F.when(I.later("n", "o"), F.col("n")).alias("plus"),
                          F.when(I.later("n", "o"), F.col("o")).alias("minus"),
                          F.struct(F.lit(1).cast("long").alias("x")).alias("stats"))
    merged = I.tallies(I.stored_records(stored).unionByName(I.tally_records(delta)))
    after = T.latest_snapshots(rows.unionByName(frame(spark, later)))
    assertDataFrameEqual(I.count_table(merged, "value_counts"), T.value_counts(after))


def test_the_rules_in_one_projection_equal_one_union_per_rule(rows: DataFrame, inst: DataFrame) -> None:
    configs = T.instance_configs(T.latest_snapshots(rows))
    expected = R.instance_alerts(configs)
    got = R.instance_alerts_projection(I.with_cfg(inst))
    assert {r["rule_id"] for r in expected.collect()} >= {"CC001", "CC002", "CC003", "CC006",
                                                         "CC009", "CC014", "CC015"}
    assertDataFrameEqual(got, expected)
    assertDataFrameEqual(R.too_old_clients(I.with_cfg(inst)), R.too_old_clients(configs))


def test_the_job_takes_no_action_only_to_count() -> None:
    """No count() or collect() in the job: every summary figure comes from work the run does."""
    tree = ast.parse((ROOT / "backend" / "pipeline" / "job.py").read_text(encoding="utf-8"))
    calls = [node.func.attr for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
    assert calls and not {"count", "collect", "toPandas", "first", "take", "show"} & set(calls)


def test_results_on_the_driver_equal_the_spark_transforms(spark: SparkSession) -> None:
    """results.py (pandas, from the count tables) against the reference Spark transforms."""
    from datetime import UTC, datetime

    from backend.pipeline import results as RS
    from backend.store.config_schemas import spark_schema
    from tests.unit.pipeline.test_counts import _fleet as counts_fleet

    latest = T.latest_snapshots(frame(spark, _fleet() + counts_fleet()[len(small_fleet()):])).cache()
    counts = {"value_counts": T.value_counts(latest), "group_counts": T.group_counts(latest),
              "version_counts": T.version_counts(latest)}
    tables = RS.results_tables({name: df.toPandas() for name, df in counts.items()})
    dist = T.distributions(latest)
    reference = {
        "distributions": dist, "default_share": T.default_share(latest),
        "numeric_summary": T.numeric_summary(latest), "drift_clusters": T.drift_clusters(dist),
        "drift_keys": T.drift_keys(dist, T.drift_clusters(dist)), "group_drift": T.group_drift(latest),
        "client_versions": T.client_versions(latest),
    }
    now = datetime.now(UTC)
    for name, expected in reference.items():
        schema = spark_schema(name)
        columns = [f.name for f in schema.fields if f.name not in ("computed_at", "schema_version")]
        got = spark.createDataFrame(RS.to_arrow(tables[name], name, now).to_pylist(), schema)
        assert expected.count() > 0, name
        assertDataFrameEqual(got.select(*columns),
                             expected.select(*[F.col(c).cast(schema[c].dataType) for c in columns]))
    assert any(r is None for r in tables["drift_keys"]["client_type"])  # untyped clients kept
    fleet = RS.group_disagreement_alerts(tables["group_drift"])
    assert {a["group_id"] for a in fleet} == {"orders"} and all(a["keys"] for a in fleet)
