"""Transforms over the hand-made fleet, against answers computed by hand."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, frame, small_fleet


@pytest.fixture(scope="module")
def latest(spark: SparkSession) -> DataFrame:
    return T.latest_snapshots(frame(spark, small_fleet())).cache()


def test_latest_snapshot_per_instance(latest: DataFrame) -> None:
    p1 = {r["key"]: r["value"] for r in latest.where("client_id = 'P1'").collect()}
    assert p1 == {"acks": "all", "linger.ms": "5"}
    assert latest.select("client_instance_id").distinct().count() == 9


def test_latest_with_time_window(spark: SparkSession) -> None:
    from datetime import timedelta

    rows = frame(spark, small_fleet())
    early = T.latest_snapshots(rows, until=T0 - timedelta(minutes=1))
    assert [(r["client_id"], r["key"], r["value"]) for r in early.orderBy("key").collect()] == [
        ("P1", "acks", "0"), ("P1", "linger.ms", "1")]


def test_duplicate_ingest_is_deduplicated(spark: SparkSession) -> None:
    rows = small_fleet()
    again = T.latest_snapshots(frame(spark, rows + rows))
    assert again.count() == T.latest_snapshots(frame(spark, rows)).count() == 2 * 6 + 3 * 4


def test_distributions_exact(spark: SparkSession, latest: DataFrame) -> None:
    got = T.distributions(latest).where("key = 'acks'")
    expected = spark.createDataFrame(
        [("east", "producer", "acks", "all", 3, 4, 0.75, ["all"]),
         ("east", "producer", "acks", "1", 1, 4, 0.25, ["1"]),
         ("west", "producer", "acks", "1", 1, 2, 0.5, ["1"]),
         ("west", "producer", "acks", "0", 1, 2, 0.5, ["0"])],
        "cluster_id string, client_type string, key string, value string, instance_count long, "
        "total_instances long, share double, raw_values array<string>")
    assertDataFrameEqual(got, expected)


def test_default_share(spark: SparkSession, latest: DataFrame) -> None:
    got = T.default_share(latest).where("key = 'acks'")
    expected = spark.createDataFrame(
        [("east", "producer", "acks", 4, 3, 1, 0.75), ("west", "producer", "acks", 2, 0, 2, 0.0)],
        "cluster_id string, client_type string, key string, instances long, default_count long, "
        "overridden_count long, default_share double")
    assertDataFrameEqual(got, expected)


def test_numeric_summary(spark: SparkSession, latest: DataFrame) -> None:
    got = T.numeric_summary(latest).where("key = 'linger.ms' AND cluster_id = 'east'")
    # sorted 5, 5, 10, 100: p50 between 5 and 10 -> 7.5; p90 at 2.7 -> 10 + 0.7 * 90 = 73
    expected = spark.createDataFrame(
        [("east", "producer", "linger.ms", "INT", 4, 0, 5.0, 7.5, 73.0, 100.0)],
        "cluster_id string, client_type string, key string, type string, instances long, "
        "unparsable long, min double, p50 double, p90 double, max double")
    assertDataFrameEqual(got, expected)


def test_drift_between_clusters(spark: SparkSession, latest: DataFrame) -> None:
    dist = T.distributions(latest)
    got = T.drift_clusters(dist)
    # acks: ½(|.75-0| + |.25-.5| + |0-.5|) = .75 ; linger.ms: ½(|.5-1| + .25 + .25) = .5
    expected = spark.createDataFrame(
        [("producer", "acks", "east", "west", 0.75, 4, 2, "all", "0"),
         ("producer", "linger.ms", "east", "west", 0.5, 4, 2, "5", "5")],
        "client_type string, key string, cluster_a string, cluster_b string, tvd double, "
        "instances_a long, instances_b long, dominant_value_a string, dominant_value_b string")
    assertDataFrameEqual(got, expected)
    keys = T.drift_keys(dist, got).where("key = 'acks'")
    expected_keys = spark.createDataFrame(
        [("producer", "acks", "east", 4, 2, "all", 0.75, 0.75, 0.5),
         ("producer", "acks", "west", 2, 2, "0", 0.5, 0.75, 1.0)],
        "client_type string, key string, cluster_id string, instances long, distinct_values long, "
        "dominant_value string, dominant_share double, max_tvd double, distinct_share double")
    assertDataFrameEqual(keys, expected_keys)


def test_drift_with_null_values_and_untyped_clients(spark: SparkSession) -> None:
    from tests.unit.pipeline.fleet import rows_for

    rows = (rows_for("a1", {"transactional.id": None}, cluster="a", client_type=None)
            + rows_for("a2", {"transactional.id": "tx"}, cluster="a", client_type=None)
            + rows_for("b1", {"transactional.id": None}, cluster="b", client_type=None))
    got = T.drift_clusters(T.distributions(T.latest_snapshots(frame(spark, rows)))).collect()
    assert [(r["client_type"], r["cluster_a"], r["cluster_b"], r["tvd"]) for r in got] == [
        (None, "a", "b", 0.5)]


def test_group_drift(latest: DataFrame) -> None:
    got = T.group_drift(latest).collect()
    assert [(r["cluster_id"], r["group_id"], r["key"], r["members"], r["distinct_values"])
            for r in got] == [("east", "orders", "session.timeout.ms", 3, 2)]
    assert json.loads(got[0]["value_counts_json"]) == {"10000": 1, "45000": 2}


def test_client_versions(spark: SparkSession, latest: DataFrame) -> None:
    got = T.client_versions(latest)
    expected = spark.createDataFrame(
        [("east", "producer", "apache-kafka-java", "3.9.0", 4),
         ("east", "consumer", "apache-kafka-java", "3.9.0", 3),
         ("west", "producer", "apache-kafka-java", "3.9.0", 1),
         ("west", "producer", "confluent-kafka-python", "2.3.0-rdkafka-2.3.0", 1)],
        "cluster_id string, client_type string, client_software_name string, "
        "client_software_version string, instances long")
    assertDataFrameEqual(got, expected)
