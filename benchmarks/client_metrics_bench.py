"""One client-inventory collection cycle over 20 lab clusters x 3 brokers against the slowest endpoint alone.

Run: .venv/bin/python -m benchmarks.client_metrics_bench [--clusters 20] [--brokers 3] [--series 5000]
     [--slow-ms 300] [--rounds 5]

The lab runs in a child process (its brokers and metrics endpoints do not share this process's CPU). Each broker's
page holds `--series` realistic series (per-topic counts, as an exporter's default rules give) plus the KIP-511 and
KIP-896 series; one broker answers `--slow-ms` late (a latency fault). Side by side, in this process:

- a cycle: `ClientMetricsCollector.collect` for every cluster at once (one thread per cluster, as the poller runs
  them; within a cluster the brokers are read concurrently), wall time and this process's CPU time;
- the slowest endpoint alone: `read_exporter` of that one broker, wall time.
The ratio (cycle / slowest alone) is the figure: the target is <= 1.5.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _lab(conf: dict[str, Any], fleet_path: str, padding: int, slow_ms: int, ready: Any, stop: Any) -> None:
    from backend.lab.fleet import LabFleet
    from backend.lab.model import parse_lab_config

    lab = LabFleet(parse_lab_config(conf, Path(fleet_path).parent), metrics_padding=padding)
    lab.start()
    try:
        lab.set_fault(conf["clusters"][0]["name"], 1, latency_ms=slow_ms)
        lab.write_fleet_file(fleet_path)
        ready.set()
        stop.wait()
    finally:
        lab.stop()


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--series", type=int, default=5000)
    parser.add_argument("--slow-ms", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from backend.collect.client_metrics import ClientMetricsCollector
    from backend.config import load_fleet
    from backend.kafka.admin import NodeInfo
    from backend.kafka.metrics_fetch import Endpoint, fill_template, read_exporter

    work = Path(tempfile.mkdtemp(prefix="client-metrics-bench-"))
    clients = [{"software_name": "apache-kafka-java", "software_version": f"3.{i}.0", "connections": 3} for i in range(8)]
    clients.append({"software_name": "unknown", "software_version": "unknown", "connections": 2,
                    "deprecated": ["Produce:2"], "rate": 2.0})
    conf = {"lab": {"state_dir": str(work / "lab")}, "clusters": [
        {"name": f"c{i:02d}", "profile": "apache-kafka-4.3-kraft",
         "brokers": [{"id": b} for b in range(1, args.brokers + 1)], "metrics_clients": clients}
        for i in range(args.clusters)]}
    fleet_path = str(work / "clusters.toml")
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_lab, args=(conf, fleet_path, args.series, args.slow_ms, ready, stop), daemon=True)
    child.start()
    try:
        if not ready.wait(120):
            raise SystemExit("the lab did not start")
        fleet = load_fleet(fleet_path)
        settings = fleet.settings
        nodes = {c.name: [NodeInfo(b, "127.0.0.1", 0, None) for b in range(1, args.brokers + 1)] for c in fleet.clusters}
        collector = ClientMetricsCollector()
        slow = fleet.clusters[0]
        assert slow.broker_metrics is not None and slow.broker_metrics.metrics_url
        slow_endpoint = Endpoint(1, fill_template(slow.broker_metrics.metrics_url, host="127.0.0.1", broker_id=1, port=0))

        def cycle() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            threads = [threading.Thread(target=collector.collect, args=(c, settings, nodes[c.name],
                                                                        time.monotonic() + 30)) for c in fleet.clusters]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return time.perf_counter() - wall, time.process_time() - cpu

        def alone() -> float:
            wall = time.perf_counter()
            read_exporter(slow_endpoint, slow.broker_metrics, timeout_s=10, max_bytes=settings.client_metrics_max_bytes)
            return time.perf_counter() - wall

        cycle()  # warm-up: connections, imports, the first parse
        page = len(__import__("urllib.request").request.urlopen(slow_endpoint.url, timeout=10).read())
        cycles, cpus, alones = [], [], []
        for _ in range(args.rounds):
            w, c = cycle()
            cycles.append(w)
            cpus.append(c)
            alones.append(alone())
        last = collector.last(slow.name)
        assert last is not None and last.status == "ok", last
        cyc, cpu, one = statistics.median(cycles), statistics.median(cpus), statistics.median(alones)
        print(f"clusters {args.clusters} x brokers {args.brokers}, {args.series} padding series per page "
              f"({page / 1024:.0f} KiB uncompressed), slowest endpoint +{args.slow_ms} ms, {args.rounds} rounds")
        print(f"cycle (all endpoints): median {cyc * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU "
              f"({cpu * 1000 / (args.clusters * args.brokers):.1f} ms CPU per endpoint)")
        print(f"slowest endpoint alone: median {one * 1000:.0f} ms wall")
        print(f"ratio cycle / slowest alone: {cyc / one:.2f} (target <= 1.5)")
    finally:
        stop.set()
        child.join(30)


if __name__ == "__main__":
    main()
