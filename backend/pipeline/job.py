"""The Spark job: fold new client_configs files into the pipeline's state, rewrite the results.

Runnable three ways: ``run_analysis()``, ``python -m backend analyze`` and ``spark-submit
spark_analyze.py --lake ...`` (the entry file at the repository root). A run is two Spark passes
(backend.pipeline.passes), each ending in one collect; the driver keeps the state
(backend.pipeline.state_store: heads, counts, alerts) and computes every results table from it
(backend.pipeline.results). A full run and a refresh are the same steps: a full run starts from an
empty state and reads every file.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from backend.pipeline import heads as H
from backend.pipeline import passes
from backend.pipeline import results as RS
from backend.pipeline import rules as R
from backend.pipeline.spark import SMALL_RUN_ROWS, get_spark, jvm_flags, size_session
from backend.pipeline.state_store import (
    COUNT_SCHEMA,
    VALUE_SCHEMA,
    LakePaths,
    PipelineState,
    StateRead,
    cleanup,
    commit_state,
    drop_tables,
    empty_tables,
    read_state,
    read_tables,
    write_tables,
)
from backend.pipeline.watched import watched_keys
from backend.search.updates import index_pipeline_run
from backend.store.tables import read_table, replace_table, table_generation

SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters",
                 "drift_keys", "group_drift", "group_configs", "client_versions", "config_alerts", "client_instances")


@dataclass
class AnalysisSummary:
    """What one analysis run read and produced.

    A refresh (``full`` false) proves what it touched: ``instances_changed`` instances whose latest
    snapshot changed (``instances_new`` + ``instances_updated``), the only ones whose entries were
    counted (``rows_added``) and whose rules were evaluated; the old entries of the updated ones were
    taken out of the counts (``rows_removed``, read again from ``files_reread`` files). Every count
    comes from work the run did anyway, never from an extra Spark action. ``spark_jobs`` /
    ``spark_stages``: the jobs the run started and the stages that ran tasks (Spark's status tracker).
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
    shuffle_partitions: int = 0  # of the instance pass, sized from its rows (backend.pipeline.spark)
    full_reason: str = ""
    instances_changed: int = 0
    instances_new: int = 0
    instances_updated: int = 0
    rows_added: int = 0
    rows_removed: int = 0
    files_reread: int = 0
    spark_jobs: int = 0
    spark_stages: int = 0
    watched_keys: list[str] = field(default_factory=list)  # the keys results/client_instances covers
    instances_refilled: int = 0  # unchanged instances read again for keys a policy file named since the last run


def _brokers(lake: str) -> pd.DataFrame:
    from backend.store.readers import latest_brokers

    try:
        brokers = latest_brokers(lake)
    except Exception:  # noqa: BLE001 - no readable poller data means "no brokers seen"
        return pd.DataFrame()
    return brokers


def broker_versions_seen(lake: str) -> list[list[str]]:
    """The distinct (cluster id, version, version_min, provenance) of the latest poll's brokers, sorted.

    A refresh with no new client configs still re-runs when this changes (an upgrade, a first
    poll), so the client-too-old rule (CC018) never goes stale.
    """
    brokers = _brokers(lake)
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


def _results_behind(paths: LakePaths, state: PipelineState | None) -> bool:
    """Whether a results table is older than the committed state says (a run stopped between commit and switch)."""
    return state is not None and any(table_generation(paths.where, f"results/{name}") < state.results_generation
                                     for name in SPARK_RESULTS)


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
    policy_files: Sequence[str | Path] = (),
) -> AnalysisSummary:
    """Fold new client_configs into the state and rewrite lake/results.

    Incremental by default: only files not listed in the processed-files manifest are read, and only
    the instances whose latest snapshot they change are counted and evaluated. ``full`` (and a first
    run, a time window, a state of another format, or files the state needs gone) starts from an
    empty state and reads every file. ``window_days`` limits results to instances whose latest
    snapshot is that recent. ``short_lived``: the process exits after this run (the CLI), so a small
    run may start the JVM with start-up settings (backend.pipeline.spark.get_spark); a long-lived
    driver leaves it false. ``driver_host``: where a driver this run starts listens (default loopback).

    Every instance's value of each key a client-config policy names (the poller's policy file in the lake, and
    ``policy_files``) goes to results/client_instances; a key named since the last run is read for every unchanged
    instance too (from the files holding their latest snapshots, only that key's rows), one no policy names any
    more is dropped (backend.pipeline.watched).
    """
    paths = LakePaths(lake)
    found = read_state(paths)
    state = None if full else found.state
    reason = _full_reason(full, window_days, state, paths)
    watched = watched_keys(paths.where, policy_files, progress)
    summary = _run(paths, found, state, reason, master, window_days, progress, short_lived, driver_host, watched)
    if summary is None:  # the state needs files that are gone: a full run instead
        summary = _run(paths, found, None, "files the state was built from are gone", master, window_days, progress,
                       short_lived, driver_host, watched)
    assert summary is not None
    return summary


