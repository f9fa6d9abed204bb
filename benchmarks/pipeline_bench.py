"""Benchmark of the Spark pipeline on synthetic fleets, with DuckDB as the single-process peer.

For each fleet size: write N client instances x ~40 keys as client_configs Parquet, run the full
analysis, add 1 % new snapshots (half of them new instances, half new snapshots of existing
instances) and run the incremental refresh, then compute the same results tables (see
DUCKDB_COVERS) with DuckDB over the same files and check both have the same rows per table.
Before the sizes, one `python -m backend analyze` of a 400-instance fleet is timed in a new
process (JVM start included). Spark jobs and stages per run come from its status tracker. Peak
memory is the RSS of this process plus its children (the Spark JVM), sampled every 200 ms.

    .venv/bin/python -m benchmarks.pipeline_bench --sizes 100000
    .venv/bin/python -m benchmarks.pipeline_bench --sizes 100000,1000000 --master 'local[2]'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from backend.pipeline.job import run_analysis
from backend.pipeline.normalize import normalized_value_sql
from backend.pipeline.rules import _GENERATED_ID, _PLACEHOLDER, PER_INSTANCE_RULE_IDS, Rule, rule_by_id
from backend.pipeline.transforms import GROUP_IDENTITY_KEYS
from backend.store.config_schemas import NUMERIC_CONFIG_TYPES, SCHEMA_VERSION, arrow_schema
from backend.store.tables import read_table

CLUSTERS = [f"cluster-{i:02d}" for i in range(10)]
COMMON_KEYS = [
    ("client.dns.lookup", "STRING", ["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"]),
    ("connections.max.idle.ms", "LONG", ["540000", "300000"]),
    ("metadata.max.age.ms", "LONG", ["300000", "60000", "600000"]),
    ("receive.buffer.bytes", "INT", ["32768", "65536", "-1"]),
    ("send.buffer.bytes", "INT", ["131072", "-1"]),
    ("reconnect.backoff.ms", "LONG", ["50", "100"]),
    ("reconnect.backoff.max.ms", "LONG", ["1000", "10000"]),
    ("retry.backoff.ms", "LONG", ["100", "500"]),
    ("retry.backoff.max.ms", "LONG", ["1000"]),
    ("request.timeout.ms", "INT", ["30000", "60000", "15000"]),
    ("socket.connection.setup.timeout.ms", "LONG", ["10000"]),
    ("socket.connection.setup.timeout.max.ms", "LONG", ["30000"]),
    ("metrics.num.samples", "INT", ["2"]),
    ("metrics.recording.level", "STRING", ["INFO", "DEBUG"]),
    ("metrics.sample.window.ms", "LONG", ["30000"]),
    ("auto.include.jmx.reporter", "BOOLEAN", ["true", "false"]),
    ("enable.metrics.push", "BOOLEAN", ["true", "false"]),
    ("client.rack", "STRING", ["", "rack-a", "rack-b"]),
    ("default.api.timeout.ms", "INT", ["60000"]),
]
PRODUCER_KEYS = [
    ("acks", "STRING", ["all", "1", "0", "-1"]),
    ("batch.size", "INT", ["16384", "65536", "131072", "0"]),
    ("buffer.memory", "LONG", ["33554432", "67108864"]),
    ("compression.type", "STRING", ["none", "lz4", "zstd", "snappy", "gzip"]),
    ("delivery.timeout.ms", "INT", ["120000", "30000", "300000"]),
    ("enable.idempotence", "BOOLEAN", ["true", "false"]),
    ("linger.ms", "LONG", ["0", "5", "10", "20", "100"]),
    ("max.block.ms", "LONG", ["60000", "10000"]),
    ("max.in.flight.requests.per.connection", "INT", ["5", "1", "10"]),
    ("max.request.size", "INT", ["1048576", "5242880"]),
    ("retries", "INT", ["2147483647", "3", "0"]),
    ("transaction.timeout.ms", "INT", ["60000"]),
    ("partitioner.ignore.keys", "BOOLEAN", ["false"]),
    ("partitioner.adaptive.partitioning.enable", "BOOLEAN", ["true"]),
    ("partitioner.availability.timeout.ms", "LONG", ["0"]),
    ("metadata.max.idle.ms", "LONG", ["300000"]),
    ("compression.gzip.level", "INT", ["-1"]),
    ("compression.lz4.level", "INT", ["9"]),
    ("compression.zstd.level", "INT", ["3"]),
    ("transactional.id", "STRING", [None]),
]
CONSUMER_KEYS = [
    ("allow.auto.create.topics", "BOOLEAN", ["true", "false"]),
    ("auto.commit.interval.ms", "INT", ["5000", "1000"]),
    ("auto.offset.reset", "STRING", ["latest", "earliest", "none"]),
    ("check.crcs", "BOOLEAN", ["true"]),
    ("enable.auto.commit", "BOOLEAN", ["true", "false"]),
    ("exclude.internal.topics", "BOOLEAN", ["true"]),
    ("fetch.max.bytes", "INT", ["52428800"]),
    ("fetch.max.wait.ms", "INT", ["500", "100", "1000"]),
    ("fetch.min.bytes", "INT", ["1", "1024", "65536"]),
    ("group.id", "STRING", [f"group-{i}" for i in range(300)]),
    ("group.protocol", "STRING", ["classic", "consumer"]),
    ("heartbeat.interval.ms", "INT", ["3000", "5000", "10000"]),
    ("isolation.level", "STRING", ["read_uncommitted", "read_committed"]),
    ("max.partition.fetch.bytes", "INT", ["1048576"]),
    ("max.poll.interval.ms", "INT", ["300000", "600000", "60000"]),
    ("max.poll.records", "INT", ["500", "100", "1000", "20000"]),
    ("session.timeout.ms", "INT", ["45000", "10000", "30000"]),
    ("partition.assignment.strategy", "LIST", ["org.apache.kafka.clients.consumer.RangeAssignor"]),
    ("group.instance.id", "STRING", [None]),
    ("group.remote.assignor", "STRING", [None]),
]
T0 = datetime(2026, 11, 20, tzinfo=UTC)


@dataclass
class Peak:
    """Peak RSS (bytes) of this process and its children while sampling."""

    rss: int = 0


@contextmanager
def peak_memory() -> Iterator[Peak]:
    """Sample RSS of this process tree every 200 ms."""
    peak, stop = Peak(), threading.Event()
    me = psutil.Process()

    def sample() -> None:
        while not stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            peak.rss = max(peak.rss, total)
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


def _chunk(start: int, count: int, rng: np.random.Generator, at: datetime, epoch: int = 0) -> pa.Table:
    """client_configs rows of instances [start, start + count); epoch > 0: a later snapshot."""
    cols: dict[str, list[Any]] = {f.name: [] for f in arrow_schema("client_configs")}
    cluster_idx = rng.integers(0, len(CLUSTERS), count)
    is_producer = rng.random(count) < 0.5
    for j in range(count):
        n = start + j
        keys = COMMON_KEYS + (PRODUCER_KEYS if is_producer[j] else CONSUMER_KEYS)
        cluster = cluster_idx[j]
        instance = str(uuid.UUID(int=n + 1))
        snapshot = str(uuid.UUID(int=(1 << 100) + (epoch << 64) + n + 1))
        client_id = f"app-{n % 5000}"
        cols["client_id"] += [client_id] * len(keys)
        for key, typ, domain in keys:
            # cluster-dependent skew so clusters drift apart
            pick = int(min(len(domain) - 1, rng.geometric(0.55 + 0.04 * cluster) - 1))
            cols["snapshot_id"].append(snapshot)
            cols["cluster_id"].append(CLUSTERS[cluster])
            cols["client_instance_id"].append(instance)
            cols["client_type"].append("producer" if is_producer[j] else "consumer")
            cols["key"].append(key)
            cols["value"].append(domain[pick])
            cols["type"].append(typ)
            cols["is_default"].append(pick == 0)
    rows = len(cols["key"])
    cols["received_at"] = [at] * rows
    cols["broker_id"] = [1] * rows
    cols["client_type_inferred"] = [False] * rows
    cols["client_software_name"] = ["apache-kafka-java"] * rows
    cols["client_software_version"] = ["3.9.0"] * rows
    for name in ("principal", "client_address"):
        cols[name] = [None] * rows
    cols["source"] = ["bench"] * rows
    cols["source_position"] = ["bench:1"] * rows
    cols["ingested_at"] = [at] * rows
    cols["schema_version"] = [SCHEMA_VERSION] * rows
    return pa.table(cols, schema=arrow_schema("client_configs"))


def write_fleet(lake: Path, start: int, count: int, at: datetime, chunk: int = 25_000,
                epoch: int = 0) -> int:
    """Write instances as client_configs files of `chunk` instances; returns the rows written.

    ``epoch`` > 0 writes new snapshots (other values, maybe another cluster) of those instances.
    """
    rng = np.random.default_rng(start + 7919 * epoch)
    rows = 0
    day = lake / "client_configs" / f"date={at.date().isoformat()}"
    day.mkdir(parents=True, exist_ok=True)
    for first in range(start, start + count, chunk):
        table = _chunk(first, min(chunk, start + count - first), rng, at, epoch)
        pq.write_table(table, day / f"bench-{first:09d}-{uuid.uuid4().hex[:6]}.parquet",
                       compression="zstd")
        rows += table.num_rows
    return rows


_NUMERIC = ", ".join(f"'{t}'" for t in NUMERIC_CONFIG_TYPES)
# The DuckDB peer computes the same results tables as the Spark job, from the same files:
# latest snapshot per instance, normalised values, then each table in SQL.
DUCKDB_LATEST = f"""
CREATE OR REPLACE TEMP TABLE latest AS
WITH rows AS (
  SELECT client_instance_id, snapshot_id, received_at, cluster_id, client_id, client_type,
         client_software_name, client_software_version, key, value, type, is_default
  FROM read_parquet(?)),
