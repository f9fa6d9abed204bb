"""The read-only API under load: p50/p99 per endpoint with 50 concurrent clients, CPU per request, the UI side by side.

    .venv/bin/python -m benchmarks.api_bench                      # 20 clusters x 2,000 topics x 2,000 groups
    .venv/bin/python -m benchmarks.api_bench --clusters 5 --topics 500 --groups 500 --seconds 30   # smaller
    .venv/bin/python -m benchmarks.api_bench --baseline /tmp/base  # and an older checkout's API, side by side

A lab fleet (`python -m backend lab`, KIP-885 brokers, synthetic consumer groups), `fleetview serve --no-analyze` on
it (login off: loopback), and once every cluster's groups are read:

1. the UI's Fleet and Consumer groups pages in headless Chromium, with the API idle;
2. `--clients` concurrent API clients (one asyncio process, one keep-alive HTTP/1.1 connection each, gzip accepted)
   requesting pages of 100 rows of `/clusters`, `/topics?search=` (50 different searches), `/groups?status=stalled`
   and `/readiness`, round robin, for `--seconds`; the UI's page times again while that load runs;
3. with `--baseline`: the same load against two more API processes on the same lake, this checkout's and the
   baseline checkout's (`python -m backend.api` run from there, without the event loop and HTTP parser this
   checkout added), in alternating rounds so the machine's load falls on both alike;
4. the same endpoints one at a time on a fresh data generation (cold: nothing memoised).

The load generator is a few lines of asyncio (not an HTTP library): it costs well under a tenth of a millisecond of
CPU per request, so it does not compete with the API for the cores it measures. CPU per request is the API
process's own CPU time (user + system, every thread) over the answers it gave: far less sensitive to the machine's
load than latency. Prints one JSON document: latencies per endpoint (p50, p99, max), requests per second, errors,
CPU per request, the UI's page times idle and loaded and their ratio, and `uptime` before and after.
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
from urllib.parse import urlencode, urlsplit

import httpx
import psutil

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


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, target: str) -> int:
    """One GET on a keep-alive connection; the status (the body is read whole, not decoded)."""
    writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip\r\nUser-Agent: api-bench\r\n\r\n"
                 .encode())
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length, chunked = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def load(api: str, clients: int, seconds: float) -> tuple[dict[str, list[float]], int, float]:
    """`clients` concurrent clients for `seconds` (closed loop): latencies per endpoint, errors, elapsed."""
    latencies: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    errors = 0
    where = urlsplit(api)
    host, port, prefix = where.hostname or "127.0.0.1", where.port or 80, where.path.rstrip("/")
    stop = time.monotonic() + seconds

    async def client(n: int) -> None:
        nonlocal errors
        rng = random.Random(n)
        reader, writer = await asyncio.open_connection(host, port)
        try:
            i = n
            while time.monotonic() < stop:
                endpoint, params = request_for(ENDPOINTS[i % len(ENDPOINTS)], rng)
                began = time.perf_counter()
                status = await asyncio.wait_for(_get(reader, writer, f"{host}:{port}",
                                                     f"{prefix}{endpoint}?{urlencode(params)}"), 120)
                elapsed = time.perf_counter() - began
                if status != 200:
                    errors += 1
                else:
                    latencies[endpoint].append(elapsed)
                i += 1
        finally:
            writer.close()

    began = time.monotonic()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies, errors, time.monotonic() - began


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) a process has used."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def measured(api: str, pid: int, clients: int, seconds: float) -> dict[str, Any]:
    """One load round against one API process: latencies, answers a second, CPU per request (the API's, the load's)."""
    api_before, mine_before = cpu_s(pid), cpu_s(os.getpid())
    latencies, errors, elapsed = asyncio.run(load(api, clients, seconds))
    api_cpu, mine = cpu_s(pid) - api_before, cpu_s(os.getpid()) - mine_before
    answers = sum(len(v) for v in latencies.values())
    return {"latencies": latencies, "errors": errors, "seconds": elapsed, "answers": answers,
            "api_cpu_s": api_cpu, "load_cpu_s": mine, "uptime": uptime()}


def combined(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one API folded into one summary."""
    latencies: dict[str, list[float]] = {e: [] for e in ENDPOINTS}
    for r in rounds:
        for name, values in r["latencies"].items():
            latencies[name] += values
    answers = sum(r["answers"] for r in rounds)
    seconds = sum(r["seconds"] for r in rounds)
    api_cpu = sum(r["api_cpu_s"] for r in rounds)
    return {"latency": summary(latencies), "answers": answers, "requests_per_s": round(answers / seconds, 1),
            "errors": sum(r["errors"] for r in rounds),
            "api_cpu_ms_per_request": round(1000 * api_cpu / max(answers, 1), 3),
            "api_cpu_share_of_a_core": round(api_cpu / seconds, 2),
            "load_generator_cpu_ms_per_request": round(1000 * sum(r["load_cpu_s"] for r in rounds) / max(answers, 1),
                                                       3),
            "rounds": [{"requests_per_s": round(r["answers"] / r["seconds"], 1),
                        "api_cpu_ms_per_request": round(1000 * r["api_cpu_s"] / max(r["answers"], 1), 3),
                        "uptime": r["uptime"]} for r in rounds]}


