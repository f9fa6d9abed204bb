"""Benchmark of the Spark pipeline: this code against a baseline ref (main), both against DuckDB.

For each fleet size: write N client instances x ~40 keys as client_configs Parquet, and 1 % new
snapshots beside it (half new instances, half new snapshots of existing instances). Then, for
each implementation (this checkout, and the ``--baseline`` git ref exported with ``git
archive``), side by side in one run: copy the lake, run the full analysis in a new process (JVM
start not timed), add the 1 % and run the incremental refresh in that process. DuckDB computes
the same results tables over the same files (see DUCKDB_COVERS); the results of the two
implementations are compared row for row. Before the sizes, cold runs: `python -m backend
analyze` of small fleets in a new process (JVM start included), next to the floor: the same
cold process with the same settings running an empty job. Peak memory is the RSS of a worker
process plus its children (the Spark JVM), sampled every 200 ms.

    .venv/bin/python -m benchmarks.pipeline_bench --sizes 100000 --small 163,400
    .venv/bin/python -m benchmarks.pipeline_bench --sizes 1000000 --small '' --driver-memory 4g
    .venv/bin/python -m benchmarks.pipeline_bench --explain 2000   # the passes' physical plans
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from backend.pipeline.normalize import normalized_value_sql
from backend.pipeline.results import GROUP_IDENTITY_KEYS
from backend.pipeline.rules import _PLACEHOLDER, GENERATED_ID, PER_INSTANCE_RULE_IDS, Rule, rule_by_id
from backend.store.config_schemas import NUMERIC_CONFIG_TYPES, SCHEMA_VERSION, arrow_schema
from backend.store.tables import read_table

CLUSTERS = [f"cluster-{i:02d}" for i in range(10)]
Keys = list[tuple[str, str, list[str | None]]]  # (key, config type, values to draw from)
COMMON_KEYS: Keys = [
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
PRODUCER_KEYS: Keys = [
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
CONSUMER_KEYS: Keys = [
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
        match = f"regexp_matches(coalesce(client_id, cfg['client.id'], ''), '{GENERATED_ID}')"
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


def duckdb_results(files: list[str]) -> tuple[float, dict[str, int]]:
    """(seconds, rows per table) of the results tables computed by DuckDB over client_configs files.

    config_alerts holds the per-instance rules (PER_INSTANCE_RULE_IDS), the ones SQL can state
    per instance; the fleet rules (CC016-CC018) and drift_keys are not computed by the peer.
    """
    import duckdb

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


DUCK_WORKER = r"""
import json, sys, threading
import psutil
from benchmarks.pipeline_bench import duckdb_results
me, peak, stop = psutil.Process(), [0], threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], me.memory_info().rss)
        stop.wait(0.2)
thread = threading.Thread(target=sample, daemon=True)
thread.start()
seconds, rows = duckdb_results(json.loads(sys.argv[1]))
stop.set()
thread.join()
print("RESULT " + json.dumps({"s": seconds, "rows": rows, "peak_rss": peak[0]}))
"""


def duckdb_process(files: list[str]) -> dict[str, Any]:
    """duckdb_results in a new process, with that process's peak RSS (sampled every 200 ms)."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", DUCK_WORKER, json.dumps(files)], cwd=root, env=_env(None),
                          stdout=subprocess.PIPE, text=True, timeout=6 * 3600, check=True)
    return dict(json.loads([line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1][7:]))


def spark_rows(lake: Path) -> dict[str, int]:
    """Rows per results table the Spark job wrote (config_alerts: the per-instance rules only)."""
    rows = {name: read_table(str(lake), f"results/{name}").num_rows for name in DUCKDB_TABLES}
    alerts = read_table(str(lake), "results/config_alerts")
    rows["config_alerts"] = sum(1 for r in alerts.column("rule_id").to_pylist() if r in PER_INSTANCE_RULE_IDS)
    return rows




# --- Implementations side by side ------------------------------------------------------------
#
# Every Spark run happens in a new process whose working directory is the implementation's
# root, so `import backend` is that implementation's code; both use this interpreter (the venv).

