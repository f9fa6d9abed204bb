"""The hash-aggregate passes (heads, entries, tally, alerts) equal the reference transforms, and plan as hash aggregates."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from backend.pipeline import alerts as A
from backend.pipeline import instances as I
from backend.pipeline import rules as R
from backend.pipeline import tally as C
from backend.pipeline.rules import Rule
from backend.pipeline.spark import size_session
from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, frame, instance_id, rows_for, small_fleet

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 8  # the shuffle partitions of a run that is not small, on the 2-core test session


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
    # the settings of a run that is not small (whole-stage code generation on), as the big runs get
    assert size_session(spark, 0, small=False).shuffle_partitions == PARTITIONS
    return frame(spark, _fleet()).cache()


@pytest.fixture(scope="module")
def passes(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
    heads = I.instance_heads(rows).cache()
    return heads, I.head_entries(rows, heads, PARTITIONS).cache()


def _records(heads: DataFrame, entries: DataFrame, sign: int = 1) -> DataFrame:
    return C.count_records(heads, entries, sign)


def _count_table(counts: DataFrame, name: str) -> DataFrame:
    keys, columns = C.COUNT_LAYOUT[name]
    picked = counts.where(F.col("t") == name).select(
        *[F.col(c).alias(k) for k, c in zip(keys, columns, strict=True)], "n")
    return picked.withColumn("is_default", F.col("is_default").cast("boolean")) if "is_default" in keys else picked


def test_heads_and_entries_are_the_latest_snapshot(rows: DataFrame, passes: tuple[DataFrame, DataFrame]) -> None:
    heads, entries = passes
    latest = T.normalized(T.latest_snapshots(rows))
    assert heads.count() == heads.select(I.IDS).distinct().count() == 14
    assertDataFrameEqual(heads.select(*I.INSTANCE_COLUMNS), T.instances(latest))
    assertDataFrameEqual(entries, latest.select(*I.ENTRY_FIELDS))
    (l1,) = heads.where(F.col(I.IDS) == instance_id("L1")).collect()
    assert (l1["rows_read"], l1["snapshots_read"]) == (5, 2)
    (d1,) = heads.where(F.col(I.IDS) == instance_id("D1")).collect()
    assert d1["rows_read"] == 4 and entries.where(F.col(I.IDS) == instance_id("D1")).count() == 2


def test_ties_and_clashing_keys_have_one_answer(spark: SparkSession) -> None:
    """Same received_at: the greater snapshot_id wins; a key reported twice with two values: the smaller."""
    low = rows_for("T1", {"acks": "1"}, snapshot="00000000-0000-4000-8000-000000000000")
    high = rows_for("T1", {"acks": "0", "linger.ms": "5"}, snapshot="ffffffff-ffff-4fff-bfff-ffffffffffff")
    clash = rows_for("K1", {"acks": "all"}) + rows_for("K1", {"acks": "1", "linger.ms": "5"})
    # K2: "-1" and "all" normalise to one value; of its two spellings the smaller is kept
    spellings = rows_for("K2", {"acks": "all"}) + rows_for("K2", {"acks": "-1"})
    rows = frame(spark, low + high + clash + spellings + spellings)
    heads = I.instance_heads(rows)
    entries = I.head_entries(rows, heads, PARTITIONS)
    got = {(r[I.IDS], r["key"]): (r["value"], r["raw_value"]) for r in entries.collect()}
    assert got == {(instance_id("T1"), "acks"): ("0", "0"), (instance_id("T1"), "linger.ms"): ("5", "5"),
                   (instance_id("K1"), "acks"): ("1", "1"), (instance_id("K1"), "linger.ms"): ("5", "5"),
                   (instance_id("K2"), "acks"): ("all", "-1")}
    (t1,) = heads.where(F.col(I.IDS) == instance_id("T1")).collect()
    assert t1["snapshot_id"].startswith("ffffffff") and t1["snapshots_read"] == 2


def test_latest_heads_of_a_base_and_its_segments(passes: tuple[DataFrame, DataFrame], spark: SparkSession) -> None:
    heads, _ = passes
    later = I.instance_heads(frame(spark, rows_for("P3", {"acks": "0"}, at=T0 + timedelta(hours=1))))
    latest = I.latest_heads(heads.unionByName(later))
    assert latest.count() == 14
    (p3,) = latest.where(F.col(I.IDS) == instance_id("P3")).collect()
    assert p3["received_at"] == (T0 + timedelta(hours=1)).replace(tzinfo=None)  # Spark: naive UTC


def test_one_aggregation_gives_every_count_table(rows: DataFrame, passes: tuple[DataFrame, DataFrame]) -> None:
    latest = T.latest_snapshots(rows)
    records = _records(*passes).unionByName(C.stat_records(passes[0], {"rows_read": F.col("rows_read")}))
    counts = C.tallies(records).cache()
    reference = {"value_counts": T.value_counts(latest), "group_counts": T.group_counts(latest),
                 "version_counts": T.version_counts(latest), "client_id_counts": T.client_id_counts(latest)}
    for name, expected in reference.items():
        assert expected.count() > 0, name
        assertDataFrameEqual(_count_table(counts, name), expected.select(*C.COUNT_LAYOUT[name][0], "n"))
    (stat,) = counts.where(F.col("t") == C.STAT + "rows_read").collect()
    assert stat["n"] == len(_fleet())


def test_a_delta_folds_into_the_stored_tally(spark: SparkSession, rows: DataFrame,
                                             passes: tuple[DataFrame, DataFrame]) -> None:
    heads, entries = passes
    later = frame(spark, rows_for("P3", {"acks": "0", "linger.ms": "7"}, at=T0 + timedelta(hours=1)))
    stored = C.tallies(_records(heads, entries))
    new_heads = I.instance_heads(later)
    old_heads = heads.join(new_heads.select(I.IDS), I.IDS, "left_semi")
    old_entries = entries.join(old_heads.select(I.IDS, "snapshot_id"), [I.IDS, "snapshot_id"], "left_semi")
    delta = _records(new_heads, I.head_entries(later, new_heads, PARTITIONS)).unionByName(
        _records(old_heads, old_entries, -1))
    merged = C.tallies(C.stored_records(stored).unionByName(delta))
    after = T.latest_snapshots(rows.unionByName(later))
    for name, counts in (("value_counts", T.value_counts), ("version_counts", T.version_counts)):
        assertDataFrameEqual(_count_table(merged, name), counts(after))


def test_the_rules_on_features_equal_one_scan_per_rule(rows: DataFrame, passes: tuple[DataFrame, DataFrame]) -> None:
    configs = T.instance_configs(T.latest_snapshots(rows))
    expected = T.instance_alerts(configs)
    got = A.instance_alerts(*passes, PARTITIONS)
    assert {r["rule_id"] for r in expected.collect()} >= {"CC001", "CC002", "CC003", "CC006",
                                                         "CC009", "CC014", "CC015"}
    assertDataFrameEqual(got, expected)
    heads, entries = passes
    with_group = heads.join(C.group_ids(entries), I.IDS, "left")
    assertDataFrameEqual(R.too_old_clients(with_group), T.too_old_clients(T._with_ids(configs)))


def test_every_rule_case_on_features_equals_the_reference(spark: SparkSession) -> None:
    """The crafted fire / near-miss instance of every rule (tests/unit/pipeline/test_rules.py)."""
    from tests.unit.pipeline.test_rules import _fleet as rule_fleet

    rows = frame(spark, rule_fleet())
    heads = I.instance_heads(rows)
    expected = T.instance_alerts(T.instance_configs(T.latest_snapshots(rows)))
    assert expected.count() >= 17
    assertDataFrameEqual(A.instance_alerts(heads, I.head_entries(rows, heads, PARTITIONS), PARTITIONS), expected)


def test_text_placeholders_compared_otherwise_are_refused() -> None:
    ok = Rule("X1", "info", "t", "r", "https://x", ("a", "b"),
              condition="{str:a} NOT IN ('x', 'y') AND coalesce({str:b}, 'z') <> 'w' AND {str:c} IS NOT NULL")
    assert A._plan((ok,)).literals == {k: ("w", "x", "y", "z") for k in "abc"}
    for condition in ("{str:a} LIKE 'x%'", "{str:a} = {str:b}", "length({str:a}) > 3", "'x' = {str:a}",
                      "coalesce({str:a}, {str:b}) = 'x'", "{str:a} > 'm'"):
        with pytest.raises(ValueError, match="literals"):
            A._plan((Rule("X2", "info", "t", "r", "https://x", ("a", "b"), condition=condition),))


def _plan_text(df: DataFrame) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_the_passes_plan_hash_aggregates_only(spark: SparkSession, tmp_path: Path) -> None:
    """No SortAggregate or ObjectHashAggregate (sort-based once a task holds 128 keys) in any pass,
    and the entries shuffle their rows once: every later step stays in those partitions."""
    size_session(spark, 0, small=False)
    frame(spark, _fleet()).write.parquet(str(tmp_path / "rows"))
    rows = spark.read.parquet(str(tmp_path / "rows"))
    heads = I.instance_heads(rows)
    heads.write.parquet(str(tmp_path / "heads"))
    written = spark.read.parquet(str(tmp_path / "heads"))
    entries = I.head_entries(rows, written, PARTITIONS)
    entries.write.parquet(str(tmp_path / "entries"))
    stored = spark.read.parquet(str(tmp_path / "entries"))
    plans = {
        "heads": heads, "entries": entries, "latest_heads": I.latest_heads(written),
        "tally": C.tallies(_records(written, stored)), "alerts": A.instance_alerts(written, stored, PARTITIONS),
    }
    for name, df in plans.items():
        text = _plan_text(df)
        assert "HashAggregate" in text, name
        assert "SortAggregate" not in text and "ObjectHashAggregate" not in text, (name, text)
        assert "Window" not in text, (name, text)
        # object buffers and the codegen fallback that took the old pass out of whole-stage codegen
        for call in ("collect_list(", "collect_set(", "array_sort(", "max_by(", "first("):
            assert call not in text, (name, call, text)
    # the rows and the heads are shuffled by instance (each exchange shows once per reader of it);
    # only the keys reported more than once are shuffled again, by key
    text = _plan_text(entries)
    exchanges = {line.split("Exchange ")[1].split("#")[0] for line in text.splitlines() if "Exchange hash" in line}
    assert exchanges == {"hashpartitioning(client_instance_id", "hashpartitioning(key"}, text
    assert text.count("ShuffledHashJoin") >= 3, text
    alerts = _plan_text(plans["alerts"])
    assert "Exchange hashpartitioning(client_instance_id#" in alerts and "SortMergeJoin" not in alerts, alerts


def test_the_job_takes_no_action_only_to_count() -> None:
    """No count() or collect() in the job: every summary figure comes from work the run does."""
    tree = ast.parse((ROOT / "backend" / "pipeline" / "job.py").read_text(encoding="utf-8"))
    calls = [node.func.attr for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]
    assert calls and not {"count", "collect", "toPandas", "first", "take", "show"} & set(calls)


def test_backend_keeps_only_the_path_that_runs() -> None:
    """The row-level reference transforms live with the tests; the job's modules do not use them."""
    assert not (ROOT / "backend" / "pipeline" / "transforms.py").exists()
    for path in (ROOT / "backend" / "pipeline").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for call in ("dropDuplicates(", "collect_list(", "collect_set(", "max_by(", "array_sort(", "Window"):
            assert call not in text, (path.name, call)


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
