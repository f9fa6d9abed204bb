"""A chain of incremental refreshes gives exactly the results of a --full run on the same lake.

The hand-made fleet exercises what the delta accounting must get right: new instances, updated
instances (values, group.id, client.id), an instance moving cluster, snapshots older than the
state, a duplicate re-ingest, a (received_at, snapshot_id) tie, two snapshots of one new
instance in one file, a broker upgrade without new configs, and a file the state needs gone.
After every refresh each results table is compared with a --full run on a copy of the lake, and
the --full results with the direct transforms (the reference definitions) over every row. The
counts prove that a refresh touched only the changed instances.
"""

from __future__ import annotations

import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from backend.pipeline.job import SPARK_RESULTS, AnalysisSummary, run_analysis
from backend.pipeline.state_store import STATE_DIR, LakePaths, load_state
from backend.store.config_schemas import arrow_schema, spark_schema
from backend.store.tables import read_table
from tests.unit.pipeline import reference as T
from tests.unit.pipeline.fleet import T0, instance_id, rows_for

NUMERIC = {"linger.ms": "LONG", "batch.size": "INT", "session.timeout.ms": "INT",
           "max.poll.records": "INT", "heartbeat.interval.ms": "INT", "retries": "INT"}
JAVA_OLD, JAVA_NEW = ("apache-kafka-java", "2.0.1"), ("apache-kafka-java", "3.9.0")
RD_OLD = ("confluent-kafka-python", "1.7.0-rdkafka-1.7.0")


def snap(name: str, configs: dict[str, str | None], **kw: Any) -> list[dict[str, Any]]:
    """rows_for with numeric config types for the numeric keys (so 'abc' is unparsable)."""
    rows = rows_for(name, configs, **kw)
    for row in rows:
        row["type"] = NUMERIC.get(row["key"], row["type"])
    return rows


def producer(name: str, acks: str | None, linger: str | None, **kw: Any) -> list[dict[str, Any]]:
    return snap(name, {"acks": acks, "linger.ms": linger, "batch.size": "16384",
                       "enable.idempotence": "true"}, defaults=frozenset({"batch.size"}), **kw)


def consumer(name: str, group: str, session: str, polls: str = "500", **kw: Any) -> list[dict[str, Any]]:
    return snap(name, {"group.id": group, "session.timeout.ms": session,
                       "heartbeat.interval.ms": "3000", "max.poll.records": polls,
                       "client.id": name.lower()}, client_type="consumer", **kw)


def initial_fleet() -> list[dict[str, Any]]:
    """27 instances in east/west: shared client.id (10, at the threshold), two groups, old clients."""
    rows: list[dict[str, Any]] = []
    lingers = ["0", "5", "5", "10", "20", "100", "abc", None, "5", "1"]
    for i in range(10):
        rows += producer(f"P{i}", ["all", "1", "all", None, "-1"][i % 5], lingers[i],
                         client_id="shared-app")
    for i in range(5):
        rows += producer(f"W{i}", ["1", "0", "all", "all", "1"][i], str(5 * i), cluster="west",
                         client_id=f"west-{i}")
    for i, session in enumerate(["45000", "45000", "10000", "30000", "45000", "45000"]):
        rows += consumer(f"C{i}", "orders", session)
    for i in range(3):
        rows += consumer(f"B{i}", "billing", "45000", polls="20000")
    rows += snap("legacy", {"acks": "all"}, software=JAVA_OLD, client_id="legacy")
    rows += snap("legacy-rd", {"acks": "1"}, software=RD_OLD, cluster="west", client_id=None)
    rows += snap("untyped", {"transactional.id": None, "linger.ms": "7"}, cluster="west",
                 client_type=None, client_id="producer-1")
    return rows


def write_file(lake: Path, name: str, rows: list[dict[str, Any]]) -> int:
    """One client_configs Parquet file as ingest writes it; returns its row count."""
    day = lake / "client_configs" / "date=2026-11-20"
    day.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema("client_configs")),
                   day / f"{name}.parquet")
    return len(rows)


