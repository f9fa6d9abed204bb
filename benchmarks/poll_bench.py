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

from backend.collect.poller import DEFAULT_TOPIC_TABLES, forget_topic_rows, poll_cluster, poll_fleet
from backend.config import Fleet, parse_fleet
from backend.kafka.admin import AdminClientCache
from backend.lab.faults import BrokerFaults, write_control_file
from backend.store.model import ClusterSnapshot

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
        last = {"snapshot": snapshot}

        def poll() -> None:
            # As the poller runs: each poll gets the previous snapshot of its cluster.
            last["snapshot"] = poll_cluster(config, settings, clients=clients, previous=last["snapshot"])
            assert last["snapshot"].status == "ok", last["snapshot"].error

        def kcat() -> None:
            out = subprocess.run(
                [KCAT, "-L", "-J", "-b", cluster.bootstrap, "-m", "30"], capture_output=True, check=True, timeout=60
            ).stdout
            assert len(json.loads(out)["topics"]) >= topics

        kcat()
        poll_s, poll_runs = _median_s(poll, repeats)
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


MIXED_MAX_MS = 50


def _latency_of(setting: str, index: int, clusters: int) -> int:
    """A fixed delay, or for "mixed" a spread from 0 to MIXED_MAX_MS over the clusters (a fleet across regions)."""
    if setting == "mixed":
        return round(MIXED_MAX_MS * index / max(1, clusters - 1))
    return int(setting)


def _set_latency(state_dir: Path, fleet: Fleet, setting: str) -> None:
    """Give every lab broker a per-request delay (a stand-in for the network between poller and cluster)."""
    faults = {}
    for index, config in enumerate(fleet.clusters):
        for broker in range(1, 4):
            faults[(config.name, broker)] = BrokerFaults(latency_ms=_latency_of(setting, index, len(fleet.clusters)))
    write_control_file(state_dir / "faults.json", faults)
    time.sleep(1.5)  # the lab re-reads its control file every CONTROL_POLL_S


class _Cycles:
    """poll_fleet as the poller runs it: each poll gets the previous snapshot of every cluster."""

    def __init__(self, clients: AdminClientCache) -> None:
        self.clients = clients
        self.previous: dict[str, ClusterSnapshot] = {}

    def run(self, fleet: Fleet) -> None:
        poll = poll_fleet(fleet, self.previous, clients=self.clients)
        bad = [(s.cluster_name, s.status, s.error) for s in poll.clusters if s.status != "ok"]
        assert not bad, bad
        self.previous.update({s.cluster_name: s for s in poll.clusters})


def bench_lab_fleet(workdir: Path, clusters: int, topics: int, repeats: int, latencies: list[str]) -> dict[str, object]:
    """A full cycle over the lab fleet vs each cluster polled alone (slowest one reported), per latency."""
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
        cycles = _Cycles(AdminClientCache())
        cycles.run(fleet)  # warm every client
        assert all(len(s.topics) >= topics for s in cycles.previous.values())
        lab_proc = psutil.Process(lab.pid)
        results = []
        for latency in latencies:
            _set_latency(workdir / "lab-state", fleet, latency)
            cycles.run(fleet)
            single: dict[str, float] = {}
            for config in fleet.clusters:
                alone = Fleet(settings=fleet.settings, clusters=[config])
                single[config.name], _ = _median_s(lambda alone=alone: cycles.run(alone), repeats)
            lab_cpu_before, own_cpu_before = sum(lab_proc.cpu_times()[:2]), time.process_time()
            reused_before = DEFAULT_TOPIC_TABLES.reused
            full_s, full_runs = _median_s(lambda: cycles.run(fleet), repeats)
            lab_cpu = (sum(lab_proc.cpu_times()[:2]) - lab_cpu_before) / repeats
            own_cpu = (time.process_time() - own_cpu_before) / repeats
            slowest = max(single, key=single.__getitem__)
            results.append({
                "latency_ms_per_request": latency if latency == "mixed" else int(latency),
                "full_cycle_median_s": round(full_s, 3),
                "full_cycle_runs_s": [round(r, 3) for r in full_runs],
                "slowest_single_cluster": slowest,
                "slowest_single_median_s": round(single[slowest], 3),
                "sum_of_singles_s": round(sum(single.values()), 3),
                "ratio_full_over_slowest_single": round(full_s / single[slowest], 2),
                "target_ratio": 1.5,
                # CPU seconds per full cycle, both processes share the machine's cores.
                "lab_cpu_s_per_cycle": round(lab_cpu, 3),
                "poller_cpu_s_per_cycle": round(own_cpu, 3),
                "unchanged_topic_tables_not_decoded": DEFAULT_TOPIC_TABLES.reused - reused_before,
            })
        # Every answer changed since the last poll (ISR churn everywhere): nothing is reused.
        _set_latency(workdir / "lab-state", fleet, "0")

        def cold(target: Fleet) -> None:
            DEFAULT_TOPIC_TABLES.forget()
            forget_topic_rows()
            cycles.run(target)

        cold_single = max(
            _median_s(lambda config=config: cold(Fleet(settings=fleet.settings, clusters=[config])), repeats)[0]
            for config in fleet.clusters
        )
        own_cpu_before = time.process_time()
        cold_full, _ = _median_s(lambda: cold(fleet), repeats)
        return {
            "clusters": clusters,
            "topics_per_cluster": topics,
            "by_latency": results,
            "every_answer_changed_0ms": {
                "full_cycle_median_s": round(cold_full, 3),
                "slowest_single_median_s": round(cold_single, 3),
                "ratio_full_over_slowest_single": round(cold_full / cold_single, 2),
                "poller_cpu_s_per_cycle": round((time.process_time() - own_cpu_before) / repeats, 3),
            },
            "lab_process_rss_mb": round(lab_proc.memory_info().rss / 2**20, 1),
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
    parser.add_argument("--lab-latency-ms", default="0,5,20,50,mixed",
                        help="per-request delay of every lab broker, comma separated; one fleet cycle result per "
                             f"value; 'mixed' spreads 0..{MIXED_MAX_MS} ms over the clusters")
    parser.add_argument("--skip-real", action="store_true", help="skip the real-Kafka comparison")
    parser.add_argument("--skip-lab", action="store_true", help="skip the lab fleet cycle")
    args = parser.parse_args(argv)
    results: dict[str, object] = {"cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="poll-bench-") as tmp:
        workdir = Path(tmp)
        if not args.skip_real:
            results["real_cluster_vs_kcat"] = bench_real_cluster(workdir, args.topics, args.repeats)
        if not args.skip_lab:
            results["lab_fleet_cycle"] = bench_lab_fleet(
                workdir, args.lab_clusters, args.lab_topics, args.repeats,
                [v.strip() for v in args.lab_latency_ms.split(",") if v.strip()])
    results["poller_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