def _session(master: str | None, rows: int, short_lived: bool, driver_host: str | None, lake: str,
             group: str) -> SparkSession:
    spark = get_spark(master, short_lived=short_lived and rows <= SMALL_RUN_ROWS, driver_host=driver_host, lake=lake)
    spark.sparkContext.setJobGroup(group, "fleetview analyze", interruptOnCancel=False)
    size_session(spark, rows)
    return spark


def _run(paths: LakePaths, found: StateRead, state: PipelineState | None, reason: str, master: str | None,
         window_days: float | None, progress: Callable[[str], None] | None, short_lived: bool,
         driver_host: str | None, watched: list[str]) -> AnalysisSummary | None:
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    lake = paths.lake
    summary = AnalysisSummary(lake=lake, full=bool(reason), full_reason=reason, watched_keys=watched)
    summary.quarantined, summary.sensitive_dropped, summary.untyped = _ingest_totals(lake)
    all_files = paths.config_files()
    done = set(state.processed_files) if state is not None else set()
    new_files = all_files if reason else [f for f in all_files if f not in done]
    brokers_seen = broker_versions_seen(lake)
    brokers_changed = state is None or state.broker_versions != brokers_seen
    behind = _results_behind(paths, state)
    if behind:
        say("results tables are behind the committed state (a run stopped before switching them): writing them")
    keys_changed = state is not None and state.watched_keys != watched
    fill = sorted(set(watched) - set(state.watched_keys)) if state is not None else []
    if keys_changed:
        say(f"client-config keys kept per instance: {', '.join(watched) or 'none'}"
            + (f" ({', '.join(fill)} to read for every instance)" if fill else ""))
    if not reason and not new_files and not brokers_changed and not behind and not keys_changed:
        summary.skipped = True
        summary.duration_s = time.monotonic() - started
        say("nothing new; results are current")
        return summary
    if reason:
        say(f"full computation: {reason}")
    tables = empty_tables() if state is None else read_tables(paths, state)
    summary.files_processed = len(new_files)
    say(f"{len(new_files)} new client_configs files ({len(all_files)} in the lake)")
    changed = replaced = tables["heads"].slice(0, 0)
    heads_after, reread = tables["heads"], []
    spark: SparkSession | None = None
    group = f"fleetview-analyze-{uuid.uuid4().hex}"
    if new_files:
        spark = _session(master, paths.config_rows(new_files), short_lived, driver_host, lake, group)
        snapshots = passes.snapshot_table(passes.read_rows(spark, _spark_paths(paths, new_files)))
        new_heads, summary.records_read, summary.snapshots_read = H.heads_of(snapshots,
                                                                             paths.spark_path("client_configs"))
        if window_days is not None:
            since = pa.scalar(datetime.now(UTC) - timedelta(days=window_days), new_heads.schema.field("received_at").type)
            new_heads = new_heads.filter(pc.greater_equal(new_heads["received_at"], since))
        say(f"read {summary.records_read} config rows of {summary.snapshots_read} snapshots")
        heads_after, changed, replaced = H.supersede(tables["heads"], new_heads)
        reread = sorted({f for files in replaced["files"].to_pylist() for f in files} - set(new_files))
        if set(reread) - set(all_files):
            say(f"{len(set(reread) - set(all_files))} files the state was built from are gone")
            return None
        summary.instances_changed, summary.instances_updated = changed.num_rows, replaced.num_rows
        summary.instances_new, summary.files_reread = changed.num_rows - replaced.num_rows, len(reread)
        summary.rows_added = int(pc.sum(changed["rows"]).as_py() or 0)
        summary.rows_removed = int(pc.sum(replaced["rows"]).as_py() or 0)
        say(f"{summary.instances_changed} instances changed ({summary.instances_new} new, "
            f"{summary.instances_updated} updated); {len(reread)} files read again for their old entries")
    # Keys a policy file named since the last run: every unchanged instance's latest snapshot is read again for them.
    refill = heads_after.filter(pc.invert(pc.is_in(heads_after[H.IDS], value_set=changed[H.IDS].combine_chunks()))) \
        if fill else heads_after.slice(0, 0)
    refill_files = sorted({f for files in refill["files"].to_pylist() for f in files} - set(new_files) - set(reread))
    if set(refill_files) - set(all_files):
        say(f"{len(set(refill_files) - set(all_files))} files the state was built from are gone")
        return None
    summary.instances_refilled = refill.num_rows
    if changed.num_rows or refill.num_rows:
        files = new_files + reread + refill_files
        if refill.num_rows:
            say(f"{refill.num_rows} unchanged instances read again for {', '.join(fill)} ({len(refill_files)} files)")
        spark = spark or _session(master, paths.config_rows(files), short_lived, driver_host, lake, group)
        tables = _fold(spark, paths, tables, changed, replaced, refill, files, watched, fill, summary, say)
        tables["heads"] = heads_after
    tables["values"] = tables["values"].filter(pc.is_in(tables["values"]["key"], value_set=pa.array(watched, pa.string())))
    summary.instances = tables["heads"].num_rows
    generation = found.generation + 1
    rewrite = bool(changed.num_rows or reason or brokers_changed or behind or keys_changed
                   or not paths.exists("results", "config_alerts"))
    frames = _results_frames(tables, brokers_seen, watched, summary) if rewrite else None
    if frames is None:
        say("no instance changed; results are current")
        for name in SPARK_RESULTS:
            summary.result_rows[name] = read_table(lake, f"results/{name}").num_rows
        summary.alerts_by_severity = dict(Counter(read_table(lake, "results/config_alerts").column("severity").to_pylist()))
    kept = state.tables if state is not None and not changed.num_rows and not reason and not keys_changed else None
    written = None if kept else write_tables(paths, tables, generation)
    new_state = PipelineState(generation, kept or written or "", window_days, sorted(done | set(new_files)),
                              brokers_seen, generation if frames is not None else (state.results_generation if state else 0),
                              watched)
    # Commit: state.json names the new generation, over the version this run read. A crash before this line leaves
    # the previous state current (reading files it already holds again changes nothing: their snapshots supersede
    # nothing); a run that committed first wins, and this one removes its generation and stops here.
    try:
        commit_state(paths, new_state, found.version)
    except BaseException:
        if written is not None:
            drop_tables(paths, written)
        raise
    if frames is not None:
        _switch_results(paths, frames, generation, summary, say)
    cleanup(paths, new_state)
    # The search index's client instances follow the committed state (backend/search): the changed heads only.
    index_pipeline_run(paths.where, state.generation if state else None, generation, changed, tables["heads"],
                       full=bool(reason), say=say)
    if spark is not None:
        summary.spark_jobs, summary.spark_stages = _jobs_and_stages(spark, group)
        say(f"{summary.spark_jobs} Spark jobs, {summary.spark_stages} stages run")
    summary.duration_s = time.monotonic() - started
    return summary


