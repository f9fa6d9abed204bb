"""The Spark job: fold new client_configs files into the latest-per-instance state, rewrite results.

Runnable three ways: ``run_analysis()``, ``python -m backend analyze`` and
``spark-submit spark_analyze.py --lake ...`` (the entry file at the repository root). The state it
builds on lives in ``backend.pipeline.state_store``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from backend.pipeline import instances as I
from backend.pipeline import results as RS
from backend.pipeline import rules as rules_mod
from backend.pipeline import transforms as T
from backend.pipeline.spark import get_spark, size_session
from backend.pipeline.state_store import (
    BROKER_VERSIONS,
    COMPACT_FRACTION,
    COUNTS,
    LATEST,
    MANIFEST,
    MAX_SEGMENTS,
    STATE,
    STATE_DIR,
    TOO_OLD,
    LakePaths,
    PipelineState,
    cleanup,
    load_state,
    read_agg,
    read_counts,
    read_latest,
    read_stats,
    write_agg,
)
from backend.store.config_schemas import SCHEMA_VERSION, spark_schema
from backend.store.tables import read_table

SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters",
                 "drift_keys", "group_drift", "client_versions", "config_alerts")
COUNT_TABLES = tuple(I.COUNT_LAYOUT)


@dataclass
class AnalysisSummary:
    """What one analysis run read and produced.

    The state holds one row per client instance. A refresh (``full`` false) proves what it
    touched: ``instances_changed`` instances whose latest snapshot changed (new + updated),
    ``delta_rows`` signed instance rows folded into the count tables (+1 per changed instance,
    -1 per replaced state row), ``state_rows_matched`` state rows of the instances with new
    snapshots (found by a filtered scan of ``state_rows_scanned`` rows), ``state_rows_written``
    rows appended as a segment and ``state_rows_rewritten`` rows rewritten by a compaction (0
    when none ran). Every count comes from work the run did anyway (the statistics records of
    its one aggregation), never from an extra Spark action. ``spark_jobs`` / ``spark_stages``:
    the jobs the run started and the stages that ran tasks, from Spark's status tracker.
    """

    lake: str
    full: bool
    files_processed: int = 0
    records_read: int = 0
    snapshots_read: int = 0
    instances: int = 0
    quarantined: int = 0
    sensitive_dropped: int = 0
    untyped: int = 0
    alerts_by_severity: dict[str, int] = field(default_factory=dict)
    result_rows: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    duration_s: float = 0.0
    shuffle_partitions: int = 0  # sized from this run's input (backend.pipeline.spark.size_session)
    full_reason: str = ""
    instances_changed: int = 0
    instances_new: int = 0
    instances_updated: int = 0
    instances_evaluated: int = 0
    delta_rows: int = 0
    state_rows_scanned: int = 0
    state_rows_matched: int = 0
    state_rows_written: int = 0
    state_rows_rewritten: int = 0
    compacted: bool = False
    spark_jobs: int = 0
    spark_stages: int = 0


def _conform(df: DataFrame, name: str, computed_at: datetime) -> DataFrame:
    """Add computed_at/schema_version and cast to the table's declared columns and order."""
    schema = spark_schema(name)
    if "computed_at" in schema.fieldNames():
        df = df.withColumn("computed_at", F.lit(computed_at))
    df = df.withColumn("schema_version", F.lit(SCHEMA_VERSION))
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def _broker_versions(spark: SparkSession, lake: LakePaths, location: str | None = None) -> DataFrame | None:
    if location is not None and lake.exists("_state", "fleet", "state.json"):
        # Lake v2: no broker row per poll any more; the current brokers come from the lake's state.
        from backend.store.readers import latest_brokers

        brokers = latest_brokers(location)
        columns = ["cluster_id", "polled_at", "software_version", "version_min", "version_provenance"]
        if brokers.empty:
            return None
        rows = [
            (r[0], r[1].to_pydatetime(), *(None if pd.isna(v) else v for v in r[2:]))
            for r in brokers[columns].itertuples(index=False, name=None)
        ]
        types = "cluster_id string, polled_at timestamp, software_version string, version_min string, " \
                "version_provenance string"
        return rules_mod.broker_major_versions(spark.createDataFrame(rows, types))
    if not lake.exists("broker_snapshots"):
        return None
    try:
        snaps = spark.read.option("basePath", lake.spark_path("broker_snapshots")).parquet(
            lake.spark_path("broker_snapshots"))
    except Exception:  # noqa: BLE001 - an unreadable optional table only disables one rule
        return None
    needed = {"cluster_id", "polled_at", "software_version", "version_min", "version_provenance"}
    if not needed <= set(snaps.columns):
        return None
    return rules_mod.broker_major_versions(snaps)