heads AS (
  SELECT client_instance_id, arg_max(snapshot_id, received_at) AS snapshot_id
  FROM rows GROUP BY client_instance_id)
SELECT DISTINCT ON (r.client_instance_id, r.key) r.* EXCLUDE (value),
  r.value AS raw_value, {normalized_value_sql("r.key", "r.value")} AS value
FROM rows r JOIN heads h USING (client_instance_id, snapshot_id)
"""
DUCKDB_TABLES = {
    "distributions": """
      SELECT cluster_id, client_type, key, value, count(*) AS instance_count,
             list_sort(list(DISTINCT raw_value)) AS raw_values,
             sum(count(*)) OVER (PARTITION BY cluster_id, client_type, key) AS total_instances,
             count(*) / sum(count(*)) OVER (PARTITION BY cluster_id, client_type, key) AS share
      FROM latest GROUP BY cluster_id, client_type, key, value""",
    "default_share": """
      SELECT cluster_id, client_type, key, count(*) AS instances,
             count(*) FILTER (WHERE is_default) AS default_count,
             count(*) FILTER (WHERE NOT is_default) AS overridden_count,
             count(*) FILTER (WHERE is_default) / count(*) AS default_share
      FROM latest GROUP BY cluster_id, client_type, key""",
    "numeric_summary": f"""
      SELECT cluster_id, client_type, key, min(type) AS type, count(*) AS instances,
             count(*) FILTER (WHERE TRY_CAST(value AS DOUBLE) IS NULL AND value IS NOT NULL)
               AS unparsable,
             min(TRY_CAST(value AS DOUBLE)) AS min,
             quantile_cont(TRY_CAST(value AS DOUBLE), [0.5, 0.9]) AS pct,
             max(TRY_CAST(value AS DOUBLE)) AS max
      FROM latest WHERE type IN ({_NUMERIC}) GROUP BY cluster_id, client_type, key""",
    "drift_clusters": """
      WITH dist AS (SELECT * FROM distributions),
      sides AS (SELECT DISTINCT client_type, key, cluster_id, total_instances FROM dist),
      pairs AS (
        SELECT a.client_type, a.key, a.cluster_id AS cluster_a, b.cluster_id AS cluster_b,
               a.total_instances AS instances_a, b.total_instances AS instances_b
        FROM sides a JOIN sides b ON a.client_type IS NOT DISTINCT FROM b.client_type
          AND a.key = b.key AND a.cluster_id < b.cluster_id),
      shares AS (
        SELECT p.client_type, p.key, p.cluster_a, p.cluster_b, d.value,
               sum(d.share) FILTER (WHERE d.cluster_id = p.cluster_a) AS sa,
               sum(d.share) FILTER (WHERE d.cluster_id = p.cluster_b) AS sb
        FROM pairs p JOIN dist d ON d.client_type IS NOT DISTINCT FROM p.client_type
          AND d.key = p.key AND d.cluster_id IN (p.cluster_a, p.cluster_b)
        GROUP BY p.client_type, p.key, p.cluster_a, p.cluster_b, d.value),
      tvd AS (
        SELECT client_type, key, cluster_a, cluster_b,
               least(greatest(sum(abs(coalesce(sa, 0) - coalesce(sb, 0))) / 2, 0), 1) AS tvd
        FROM shares GROUP BY client_type, key, cluster_a, cluster_b),
      dom AS (
        SELECT cluster_id, client_type, key, arg_max(value, instance_count) AS dominant_value
        FROM dist GROUP BY cluster_id, client_type, key)
      SELECT p.*, t.tvd, da.dominant_value AS dominant_value_a, db.dominant_value AS dominant_value_b
      FROM pairs p
      JOIN tvd t ON t.client_type IS NOT DISTINCT FROM p.client_type AND t.key = p.key
        AND t.cluster_a = p.cluster_a AND t.cluster_b = p.cluster_b
      JOIN dom da ON da.client_type IS NOT DISTINCT FROM p.client_type AND da.key = p.key
        AND da.cluster_id = p.cluster_a
      JOIN dom db ON db.client_type IS NOT DISTINCT FROM p.client_type AND db.key = p.key
        AND db.cluster_id = p.cluster_b""",
    "group_drift": f"""
      WITH groups AS (
        SELECT client_instance_id, value AS group_id FROM latest
        WHERE key = 'group.id' AND value IS NOT NULL),
      counts AS (
        SELECT l.cluster_id, g.group_id, l.key, l.value, count(*) AS n
        FROM latest l JOIN groups g USING (client_instance_id)
        WHERE l.key NOT IN ({", ".join(f"'{k}'" for k in GROUP_IDENTITY_KEYS)})
        GROUP BY l.cluster_id, g.group_id, l.key, l.value)
      SELECT cluster_id, group_id, key, sum(n) AS members, count(*) AS distinct_values
      FROM counts GROUP BY cluster_id, group_id, key HAVING count(*) > 1""",
    "client_versions": """
      SELECT cluster_id, client_type, client_software_name, client_software_version,
             count(DISTINCT client_instance_id) AS instances
      FROM latest GROUP BY cluster_id, client_type, client_software_name, client_software_version""",
}


def _duckdb_rule(rule: Rule) -> str:
    """One per-instance rule as a DuckDB SELECT over the per-instance cfg map."""
    if rule.condition is None:  # CC015
        match = f"regexp_matches(coalesce(client_id, cfg['client.id'], ''), '{_GENERATED_ID}')"
    else:
        cond = _PLACEHOLDER.sub(lambda m: {
            "num": f"TRY_CAST(cfg['{m.group(2)}'] AS DOUBLE)",
            "str": f"lower(cfg['{m.group(2)}'])",
            "has": f"map_contains(cfg, '{m.group(2)}')"}[m.group(1)], rule.condition)
        present = " AND ".join(f"map_contains(cfg, '{k}')" for k in rule.keys)
        match = f"({present}) AND ({cond})"
        if rule.client_types:
            match = f"client_type IN ({', '.join(repr(t) for t in rule.client_types)}) AND {match}"
    return (f"SELECT '{rule.id}' AS rule_id, cluster_id, client_instance_id, client_id, "
            f"cfg['group.id'] AS group_id FROM configs WHERE {match}")


def duckdb_results(lake: Path) -> tuple[float, dict[str, int]]:
    """(seconds, rows per table) of the results tables computed by DuckDB over the lake's files.

    config_alerts holds the per-instance rules (PER_INSTANCE_RULE_IDS), the ones SQL can state
    per instance; the fleet rules (CC016-CC018) and drift_keys are not computed by the peer.
    """
    import duckdb

    files = sorted(str(p) for p in (lake / "client_configs").rglob("*.parquet"))
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(DUCKDB_LATEST, [files])
    rows: dict[str, int] = {}
    for name, sql in DUCKDB_TABLES.items():
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}")
        rows[name] = int(con.execute(f"SELECT count(*) FROM {name}").fetchone()[0])  # type: ignore[index]
    con.execute("""CREATE OR REPLACE TEMP TABLE configs AS
      SELECT client_instance_id, any_value(cluster_id) AS cluster_id, any_value(client_id) AS client_id,
             any_value(client_type) AS client_type, map_from_entries(list((key, value))) AS cfg
      FROM latest GROUP BY client_instance_id""")
    alerts = " UNION ALL ".join(_duckdb_rule(rule_by_id(r)) for r in PER_INSTANCE_RULE_IDS)
    con.execute(f"CREATE OR REPLACE TEMP TABLE config_alerts AS {alerts}")
    rows["config_alerts"] = int(con.execute("SELECT count(*) FROM config_alerts").fetchone()[0])  # type: ignore[index]
    elapsed = time.perf_counter() - started
    con.close()
    return elapsed, rows


DUCKDB_COVERS = (*DUCKDB_TABLES, "config_alerts (per-instance rules: "
                 + ", ".join(PER_INSTANCE_RULE_IDS) + ")")


def spark_rows(lake: Path) -> dict[str, int]:
    """Rows per results table the Spark job wrote (config_alerts: the per-instance rules only)."""
    rows = {name: read_table(str(lake), f"results/{name}").num_rows for name in DUCKDB_TABLES}
    alerts = read_table(str(lake), "results/config_alerts")
    rows["config_alerts"] = sum(1 for r in alerts.column("rule_id").to_pylist() if r in PER_INSTANCE_RULE_IDS)
    return rows


def demo_analyze(workdir: Path, n: int = 400) -> dict[str, Any]:
    """Wall time of one `python -m backend analyze` (a new process: JVM start included) on n instances."""
    lake = workdir / f"demo-{n}"
    write_fleet(lake, 0, n, T0)
    command = [sys.executable, "-m", "backend", "analyze", "--lake", str(lake), "--master", "local[2]"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"analyze failed: {done.stderr[-2000:]}")
    return {"instances": n, "analyze_wall_s": round(wall, 1), "command": " ".join(command[1:])}


def _log(stage: str) -> Callable[[str], None]:
    """Progress of one run_analysis on stderr, with seconds since it started."""
    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[{stage} {time.perf_counter() - started:7.1f} s] {msg}", file=sys.stderr, flush=True)

    return say


def _timed(fn: Callable[[], Any]) -> tuple[float, Any, int]:
    with peak_memory() as peak:
        started = time.perf_counter()
        value = fn()
        elapsed = time.perf_counter() - started
    return elapsed, value, peak.rss


def bench_size(n: int, master: str | None, workdir: Path) -> dict[str, Any]:
    """All measurements for a fleet of n instances."""
    lake = workdir / f"lake-{n}"
    gen_s, rows, _ = _timed(lambda: write_fleet(lake, 0, n, T0))
    full_s, full, full_rss = _timed(lambda: run_analysis(str(lake), master=master,
                                                         progress=_log(f"{n} full")))
    added, updated = max(1, n // 200), n // 200  # +1 %: half new instances, half new snapshots
    write_fleet(lake, n, added, T0 + timedelta(hours=1))
    if updated:
        write_fleet(lake, 0, updated, T0 + timedelta(hours=1), epoch=1)
    inc_s, inc, inc_rss = _timed(lambda: run_analysis(str(lake), master=master,
                                                      progress=_log(f"{n} refresh")))
    duck_s, duck_rows = duckdb_results(lake)
    ours = spark_rows(lake)
    return {
        "instances": n,
        "config_rows": rows,
        "generate_s": round(gen_s, 1),
        "spark_full_s": round(full_s, 1),
        "spark_full_rows_read": full.records_read,
        "spark_full_jobs": full.spark_jobs,
        "spark_full_stages": full.spark_stages,
        "spark_incremental_s": round(inc_s, 1),
        "spark_incremental_jobs": inc.spark_jobs,
        "spark_incremental_stages": inc.spark_stages,
        "shuffle_partitions_full": full.shuffle_partitions,
        "incremental_written_new_instances": added,
        "incremental_written_updated_instances": updated,
        "incremental_rows_read": inc.records_read,
        "incremental_files_processed": inc.files_processed,
        "incremental_full_fallback": inc.full_reason,
        # what the refresh touched (from AnalysisSummary): only the changed instances
        "incremental_instances_new": inc.instances_new,
        "incremental_instances_updated": inc.instances_updated,
        "incremental_instances_evaluated": inc.instances_evaluated,
        "incremental_delta_rows": inc.delta_rows,
        "incremental_state_rows_scanned": inc.state_rows_scanned,
        "incremental_state_rows_matched": inc.state_rows_matched,
        "incremental_state_rows_written": inc.state_rows_written,
        "incremental_state_rows_rewritten": inc.state_rows_rewritten,
        "instances_after_refresh": inc.instances,
        "incremental_over_full": round(inc_s / full_s, 3),
        "duckdb_s": round(duck_s, 2),
        "duckdb_covers": list(DUCKDB_COVERS),
        "spark_full_over_duckdb": round(full_s / duck_s, 1),
        "spark_incremental_over_duckdb": round(inc_s / duck_s, 2),
        "rows_spark": ours,
        "rows_duckdb": duck_rows,
        "tables_agree": ours == duck_rows,
        "alerts": inc.alerts_by_severity,
        "peak_rss_full_mb": round(full_rss / 2**20),
        "peak_rss_incremental_mb": round(inc_rss / 2**20),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated instance counts")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None, help="where lakes go (default: a temp dir)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--demo", type=int, default=400,
                        help="also time one `python -m backend analyze` of this many instances (0: skip)")
    parser.add_argument("--driver-memory", default=None,
                        help="heap of the local Spark JVM, e.g. 4g (default: Spark's 1g)")
    args = parser.parse_args(argv)
    if args.driver_memory:  # must be set before the JVM starts (the first run_analysis)
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {args.driver_memory} pyspark-shell"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-", dir=args.workdir) as tmp:
        demo = demo_analyze(Path(tmp), args.demo) if args.demo else None
        results = [bench_size(n, args.master, Path(tmp)) for n in sizes]
    report = {"benchmark": "pipeline", "master": args.master, "driver_memory": args.driver_memory or "1g",
              "cpu_count": psutil.cpu_count(), "demo": demo,
              "load_avg": [round(x, 1) for x in psutil.getloadavg()], "results": results}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
