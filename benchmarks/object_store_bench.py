"""The lake on S3 against the lake on a local disk, side by side in one run (SeaweedFS on loopback).

analysis: the 100,000-instance fleet of pipeline_bench (about 3.9 M client_configs rows), written once to a local
lake and uploaded to a SeaweedFS bucket; then +1 % (half new instances, half new snapshots). The full analysis, then
the +1 % refresh: on the local lake with `local[2]`, and on the bucket (s3a://) with a standalone cluster of a master
and two workers (one core each: the same two cores); the sides take turns going first, `--repeat` times, and their
results tables are compared row for row. `--mode warm` (default): one driver per side runs both (as the service's warm
driver does, keeping its executors); `--mode cold`: a new process per run. Neither times the JVM start, nor on the
cluster the executors' start (a trivial job brings them up first).

poll: a lab fleet of `--clusters` clusters x 3 brokers x `--topics` topics (KIP-885 profile) in this process. Each
cycle polls the fleet once (poll_fleet, as run_poller does) and two FleetWriters write that poll (write + maintain),
one to a local lake and one to an s3:// lake, taking turns going first; a side's cycle is the poll plus its write.
The first cycle (every topic first seen), `--cycles` unchanged cycles, then cycles in which one topic per cluster is
recreated (every cluster's state rewritten).

    .venv/bin/python -m benchmarks.object_store_bench analysis --instances 100000 --repeat 3 [--mode cold]
    .venv/bin/python -m benchmarks.object_store_bench poll --clusters 20 --topics 2000 --cycles 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.pipeline_bench import results_digest, write_fleet  # noqa: E402
from tests.rig.objectstores import S3Server, start_seaweedfs  # noqa: E402
from tests.rig.spark_cluster import spark_env, start_cluster  # noqa: E402

T0 = datetime(2026, 11, 20, tzinfo=UTC)
T1 = datetime(2026, 11, 21, tzinfo=UTC)

# One analysis in a process of its own: the JVM start is timed apart from the runs.
WORKER = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
from backend.pipeline.job import run_analysis
from backend.pipeline.spark import get_spark
began = time.perf_counter()
spark = get_spark(spec["master"], lake=spec["lake"])
spark.range(1000, numPartitions=4).selectExpr("sum(id)").collect()  # the executors up (on a cluster: their JVMs)
out = {"jvm_start_s": time.perf_counter() - began}
t = time.perf_counter()
summary = run_analysis(spec["lake"], master=spec["master"], full=spec["full"])
out["s"] = time.perf_counter() - t
out.update(instances=summary.instances, records_read=summary.records_read, full=summary.full,
           spark_jobs=summary.spark_jobs, shuffle_partitions=summary.shuffle_partitions)
print("RESULT " + json.dumps(out))
"""


# One driver for both runs (as the service's warm driver keeps one, with its executors): executors up, the full run,
# the +1 % added to the lake, the refresh.
WARM_WORKER = r"""
import json, shutil, sys, time
from pathlib import Path
spec = json.loads(sys.argv[1])
from backend.pipeline.job import run_analysis
from backend.pipeline.spark import get_spark
began = time.perf_counter()
spark = get_spark(spec["master"], lake=spec["lake"])
spark.range(1000, numPartitions=4).selectExpr("sum(id)").collect()  # the executors up (on a cluster: their JVMs)
out = {"jvm_start_s": time.perf_counter() - began}
for phase in ("full", "refresh"):
    if phase == "refresh":
        extra = Path(spec["extra"])
        for path in sorted(extra.rglob("*.parquet")):
            rel = path.relative_to(extra).as_posix()
            if spec["lake"].startswith("s3://"):
                import boto3
                bucket, prefix = spec["lake"][5:].split("/", 1)
                boto3.client("s3").upload_file(str(path), bucket, f"{prefix}/{rel}")
            else:
                (Path(spec["lake"]) / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, Path(spec["lake"]) / rel)
    t = time.perf_counter()
    summary = run_analysis(spec["lake"], master=spec["master"], full=phase == "full")
    out[phase] = {"s": time.perf_counter() - t, "instances": summary.instances, "full": summary.full,
                  "records_read": summary.records_read, "shuffle_partitions": summary.shuffle_partitions}
print("RESULT " + json.dumps(out))
"""


def _upload(server: S3Server, bucket: str, local: Path, prefix: str) -> int:
    client, sent = server.client(), 0
    for path in sorted(local.rglob("*.parquet")):
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        client.upload_file(str(path), bucket, key)
        sent += 1
    return sent