WORKER = r"""
import json, shutil, sys, threading, time
from pathlib import Path
import psutil
args = json.loads(sys.argv[1])
began = time.perf_counter()
from backend.pipeline.job import run_analysis
from backend.pipeline.spark import get_spark


def say(stage):
    t0 = time.perf_counter()
    return lambda msg: print(f"[{args['name']} {stage} {time.perf_counter() - t0:7.1f} s] {msg}",
                             file=sys.stderr, flush=True)


def measured(fn):
    me, peak, stop = psutil.Process(), [0], threading.Event()
    def sample():
        while not stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            peak[0] = max(peak[0], total)
            stop.wait(0.2)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    try:
        value = fn()
    finally:
        elapsed = time.perf_counter() - t0
        stop.set()
        thread.join()
    return elapsed, value, peak[0]


KEEP = ("records_read", "snapshots_read", "instances", "files_processed", "full_reason", "spark_jobs",
        "spark_stages", "shuffle_partitions", "instances_new", "instances_updated", "instances_changed",
        "rows_added", "rows_removed", "files_reread", "instances_evaluated", "delta_rows", "state_rows_scanned",
        "state_rows_matched", "state_rows_written", "state_rows_rewritten", "alerts_by_severity")
out = {"imports_s": time.perf_counter() - began}
jvm_s, _, _ = measured(lambda: get_spark(args["master"]))
out["jvm_start_s"] = jvm_s
for phase in ("full", "full_again", "refresh"):
    if phase == "refresh":
        for f in args["refresh_files"]:
            target = Path(args["lake"], "client_configs", Path(f).parent.name, Path(f).name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, target)
    s, summary, rss = measured(lambda: run_analysis(args["lake"], master=args["master"], progress=say(phase),
                                                    full=phase == "full_again"))
    out[phase] = {"s": s, "peak_rss": rss, **{k: getattr(summary, k) for k in KEEP if hasattr(summary, k)}}
print("RESULT " + json.dumps(out))
"""

# The floor of a cold run: the same process (the imports of `analyze`, the session get_spark()
# builds for a small run, the sized settings) running one trivial Spark job.
FLOOR = r"""
import inspect, sys
import backend.pipeline.cli, backend.pipeline.job
from backend.pipeline import spark as S
if "short_lived" in inspect.signature(S.get_spark).parameters:  # the JVM options of a small analyze
    spark = S.get_spark(sys.argv[1], short_lived=True)
else:
    spark = S.get_spark(sys.argv[1])
S.size_session(spark, 0)
spark.range(1).selectExpr("count(*)").collect()
"""


def export_ref(ref: str, into: Path) -> Path:
    """A checkout of ``ref`` (only its tracked files, via git archive) under ``into``."""
    root = Path(__file__).resolve().parents[1]
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", ref],
                             capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True, timeout=120)
    return into


def _env(driver_memory: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if driver_memory:  # read when the JVM starts
        env["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {driver_memory} pyspark-shell"
    return env


def worker(name: str, root: Path, lake: Path, refresh: list[Path], master: str,
           driver_memory: str | None) -> dict[str, Any]:
    """Full run then +1 % refresh of ``lake`` by the implementation at ``root``, in a new process."""
    spec = {"name": name, "lake": str(lake), "refresh_files": [str(f) for f in refresh], "master": master}
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(spec)], cwd=root, env=_env(driver_memory),
                          stdout=subprocess.PIPE, text=True, timeout=6 * 3600, check=False)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not result:
        raise RuntimeError(f"{name} worker failed ({done.returncode}): {done.stdout[-2000:]}")
    return dict(json.loads(result[-1][len("RESULT "):]))