def broker_versions_seen(lake: str) -> list[list[str]]:
    """The distinct (cluster id, version, version_min, provenance) of the latest poll's brokers, sorted.

    A refresh with no new client configs still re-runs when this changes (an upgrade, a first
    poll), so the client-too-old rule (CC018) never goes stale.
    """
    from backend.store.readers import latest_brokers

    try:
        brokers = latest_brokers(lake)
    except Exception:  # noqa: BLE001 - no readable poller data means "no brokers seen"
        return []
    if brokers.empty:
        return []
    columns = ["cluster_id", "software_version", "version_min", "version_provenance"]
    rows = brokers[columns].astype(object).where(brokers[columns].notna(), "").astype(str)
    return sorted(map(list, set(map(tuple, rows.to_numpy().tolist()))))


def _ingest_totals(lake: str) -> tuple[int, int, int]:
    stats = read_table(lake, "results/ingest_stats")

    def total(metric: str) -> int:
        mask = pc.equal(stats["metric"], metric)
        return int(pc.sum(pc.filter(stats["count"], mask)).as_py() or 0)

    return total("quarantined"), total("sensitive_dropped"), total("untyped")


def _full_reason(full: bool, window_days: float | None, state: PipelineState | None, paths: LakePaths) -> str:
    if full:
        return "--full"
    if state is None:
        return "no incremental state (first run, or state of another format)"
    if window_days is not None or state.window_days is not None:
        return "time window (results depend on the clock)"
    if not paths.exists("results", "config_alerts"):
        return "results missing"
    return ""


