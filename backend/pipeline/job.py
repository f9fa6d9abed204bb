"""The Spark job: fold new client_configs files into the latest-per-instance state, rewrite results.

Runnable three ways: ``run_analysis()``, ``python -m backend analyze`` and
``spark-submit backend/pipeline/job.py --lake ...``.
"""

from __future__ import annotations

import json
import posixpath
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):  # run as a script by spark-submit: make `backend` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from backend.configs.lake import lake_filesystem, read_table
from backend.pipeline import rules as rules_mod
from backend.pipeline import transforms as T
from backend.pipeline.schema import SCHEMA_VERSION, spark_schema
from backend.pipeline.spark import get_spark

STATE_DIR = "_state/pipeline"
MANIFEST = "processed_files.json"
BROKER_VERSIONS = "broker_versions.json"  # the broker versions the last run's CC018 saw
LATEST = "latest"
SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters",
                 "drift_keys", "group_drift", "client_versions", "config_alerts")


@dataclass
class AnalysisSummary:
    """What one analysis run read and produced."""

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


class _Lake:
    """Paths of one lake for pyarrow (listing, state files, renames) and for Spark."""

    def __init__(self, lake: str) -> None:
        self.fs, self.root = lake_filesystem(lake)
        if "://" in lake and not lake.startswith("file://"):
            self.spark_root = lake.rstrip("/")
        else:
            self.spark_root = "file://" + self.root

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def spark_path(self, *parts: str) -> str:
        return "/".join([self.spark_root, *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    def config_files(self) -> list[str]:
        """client_configs Parquet files relative to the table (hidden and temp files skipped)."""
        base = self.path("client_configs")
        if self.fs.get_file_info(base).type != pafs.FileType.Directory:
            return []
        selector = pafs.FileSelector(base, recursive=True)
        found = []
        for info in self.fs.get_file_info(selector):
            rel = posixpath.relpath(info.path, base)
            if info.type == pafs.FileType.File and rel.endswith(".parquet") and not any(
                part.startswith((".", "_")) for part in rel.split("/")
            ):
                found.append(rel)
        return sorted(found)

    def read_json(self, *parts: str) -> object:
        if not self.exists(*parts):
            return None
        with self.fs.open_input_stream(self.path(*parts)) as src:
            return json.loads(src.read().decode("utf-8"))

    def write_json(self, obj: object, *parts: str) -> None:
        target = self.path(*parts)
        self.fs.create_dir(posixpath.dirname(target), recursive=True)
        tmp = posixpath.join(posixpath.dirname(target), f".tmp-{uuid.uuid4().hex}.json")
        with self.fs.open_output_stream(tmp) as sink:
            sink.write(json.dumps(obj).encode("utf-8"))
        self.fs.move(tmp, target)

    def replace_dir(self, df: DataFrame, *parts: str) -> None:
        """Write df as Parquet next to the target, then swap it into place."""
        parent = posixpath.join(*parts[:-1]) if len(parts) > 1 else ""
        tmp_name = f".tmp-{parts[-1]}-{uuid.uuid4().hex}"
        df.write.mode("overwrite").parquet(self.spark_path(*filter(None, [parent, tmp_name])))
        target = self.path(*parts)
        old = self.path(*filter(None, [parent, f".old-{parts[-1]}-{uuid.uuid4().hex}"]))
        if self.exists(*parts):
            self.fs.move(target, old)
        self.fs.move(self.path(*filter(None, [parent, tmp_name])), target)
        if self.fs.get_file_info(old).type != pafs.FileType.NotFound:
            self.fs.delete_dir(old)


def _conform(df: DataFrame, name: str, computed_at: datetime) -> DataFrame:
    """Add computed_at/schema_version and cast to the table's declared columns and order."""
    schema = spark_schema(name)
    if "computed_at" in schema.fieldNames():
        df = df.withColumn("computed_at", F.lit(computed_at))
    df = df.withColumn("schema_version", F.lit(SCHEMA_VERSION))
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def _broker_versions(spark: SparkSession, lake: _Lake) -> DataFrame | None:
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


def run_analysis(
    lake: str,
    master: str | None = None,
    full: bool = False,
    window_days: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> AnalysisSummary:
    """Fold new client_configs into the latest-per-instance state and rewrite lake/results.

    Incremental by default: only files not listed in the processed-files manifest are read.
    ``full`` rebuilds the state from every file. ``window_days`` limits results to instances
    whose latest snapshot is that recent.
    """
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    summary = AnalysisSummary(lake=lake, full=full)
    paths = _Lake(lake)
    spark = get_spark(master)
    summary.quarantined, summary.sensitive_dropped, summary.untyped = _ingest_totals(lake)

    all_files = paths.config_files()
    saved = paths.read_json(STATE_DIR, MANIFEST)
    manifest = [str(f) for f in saved] if isinstance(saved, list) and not full else []
    has_state = not full and paths.exists(STATE_DIR, LATEST)
    if not has_state:
        manifest = []
    done = set(manifest)
    new_files = [f for f in all_files if f not in done]
    summary.files_processed = len(new_files)
    say(f"{len(new_files)} new client_configs files ({len(all_files)} in the lake)")
    brokers_seen = broker_versions_seen(lake)
    brokers_unchanged = paths.read_json(STATE_DIR, BROKER_VERSIONS) == brokers_seen
    if not new_files and has_state and brokers_unchanged and paths.exists("results", "config_alerts"):
        summary.skipped = True
        summary.duration_s = time.monotonic() - started
        say("nothing new; results are current")
        return summary

    schema = spark_schema("client_configs")
    parts = []
    if new_files:
        new_rows = spark.read.schema(schema).parquet(
            *[paths.spark_path("client_configs", f) for f in new_files]).cache()
        counts = new_rows.agg(F.count(F.lit(1)).alias("rows"),
                              F.countDistinct("snapshot_id").alias("snaps")).collect()[0]
        summary.records_read, summary.snapshots_read = int(counts["rows"]), int(counts["snaps"])
        say(f"read {summary.records_read} config rows of {summary.snapshots_read} snapshots")
        parts.append(new_rows)
    if has_state:
        parts.append(spark.read.schema(schema).parquet(paths.spark_path(STATE_DIR, LATEST)))
    if not parts:
        parts.append(spark.createDataFrame([], schema))
    combined = parts[0]
    for extra in parts[1:]:
        combined = combined.unionByName(extra)
    paths.replace_dir(T.latest_snapshots(combined).select(*schema.fieldNames()), STATE_DIR, LATEST)
    latest = spark.read.schema(schema).parquet(paths.spark_path(STATE_DIR, LATEST))
    if window_days is not None:
        latest = T.latest_snapshots(latest, since=datetime.now(UTC) - timedelta(days=window_days))
    latest = latest.cache()
    summary.instances = latest.select("client_instance_id").distinct().count()
    say(f"{summary.instances} client instances in the latest state")

    computed_at = datetime.now(UTC)
    dist = T.distributions(latest).cache()
    pairs = T.drift_clusters(dist).cache()
    groups = T.group_drift(latest).cache()
    # 18 rules each scan the per-instance map: build it once.
    configs = T.instance_configs(latest).cache()
    alerts = rules_mod.evaluate_rules(configs, group_drift=groups,
                                      brokers=_broker_versions(spark, paths))
    frames = {
        "distributions": dist,
        "default_share": T.default_share(latest),
        "numeric_summary": T.numeric_summary(latest),
        "drift_clusters": pairs,
        "drift_keys": T.drift_keys(dist, pairs),
        "group_drift": groups,
        "client_versions": T.client_versions(latest),
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
    paths.write_json(sorted(done | set(new_files)), STATE_DIR, MANIFEST)
    paths.write_json(brokers_seen, STATE_DIR, BROKER_VERSIONS)
    for frame in (dist, pairs, groups, configs, latest):
        frame.unpersist()
    if new_files:
        new_rows.unpersist()
    summary.duration_s = time.monotonic() - started
    return summary


if __name__ == "__main__":
    from backend.pipeline.cli import main

    sys.exit(main())
