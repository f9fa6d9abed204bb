"""UI benchmark: time until Fleet, Cluster and Client-config pages finish rendering in headless Chromium.

Builds a lake of 50 clusters, 100,000 topics (half of them in cluster-000, the Cluster page's default)
and pipeline aggregates of 1,000,000 client instances,
serves it with `streamlit run`, and measures each page cold (first visit, empty caches) and warm,
side by side with a 3-cluster lake in the same run; samples the server's peak RSS.

    .venv/bin/python benchmarks/ui_bench.py [--clusters 50] [--topics 100000] [--instances 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from backend.store.config_schemas import arrow_schema  # noqa: E402
from backend.store.lake import Lake  # noqa: E402
from tests.unit.dashboard.lake_fixture import build_lake  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
KEYS = [("producer", k) for k in ("acks", "compression.type", "linger.ms", "batch.size", "enable.idempotence",
                                  "max.in.flight.requests.per.connection", "retries", "delivery.timeout.ms",
                                  "partitioner.class", "request.timeout.ms")] + \
       [("consumer", k) for k in ("enable.auto.commit", "auto.offset.reset", "auto.commit.interval.ms",
                                  "fetch.min.bytes", "max.poll.records", "session.timeout.ms",
                                  "isolation.level", "group.protocol", "heartbeat.interval.ms", "max.poll.interval.ms")]
NUMERIC = {"linger.ms", "batch.size", "retries", "delivery.timeout.ms", "request.timeout.ms", "auto.commit.interval.ms",
           "fetch.min.bytes", "max.poll.records", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
           "max.in.flight.requests.per.connection"}
PAGES = {"fleet": ("", "stDataFrame"), "cluster": ("cluster", "stDataFrame"),
         "client_configs": ("client_configs", "stPlotlyChart")}


def _poll_id(at: datetime) -> str:
    return f"{at:%Y%m%dT%H%M%S%f}Z-{random.getrandbits(32):08x}"


def build_big_lake(root: Path, clusters: int, topics: int, instances: int) -> None:
    """Two polls of `clusters` clusters holding `topics` topics, and results over `instances` clients."""
    rng = random.Random(7)
    lake = Lake(root)
    names = [f"cluster-{i:03d}" for i in range(clusters)]
    ids = {n: f"{n}-id-{i:06d}AAAA" for i, n in enumerate(names)}
    # Skewed on purpose: the first cluster (the Cluster page's default) holds half of all topics.
    counts = [topics // 2] + [(topics - topics // 2) // max(1, clusters - 1)] * (clusters - 1)
    t0 = datetime.now(UTC) - timedelta(minutes=10)
    for poll_no, at in enumerate((t0, t0 + timedelta(minutes=5))):
        poll = _poll_id(at)
        lake.write("cluster_snapshots", [{
            "poll_id": poll, "polled_at": at, "cluster_name": n, "cluster_id": ids[n], "zk_cluster_id": None,
            "tags_json": json.dumps({"env": ["prod", "staging", "dev"][i % 3], "region": ["eu", "us", "ap"][i % 3],
                                     "team": f"team-{i % 7}"}),
            "controller_id": 1, "status": "down" if i == clusters - 1 else "ok",
            "error": "connection refused" if i == clusters - 1 else None, "broker_count": 3, "brokers_reachable": 3,
            "topic_count": counts[i], "partition_count": counts[i] * 6, "under_replicated": 0,
            "offline_partitions": 0, "duration_ms": 50.0} for i, n in enumerate(names)], poll_id=poll)
        lake.write("broker_snapshots", [{
            "poll_id": poll, "polled_at": at, "cluster_name": n, "cluster_id": ids[n], "broker_id": b,
            "host": f"{n}-b{b}", "port": 9092, "rack": f"r{b}", "is_controller": b == 1, "reachable": True,
            "software_name": "Apache Kafka", "software_version": ["3.8.1", "3.9.1", "4.1.0"][(i + b + poll_no) % 3],
            "version_provenance": "reported", "version_min": None, "version_max": None, "version_confidence": "high",
            "api_versions_json": json.dumps({str(k): [0, 12] for k in range(70)}), "probe_ms": 2.0, "error": None}
            for i, n in enumerate(names) for b in (1, 2, 3)], poll_id=poll)
        columns: dict[str, list[object]] = {c: [] for c in ("poll_id", "polled_at", "cluster_name", "cluster_id", "topic",
                                                            "topic_id", "zk_topic_id", "partitions",
                                                            "replication_factor", "internal", "under_replicated",
                                                            "offline_partitions")}
        for n, count in zip(names, counts, strict=True):
            for t in range(count):
                for col, value in (("poll_id", poll), ("polled_at", at), ("cluster_name", n), ("cluster_id", ids[n]),
                                   ("topic", f"topic-{t:06d}"), ("topic_id", f"{n}-{t:06d}-{poll_no if t % 500 == 0 else 0}"),
                                   ("zk_topic_id", None), ("partitions", 6), ("replication_factor", 3),
                                   ("internal", False), ("under_replicated", 1 if t % 997 == 0 else 0),
                                   ("offline_partitions", 0)):
                    columns[col].append(value)
        lake.write("topic_snapshots", pa.table(columns), poll_id=poll)
    _write_results(root, [ids[n] for n in names], instances, rng)


def _result(root: Path, name: str, rows: list[dict[str, object]]) -> None:
    schema = arrow_schema(name)
    now = datetime.now(UTC)
    folder = root / "results" / name
    folder.mkdir(parents=True, exist_ok=True)
    filled = [{"computed_at": now, "schema_version": 1, **r} for r in rows]
    pq.write_table(pa.Table.from_pylist(filled, schema=schema), folder / "part-00000.parquet")


def _write_results(root: Path, cluster_ids: list[str], instances: int, rng: random.Random) -> None:
    per_cluster = instances // len(cluster_ids)
    dist, numeric, defaults, versions, dominant = [], [], [], [], {}
    for cid in cluster_ids:
        for ctype, key in KEYS:
            total = per_cluster // 2
            if key in NUMERIC:
                base = rng.choice([1, 5, 100, 1000])
                numeric.append({"cluster_id": cid, "client_type": ctype, "key": key, "type": "INT", "instances": total,
                                "unparsable": 0, "min": 0.0, "p50": float(base), "p90": float(base * 4),
                                "max": float(base * 20)})
                continue
            values = [f"v{j}" for j in range(rng.randint(2, 6))]
            weights = [rng.random() for _ in values]
            counts = [int(total * w / sum(weights)) for w in weights]
            counts[0] += total - sum(counts)
            dist += [{"cluster_id": cid, "client_type": ctype, "key": key, "value": v, "instance_count": c,
                      "total_instances": total, "share": c / total} for v, c in zip(values, counts, strict=True)]
            dominant[(cid, key)] = dict(zip(values, counts, strict=True))
            defaults.append({"cluster_id": cid, "client_type": ctype, "key": key, "instances": total,
                             "default_count": counts[0], "overridden_count": total - counts[0],
                             "default_share": counts[0] / total})
        for sw, ver in (("apache-kafka-java", "3.9.1"), ("librdkafka", "2.16.1"), ("franz-go", "1.18.0")):
            versions.append({"cluster_id": cid, "client_type": "producer", "client_software_name": sw,
                             "client_software_version": ver, "instances": per_cluster // 3})
    drift = []
    keys = sorted({k for _, k in dominant})
    ordered = sorted(cluster_ids)
    for a_i, a in enumerate(ordered):
        for b in ordered[a_i + 1:]:
            for key in keys:
                da, db = dominant[(a, key)], dominant[(b, key)]
                ta, tb = sum(da.values()), sum(db.values())
                tvd = 0.5 * sum(abs(da.get(v, 0) / ta - db.get(v, 0) / tb) for v in set(da) | set(db))
                drift.append({"client_type": None, "key": key, "cluster_a": a, "cluster_b": b, "tvd": tvd,
                              "instances_a": ta, "instances_b": tb, "dominant_value_a": None, "dominant_value_b": None})
    alerts = [{"alert_id": f"a{i}", "rule_id": "producer_acks_zero", "severity": ["critical", "warning", "info"][i % 3],
               "title": "t", "cluster_id": cluster_ids[i % len(cluster_ids)], "client_instance_id": f"ci{i}",
               "client_id": f"client-{i}", "group_id": None, "client_type": "producer", "keys": "acks",
               "observed_json": json.dumps({"acks": "0"}), "explanation": "e", "doc_url": "https://kafka.apache.org/"}
              for i in range(5000)]
    for name, rows in (("distributions", dist), ("numeric_summary", numeric), ("default_share", defaults),
                       ("client_versions", versions), ("drift_clusters", drift), ("config_alerts", alerts)):
        _result(root, name, rows)
    _result(root, "ingest_stats", [{"run_id": "r", "ran_at": datetime.now(UTC), "source": "sink", "location": "x",
                                    "metric": "records_read", "detail": "", "count": instances}])


@dataclass
class Measurement:
    """One page load."""

    lake: str
    page: str
    visit: str
    seconds: float


class RssSampler(threading.Thread):
    """Samples the RSS of a process and its children every 100 ms; keeps the peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process = psutil.Process(pid)
        self.peak = 0
        self.running = True

    def run(self) -> None:
        while self.running:
            try:
                procs = [self.process, *self.process.children(recursive=True)]
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs))
            except psutil.Error:
                pass
            time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(lake: Path, log: Path, app: Path | None = None, *, port: int | None = None,
          env: dict[str, str] | None = None, args: list[str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start `streamlit run dashboard/app.py` (or another app) on the lake and wait until it is healthy."""
    port = port or _free_port()
    env = {**os.environ, "FLEETVIEW_LAKE": str(lake), "PYTHONPATH": str(REPO), **(env or {})}
    cmd = [sys.executable, "-m", "streamlit", "run", str(app or REPO / "dashboard" / "app.py"), "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", *(args or [])]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.read().strip() == b"ok":
                    return proc, url
        except OSError:
            time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGTERM)
    raise RuntimeError(f"streamlit did not start; see {log}")


def time_page(page: object, url: str, marker: str) -> float:
    """Seconds from navigation until the page's marker element is shown and the script has finished."""
    start = time.perf_counter()
    page.goto(url)  # type: ignore[attr-defined]
    page.get_by_test_id(marker).first.wait_for(timeout=300_000)  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=300_000)
    elapsed = time.perf_counter() - start
    if page.query_selector("[data-testid='stException']"):  # type: ignore[attr-defined]
        raise RuntimeError(f"{url} rendered an exception; the timing would be meaningless")
    return elapsed


def measure(servers: dict[str, str], browser: object, repeats: int) -> list[Measurement]:
    """Visit every page on every server, interleaved so both lakes see the same machine load.

    The first round is the cold visit (empty caches); the other rounds are warm visits.
    Each visit uses a fresh browser context, so it is a new Streamlit session.
    """
    results: list[Measurement] = []
    for round_no in range(1 + repeats):
        visit = "cold" if round_no == 0 else "warm"
        for name, (path, marker) in PAGES.items():
            for label, url in servers.items():
                context = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
                page = context.new_page()
                results.append(Measurement(label, name, visit, round(time_page(page, f"{url}/{path}", marker), 3)))
                context.close()
    return results


def main() -> int:
    """Build both lakes, measure them side by side, print and save the figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="warm visits per page and lake (median reported)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "ui_bench.json")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    # SIGTERM unwinds like Ctrl-C, so the Streamlit servers in `finally` are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    with tempfile.TemporaryDirectory(prefix="ui-bench-") as tmp:
        workdir = Path(tmp)
        small = build_lake(workdir / "small")
        started = time.perf_counter()
        build_big_lake(workdir / "big", args.clusters, args.topics, args.instances)
        print(f"built big lake in {time.perf_counter() - started:.1f} s")
        procs: dict[str, subprocess.Popen[bytes]] = {}
        servers: dict[str, str] = {}
        samplers: dict[str, RssSampler] = {}
        try:
            for label, lake in (("small", small), ("big", workdir / "big")):
                procs[label], servers[label] = serve(lake, workdir / f"streamlit-{label}.log")
                samplers[label] = RssSampler(procs[label].pid)
                samplers[label].start()
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                results = measure(servers, browser, args.repeats)
                browser.close()
        finally:
            for label, proc in procs.items():
                samplers[label].running = False
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
    rss = {label: sampler.peak for label, sampler in samplers.items()}
    rows = []
    print(f"{'page':16}{'visit':7}{'small s':>9}{'big s':>9}{'big/small':>11}")
    for name in PAGES:
        for visit in ("cold", "warm"):
            small_s = statistics.median(m.seconds for m in results if (m.page, m.visit, m.lake) == (name, visit, "small"))
            big_s = statistics.median(m.seconds for m in results if (m.page, m.visit, m.lake) == (name, visit, "big"))
            rows.append({"page": name, "visit": visit, "small_s": small_s, "big_s": big_s,
                         "ratio": round(big_s / small_s, 2)})
            print(f"{name:16}{visit:7}{small_s:9.2f}{big_s:9.2f}{big_s / small_s:11.2f}")
    print(f"peak server RSS: small {rss['small'] / 2**20:.0f} MiB, big {rss['big'] / 2**20:.0f} MiB "
          f"(ratio {rss['big'] / rss['small']:.2f}); load average {os.getloadavg()[0]:.1f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "pages": rows,
                                    "peak_rss_bytes": rss, "raw": [asdict(m) for m in results]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