def write_poll(lake: Path, versions: dict[str, str]) -> None:
    """One poll per cluster whose brokers report a version (what the poller writes)."""
    from backend.store.lake import Lake, new_poll_id

    store = Lake(str(lake))
    for cluster, version in versions.items():
        now = datetime.now(UTC)
        poll_id = new_poll_id(now)
        store.write("cluster_snapshots", [{"poll_id": poll_id, "polled_at": now,
                                           "cluster_name": f"{cluster}-cluster", "cluster_id": cluster,
                                           "status": "ok", "broker_count": 1}], poll_id=poll_id)
        store.write("broker_snapshots", [{"poll_id": poll_id, "polled_at": now,
                                          "cluster_name": f"{cluster}-cluster", "cluster_id": cluster,
                                          "broker_id": 1, "reachable": True, "software_name": "Kafka",
                                          "software_version": version,
                                          "version_provenance": "reported"}], poll_id=poll_id)


def _result(spark: SparkSession, lake: Path, name: str) -> DataFrame:
    return spark.read.schema(spark_schema(name)).parquet(str(lake / "results" / name)).drop(
        "computed_at", "schema_version")


def assert_equals_full(spark: SparkSession, lake: Path, scratch: Path) -> dict[str, list[dict[str, Any]]]:
    """Every results table of the lake equals a --full run on a copy; returns the alerts etc."""
    copy = scratch / f"full-{uuid.uuid4().hex[:6]}"
    shutil.copytree(lake, copy)
    full = run_analysis(str(copy), full=True)
    assert full.full and full.full_reason == "--full"
    for name in SPARK_RESULTS:
        assertDataFrameEqual(_result(spark, lake, name), _result(spark, copy, name))
        assert _result(spark, lake, name).count() > 0, name
    assert_full_matches_reference(spark, copy)
    tables = {name: read_table(str(lake), f"results/{name}").to_pylist() for name in SPARK_RESULTS}
    shutil.rmtree(copy)
    return tables


def assert_full_matches_reference(spark: SparkSession, lake: Path) -> None:
    """The results (computed from count tables) equal the direct transforms over every row."""
    rows = spark.read.schema(spark_schema("client_configs")).parquet(str(lake / "client_configs"))
    latest = T.latest_snapshots(rows).cache()
    dist = T.distributions(latest)
    reference = {
        "distributions": dist,
        "default_share": T.default_share(latest),
        "numeric_summary": T.numeric_summary(latest),
        "drift_clusters": T.drift_clusters(dist),
        "drift_keys": T.drift_keys(dist, T.drift_clusters(dist)),
        "group_drift": T.group_drift(latest),
        "client_versions": T.client_versions(latest),
        "config_alerts": T.evaluate_rules(
            T.instance_configs(latest), group_drift=T.group_drift(latest), brokers=_brokers(spark, lake)),
    }
    for name, frame in reference.items():
        columns = [f.name for f in spark_schema(name).fields if f.name not in ("computed_at", "schema_version")]
        expected = frame.select(*[F.col(c).cast(spark_schema(name)[c].dataType) for c in columns])
        assertDataFrameEqual(_result(spark, lake, name), expected)
    latest.unpersist()


def _brokers(spark: SparkSession, lake: Path) -> DataFrame | None:
    """The reference's broker major versions, from the broker_snapshots the polls wrote."""
    if not (lake / "broker_snapshots").exists():
        return None
    return T.broker_major_versions(spark.read.option("basePath", str(lake / "broker_snapshots")).parquet(
        str(lake / "broker_snapshots")))


def rule_hits(tables: dict[str, list[dict[str, Any]]], rule_id: str) -> set[str | None]:
    return {a["client_instance_id"] or a["client_id"] or a["group_id"]
            for a in tables["config_alerts"] if a["rule_id"] == rule_id}