def run_analysis(
    lake: str,
    master: str | None = None,
    full: bool = False,
    window_days: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> AnalysisSummary:
    """Fold new client_configs into the state and count tables, and rewrite lake/results.

    Incremental by default: only files not listed in the processed-files manifest are read, and
    only the instances whose latest snapshot they change are counted, evaluated and appended to
    the state. ``full`` (and a first run, a time window or a state of another format) rebuilds
    everything from every file. ``window_days`` limits results to instances whose latest
    snapshot is that recent.
    """
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    paths = LakePaths(lake)
    state = None if full else load_state(paths)
    reason = _full_reason(full, window_days, state, paths)
    summary = AnalysisSummary(lake=lake, full=bool(reason), full_reason=reason)
    spark = get_spark(master)
    summary.quarantined, summary.sensitive_dropped, summary.untyped = _ingest_totals(lake)

    sizes = paths.config_file_sizes()
    all_files = sorted(sizes)
    saved = paths.read_json(STATE_DIR, MANIFEST)
    manifest = [str(f) for f in saved] if isinstance(saved, list) and state is not None else []
    done = set(manifest)
    new_files = [f for f in all_files if f not in done]
    brokers_seen = broker_versions_seen(lake)
    brokers_unchanged = paths.read_json(STATE_DIR, BROKER_VERSIONS) == brokers_seen
    same_window = state is not None and state.window_days == window_days
    if (not full and not new_files and same_window and brokers_unchanged
            and paths.exists("results", "config_alerts")):
        summary.skipped = True
        summary.duration_s = time.monotonic() - started
        say("nothing new; results are current")
        return summary
    if reason:
        new_files = all_files
        say(f"full computation: {reason}")
    summary.files_processed = len(new_files)
    say(f"{len(new_files)} new client_configs files ({len(all_files)} in the lake)")
    sized = size_session(spark, sum(sizes[f] for f in new_files))
    summary.shuffle_partitions = sized.shuffle_partitions
    say(f"{sized.shuffle_partitions} shuffle partitions for {sized.input_bytes / 2**20:.1f} MiB on "
        f"{sized.cores} cores" + (" (set by $FLEETVIEW_SPARK_SHUFFLE_PARTITIONS)" if sized.overridden else ""))
    job_group = f"fleetview-analyze-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(job_group, "fleetview analyze", interruptOnCancel=False)

    schema = spark_schema("client_configs")
    rows = spark.createDataFrame([], schema)
    if new_files:
        rows = spark.read.schema(schema).parquet(*[paths.spark_path("client_configs", f) for f in new_files])
    new_rows = rows.select(*T.INSTANCE_COLUMNS, "key", "value", "type", "is_default")

    generation = (state.generation if state else 0) + 1
    tag = f"g{generation:06d}-{uuid.uuid4().hex[:8]}"
    cached: list[DataFrame] = []
    if reason:
        new_state, configs, prior_alerts, stats = _full_state(spark, paths, new_rows, window_days, tag,
                                                              generation, summary, say)
    else:
        assert state is not None
        new_state, configs, prior_alerts, stats = _refresh_state(
            spark, paths, new_rows if new_files else None, state, tag, summary, cached, say)
    summary.records_read = stats.get("rows_read", 0)
    summary.snapshots_read = stats.get("snapshots_read", 0)
    summary.instances = stats.get("instances", 0)
    say(f"read {summary.records_read} config rows of {summary.snapshots_read} snapshots; "
        f"{summary.instances_evaluated} instances evaluated, {summary.delta_rows} delta rows; "
        f"{summary.instances} client instances in the latest state")

    # The results but config_alerts come from the small count tables, on the driver (no Spark
    # job each); the alerts are one Spark write: per-instance rules in one projection, CC018
    # (a join with the brokers), and CC016/CC017 from the count tables.
    computed_at = datetime.now(UTC)
    counts = RS.count_frames(read_counts(paths, new_state.agg))
    tables = RS.results_tables(counts)
    for name, frame in tables.items():
        paths.replace_dir_table(RS.to_arrow(frame, name, computed_at), "results", name)
        say(f"wrote results/{name}")
    fleet_rows = (RS.shared_client_id_alerts(counts["client_id_counts"])
                  + RS.group_disagreement_alerts(tables["group_drift"]))
    alert_schema = spark_schema("config_alerts")
    alert_columns = [f for f in alert_schema.fields if f.name not in ("computed_at", "schema_version")]
    fleet_alerts = spark.createDataFrame([tuple(r[f.name] for f in alert_columns) for r in fleet_rows],
                                         StructType(alert_columns))
    too_old = read_agg(spark, paths, new_state.agg, TOO_OLD)
    alerts = rules_mod.instance_alerts_projection(configs).unionByName(
        rules_mod.client_too_old_alerts(too_old, _broker_versions(spark, paths, lake))).unionByName(
        fleet_alerts)
    if prior_alerts is not None:
        alerts = alerts.unionByName(prior_alerts)
    paths.replace_dir(_conform(alerts, "config_alerts", computed_at).repartition(1), "results",
                      "config_alerts")
    say("wrote results/config_alerts")
    for name in SPARK_RESULTS:
        table = read_table(lake, f"results/{name}")
        summary.result_rows[name] = table.num_rows
        if name == "config_alerts":
            for sev in table.column("severity").to_pylist():
                summary.alerts_by_severity[sev] = summary.alerts_by_severity.get(sev, 0) + 1
    # Commit: state.json names the new base/segments/tally. A crash before this line leaves the
    # previous state current; re-folding files it already holds is a no-op (their snapshots do
    # not supersede themselves).
    paths.write_json(new_state.to_json(), STATE_DIR, STATE)
    paths.write_json(sorted(done | set(new_files)), STATE_DIR, MANIFEST)
    paths.write_json(brokers_seen, STATE_DIR, BROKER_VERSIONS)
    cleanup(paths, new_state)
    for frame in cached:
        frame.unpersist()
    summary.spark_jobs, summary.spark_stages = _jobs_and_stages(spark, job_group)
    say(f"{summary.spark_jobs} Spark jobs, {summary.spark_stages} stages run")
    summary.duration_s = time.monotonic() - started
    return summary


def _jobs_and_stages(spark: SparkSession, group: str) -> tuple[int, int]:
    """Jobs of a job group, and the stages of them that ran tasks (skipped ones left out)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    stage_ids: set[int] = set()
    for job_id in jobs:
        info = tracker.getJobInfo(job_id)
        if info is not None:
            stage_ids.update(info.stageIds)
    ran = 0
    for stage_id in stage_ids:
        stage = tracker.getStageInfo(stage_id)
        if stage is not None and stage.numCompletedTasks > 0:
            ran += 1
    return len(jobs), ran


def _full_state(
    spark: SparkSession, paths: LakePaths, rows: DataFrame, window_days: float | None, tag: str,
    generation: int, summary: AnalysisSummary, say: Callable[[str], None],
) -> tuple[PipelineState, DataFrame, DataFrame | None, dict[str, int]]:
    """Rebuild the instance base (one shuffle of the wide rows), the tally and the too-old index."""
    base = f"base-{tag}"
    paths.replace_dir(I.instance_rows(rows), STATE_DIR, LATEST, base)
    say("wrote the instance state")
    inst = read_latest(spark, paths, [base])
    counted = F.lit(True)
    if window_days is not None:
        counted = F.col("received_at") >= F.lit(datetime.now(UTC) - timedelta(days=window_days))
    frame = inst.select(
        F.when(counted, F.struct(*I.INSTANCE_FIELDS)).alias("plus"),
        F.lit(None).cast(I.INSTANCE_SCHEMA).alias("minus"),
        F.struct(F.col("rows_read"), F.col("snapshots_read"), F.lit(1).cast("long").alias("state_rows"),
                 counted.cast("long").alias("evaluated")).alias("stats"),
    )
    configs = I.with_cfg(inst.where(counted))
    write_agg(paths, {COUNTS: I.tallies(I.tally_records(frame)),
                      TOO_OLD: rules_mod.too_old_clients(configs)}, tag)
    say("wrote the count tables")
    stats = read_stats(paths, tag)
    summary.instances_evaluated = stats.get("evaluated", 0)
    summary.state_rows_written = base_rows = stats.get("state_rows", 0)
    return PipelineState(generation, base, base_rows, [], 0, tag, window_days), configs, None, stats


def _refresh_state(
    spark: SparkSession, paths: LakePaths, new_rows: DataFrame | None, state: PipelineState, tag: str,
    summary: AnalysisSummary, cached: list[DataFrame], say: Callable[[str], None],
) -> tuple[PipelineState, DataFrame, DataFrame | None, dict[str, int]]:
    """Fold only the instances whose latest snapshot changed into the state and the tally."""
    ids = "client_instance_id"
    prior_alerts = spark.read.schema(spark_schema("config_alerts")).parquet(
        paths.spark_path("results", "config_alerts")).where(
        F.col("rule_id").isin(*rules_mod.PER_INSTANCE_RULE_IDS)).drop(
        "computed_at", "schema_version")
    segments, segment_rows, agg = list(state.segments), state.segment_rows, state.agg
    if new_rows is None:  # only the broker versions changed: nothing to look up or fold in
        configs = I.with_cfg(spark.createDataFrame([], I.INSTANCE_SCHEMA))
        stats = {"instances": read_stats(paths, state.agg).get("instances", 0)}
    else:
        new_inst = I.instance_rows(new_rows).cache()
        cached.append(new_inst)
        # The state rows of just these instances: a filtered scan of base + segments (the ids
        # are broadcast), then the latest of them per instance.
        summary.state_rows_scanned = state.base_rows + state.segment_rows
        old = I.latest_instances(read_latest(spark, paths, [state.base, *state.segments]).join(
            F.broadcast(new_inst.select(ids)), ids, "left_semi"))
        fields = [F.col(c) for c in I.INSTANCE_FIELDS]
        joined = new_inst.select(ids, F.struct(*fields).alias("n")).join(
            old.select(ids, F.struct(*fields).alias("o")), ids, "left")
        changed = I.later("n", "o")
        found = F.col("o").isNotNull()
        frame = joined.select(
            F.when(changed, F.col("n")).alias("plus"),
            F.when(changed & found, F.col("o")).alias("minus"),
            F.struct(F.col("n.rows_read").alias("rows_read"),
                     F.col("n.snapshots_read").alias("snapshots_read"),
                     (changed & ~found).cast("long").alias("new"),
                     (changed & found).cast("long").alias("updated"),
                     found.cast("long").alias("matched")).alias("stats"),
        ).cache()
        cached.append(frame)
        plus = frame.where(F.col("plus").isNotNull()).select("plus.*")
        configs = I.with_cfg(plus)
        changed_ids = F.broadcast(plus.select(ids))
        tally = I.tallies(I.stored_records(read_agg(spark, paths, state.agg, COUNTS))
                          .unionByName(I.tally_records(frame)))
        too_old = read_agg(spark, paths, state.agg, TOO_OLD).join(
            changed_ids, ids, "left_anti").unionByName(rules_mod.too_old_clients(configs))
        write_agg(paths, {COUNTS: tally, TOO_OLD: too_old}, tag)
        agg = tag
        stats = read_stats(paths, tag)
        summary.instances_new, summary.instances_updated = stats.get("new", 0), stats.get("updated", 0)
        summary.instances_changed = summary.instances_new + summary.instances_updated
        summary.instances_evaluated = summary.instances_changed
        summary.state_rows_matched = stats.get("matched", 0)
        summary.delta_rows = summary.instances_changed + summary.instances_updated
        say(f"{summary.instances_changed} changed instances; {summary.state_rows_matched} state rows "
            f"of the instances with new snapshots found in {summary.state_rows_scanned}")
        if summary.instances_changed:
            seg = f"seg-{tag}"
            paths.replace_dir(plus, STATE_DIR, LATEST, seg)
            segments.append(seg)
            summary.state_rows_written = summary.instances_changed
            segment_rows += summary.state_rows_written
            say(f"appended {summary.state_rows_written} instance rows")
            prior_alerts = prior_alerts.join(changed_ids, ids, "left_anti")

    base, base_rows = state.base, state.base_rows
    if segment_rows > COMPACT_FRACTION * base_rows or len(segments) > MAX_SEGMENTS:
        base = f"base-{tag}"
        paths.replace_dir(I.latest_instances(read_latest(spark, paths, [state.base, *segments])),
                          STATE_DIR, LATEST, base)
        base_rows = stats["instances"]  # one state row per instance counted in version_counts
        summary.state_rows_rewritten, summary.compacted = base_rows, True
        say(f"compacted the instance state: {base_rows} rows rewritten")
        segments, segment_rows = [], 0
    new_state = PipelineState(state.generation + 1, base, base_rows, segments, segment_rows, agg, None)
    return new_state, configs, prior_alerts, stats


# Old private names, kept for the tests and tools that reach into the job.
_Lake = LakePaths
_load_state = load_state