def _spark_paths(paths: LakePaths, files: list[str]) -> list[str]:
    return [paths.spark_path("client_configs", f) for f in files]


def _fold(spark: SparkSession, paths: LakePaths, tables: dict[str, pa.Table], changed: pa.Table,
          replaced: pa.Table, refill: pa.Table, files: list[str], watched: list[str], fill: list[str],
          summary: AnalysisSummary, say: Callable[[str], None]) -> dict[str, pa.Table]:
    """The instance pass over the changed heads (+1), the heads they replace (-1) and the unchanged heads read again
    for the keys to fill (0), folded into the state."""
    wanted, classes = H.wanted(changed, replaced, refill if refill.num_rows else None)
    sized = size_session(spark, paths.config_rows(files))
    summary.shuffle_partitions = sized.shuffle_partitions
    if sized.small:
        say("small run: no whole-stage code generation; JVM " + (" ".join(jvm_flags(spark)) or "as it is"))
    say(f"instance pass: {wanted.num_rows} snapshots, {sized.shuffle_partitions} shuffle partitions for "
        f"{sized.rows} rows on {sized.cores} cores" + (" (set by $FLEETVIEW_SPARK_SHUFFLE_PARTITIONS)"
                                                        if sized.overridden else ""))
    out = passes.instance_pass(passes.read_rows(spark, _spark_paths(paths, files)), spark.createDataFrame(wanted),
                               sized.shuffle_partitions, watched, fill if refill.num_rows else ())
    kept_ids = changed[H.IDS].combine_chunks()
    values = tables["values"].filter(pc.invert(pc.is_in(tables["values"][H.IDS], value_set=kept_ids)))
    if "watched" in out.column_names:
        seen = out.filter(pc.fill_null(out["watched"], False))
        out = out.filter(pc.is_null(out["watched"]))
        values = pa.concat_tables([values, RS.normalized_values(seen["sid"].combine_chunks(), seen["key"].combine_chunks(),
                                                                seen["raw_value"].combine_chunks(),
                                                                wanted[H.IDS].combine_chunks()).cast(VALUE_SCHEMA)])
    delta = out.filter(pc.is_null(out["rule_id"]))
    cls = delta["cls"].to_numpy()
    delta = pa.table({**{c: pa.array(classes[c].to_numpy()[cls], pa.string()) for c in H.CLASS_COLUMNS},
                      **{c: delta[c] for c in ("key", "raw_value", "type", "is_default", "n")}})
    counts = pa.concat_tables([tables["counts"], delta.cast(COUNT_SCHEMA)])
    keys = [c for c in COUNT_SCHEMA.names if c != "n"]
    counts = counts.group_by(keys, use_threads=False).aggregate([("n", "sum")]).select([*keys, "n_sum"]).rename_columns(
        [*keys, "n"])
    fired = out.filter(pc.is_valid(out["rule_id"]))
    fired = pa.table({H.IDS: pc.take(wanted[H.IDS], fired["sid"]), "rule_id": fired["rule_id"],
                      "observed_json": fired["observed_json"]})
    prior = tables["alerts"]
    return {"counts": counts.filter(pc.not_equal(counts["n"], 0)),
            "alerts": pa.concat_tables([prior.filter(pc.invert(pc.is_in(prior[H.IDS], value_set=kept_ids))),
                                        fired.cast(prior.schema)]),
            "heads": tables["heads"], "values": values}


