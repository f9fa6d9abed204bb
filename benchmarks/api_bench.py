"""The read-only API under load: p50/p99 per endpoint with 50 concurrent clients, and the UI's page times side by side.

    .venv/bin/python -m benchmarks.api_bench                      # 20 clusters x 2,000 topics x 2,000 groups
    .venv/bin/python -m benchmarks.api_bench --clusters 5 --topics 500 --groups 500 --seconds 30   # smaller

A lab fleet (`python -m backend lab`, KIP-885 brokers, synthetic consumer groups), `fleetview serve --no-analyze` on
it (login off: loopback), and once every cluster's groups are read:

1. the UI's Fleet and Consumer groups pages in headless Chromium, with the API idle;
2. `--clients` concurrent API clients (one asyncio process, one HTTP connection each) requesting pages of 100 rows of
   `/clusters`, `/topics?search=` (50 different searches), `/groups?status=stalled` and `/readiness`, round robin,
   for `--seconds`; the UI's page times again while that load runs (interleaved rounds, same pages);
3. the same endpoints one at a time on a fresh data generation (cold: nothing memoised).

Prints one JSON document: latencies per endpoint (p50, p99, max), requests per second, errors, the UI's page times
idle and loaded and their ratio, and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.ui_bench import time_page  # noqa: E402
from tests.rig.procs import free_port  # noqa: E402

ENDPOINTS = ("/clusters", "/topics", "/groups", "/readiness")
PAGES = {"fleet": ("", "stDataFrame"), "consumer_groups": ("consumer_groups", "stDataFrame")}


def lab_toml(workdir: Path, clusters: int, topics: int, groups: int) -> Path:
    """A lab fleet: clusters of 3 KIP-885 brokers with `topics` topics and `groups` synthetic groups each."""
    lines = [f'[lab]\nstate_dir = "{workdir / "lab-state"}"\n']
    for c in range(clusters):
        env = "prod" if c % 2 == 0 else "staging"
        lines.append(
            f'[[clusters]]\nname = "bench-{c:02d}"\nprofile = "apache-kafka-4-kraft-kip885"\n'
            f"synthetic_groups = {groups}\ntags = {{ env = \"{env}\", region = \"r{c % 3}\" }}\n"
            "brokers = [ { id = 1, port = 0 }, { id = 2, port = 0 }, { id = 3, port = 0 } ]\n"
            "topics = [\n" + "".join(f'  {{ name = "topic-{t:05d}", partitions = 1, replication_factor = 3 }},\n'
                                     for t in range(topics)) + "]\n")
    path = workdir / "lab.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of values, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(latencies: dict[str, list[float]]) -> dict[str, Any]:
    """p50, p99 and max in milliseconds per endpoint."""
    return {name: {"requests": len(v), "p50_ms": round(percentile(v, 0.5) * 1000, 1),
                   "p99_ms": round(percentile(v, 0.99) * 1000, 1), "max_ms": round(max(v) * 1000, 1)}
            for name, v in latencies.items() if v}


def request_for(endpoint: str, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """One request of the load mix: a page of 100 rows."""
    if endpoint == "/topics":
        return endpoint, {"search": f"topic-{rng.randrange(50):02d}", "limit": 100}
    if endpoint == "/groups":
        return endpoint, {"status": "stalled", "limit": 100}
    if endpoint == "/readiness":
        return endpoint, {"target": "4.1"}
    return endpoint, {"limit": 100}


async def load(api: str, clients: int, seconds: float) -> tuple[dict[str, list[float]], int, float]:
    """`clients` concurrent clients for `seconds`: latencies per endpoint, errors, elapsed."""
    latencies: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    errors = 0
    stop = time.monotonic() + seconds

    async def client(n: int) -> None:
        nonlocal errors
        rng = random.Random(n)
        async with httpx.AsyncClient(base_url=api, timeout=60) as http:
            i = n
            while time.monotonic() < stop:
                endpoint, params = request_for(ENDPOINTS[i % len(ENDPOINTS)], rng)
                began = time.perf_counter()
                answer = await http.get(endpoint, params=params)
                elapsed = time.perf_counter() - began
                if answer.status_code != 200:
                    errors += 1
                else:
                    latencies[endpoint].append(elapsed)
                i += 1

    began = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies, errors, time.monotonic() - began


def cold(api: str, rounds: int) -> dict[str, Any]:
    """Each endpoint alone, right after the API's memo of the data generation expired (nothing reused)."""
    latencies: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    rng = random.Random(7)
    with httpx.Client(base_url=api, timeout=120) as http:
        for _ in range(rounds):
            time.sleep(5.5)  # ScopedLakes keeps a caller's readers 5 s
            for endpoint in ENDPOINTS:
                path, params = request_for(endpoint, rng)
                began = time.perf_counter()
                http.get(path, params=params).raise_for_status()
                latencies[endpoint].append(time.perf_counter() - began)
    return summary(latencies)