def _rows(lake: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path in lake.rglob("*.parquet"))


def _analysis(lake: str, master: str, full: bool, env: dict[str, str], extra: Path | None = None) -> dict[str, Any]:
    spec = {"lake": lake, "master": master, "full": full, "extra": str(extra) if extra else None}
    done = subprocess.run([sys.executable, "-c", WORKER if extra is None else WARM_WORKER, json.dumps(spec)],
                          cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=3 * 3600, check=False)
    found = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not found:
        errors = [line for line in done.stderr.splitlines() if "Exception" in line or "Error" in line][:5]
        raise RuntimeError(f"analysis of {lake} failed ({done.returncode}): {errors} ... {done.stderr[-1500:]}")
    return dict(json.loads(found[-1][len("RESULT "):]))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def bench_analysis(instances: int, repeat: int, workdir: Path, mode: str = "warm") -> dict[str, Any]:
    """Full run and +1 % refresh: local lake + local[2] against SeaweedFS + a two-worker standalone cluster."""
    server = start_seaweedfs(workdir / "seaweedfs")
    cluster = None
    try:
        env = {**spark_env(workdir), **server.env(), "PYTHONPATH": str(REPO)}
        cluster = start_cluster(workdir / "spark", 2, memory="3g", env=server.env())
        source = workdir / "fleet"
        extra = workdir / "extra"  # +1 %: half new instances, half new snapshots of existing ones
        if not (workdir / "fleet.done").exists():  # written once per workdir (a rerun reuses it)
            write_fleet(source, 0, instances, T0)
            write_fleet(extra, instances, instances // 200, T1)
            write_fleet(extra, 0, instances // 200, T1, epoch=1)
            (workdir / "fleet.done").write_text(str(instances))
        rows = _rows(source)
        rows_extra = _rows(extra)
        out: dict[str, Any] = {"mode": mode, "instances": instances, "rows": rows, "rows_refresh": rows_extra,
                               "master_s3": "spark standalone, 2 workers x 1 core", "master_local": "local[2]",
                               "runs": []}
        for i in range(repeat):
            lake_dir = workdir / f"local-{i}"
            subprocess.run(["cp", "-r", str(source), str(lake_dir)], check=True)
            bucket = server.new_bucket(f"bench{i}")
            s3_lake = f"s3://{bucket}/lake"
            _upload(server, bucket, source, "lake")
            pair: dict[str, Any] = {"load_before": _load()}
            order = [("local", str(lake_dir), "local[2]"), ("s3", s3_lake, cluster.url)]
            if mode == "warm":  # one driver per side for both runs, the sides taking turns going first
                for name, lake, master in order if i % 2 == 0 else order[::-1]:
                    both = _analysis(lake, master, True, env, extra)
                    pair[f"{name}_full"] = {**both["full"], "jvm_start_s": both["jvm_start_s"]}
                    pair[f"{name}_refresh"] = both["refresh"]
            else:  # a new process for each run
                for name, lake, master in order if i % 2 == 0 else order[::-1]:
                    pair[f"{name}_full"] = _analysis(lake, master, True, env)
                subprocess.run(["cp", "-r", f"{extra}/client_configs/.", f"{lake_dir}/client_configs/"], check=True)
                _upload(server, bucket, extra, "lake")
                for name, lake, master in order if i % 2 else order[::-1]:
                    pair[f"{name}_refresh"] = _analysis(lake, master, False, env)
            for part in ("full", "refresh"):
                pair[f"ratio_{part}_s3_over_local"] = round(pair[f"s3_{part}"]["s"] / pair[f"local_{part}"]["s"], 2)
            os.environ.update(server.env())
            pair["results_equal"] = results_digest(lake_dir) == results_digest(s3_lake)  # type: ignore[arg-type]
            pair["load_after"] = _load()
            out["runs"].append(pair)
            print(json.dumps(pair), file=sys.stderr, flush=True)
        for part in ("full", "refresh"):
            out[f"median_ratio_{part}"] = statistics.median(r[f"ratio_{part}_s3_over_local"] for r in out["runs"])
        return out
    finally:
        if cluster is not None:
            cluster.stop()
        server.stop()


def bench_poll(clusters: int, topics: int, cycles: int, workdir: Path) -> dict[str, Any]:
    """One poll cycle (poll_fleet + write + maintain) to a local lake against the same to an s3:// lake."""
    from backend.collect.configs import ConfigCollector
    from backend.collect.groups import GroupCollector
    from backend.collect.poller import poll_fleet
    from backend.config import load_fleet
    from backend.kafka.admin import AdminClientCache
    from backend.lab.fleet import LabFleet
    from backend.lab.model import load_lab_config
    from backend.store.fleet_writer import FleetWriter
    from backend.store.lake import Lake
    from benchmarks.poll_bench import _lab_toml

    server = start_seaweedfs(workdir / "seaweedfs")
    lab = LabFleet(load_lab_config(_lab_toml(workdir, clusters, topics)))
    lab.start()
    try:
        os.environ.update(server.env())
        fleet_file = lab.write_fleet_file(workdir / "lab-clusters.toml")
        settings = "[settings]\nrequest_timeout_s = 60\npoll_deadline_s = 120\nconfig_interval_s = 0\ngroup_interval_s = 0\n\n"
        (workdir / "fleet.toml").write_text(settings + fleet_file.read_text(), encoding="utf-8")
        fleet = load_fleet(workdir / "fleet.toml")
        bucket = server.new_bucket("poll")
        writers = {"local": FleetWriter(Lake(workdir / "local-lake")), "s3": FleetWriter(Lake(f"s3://{bucket}/lake"))}
        previous: dict[str, Any] = {}
        clients, configs, groups = AdminClientCache(), ConfigCollector(), GroupCollector()

        def cycle(i: int) -> dict[str, float]:
            """One poll, written by each side in turn (alternating who goes first): the poll's time plus each write."""
            began = time.perf_counter()
            poll = poll_fleet(fleet, previous, clients=clients, configs=configs, groups=groups)
            polled = time.perf_counter() - began
            bad = [(c.cluster_name, c.status) for c in poll.clusters if c.status != "ok"]
            assert not bad, bad
            previous.update({c.cluster_name: c for c in poll.clusters})
            took = {"poll": polled}
            for name in (list(writers) if i % 2 == 0 else list(writers)[::-1]):
                began = time.perf_counter()
                writers[name].write(poll)
                writers[name].maintain(poll.polled_at, 30)
                took[name] = time.perf_counter() - began
            return took

        def summary(runs: list[dict[str, float]]) -> dict[str, float]:
            out = {k: round(statistics.median(r[k] for r in runs), 3) for k in ("poll", "local", "s3")}
            out["cycle_local"] = round(statistics.median(r["poll"] + r["local"] for r in runs), 3)
            out["cycle_s3"] = round(statistics.median(r["poll"] + r["s3"] for r in runs), 3)
            out["ratio_cycle_s3_over_local"] = round(out["cycle_s3"] / out["cycle_local"], 2)
            out["ratio_write_s3_over_local"] = round(out["s3"] / out["local"], 2)
            return out

        out: dict[str, Any] = {"clusters": clusters, "topics_per_cluster": topics, "load_before": _load()}
        out["first"] = summary([cycle(0)])  # every topic first seen: 40,000 change rows, every state file
        out["unchanged"] = summary([cycle(i) for i in range(cycles)])  # status rows only
        changed = []
        for i in range(max(2, cycles // 2)):
            for cluster in lab.clusters:  # one topic recreated per cluster: every cluster's state rewritten
                lab.recreate_topic(cluster, "t00000")
            changed.append(cycle(i))
        out["changed"] = summary(changed)
        out["load_after"] = _load()
        return out
    finally:
        lab.stop()
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark; print its JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="bench", required=True)
    analysis = sub.add_parser("analysis")
    analysis.add_argument("--instances", type=int, default=100_000)
    analysis.add_argument("--repeat", type=int, default=2)
    analysis.add_argument("--mode", choices=("warm", "cold"), default="warm",
                          help="warm: one driver per side for the full run and the refresh (the service); "
                               "cold: a new process per run")
    poll = sub.add_parser("poll")
    poll.add_argument("--clusters", type=int, default=20)
    poll.add_argument("--topics", type=int, default=2000)
    poll.add_argument("--cycles", type=int, default=10)
    for each in (analysis, poll):
        each.add_argument("--workdir", default=None)
        each.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="fleetview-s3-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.bench == "analysis":
        result = bench_analysis(args.instances, args.repeat, workdir, args.mode)
    else:
        result = bench_poll(args.clusters, args.topics, args.cycles, workdir)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