def _wall(command: list[str], root: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=_env(None), capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed in {root.name}: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def results_digest(lake: Path) -> dict[str, list[str]]:
    """Every results table as sorted JSON rows, computed_at left out (to compare implementations)."""
    out = {}
    for name in SPARK_RESULTS:
        rows = read_table(str(lake), f"results/{name}").to_pylist()
        out[name] = sorted(json.dumps({k: v for k, v in r.items() if k != "computed_at"}, sort_keys=True,
                                      default=str) for r in rows)
    return out


SPARK_RESULTS = ("distributions", "default_share", "numeric_summary", "drift_clusters", "drift_keys",
                 "group_drift", "client_versions", "config_alerts")


def cold_runs(impls: dict[str, Path], sizes: list[int], repeat: int, master: str, workdir: Path
              ) -> dict[str, Any]:
    """Cold `python -m backend analyze` of small fleets and the floor, each implementation in turn."""
    lakes = {}
    for n in sizes:
        lakes[n] = workdir / f"small-{n}"
        write_fleet(lakes[n], 0, n, T0)
    empty = workdir / "small-empty"
    empty.mkdir()
    runs: dict[str, dict[str, list[float]]] = {name: {} for name in impls}
    for i in range(repeat):
        for name, root in (impls.items() if i % 2 == 0 else reversed(impls.items())):
            times = runs[name]
            times.setdefault("floor", []).append(_wall([sys.executable, "-c", FLOOR, master], root))
            times.setdefault("empty_lake", []).append(_wall(
                [sys.executable, "-m", "backend", "analyze", "--lake", str(_copy(empty, workdir, f"{name}-e{i}")),
                 "--master", master], root))
            for n, lake in lakes.items():
                copy = _copy(lake, workdir, f"{name}-{n}-{i}")
                times.setdefault(str(n), []).append(_wall(
                    [sys.executable, "-m", "backend", "analyze", "--lake", str(copy), "--master", master], root))
            print(f"[cold {name} #{i + 1}] " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
                  file=sys.stderr, flush=True)
    out: dict[str, Any] = {"instances": sizes, "repeat": repeat, "command": "python -m backend analyze"}
    for name, times in runs.items():
        out[name] = {k: {"median_s": round(statistics.median(v), 1), "runs_s": [round(x, 1) for x in v]}
                     for k, v in times.items()}
    for label in [*map(str, sizes), "empty_lake"]:
        new, floor = out["new"][label]["median_s"], out["new"]["floor"]["median_s"]
        out.setdefault("new_over_floor", {})[label] = round(new / floor, 2)
        if "main" in out:
            out.setdefault("new_over_main", {})[label] = round(new / out["main"][label]["median_s"], 2)
    return out


def _copy(lake: Path, workdir: Path, name: str) -> Path:
    target = workdir / "copies" / name
    shutil.copytree(lake, target)
    return target


def bench_size(n: int, impls: dict[str, Path], master: str, driver_memory: str | None, workdir: Path
               ) -> dict[str, Any]:
    """Full run and +1 % refresh of n instances by each implementation, and the DuckDB peer."""
    base, extra = workdir / f"fleet-{n}", workdir / f"fleet-{n}-refresh"
    started = time.perf_counter()
    rows = write_fleet(base, 0, n, T0)
    added, updated = max(1, n // 200), n // 200  # +1 %: half new instances, half new snapshots
    write_fleet(extra, n, added, T0 + timedelta(hours=1))
    if updated:
        write_fleet(extra, 0, updated, T0 + timedelta(hours=1), epoch=1)
    refresh = sorted((extra / "client_configs").rglob("*.parquet"))
    out: dict[str, Any] = {"instances": n, "config_rows": rows, "generate_s": round(time.perf_counter() - started, 1),
                           "refresh_new_instances": added, "refresh_updated_instances": updated,
                           "load_avg_before": [round(x, 1) for x in psutil.getloadavg()]}
    digests = {}
    for name, root in impls.items():
        lake = _copy(base, workdir, f"{name}-{n}")
        got = worker(name, root, lake, refresh, master, driver_memory)
        out[name] = {
            "jvm_start_s": round(got["jvm_start_s"], 1),
            "full_s": round(got["full"]["s"], 1),
            "full_with_jvm_start_s": round(got["full"]["s"] + got["jvm_start_s"], 1),
            "full_again_s": round(got["full_again"]["s"], 1),
            "refresh_s": round(got["refresh"]["s"], 1),
            "peak_rss_full_mb": round(got["full"]["peak_rss"] / 2**20),
            "peak_rss_full_again_mb": round(got["full_again"]["peak_rss"] / 2**20),
            "peak_rss_refresh_mb": round(got["refresh"]["peak_rss"] / 2**20),
            **{phase: {k: v for k, v in got[phase].items() if k not in ("s", "peak_rss")}
               for phase in ("full", "full_again", "refresh")},
            "rows_per_table": spark_rows(lake),
        }
        digests[name] = results_digest(lake)
        shutil.rmtree(lake)
    files = sorted(str(p) for p in (base / "client_configs").rglob("*.parquet")) + [str(f) for f in refresh]
    duck = duckdb_process(files)
    duck_s = duck["s"]
    out["duckdb_s"] = round(duck_s, 2)
    out["duckdb_peak_rss_mb"] = round(duck["peak_rss"] / 2**20)
    out["duckdb_rows_per_table"] = duck["rows"]
    out["duckdb_covers"] = list(DUCKDB_COVERS)
    out["load_avg_after"] = [round(x, 1) for x in psutil.getloadavg()]
    new = out["new"]
    out["new_rows_equal_duckdb"] = new["rows_per_table"] == duck["rows"]
    out["new_full_over_duckdb"] = round(new["full_with_jvm_start_s"] / duck_s, 2)
    out["new_full_again_over_duckdb"] = round(new["full_again_s"] / duck_s, 2)
    out["new_refresh_over_duckdb"] = round(new["refresh_s"] / duck_s, 2)
    if "main" in out:
        main_ = out["main"]
        out["main_full_over_duckdb"] = round(main_["full_with_jvm_start_s"] / duck_s, 2)
        out["main_full_again_over_duckdb"] = round(main_["full_again_s"] / duck_s, 2)
        out["new_full_over_main"] = round(new["full_with_jvm_start_s"] / main_["full_with_jvm_start_s"], 3)
        out["new_refresh_over_main"] = round(new["refresh_s"] / main_["refresh_s"], 3)
        out["results_equal_main"] = {t: digests["new"][t] == digests["main"][t] for t in SPARK_RESULTS}
    return out


def explain(n: int, workdir: Path, master: str) -> str:
    """The physical plans of the two passes over a fleet of n instances."""
    lake = workdir / f"explain-{n}"
    write_fleet(lake, 0, n, T0)
    code = r"""
import glob, sys
from backend.pipeline import heads as H, passes
from backend.pipeline.spark import get_spark, size_session
spark = get_spark(sys.argv[2])
files = sorted(glob.glob(sys.argv[1] + "/client_configs/**/*.parquet", recursive=True))
size_session(spark, 10**7)  # the settings of a run that is not small
rows = passes.read_rows(spark, files)
rows.groupBy(*passes.INSTANCE_COLUMNS).count().explain()  # pass 1's plan (its captured values left out)
heads, _, _ = H.heads_of(passes.snapshot_table(rows), "file://" + sys.argv[1] + "/client_configs")
wanted, _ = H.wanted(heads, heads.slice(0, 0))
print("== instance pass ==")
passes.instance_frame(rows, spark.createDataFrame(wanted), 8).explain()
"""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code, str(lake), master], cwd=root, env=_env(None),
                          capture_output=True, text=True, timeout=900, check=True)
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated instance counts ('' for none)")
    parser.add_argument("--small", default="163,400",
                        help="cold `python -m backend analyze` of these fleet sizes, and the floor ('' for none)")
    parser.add_argument("--repeat-small", type=int, default=3, help="cold runs per size and implementation")
    parser.add_argument("--baseline", default="main", help="git ref run side by side with this checkout ('' for none)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", default=None, help="where lakes go (default: a temp dir)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    parser.add_argument("--driver-memory", default=None,
                        help="heap of the local Spark JVM for the sizes, e.g. 4g (default: Spark's 1g)")
    parser.add_argument("--explain", type=int, default=0, help="only print the instance pass's plans for this many instances")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-", dir=args.workdir) as tmp:
        if args.explain:
            print(explain(args.explain, Path(tmp), args.master))
            return 0
        impls = {"new": Path(__file__).resolve().parents[1]}
        if args.baseline:
            impls = {"main": export_ref(args.baseline, Path(tmp) / "baseline"), **impls}
        small = [int(s) for s in args.small.split(",") if s]
        cold = cold_runs(impls, small, args.repeat_small, args.master, Path(tmp)) if small else None
        results = [bench_size(int(n), impls, args.master, args.driver_memory, Path(tmp))
                   for n in args.sizes.split(",") if n]
    report = {"benchmark": "pipeline", "baseline": args.baseline, "master": args.master,
              "driver_memory": args.driver_memory or "1g", "cpu_count": psutil.cpu_count(),
              "cold": cold, "results": results}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
