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

from backend.pipeline import rules as rules_mod
from backend.pipeline import transforms as T
from backend.pipeline.spark import get_spark, size_session
from backend.pipeline.state_store import (
    BROKER_VERSIONS,
    COMPACT_FRACTION,
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
    read_latest,
    write_agg,
)
from backend.store.config_schemas import SCHEMA_VERSION, spark_schema
from backend.store.tables import read_table

SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters",
                 "drift_keys", "group_drift", "client_versions", "config_alerts")
COUNT_TABLES: dict[str, tuple[Callable[[DataFrame], DataFrame], tuple[str, ...]]] = {
    "value_counts": (T.value_counts, T.VALUE_COUNT_KEYS),
    "group_counts": (T.group_counts, T.GROUP_COUNT_KEYS),
    "version_counts": (T.version_counts, T.VERSION_COUNT_KEYS),
    "client_id_counts": (T.client_id_counts, T.CLIENT_ID_COUNT_KEYS),
}


@dataclass
class AnalysisSummary:
    """What one analysis run read and produced.

    A refresh (``full`` false) proves what it touched: ``instances_changed`` instances whose
    latest snapshot changed (new + updated), ``delta_rows`` signed rows folded into the count
    tables, ``state_rows_matched`` current rows of those instances found in the state (read
    by a filtered scan of ``state_rows_scanned`` rows), ``state_rows_written`` rows appended as a
    segment and ``state_rows_rewritten`` rows rewritten by a compaction (0 when none ran).
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

    schema = spark_schema("client_configs")
    if new_files:
        new_rows = spark.read.schema(schema).parquet(
            *[paths.spark_path("client_configs", f) for f in new_files])
    else:
        new_rows = spark.createDataFrame([], schema)
    new_rows = new_rows.cache()
    counts = new_rows.agg(F.count(F.lit(1)).alias("rows"),
                          F.countDistinct("snapshot_id").alias("snaps")).collect()[0]
    summary.records_read, summary.snapshots_read = int(counts["rows"]), int(counts["snaps"])
    say(f"read {summary.records_read} config rows of {summary.snapshots_read} snapshots")

    generation = (state.generation if state else 0) + 1
    tag = f"g{generation:06d}-{uuid.uuid4().hex[:8]}"
    cached: list[DataFrame] = [new_rows]
    if reason:
        new_state, configs, prior_alerts = _full_state(spark, paths, new_rows, window_days, tag,
                                                       generation, summary, cached, say)
    else:
        assert state is not None
        new_state, configs, prior_alerts = _refresh_state(spark, paths, new_rows, state, tag,
                                                          summary, cached, say)
    say(f"{summary.instances_evaluated} instances evaluated, {summary.delta_rows} delta rows")

    agg = {name: read_agg(spark, paths, new_state.agg, name) for name in (*COUNT_TABLES, TOO_OLD)}
    summary.instances = int(agg["version_counts"].agg(F.sum("n")).collect()[0][0] or 0)
    say(f"{summary.instances} client instances in the latest state")

    computed_at = datetime.now(UTC)
    dist = T.distributions_from_counts(agg["value_counts"]).cache()
    pairs = T.drift_clusters(dist).cache()
    groups = T.group_drift_from_counts(agg["group_counts"]).cache()
    cached += [dist, pairs, groups]
    alerts = rules_mod.instance_alerts(configs).unionByName(rules_mod.fleet_alerts(
        agg["client_id_counts"], groups, agg[TOO_OLD], _broker_versions(spark, paths, lake)))
    if prior_alerts is not None:
        alerts = alerts.unionByName(prior_alerts)
    frames = {
        "distributions": dist,
        "default_share": T.default_share_from_counts(agg["value_counts"]),
        "numeric_summary": T.numeric_summary_from_counts(agg["value_counts"]),
        "drift_clusters": pairs,
        "drift_keys": T.drift_keys(dist, pairs),
        "group_drift": groups,
        "client_versions": T.client_versions_from_counts(agg["version_counts"]),
        "config_alerts": alerts,
    }
    for name in SPARK_RESULTS:
        # repartition (not coalesce) keeps the upstream stage parallel and still writes one file
        paths.replace_dir(_conform(frames[name], name, computed_at).repartition(1), "results", name)
        say(f"wrote results/{name}")
    for name in SPARK_RESULTS:
        table = read_table(lake, f"results/{name}")
        summary.result_rows[name] = table.num_rows
        if name == "config_alerts":
            for sev in table.column("severity").to_pylist():
                summary.alerts_by_severity[sev] = summary.alerts_by_severity.get(sev, 0) + 1
    # Commit: state.json names the new base/segments/count tables. A crash before this line
    # leaves the previous state current; re-folding files it already holds is a no-op (their
    # snapshots do not supersede themselves).
    paths.write_json(new_state.to_json(), STATE_DIR, STATE)
    paths.write_json(sorted(done | set(new_files)), STATE_DIR, MANIFEST)
    paths.write_json(brokers_seen, STATE_DIR, BROKER_VERSIONS)
    cleanup(paths, new_state)
    for frame in cached:
        frame.unpersist()
    summary.duration_s = time.monotonic() - started
    return summary


def _full_state(
    spark: SparkSession, paths: LakePaths, rows: DataFrame, window_days: float | None, tag: str,
    generation: int, summary: AnalysisSummary, cached: list[DataFrame],
    say: Callable[[str], None],
) -> tuple[PipelineState, DataFrame, DataFrame | None]:
    """Rebuild the latest-rows base and every count table from all rows."""
    schema = spark_schema("client_configs")
    base = f"base-{tag}"
    paths.replace_dir(T.latest_snapshots(rows).select(*schema.fieldNames()), STATE_DIR, LATEST, base)
    latest = read_latest(spark, paths, [base])
    base_rows = latest.count()
    say(f"wrote the latest state: {base_rows} rows")
    if window_days is not None:
        latest = T.latest_snapshots(latest, since=datetime.now(UTC) - timedelta(days=window_days))
    latest = latest.cache()
    configs = T.instance_configs(latest).cache()
    cached += [latest, configs]
    tables = {name: fn(latest) for name, (fn, _keys) in COUNT_TABLES.items()}
    tables[TOO_OLD] = rules_mod.too_old_clients(configs)
    write_agg(paths, tables, tag)
    say("wrote the count tables")
    summary.instances_evaluated = configs.count()
    summary.state_rows_written = base_rows
    return PipelineState(generation, base, base_rows, [], 0, tag, window_days), configs, None


def _refresh_state(
    spark: SparkSession, paths: LakePaths, new_rows: DataFrame, state: PipelineState, tag: str,
    summary: AnalysisSummary, cached: list[DataFrame], say: Callable[[str], None],
) -> tuple[PipelineState, DataFrame, DataFrame | None]:
    """Fold only the instances whose latest snapshot changed into the state and count tables."""
    schema = spark_schema("client_configs")
    ids = ["client_instance_id"]
    new_latest = T.latest_snapshots(new_rows).cache()
    heads = new_latest.select(*ids, "received_at", "snapshot_id").dropDuplicates(ids)
    # The current rows of just these instances: a filtered scan of base + segments, no shuffle
    # of the state.
    if summary.records_read:
        summary.state_rows_scanned = state.base_rows + state.segment_rows
        old_rows = read_latest(spark, paths, [state.base, *state.segments]).join(
            F.broadcast(heads.select(*ids)), "client_instance_id", "left_semi")
    else:  # no new rows (only the broker versions changed): nothing to look up
        old_rows = spark.createDataFrame([], schema)
    old_latest = T.latest_snapshots(old_rows).cache()
    old_heads = old_latest.select(*ids, "received_at", "snapshot_id").dropDuplicates(ids)
    changed = T.superseding(heads, old_heads).cache()
    cached += [new_latest, old_latest, changed]
    changed_ids = F.broadcast(changed.select(*ids))
    plus = new_latest.join(changed_ids, "client_instance_id", "left_semi").select(
        *schema.fieldNames()).cache()
    minus = old_latest.join(changed_ids, "client_instance_id", "left_semi")
    delta = plus.withColumn("sign", F.lit(1)).unionByName(minus.withColumn("sign", F.lit(-1))).cache()
    configs = T.instance_configs(plus).cache()
    cached += [plus, delta, configs]

    by_kind = {bool(r["updated"]): int(r["n"]) for r in
               changed.groupBy("updated").agg(F.count(F.lit(1)).alias("n")).collect()}
    summary.instances_new, summary.instances_updated = by_kind.get(False, 0), by_kind.get(True, 0)
    summary.instances_changed = summary.instances_new + summary.instances_updated
    summary.state_rows_matched = old_latest.count()
    say(f"{summary.instances_changed} changed instances; {summary.state_rows_matched} current rows of "
        f"the instances with new snapshots found in {summary.state_rows_scanned} state rows")
    summary.delta_rows = delta.count()
    summary.instances_evaluated = configs.count()

    segments, segment_rows, agg = list(state.segments), state.segment_rows, state.agg
    prior_alerts = spark.read.schema(spark_schema("config_alerts")).parquet(
        paths.spark_path("results", "config_alerts")).where(
        F.col("rule_id").isin(*rules_mod.PER_INSTANCE_RULE_IDS)).drop(
        "computed_at", "schema_version")
    if summary.instances_changed:
        seg = f"seg-{tag}"
        paths.replace_dir(plus, STATE_DIR, LATEST, seg)
        segments.append(seg)
        summary.state_rows_written = plus.count()
        segment_rows += summary.state_rows_written
        tables = {
            name: T.merge_counts(read_agg(spark, paths, state.agg, name), fn(delta), keys)
            for name, (fn, keys) in COUNT_TABLES.items()
        }
        tables[TOO_OLD] = read_agg(spark, paths, state.agg, TOO_OLD).join(
            changed_ids, "client_instance_id", "left_anti").unionByName(
            rules_mod.too_old_clients(configs))
        write_agg(paths, tables, tag)
        say(f"appended {summary.state_rows_written} rows; merged the count tables")
        agg = tag
        prior_alerts = prior_alerts.join(changed_ids, "client_instance_id", "left_anti")

    base, base_rows = state.base, state.base_rows
    if segment_rows > COMPACT_FRACTION * base_rows or len(segments) > MAX_SEGMENTS:
        base = f"base-{tag}"
        paths.replace_dir(T.latest_snapshots(read_latest(spark, paths, [state.base, *segments]))
                          .select(*schema.fieldNames()), STATE_DIR, LATEST, base)
        base_rows = read_latest(spark, paths, [base]).count()
        summary.state_rows_rewritten, summary.compacted = base_rows, True
        say(f"compacted the latest state: {base_rows} rows rewritten")
        segments, segment_rows = [], 0
    new_state = PipelineState(state.generation + 1, base, base_rows, segments, segment_rows, agg, None)
    return new_state, configs, prior_alerts



# Old private names, kept for the tests and tools that reach into the job.
_Lake = LakePaths
_load_state = load_state