def ui_rounds(browser: Any, ui: str, rounds: int) -> dict[str, list[float]]:
    """Each page in a fresh browser context, `rounds` times."""
    out: dict[str, list[float]] = {p: [] for p in PAGES}
    for _ in range(rounds):
        for name, (path, marker) in PAGES.items():
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            out[name].append(time_page(page, f"{ui}/{path}", marker))
            context.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print JSON."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--ui-rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.conftest import CHROMIUM, CHROMIUM_ARGS

    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        workdir = Path(tmp)
        fleet_file = workdir / "lab-clusters.toml"
        with (workdir / "lab.log").open("wb") as log:
            lab = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config",
                                    str(lab_toml(workdir, args.clusters, args.topics, args.groups)),
                                    "--fleet-file", str(fleet_file), "--clients", "0"], cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        serve = None
        try:
            deadline = time.monotonic() + 900
            while not fleet_file.exists():
                if lab.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the lab did not start; see {workdir / 'lab.log'}")
                time.sleep(1)
            time.sleep(2)
            config = workdir / "clusters.toml"
            config.write_text("[settings]\npoll_interval_s = 30\nrequest_timeout_s = 30\npoll_deadline_s = 120\n"
                              "group_interval_s = 60\n\n[service]\napi_rate_per_s = 100000\napi_rate_burst = 1000000\n\n"
                              + fleet_file.read_text(encoding="utf-8"), encoding="utf-8")
            ui_port = free_port()
            with (workdir / "serve.log").open("wb") as log:
                serve = subprocess.Popen([sys.executable, "-m", "backend", "serve", "--config", str(config), "--lake",
                                          str(workdir / "lake"), "--metrics-port", "0", "--ui-port", str(ui_port),
                                          "--api-port", "0", "--no-analyze"], cwd=REPO, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            api = None
            while api is None:
                if serve.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start; see {workdir / 'serve.log'}")
                for line in (workdir / "serve.log").read_text(errors="replace").splitlines():
                    if line.startswith("API: "):
                        api = line[5:].strip().replace("//localhost:", "//127.0.0.1:")
                time.sleep(1)
            want = args.clusters * args.groups
            while True:  # every cluster's topics and groups in the lake
                try:
                    groups = httpx.get(f"{api}/groups", params={"limit": 1}, timeout=120).json()["total"]
                    topics = httpx.get(f"{api}/topics", params={"limit": 1}, timeout=120).json()["total"]
                    if groups >= want and topics >= args.clusters * args.topics:
                        break
                except (httpx.HTTPError, KeyError, ValueError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not every group was read in time; see {workdir / 'serve.log'}")
                time.sleep(5)
            ui = f"http://127.0.0.1:{ui_port}"
            result: dict[str, Any] = {"clusters": args.clusters, "topics_per_cluster": args.topics,
                                      "groups_per_cluster": args.groups, "clients": args.clients,
                                      "seconds": args.seconds, "load_before": os.getloadavg()}
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                ui_rounds(browser, ui, 1)  # warm the UI's caches as a user's first visit would
                idle = ui_rounds(browser, ui, args.ui_rounds)
                box: dict[str, Any] = {}

                def run_load() -> None:
                    box["load"] = asyncio.run(load(api, args.clients, args.seconds))

                import threading

                loader = threading.Thread(target=run_load)
                loader.start()
                time.sleep(min(5.0, args.seconds / 4))
                loaded = ui_rounds(browser, ui, args.ui_rounds)
                loader.join()
                browser.close()
            latencies, errors, elapsed = box["load"]
            total = sum(len(v) for v in latencies.values())
            result["warm_under_load"] = summary(latencies)
            result["requests_per_s"] = round(total / elapsed, 1)
            result["errors"] = errors
            result["ui_idle_s"] = {p: round(statistics.median(v), 3) for p, v in idle.items()}
            result["ui_loaded_s"] = {p: round(statistics.median(v), 3) for p, v in loaded.items()}
            result["ui_loaded_over_idle"] = {p: round(result["ui_loaded_s"][p] / result["ui_idle_s"][p], 2)
                                             for p in PAGES}
            result["cold_one_at_a_time"] = cold(api, 3)
            result["load_after"] = os.getloadavg()
            print(json.dumps(result, indent=1))
            return 0
        finally:
            for proc in (serve, lab):
                if proc is not None and proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