def uptime() -> str:
    """The machine's `uptime` line (the load averages other processes put on it)."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# Runs `python -m backend.api` of an older checkout without the packages this one added (uvloop, httptools): as its
# own requirements pinned it, uvicorn picks asyncio's loop and h11 there.
BASELINE_MAIN = ("import sys; sys.modules['uvloop'] = None; sys.modules['httptools'] = None; import runpy; "
                 "runpy.run_module('backend.api', run_name='__main__', alter_sys=True)")


def start_api(repo: Path, workdir: Path, config: Path, lake: Path, label: str, *, baseline: bool
              ) -> tuple[subprocess.Popen[bytes], str]:
    """One more API process on the lake (its own audit journal), from `repo`; (process, base URL) once it answers."""
    port = free_port()
    args = ["--config", str(config), "--lake", str(lake), "--journal-dir", str(workdir / f"journal-{label}"),
            "--port", str(port), "--rate", "100000", "--burst", "1000000"]
    cmd = ([sys.executable, "-c", BASELINE_MAIN, *args] if baseline
           else [sys.executable, "-m", "backend.api", *args])
    with (workdir / f"api-{label}.log").open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {label} API exited; see {workdir / f'api-{label}.log'}")
        try:
            if httpx.get(f"{api}/clusters", params={"limit": 1}, timeout=120).status_code == 200:
                return proc, api
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"the {label} API did not answer; see {workdir / f'api-{label}.log'}")


def side_by_side(repos: dict[str, tuple[Path, bool]], workdir: Path, config: Path, lake: Path, clients: int,
                 seconds: float, rounds: int) -> dict[str, Any]:
    """The load against each API in alternating rounds (the machine's load falls on all of them alike)."""
    procs: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    try:
        for label, (repo, baseline) in repos.items():
            procs[label] = start_api(repo, workdir, config, lake, label, baseline=baseline)
        results: dict[str, list[dict[str, Any]]] = {label: [] for label in repos}
        for n in range(rounds):
            order = list(procs) if n % 2 == 0 else list(reversed(procs))
            for label in order:
                proc, api = procs[label]
                asyncio.run(load(api, 4, 2.0))  # connections open and the generation warm, outside the timing
                results[label].append(measured(api, proc.pid, clients, seconds))
        out = {label: combined(r) for label, r in results.items()}
        if "baseline" in out and "this" in out:
            out["this_over_baseline"] = {
                "api_cpu_ms_per_request": round(out["this"]["api_cpu_ms_per_request"]
                                                / out["baseline"]["api_cpu_ms_per_request"], 3),
                "requests_per_s": round(out["this"]["requests_per_s"] / out["baseline"]["requests_per_s"], 2)}
        return out
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


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
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of an older commit: its API and this one's, side by side on the same lake")
    parser.add_argument("--rounds", type=int, default=2, help="side-by-side rounds per API (each --seconds long)")
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
                                      "seconds": args.seconds, "uptime_before": uptime()}
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                ui_rounds(browser, ui, 1)  # warm the UI's caches as a user's first visit would
                idle = ui_rounds(browser, ui, args.ui_rounds)
                box: dict[str, Any] = {}

                api_pid = next(c.pid for c in psutil.Process(serve.pid).children(recursive=True)
                               if "backend.api" in " ".join(c.cmdline()))

                def run_load() -> None:
                    box["load"] = measured(api, api_pid, args.clients, args.seconds)

                import threading

                loader = threading.Thread(target=run_load)
                loader.start()
                time.sleep(min(5.0, args.seconds / 4))
                loaded = ui_rounds(browser, ui, args.ui_rounds)
                loader.join()
                browser.close()
            result["warm_under_load"] = combined([box["load"]])
            result["ui_idle_s"] = {p: round(statistics.median(v), 3) for p, v in idle.items()}
            result["ui_loaded_s"] = {p: round(statistics.median(v), 3) for p, v in loaded.items()}
            result["ui_loaded_over_idle"] = {p: round(result["ui_loaded_s"][p] / result["ui_idle_s"][p], 2)
                                             for p in PAGES}
            if args.baseline is not None:
                result["side_by_side"] = side_by_side(
                    {"baseline": (args.baseline.resolve(), True), "this": (REPO, False)}, workdir, config,
                    workdir / "lake", args.clients, args.seconds, args.rounds)
            result["cold_one_at_a_time"] = cold(api, 3)
            result["uptime_after"] = uptime()
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
