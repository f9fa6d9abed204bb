"""Poller benchmarks, measured side by side in one run.

1. One poll of a real Apache Kafka cluster holding 1,000 topics vs `kcat -L -J` on the same cluster.
2. One full cycle over 20 lab clusters of 2,000 topics each vs the slowest single cluster polled alone.
3. Peak RSS of the poller process.

Run: .venv/bin/python -m benchmarks.poll_bench [--topics 1000] [--lab-clusters 20] [--lab-topics 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

from backend.collect.poller import poll_cluster, poll_fleet
from backend.config import Fleet, parse_fleet
from backend.kafka.admin import AdminClientCache

REPO = Path(__file__).resolve().parents[1]
KCAT = shutil.which("kcat") or "kcat"


def _median_s(fn: object, repeats: int) -> tuple[float, list[float]]:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), runs


def _fleet(text: str, workdir: Path) -> Fleet:
    return parse_fleet(text, source="bench", secrets_path=workdir / "no-secrets.toml")


def bench_real_cluster(workdir: Path, topics: int, repeats: int) -> dict[str, object]:
    """Poll a real 1-node Kafka 4.x KRaft cluster with `topics` topics, and kcat -L -J on it."""
    from tests.rig.kafka import KafkaKraftCluster

    cluster = KafkaKraftCluster(workdir / "kafka", size=1)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        names = [f"bench-{i:05d}" for i in range(topics)]
        for start in range(0, topics, 200):
            batch = [NewTopic(n, 1, 1) for n in names[start : start + 200]]
            for future in admin.create_topics(batch, request_timeout=60).values():
                future.result(timeout=120)
        while len(admin.list_topics(timeout=30).topics) < topics:
            time.sleep(0.5)
        fleet = _fleet(
            "[settings]\nrequest_timeout_s = 30\npoll_deadline_s = 60\n\n"
            f'[[clusters]]\nname = "real"\nbootstrap_servers = ["{cluster.bootstrap}"]\n',
            workdir,
        )
        clients = AdminClientCache()
        settings, config = fleet.settings, fleet.clusters[0]
        snapshot = poll_cluster(config, settings, clients=clients)  # warm: connections, client
        assert snapshot.status == "ok", snapshot.error
        assert len([t for t in snapshot.topics if t.topic.startswith("bench-")]) == topics

        def kcat() -> None:
            out = subprocess.run(
                [KCAT, "-L", "-J", "-b", cluster.bootstrap, "-m", "30"], capture_output=True, check=True, timeout=60
            ).stdout
            assert len(json.loads(out)["topics"]) >= topics

        kcat()
        poll_s, poll_runs = _median_s(lambda: poll_cluster(config, settings, clients=clients), repeats)
        kcat_s, kcat_runs = _median_s(kcat, repeats)
        return {
            "topics": topics,
            "poll_median_s": round(poll_s, 3),
            "kcat_median_s": round(kcat_s, 3),
            "ratio_poll_over_kcat": round(poll_s / kcat_s, 2),
            "poll_runs_s": [round(r, 3) for r in poll_runs],
            "kcat_runs_s": [round(r, 3) for r in kcat_runs],
        }
    finally:
        cluster.stop()


def _lab_toml(workdir: Path, clusters: int, topics: int) -> Path:
    lines = [f'[lab]\nstate_dir = "{workdir / "lab-state"}"\n']
    for c in range(clusters):
        lines.append(
            f'[[clusters]]\nname = "bench-{c:02d}"\nprofile = "apache-kafka-4-kraft-kip885"\n'
            "brokers = [ { id = 1, port = 0 }, { id = 2, port = 0 }, { id = 3, port = 0 } ]\n"
            "topics = [\n" + "".join(f'  {{ name = "t{t:05d}", partitions = 1, replication_factor = 3 }},\n' for t in range(topics)) + "]\n"
        )
    path = workdir / "bench-lab.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def bench_lab_fleet(workdir: Path, clusters: int, topics: int, repeats: int) -> dict[str, object]:
    """A full cycle over the lab fleet vs each cluster polled alone (slowest one reported)."""
    lab_file = _lab_toml(workdir, clusters, topics)
    fleet_file = workdir / "lab-clusters.toml"
    log = (workdir / "lab.log").open("wb")
    # The lab runs in its own process so its event loop does not share the poller's GIL.
    lab = subprocess.Popen(
        [sys.executable, "-m", "backend", "lab", "--config", str(lab_file), "--fleet-file", str(fleet_file)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not fleet_file.exists():
            if lab.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"lab did not start; see {workdir / 'lab.log'}")
            time.sleep(0.5)
        time.sleep(1.0)
        text = "[settings]\nrequest_timeout_s = 60\npoll_deadline_s = 120\n\n" + fleet_file.read_text()
        fleet = _fleet(text, workdir)
        clients = AdminClientCache()
        first = poll_fleet(fleet, clients=clients)  # warm every client
        bad = [(s.cluster_name, s.status, s.error) for s in first.clusters if s.status != "ok"]
        assert not bad, bad
        assert all(len(s.topics) >= topics for s in first.clusters)

        single: dict[str, float] = {}
        for config in fleet.clusters:
            alone = Fleet(settings=fleet.settings, clusters=[config])
            single[config.name], _ = _median_s(lambda alone=alone: poll_fleet(alone, clients=clients), repeats)
        lab_proc = psutil.Process(lab.pid)
        lab_cpu_before, own_cpu_before = sum(lab_proc.cpu_times()[:2]), time.process_time()
        full_s, full_runs = _median_s(lambda: poll_fleet(fleet, clients=clients), repeats)
        lab_cpu = (sum(lab_proc.cpu_times()[:2]) - lab_cpu_before) / repeats
        own_cpu = (time.process_time() - own_cpu_before) / repeats
        slowest = max(single, key=single.__getitem__)
        lab_rss = lab_proc.memory_info().rss
        return {
            "clusters": clusters,
            "topics_per_cluster": topics,
            "full_cycle_median_s": round(full_s, 3),
            "full_cycle_runs_s": [round(r, 3) for r in full_runs],
            "slowest_single_cluster": slowest,
            "slowest_single_median_s": round(single[slowest], 3),
            "sum_of_singles_s": round(sum(single.values()), 3),
            "ratio_full_over_slowest_single": round(full_s / single[slowest], 2),
            "target_ratio": 1.5,
            # CPU seconds per full cycle: the lab serves every cluster from one Python thread,
            # so a cycle cannot finish faster than the lab's own CPU time per cycle.
            "lab_cpu_s_per_cycle": round(lab_cpu, 3),
            "poller_cpu_s_per_cycle": round(own_cpu, 3),
            "lab_process_rss_mb": round(lab_rss / 2**20, 1),
        }
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(timeout=30)
        log.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000, help="topics on the real cluster")
    parser.add_argument("--lab-clusters", type=int, default=20)
    parser.add_argument("--lab-topics", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-real", action="store_true", help="skip the real-Kafka comparison")
    parser.add_argument("--skip-lab", action="store_true", help="skip the lab fleet cycle")
    args = parser.parse_args(argv)
    results: dict[str, object] = {"cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="poll-bench-") as tmp:
        workdir = Path(tmp)
        if not args.skip_real:
            results["real_cluster_vs_kcat"] = bench_real_cluster(workdir, args.topics, args.repeats)
        if not args.skip_lab:
            results["lab_fleet_cycle"] = bench_lab_fleet(workdir, args.lab_clusters, args.lab_topics, args.repeats)
    results["poller_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