def _results_frames(tables: dict[str, pa.Table], brokers_seen: list[list[str]], watched: list[str],
                    summary: AnalysisSummary) -> dict[str, pa.Table]:
    """Every results table, from the state's tables and the brokers' versions, on the driver."""
    computed_at = datetime.now(UTC)
    counts = RS.count_frames(tables["counts"], tables["heads"])
    frames = RS.results_tables(counts)
    brokers = R.broker_majors((c, v or None, m or None, p or None) for c, v, m, p in brokers_seen)
    fleet = pd.DataFrame(RS.shared_client_id_alerts(counts["client_id_counts"])
                         + RS.group_disagreement_alerts(frames["group_drift"]), columns=list(RS.ALERT_FIELDS))
    per_instance = RS.instance_alerts(tables["alerts"], tables["heads"].to_pandas(), brokers)
    frames["config_alerts"] = pd.concat([per_instance, fleet], ignore_index=True)
    out = {}
    for name, frame in frames.items():
        out[name] = RS.to_arrow(frame, name, computed_at)
        summary.result_rows[name] = len(frame)
    summary.alerts_by_severity = {str(k): int(v) for k, v in frames["config_alerts"]["severity"].value_counts().items()}
    out["client_instances"] = RS.client_instances(tables["heads"], tables["values"], watched, computed_at)
    summary.result_rows["client_instances"] = out["client_instances"].num_rows
    return out


def _switch_results(paths: LakePaths, frames: dict[str, pa.Table], generation: int, summary: AnalysisSummary,
                    say: Callable[[str], None]) -> None:
    """Switch every results table to this run's (committed) generation, unless a newer run's is already there."""
    for name, table in frames.items():
        replace_table(paths.where, f"results/{name}", table, generation=generation)
    say(f"wrote {len(frames)} results tables; {summary.instances} client instances")


def _jobs_and_stages(spark: SparkSession, group: str) -> tuple[int, int]:
    """Jobs of a job group, and the stages of them that ran tasks (skipped ones left out)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    stage_ids: set[int] = set()
    for job_id in jobs:
        info = tracker.getJobInfo(job_id)
        if info is not None:
            stage_ids.update(info.stageIds)
    ran = sum(1 for s in stage_ids if (stage := tracker.getStageInfo(s)) is not None and stage.numCompletedTasks > 0)
    return len(jobs), ran