def assert_only(summary: AnalysisSummary, *, new: int, updated: int, added: int, removed: int, reread: int) -> None:
    """What a refresh touched: the changed instances' entries counted, the replaced ones' taken out."""
    assert not summary.full and summary.full_reason == ""
    assert (summary.instances_new, summary.instances_updated) == (new, updated)
    assert summary.instances_changed == new + updated
    assert (summary.rows_added, summary.rows_removed, summary.files_reread) == (added, removed, reread)
    assert summary.spark_jobs <= 8


def rows_of(*snapshots: list[dict[str, Any]]) -> int:
    return sum(len(s) for s in snapshots)


def test_refreshes_equal_full_runs(spark: SparkSession, tmp_path: Path) -> None:
    lake, scratch = tmp_path / "lake", tmp_path / "scratch"
    scratch.mkdir()
    write_file(lake, "r0", initial_fleet())
    write_poll(lake, {"east": "4.0.0", "west": "3.9.0"})
    first = run_analysis(str(lake))
    assert first.full and first.instances == 27 and first.spark_jobs <= 8
    tables = assert_equals_full(spark, lake, scratch)
    assert rule_hits(tables, "CC018") == {instance_id("legacy")}  # legacy-rd: west runs 3.9
    assert rule_hits(tables, "CC016") == set()  # 10 instances share "shared-app": at the threshold

    # Refresh 1: 2 new instances, 4 updated (values, group.id, cluster), nothing else touched.
    t1 = T0 + timedelta(hours=1)
    r1 = (producer("P10", "all", "5", client_id="shared-app", at=t1)          # new, 11th sharer
          + consumer("N1", "orders", "45000", at=t1)                           # new
          + consumer("C0", "billing", "10000", at=t1)                          # group + value change
          + producer("P1", "all", "50", client_id="shared-app", at=t1)         # values change
          + producer("P3", "0", "abc", client_id="shared-app", at=t1)          # acks=0 now
          + producer("W0", "1", "0", cluster="east", client_id="west-0", at=t1))  # moves cluster
    write_file(lake, "r1", r1)
    s1 = run_analysis(str(lake))
    assert (s1.files_processed, s1.records_read, s1.snapshots_read) == (1, len(r1), 6)
    # counted: the entries of r1's 6 instances; taken out: the old entries of C0, P1, P3 and W0 (read from r0)
    assert_only(s1, new=2, updated=4, added=len(r1), removed=5 + 4 + 4 + 4, reread=1)
    assert s1.instances == 29
    tables = assert_equals_full(spark, lake, scratch)
    assert rule_hits(tables, "CC016") == {"shared-app"}
    assert instance_id("P3") in rule_hits(tables, "CC004")
    assert "billing" in rule_hits(tables, "CC017")
    assert {r["cluster_id"] for r in tables["client_versions"]} == {"east", "west"}

    # Refresh 2: stale and duplicate data changes nothing; 4 real changes.
    t2 = T0 + timedelta(hours=2)
    late = producer("P2", "0", "999", client_id="shared-app", at=T0 - timedelta(hours=3))  # older
    tie_win = consumer("C1", "orders", "30000", snapshot="ffffffff-ffff-4fff-bfff-ffffffffffff")
    tie_lose = consumer("C2", "orders", "30000", snapshot="00000000-0000-4000-8000-000000000000")
    twice = (consumer("N2", "orders", "10000", at=t2 - timedelta(minutes=10))
             + consumer("N2", "orders", "45000", at=t2))
    c0 = consumer("C0", "billing", "45000", at=t2)  # billing agrees again
    legacy = snap("legacy", {"acks": "all"}, software=JAVA_NEW, client_id="legacy", at=t2)
    p10 = producer("P10", "all", "5", client_id="other-app", at=t2)  # shared-app back to 10
    write_file(lake, "r2", late + tie_win + tie_lose + twice + c0 + legacy + p10)
    write_file(lake, "r1-again", r1)  # the same snapshots ingested twice
    s2 = run_analysis(str(lake))
    assert (s2.files_processed, s2.snapshots_read) == (2, 8 + 6)
    # changed: C1 (tie won), N2 (new, its later snapshot), C0, legacy, P10; their old entries are in r0 and r1
    assert_only(s2, new=1, updated=4, added=rows_of(tie_win, twice[5:], c0, legacy, p10), removed=5 + 5 + 1 + 4,
                reread=2)
    tables = assert_equals_full(spark, lake, scratch)
    assert rule_hits(tables, "CC016") == set()
    assert rule_hits(tables, "CC018") == set()
    assert "billing" not in rule_hits(tables, "CC017")

    # Refresh 3: west's brokers move to 4.x, no new configs: only CC018 changes, and no Spark job runs.
    write_poll(lake, {"west": "4.1.0"})
    s3 = run_analysis(str(lake))
    assert not s3.skipped and s3.files_processed == 0
    assert_only(s3, new=0, updated=0, added=0, removed=0, reread=0)
    assert s3.spark_jobs == 0
    tables = assert_equals_full(spark, lake, scratch)
    assert rule_hits(tables, "CC018") == {instance_id("legacy-rd")}

    # Refresh 4: one updated, one new instance.
    t4 = T0 + timedelta(hours=4)
    r4 = (producer("W1", "all", "25", cluster="west", client_id="west-1", at=t4)
          + producer("N3", None, "3", cluster="west", client_id="west-9", at=t4))
    write_file(lake, "r4", r4)
    s4 = run_analysis(str(lake))
    assert_only(s4, new=1, updated=1, added=len(r4), removed=4, reread=1)
    state = load_state(LakePaths(str(lake)))
    assert state is not None and s4.instances == 31
    versions = read_table(str(lake), "results/client_versions").to_pylist()
    assert sum(r["instances"] for r in versions) == 31  # one head per instance
    assert_equals_full(spark, lake, scratch)

    # Refresh 5: a file the state needs (the old entries of P1) is gone: a full run instead.
    (lake / "client_configs" / "date=2026-11-20" / "r1.parquet").unlink()
    write_file(lake, "r5", producer("P1", "1", "7", client_id="shared-app", at=T0 + timedelta(hours=5)))
    s5 = run_analysis(str(lake))
    assert s5.full and "gone" in s5.full_reason and s5.instances == 31  # r1-again still holds r1's snapshots
    assert_equals_full(spark, lake, scratch)

    # Refresh 6: incremental again.
    r6 = producer("P4", "1", "7", client_id="shared-app", at=T0 + timedelta(hours=6))
    write_file(lake, "r6", r6)
    s6 = run_analysis(str(lake))
    assert_only(s6, new=0, updated=1, added=4, removed=4, reread=1)
    assert_equals_full(spark, lake, scratch)
    assert run_analysis(str(lake)).skipped


def test_window_and_missing_state_fall_back_to_full(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_file(lake, "r0", initial_fleet())
    assert run_analysis(str(lake)).full
    windowed = run_analysis(str(lake), window_days=100000)
    assert windowed.full and "window" in windowed.full_reason
    write_file(lake, "r1", producer("P0", "0", "5", at=T0 + timedelta(hours=1)))
    after_window = run_analysis(str(lake))  # results were windowed: a refresh must not build on them
    assert after_window.full and after_window.instances == 27
    state = load_state(LakePaths(str(lake)))
    assert state is not None
    shutil.rmtree(lake / STATE_DIR / state.tables)
    write_file(lake, "r2", producer("P1", "0", "5", at=T0 + timedelta(hours=1)))
    broken = run_analysis(str(lake))
    assert broken.full and broken.full_reason.startswith("no incremental state")
    assert broken.files_processed == 3
    refresh = run_analysis(str(lake), full=False)
    assert refresh.skipped
