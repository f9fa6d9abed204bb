"""The cost of running librdkafka in a helper process (backend.kafka.admin_helpers), side by side with in process.

A lab cluster of `--topics` topics (3 brokers, `--partitions` partitions each) runs in its own process. Interleaved,
`--repeats` times each: Metadata for every topic (`ClusterAdmin.metadata`, the poller's librdkafka Metadata) and
DescribeCluster, once through an in-process ClusterAdmin and once through the helper; then DescribeTopics of every
topic (the poller's fallback when no broker answers its own Metadata request). Wall time (median), CPU seconds of the
poller's process and of the helper, the helper's RSS, and how long a fresh helper takes to its first answer.

Run: .venv/bin/python -m benchmarks.admin_hop_bench [--topics 10000] [--partitions 3] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from backend.config import ClusterConfig, parse_fleet
from backend.kafka.admin import ClusterAdmin
from backend.kafka.admin_helpers import AdminHelpers

REPO = Path(__file__).resolve().parents[1]


def _lab(workdir: Path, topics: int, partitions: int) -> tuple[subprocess.Popen[bytes], ClusterConfig]:
    lab_file = workdir / "lab.toml"
    rows = "".join(f'  {{ name = "t{t:05d}", partitions = {partitions}, replication_factor = 1 }},\n'
                   for t in range(topics))
    lab_file.write_text(f'[lab]\nstate_dir = "{workdir / "state"}"\n\n[[clusters]]\nname = "big"\n'
                        'profile = "apache-kafka-4-kraft-kip885"\n'
                        "brokers = [ { id = 1, port = 0 }, { id = 2, port = 0 }, { id = 3, port = 0 } ]\n"
                        f"topics = [\n{rows}]\n", encoding="utf-8")
    fleet_file = workdir / "clusters.toml"
    proc = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config", str(lab_file), "--fleet-file",
                             str(fleet_file)], cwd=REPO, stdout=(workdir / "lab.log").open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not fleet_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the lab did not start; see {workdir / 'lab.log'}")
        time.sleep(0.3)
    time.sleep(1.0)
    fleet = parse_fleet(fleet_file.read_text(encoding="utf-8"), source="bench",
                        secrets_path=workdir / "no-secrets.toml")
    return proc, fleet.clusters[0]


def _timed(fn: Callable[[], Any], helper: psutil.Process | None) -> tuple[float, float, float]:
    """(wall s, this process's CPU s (every thread, librdkafka's included), the helper's CPU s) of one call."""
    hcpu0 = sum(helper.cpu_times()[:2]) if helper else 0.0
    cpu0 = time.process_time()
    began = time.perf_counter()
    fn()
    wall = time.perf_counter() - began
    cpu = time.process_time() - cpu0
    return wall, cpu, (sum(helper.cpu_times()[:2]) - hcpu0) if helper else 0.0


def _summary(runs: list[tuple[float, float, float]]) -> dict[str, float]:
    # CPU as the mean over the runs: the helper's counter ticks in 10 ms steps, too coarse for a median of one call.
    return {"wall_median_s": round(statistics.median(r[0] for r in runs), 4),
            "poller_cpu_mean_s": round(statistics.fmean(r[1] for r in runs), 4),
            "helper_cpu_mean_s": round(statistics.fmean(r[2] for r in runs), 4)}


def bench(topics: int, partitions: int, repeats: int, describe_repeats: int) -> dict[str, Any]:
    """Every figure of one run."""
    with tempfile.TemporaryDirectory(prefix="admin-hop-") as tmp:
        lab, cluster = _lab(Path(tmp), topics, partitions)
        try:
            local = ClusterAdmin(cluster, 60)
            helpers = AdminHelpers()
            remote = helpers.get(cluster, 60)
            began = time.perf_counter()
            remote.describe_cluster(60)
            first_answer_s = time.perf_counter() - began  # spawn, import, connect
            helper = psutil.Process(helpers.pids()["shared"])
            assert len(local.metadata(60).topic_names) == len(remote.metadata(60).topic_names) >= topics
            figures: dict[str, Any] = {"topics": topics, "partitions_per_topic": partitions,
                                       "fresh_helper_first_answer_s": round(first_answer_s, 3)}
            for name, call in (("metadata", lambda a: a.metadata(60)),
                               ("describe_cluster", lambda a: a.describe_cluster(60))):
                mine, hop = [], []
                for _ in range(repeats):
                    mine.append(_timed(lambda call=call: call(local), None))
                    hop.append(_timed(lambda call=call: call(remote), helper))
                figures[name] = {"in_process": _summary(mine), "helper": _summary(hop)}
                figures[name]["wall_ratio_helper_over_in_process"] = round(
                    figures[name]["helper"]["wall_median_s"] / figures[name]["in_process"]["wall_median_s"], 2)
            names = local.metadata(60).topic_names
            mine, hop = [], []
            for _ in range(describe_repeats):
                mine.append(_timed(lambda: local.describe_topics(names, 60), None))
                hop.append(_timed(lambda: remote.describe_topics(names, 60), helper))
            figures["describe_topics_all"] = {"in_process": _summary(mine), "helper": _summary(hop)}
            figures["describe_topics_all"]["wall_ratio_helper_over_in_process"] = round(
                figures["describe_topics_all"]["helper"]["wall_median_s"]
                / figures["describe_topics_all"]["in_process"]["wall_median_s"], 2)
            figures["helper_rss_mb"] = round(helper.memory_info().rss / 2**20, 1)
            figures["poller_rss_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
            helpers.close()
            idle = AdminHelpers()
            idle_admin = idle.get(cluster, 60)
            idle_admin.describe_cluster(60)
            figures["helper_rss_mb_one_small_call"] = round(
                psutil.Process(idle.pids()["shared"]).memory_info().rss / 2**20, 1)
            idle.close()
            return figures
        finally:
            os.killpg(lab.pid, signal.SIGTERM)
            lab.wait(timeout=30)


def main() -> None:
    """Print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--describe-repeats", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(bench(args.topics, args.partitions, args.repeats, args.describe_repeats), indent=2))


if __name__ == "__main__":
    main()
