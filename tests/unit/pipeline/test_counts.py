"""Count tables: results computed from them equal the direct transforms; deltas merge exactly."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, frame, instance_id, rows_for, small_fleet


def _typed(rows: list[dict[str, Any]], typ: str) -> list[dict[str, Any]]:
    for row in rows:
        row["type"] = typ
    return rows


def _fleet() -> list[dict[str, Any]]:
    """small_fleet plus unparsable and null numeric values, repeated numbers and an untyped client."""
    rows = small_fleet()
    rows += _typed(rows_for("U1", {"linger.ms": "abc"}, cluster="u"), "LONG")
    rows += _typed(rows_for("U2", {"linger.ms": None}, cluster="u"), "LONG")
    rows += _typed(rows_for("U3", {"linger.ms": "8"}), "LONG")  # east's linger.ms: INT and LONG
    for i, value in enumerate(["1", "1", "1", "2", "7", "7", "300"]):
        rows += _typed(rows_for(f"R{i}", {"batch.size": value}, cluster="west"), "INT")
    rows += rows_for("X1", {"transactional.id": None, "acks": "1"}, client_type=None, cluster="west")
    return rows


@pytest.fixture(scope="module")
def latest(spark: SparkSession) -> DataFrame:
    return T.latest_snapshots(frame(spark, _fleet())).cache()


@pytest.mark.parametrize(("direct", "from_counts", "counts"), [
    (T.distributions, T.distributions_from_counts, T.value_counts),
    (T.default_share, T.default_share_from_counts, T.value_counts),
    (T.numeric_summary, T.numeric_summary_from_counts, T.value_counts),
    (T.group_drift, T.group_drift_from_counts, T.group_counts),
    (T.client_versions, T.client_versions_from_counts, T.version_counts),
])
def test_results_from_counts_equal_direct(latest: DataFrame, direct: Any, from_counts: Any, counts: Any) -> None:
    expected = direct(latest)
    assert expected.count() > 0
    assertDataFrameEqual(from_counts(counts(latest)), expected, checkRowOrder=False)


def test_weighted_percentiles_match_by_hand(latest: DataFrame) -> None:
    (row,) = T.numeric_summary_from_counts(T.value_counts(latest)).where("key = 'batch.size'").collect()
    # sorted 1 1 1 2 7 7 300: p50 = 2; p90 at 5.4 -> 7 + 0.4 * 293 = 124.2
    assert (row["instances"], row["min"], row["p50"], row["max"]) == (7, 1.0, 2.0, 300.0)
    assert row["p90"] == pytest.approx(124.2)
    (linger,) = T.numeric_summary_from_counts(T.value_counts(latest)).where(
        "key = 'linger.ms' AND cluster_id = 'u'").collect()
    assert (linger["instances"], linger["unparsable"], linger["min"]) == (2, 1, None)


def test_merge_delta_equals_counts_of_new_latest(spark: SparkSession, latest: DataFrame) -> None:
    # P3 changes acks 1 -> all (the (east, acks, 1) combination disappears), C3 leaves group
    # orders, and a new instance N1 arrives.
    later = T0 + timedelta(hours=1)
    plus_rows = (rows_for("P3", {"acks": "all", "linger.ms": "5"}, at=later)
                 + rows_for("C3", {"group.id": "other", "session.timeout.ms": "10000"},
                            client_type="consumer", at=later)
                 + rows_for("N1", {"acks": "0"}, cluster="west", at=later))
    plus = frame(spark, plus_rows)
    changed = [instance_id(n) for n in ("P3", "C3")]
    minus = latest.where(F.col("client_instance_id").isin(*changed))
    delta = plus.withColumn("sign", F.lit(1)).unionByName(minus.withColumn("sign", F.lit(-1)))
    after = T.latest_snapshots(frame(spark, _fleet() + plus_rows))
    for counts, keys in ((T.value_counts, T.VALUE_COUNT_KEYS), (T.group_counts, T.GROUP_COUNT_KEYS),
                         (T.version_counts, T.VERSION_COUNT_KEYS),
                         (T.client_id_counts, T.CLIENT_ID_COUNT_KEYS)):
        merged = T.merge_counts(counts(latest), counts(delta), keys)
        assertDataFrameEqual(merged, counts(after), checkRowOrder=False)
    merged_values = T.merge_counts(T.value_counts(latest), T.value_counts(delta), T.VALUE_COUNT_KEYS)
    assert merged_values.where("cluster_id = 'east' AND key = 'acks' AND value = '1'").count() == 0
    assert merged_values.where("n <= 0").count() == 0


def test_superseding_orders_by_received_at_then_snapshot_id(spark: SparkSession) -> None:
    """The driver's supersede (backend.pipeline.heads) against the reference definition."""
    import pyarrow as pa

    from backend.pipeline.heads import HEAD_SCHEMA, supersede

    def heads(rows: list[tuple[str, datetime, str]]) -> pa.Table:
        return pa.Table.from_pylist([{"client_instance_id": i, "received_at": at, "snapshot_id": s, "files": []}
                                     for i, at, s in rows], schema=HEAD_SCHEMA)

    old = [("a", T0, "s5"), ("b", T0, "s5"), ("c", T0, "s5"), ("d", T0, "s5")]
    new = [("a", T0 + timedelta(seconds=1), "s1"),  # later: supersedes
           ("b", T0, "s6"),                          # same time, greater id: supersedes
           ("c", T0, "s5"),                          # the same snapshot again: no change
           ("d", T0 - timedelta(seconds=1), "s9"),   # older: no change
           ("e", T0, "s1")]                          # not in the state: new
    schema = "client_instance_id string, received_at timestamp, snapshot_id string"
    expected = {(r["client_instance_id"], r["updated"]) for r in T.superseding(
        spark.createDataFrame(new, schema), spark.createDataFrame(old, schema)).collect()}
    after, changed, replaced = supersede(heads(old), heads(new))
    assert expected == {("a", True), ("b", True), ("e", False)}
    assert {(i, i in replaced["client_instance_id"].to_pylist()) for i in changed["client_instance_id"].to_pylist()
            } == expected
    assert sorted(zip(after["client_instance_id"].to_pylist(), after["snapshot_id"].to_pylist(), strict=True)) == [
        ("a", "s1"), ("b", "s6"), ("c", "s5"), ("d", "s5"), ("e", "s1")]
