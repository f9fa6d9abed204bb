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

from backend.pipeline import alerts as A
from backend.pipeline import instances as I
from backend.pipeline import results as RS
from backend.pipeline import rules as rules_mod
from backend.pipeline import tally as C
from backend.pipeline.spark import SMALL_RUN_BYTES, get_spark, jvm_flags, size_session
from backend.pipeline.state_store import (
    BROKER_VERSIONS,
    COMPACT_FRACTION,
    COUNTS,
    ENTRIES,
    HEADS,
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
    read_entries,
    read_heads,
    read_stats,
    write_agg,
    write_part,
)
from backend.store.config_schemas import SCHEMA_VERSION, spark_schema
from backend.store.tables import read_table

SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters",
                 "drift_keys", "group_drift", "client_versions", "config_alerts")
COUNT_TABLES = tuple(C.COUNT_LAYOUT)


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
    *,
    short_lived: bool = False,
    driver_host: str | None = None,
) -> AnalysisSummary:
    """Fold new client_configs into the state and count tables, and rewrite lake/results.

    Incremental by default: only files not listed in the processed-files manifest are read, and
    only the instances whose latest snapshot they change are counted, evaluated and appended to
    the state. ``full`` (and a first run, a time window or a state of another format) rebuilds
    everything from every file. ``window_days`` limits results to instances whose latest
    snapshot is that recent. ``short_lived``: the process exits after this run (the CLI), so a
    small run may start the JVM with start-up settings (backend.pipeline.spark.get_spark); a
    long-lived driver leaves it false. ``driver_host``: where a driver this run starts listens (default loopback).
    """
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    paths = LakePaths(lake)
    state = None if full else load_state(paths)
    reason = _full_reason(full, window_days, state, paths)
    summary = AnalysisSummary(lake=lake, full=bool(reason), full_reason=reason)
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
    read_bytes = sum(sizes[f] for f in new_files)
    work_bytes = read_bytes + (paths.tree_bytes(STATE_DIR, LATEST) if not reason else 0)
    spark = get_spark(master, short_lived=short_lived and work_bytes <= SMALL_RUN_BYTES, driver_host=driver_host)
    summary.files_processed = len(new_files)
    say(f"{len(new_files)} new client_configs files ({len(all_files)} in the lake)")
    sized = size_session(spark, read_bytes, small=work_bytes <= SMALL_RUN_BYTES)
    summary.shuffle_partitions = sized.shuffle_partitions
    if sized.small:
        say("small run: no whole-stage code generation; JVM " + (" ".join(jvm_flags(spark)) or "as it is"))
    say(f"{sized.shuffle_partitions} shuffle partitions for {sized.input_bytes / 2**20:.1f} MiB on "
        f"{sized.cores} cores" + (" (set by $FLEETVIEW_SPARK_SHUFFLE_PARTITIONS)" if sized.overridden else ""))
    job_group = f"fleetview-analyze-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(job_group, "fleetview analyze", interruptOnCancel=False)

    schema = spark_schema("client_configs")
    rows = spark.createDataFrame([], schema)
    if new_files:
        rows = spark.read.schema(schema).parquet(*[paths.spark_path("client_configs", f) for f in new_files])
    new_rows = rows.select(*I.INSTANCE_COLUMNS, "key", "value", "type", "is_default")

    generation = (state.generation if state else 0) + 1
    tag = f"g{generation:06d}-{uuid.uuid4().hex[:8]}"
    cached: list[DataFrame] = []
    partitions = sized.shuffle_partitions
    if reason:
        new_state, evaluated, prior_alerts, stats = _full_state(
            spark, paths, new_rows, window_days, tag, generation, summary, partitions, say)
    else:
        assert state is not None
        new_state, evaluated, prior_alerts, stats = _refresh_state(
            spark, paths, new_rows if new_files else None, state, tag, summary, partitions, cached, say)
    summary.records_read = stats.get("rows_read", 0)
    summary.snapshots_read = stats.get("snapshots_read", 0)
    summary.instances = stats.get("instances", 0)
    say(f"read {summary.records_read} config rows of {summary.snapshots_read} snapshots; "
        f"{summary.instances_evaluated} instances evaluated, {summary.delta_rows} delta rows; "
        f"{summary.instances} client instances in the latest state")

    # The results but config_alerts come from the small count tables, on the driver (no Spark
    # job each); the alerts are one Spark write: the per-instance rules (backend.pipeline.alerts)
    # of the instances evaluated, CC018 (a join with the brokers), CC016/CC017 from the counts.
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
    alerts = A.instance_alerts(*evaluated, partitions).unionByName(
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


Instances = tuple[DataFrame, DataFrame]  # head rows and their entry rows


def _write_instances(spark: SparkSession, paths: LakePaths, name: str, heads: DataFrame,
                     rows: DataFrame, partitions: int) -> Instances:
    """Write base or segment ``name``: the heads, then the entries of their snapshots from ``rows``;
    returns both read back (the later passes read the small written rows, not the input again)."""
    write_part(paths, name, HEADS, heads)
    written = read_heads(spark, paths, [name])
    write_part(paths, name, ENTRIES, I.head_entries(rows, written, partitions))
    return written, read_entries(spark, paths, [name])


def _too_old(heads: DataFrame, entries: DataFrame) -> DataFrame:
    return rules_mod.too_old_clients(heads.join(F.broadcast(C.group_ids(entries)), I.IDS, "left"))


def _full_state(
    spark: SparkSession, paths: LakePaths, rows: DataFrame, window_days: float | None, tag: str,
    generation: int, summary: AnalysisSummary, partitions: int, say: Callable[[str], None],
) -> tuple[PipelineState, Instances, DataFrame | None, dict[str, int]]:
    """Rebuild the instance base (heads and entries), the tally and the too-old index."""
    base = f"base-{tag}"
    snapshots = I.snapshot_rows(rows).cache()
    heads, entries = _write_instances(spark, paths, base, I.instance_heads(rows, snapshots), rows, partitions)
    snapshots.unpersist()
    say("wrote the instance state")
    counted = F.lit(True)
    if window_days is not None:
        counted = F.col("received_at") >= F.lit(datetime.now(UTC) - timedelta(days=window_days))
        in_window = heads.where(counted)
        evaluated = (in_window, entries.join(F.broadcast(in_window.select(I.IDS)), I.IDS, "left_semi"))
    else:
        evaluated = (heads, entries)
    records = C.count_records(*evaluated, 1).unionByName(C.stat_records(heads, {
        "rows_read": F.col("rows_read"), "snapshots_read": F.col("snapshots_read"),
        "state_rows": F.lit(1), "evaluated": counted.cast("long")}))
    write_agg(paths, {COUNTS: C.tallies(records), TOO_OLD: _too_old(*evaluated)}, tag)
    say("wrote the count tables")
    stats = read_stats(paths, tag)
    summary.instances_evaluated = stats.get("evaluated", 0)
    summary.state_rows_written = base_rows = stats.get("state_rows", 0)
    return PipelineState(generation, base, base_rows, [], 0, tag, window_days), evaluated, None, stats


def _refresh_state(
    spark: SparkSession, paths: LakePaths, new_rows: DataFrame | None, state: PipelineState, tag: str,
    summary: AnalysisSummary, partitions: int, cached: list[DataFrame], say: Callable[[str], None],
) -> tuple[PipelineState, Instances, DataFrame | None, dict[str, int]]:
    """Fold only the instances whose latest snapshot changed into the state and the tally."""
    ids = I.IDS
    prior_alerts = spark.read.schema(spark_schema("config_alerts")).parquet(
        paths.spark_path("results", "config_alerts")).where(
        F.col("rule_id").isin(*rules_mod.PER_INSTANCE_RULE_IDS)).drop(
        "computed_at", "schema_version")
    segments, segment_rows, agg = list(state.segments), state.segment_rows, state.agg
    stored = [state.base, *state.segments]
    if new_rows is None:  # only the broker versions changed: nothing to look up or fold in
        evaluated = (spark.createDataFrame([], I.HEAD_SCHEMA), spark.createDataFrame([], I.ENTRY_SCHEMA))
        stats = {"instances": read_stats(paths, state.agg).get("instances", 0)}
    else:
        snapshots = I.snapshot_rows(new_rows).cache()
        new_heads = I.instance_heads(new_rows, snapshots).cache()
        cached += [snapshots, new_heads]
        # The state's heads of just these instances: a filtered scan of base + segments (the
        # ids are broadcast), then the latest of them per instance.
        summary.state_rows_scanned = state.base_rows + state.segment_rows
        old = I.latest_heads(read_heads(spark, paths, stored).join(
            F.broadcast(new_heads.select(ids)), ids, "left_semi"))
        fields = [F.col(c) for c in I.HEAD_FIELDS]
        joined = new_heads.select(ids, F.struct(*fields).alias("n")).join(
            old.select(ids, F.struct(*fields).alias("o")), ids, "left")
        changed = I.later("n", "o")
        found = F.col("o").isNotNull()
        frame = joined.select(
            F.when(changed, F.col("n")).alias("plus"),
            F.when(changed & found, F.col("o")).alias("minus"),
            F.col("n.rows_read").alias("rows_read"), F.col("n.snapshots_read").alias("snapshots_read"),
            (changed & ~found).cast("long").alias("new"), (changed & found).cast("long").alias("updated"),
            found.cast("long").alias("matched"),
        ).cache()
        cached.append(frame)
        # The changed instances are written as a segment first; it is kept only if they exist.
        seg = f"seg-{tag}"
        plus = _write_instances(spark, paths, seg, frame.where(F.col("plus").isNotNull()).select("plus.*"),
                                new_rows, partitions)
        minus_heads = frame.where(F.col("minus").isNotNull()).select("minus.*")
        # the replaced instances' entries: one filtered scan of the state's, kept for the two
        # readers below (their records and their group ids)
        minus_entries = read_entries(spark, paths, stored).join(
            F.broadcast(minus_heads.select(ids, "snapshot_id")), [ids, "snapshot_id"], "left_semi").cache()
        cached.append(minus_entries)
        records = C.count_records(*plus, 1).unionByName(C.count_records(minus_heads, minus_entries, -1))
        records = records.unionByName(C.stat_records(frame, {
            name: F.col(name) for name in ("rows_read", "snapshots_read", "new", "updated", "matched")}))
        tally = C.tallies(C.stored_records(read_agg(spark, paths, state.agg, COUNTS)).unionByName(records))
        changed_ids = F.broadcast(plus[0].select(ids))
        too_old = read_agg(spark, paths, state.agg, TOO_OLD).join(
            changed_ids, ids, "left_anti").unionByName(_too_old(*plus))
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
        evaluated = plus
        if summary.instances_changed:
            segments.append(seg)
            summary.state_rows_written = summary.instances_changed
            segment_rows += summary.state_rows_written
            say(f"appended {summary.state_rows_written} instance rows")
            prior_alerts = prior_alerts.join(changed_ids, ids, "left_anti")

    base, base_rows = state.base, state.base_rows
    if segment_rows > COMPACT_FRACTION * base_rows or len(segments) > MAX_SEGMENTS:
        base = f"base-{tag}"
        kept = [state.base, *segments]
        latest = I.latest_heads(read_heads(spark, paths, kept))
        write_part(paths, base, HEADS, latest)
        heads = read_heads(spark, paths, [base])
        write_part(paths, base, ENTRIES, read_entries(spark, paths, kept).join(
            heads.select(ids, "snapshot_id"), [ids, "snapshot_id"], "left_semi"))
        base_rows = stats["instances"]  # one state row per instance counted in version_counts
        summary.state_rows_rewritten, summary.compacted = base_rows, True
        say(f"compacted the instance state: {base_rows} rows rewritten")
        segments, segment_rows = [], 0
    new_state = PipelineState(state.generation + 1, base, base_rows, segments, segment_rows, agg, None)
    return new_state, evaluated, prior_alerts, stats


# Old private names, kept for the tests and tools that reach into the job.
_Lake = LakePaths
_load_state = load_state
