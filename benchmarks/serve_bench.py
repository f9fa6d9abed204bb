"""Benchmarks of `serve`: the warm Spark driver against a cold `analyze`, and what each component costs.

warm: the demo's client fleet (400 instances pushed over KIP-1324 to the lab and ingested from its sink) is
analysed, side by side in one run, by `python -m backend analyze --full` in a new process (cold: interpreter,
JVM, first-query warm-up) and by the service's analyze worker (`python -m backend.service.worker analyze`,
one SparkSession kept between runs, requests over its channel, timed from request to answer), interleaved,
`--runs` each; both for this checkout and for the `--baseline` git ref (main), exported with `git archive`. `--mode full`: both recompute everything, so every run does the same work; `--mode refresh`:
before each pair 1 % of the instances get a new snapshot in two copies of the lake and each side refreshes its
copy (the service's run on every interval). Then the worker runs `--rss-runs` more full runs and its RSS
(Python + JVM) is sampled.

resources: `python -m backend serve` on a benchmark fleet (the lab in its own process, `--clusters` clusters x
3 brokers x `--topics` topics, the demo's client fleet pushing to it) for `--seconds`; every component's
process tree is sampled every 2 s: CPU (average cores over the window) and RSS (peak).

    .venv/bin/python -m benchmarks.serve_bench warm --runs 5 --rss-runs 100
    .venv/bin/python -m benchmarks.serve_bench warm --mode refresh --runs 5 --rss-runs 0
    .venv/bin/python -m benchmarks.serve_bench resources --clusters 20 --topics 2000 --seconds 300
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from backend.service.driver import process_tree_rss
from backend.service.procs import ChildProcess, free_port
from benchmarks.poll_bench import _lab_toml

REPO = Path(__file__).resolve().parents[1]


def _demo_lake(workdir: Path, clients: int) -> Path:
    """A lake holding the demo's client fleet: pushed to the lab's PushConfig brokers, ingested from the sink."""
    import tomllib

    from backend.configs.ingest import ingest_sink
    from backend.lab.clientgen import generate_clients, push_all
    from backend.lab.fleet import LabFleet
    from backend.lab.model import parse_lab_config

    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(workdir / "lab")
    lab = LabFleet(parse_lab_config(raw, REPO))
    lab.start()
    try:
        versions = {n: lab.runtimes[n].spec.profile.software_version for n, i in lab.clusters.items() if i.push_config}
        pushed = generate_clients(versions, clients, seed=1324)
        outcomes = push_all(pushed, {n: [(b.host, b.port) for b in lab.clusters[n].brokers] for n in versions}, seed=1324)
        assert all(o.status == "accepted" for o in outcomes), {o.status for o in outcomes}
        sink = lab.config.sink_dir
    finally:
        lab.stop()
    lake = workdir / "lake"
    ingest_sink(str(lake), str(sink))
    return lake


class WarmWorker:
    """The service's analyze worker, driven over its channel as the supervisor drives it."""

    def __init__(self, workdir: Path, lake: Path, master: str, root: Path = REPO) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        fleet = workdir / "fleet.toml"
        fleet.write_text(f'[settings]\nspark_master = "{master}"\n', encoding="utf-8")
        self.child = ChildProcess("analyze", [sys.executable, "-m", "backend.service.worker", "analyze", "--config",
                                              str(fleet), "--lake", str(lake), "--master", master],
                                  workdir / "analyze.log", cwd=root, with_channel=True, term_leader_only=True)
        began = time.monotonic()
        self.child.start()
        assert self.child.channel is not None
        self.messages = self.child.channel.messages()
        hello = self._next("hello")
        self.startup_s = time.monotonic() - began
        self.hello = hello

    def _next(self, event: str) -> dict[str, Any]:
        for message in self.messages:
            if message.get("event") == event:
                return message
        raise RuntimeError(f"the worker exited; see {self.child.log}")

    def run(self, full: bool = True) -> tuple[float, dict[str, Any]]:
        """One analysis: (seconds from request to answer, the answer)."""
        assert self.child.channel is not None
        began = time.monotonic()
        self.child.channel.send({"op": "run", "id": "bench", "full": full})
        done = self._next("done")
        if done.get("outcome") != "ok":
            raise RuntimeError(f"warm run failed: {done.get('error')}")
        return time.monotonic() - began, done

    def rss(self) -> int:
        """Python + JVM resident memory, bytes."""
        return process_tree_rss(self.child.pid)

    def stop(self) -> None:
        self.child.stop()


def _cold(lake: Path, master: str, full: bool, root: Path = REPO) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-m", "backend", "analyze", "--lake", str(lake), "--master", master,
                    *(["--full"] if full else [])], cwd=root, check=True, capture_output=True, timeout=1800)
    return time.monotonic() - began


def _new_snapshots(lakes: list[Path], share: float, seed: int) -> int:
    """The same new snapshots (of `share` of the instances, new snapshot ids, received now) appended to each lake."""
    import random
    import uuid
    from datetime import UTC, datetime

    import pyarrow as pa
    import pyarrow.compute as pc

    from backend.store.atomic import write_parquet_atomic
    from backend.store.location import parse_lake
    from backend.store.tables import read_table

    table = read_table(str(lakes[0]), "client_configs")
    instances = sorted(set(table.column("client_instance_id").to_pylist()))
    chosen = random.Random(seed).sample(instances, max(1, int(len(instances) * share)))
    rows = table.filter(pc.is_in(table["client_instance_id"], pa.array(chosen)))
    latest = {}  # one snapshot per chosen instance
    for snapshot, instance in zip(rows.column("snapshot_id").to_pylist(), rows.column("client_instance_id").to_pylist(),
                                  strict=True):
        latest.setdefault(instance, snapshot)
    rows = rows.filter(pc.is_in(rows["snapshot_id"], pa.array(list(latest.values()))))
    now = datetime.now(UTC)
    renamed = {s: str(uuid.uuid4()) for s in latest.values()}
    rows = rows.set_column(rows.schema.get_field_index("snapshot_id"), "snapshot_id",
                           pa.array([renamed[s] for s in rows.column("snapshot_id").to_pylist()]))
    for name in ("received_at", "ingested_at"):
        rows = rows.set_column(rows.schema.get_field_index(name), rows.schema.field(name),
                               pa.array([now] * rows.num_rows, rows.schema.field(name).type))
    name = f"{uuid.uuid4().hex}.parquet"
    for lake in lakes:
        where = parse_lake(str(lake))
        write_parquet_atomic(where, where.path("client_configs", f"date={now.date().isoformat()}", name), rows)
    return len(latest)


def bench_warm(runs: int, rss_runs: int, clients: int, master: str, mode: str, baseline: str) -> dict[str, Any]:
    """Cold vs warm analyses of the demo's client fleet, interleaved, for this checkout ("new") and, side by side
    in the same run, the ``baseline`` git ref ("main"); then the new driver's RSS over many runs.

    mode full: every run recomputes everything; refresh: before each round the same 1 % of instances get a new
    snapshot in every copy of the lake, and each side refreshes its own copy (what the service does on its interval).
    """
    import shutil

    from benchmarks.pipeline_bench import export_ref

    full = mode == "full"
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        workdir = Path(tmp)
        lake = _demo_lake(workdir, clients)
        roots = {"new": REPO, **({"main": export_ref(baseline, workdir / "baseline")} if baseline else {})}
        sides: dict[str, dict[str, Any]] = {}
        workers: dict[str, WarmWorker] = {}
        try:
            for name, root in roots.items():
                shutil.copytree(lake, workdir / f"{name}-warm")
                shutil.copytree(lake, workdir / f"{name}-cold")
                workers[name] = WarmWorker(workdir / name, workdir / f"{name}-warm", master, root)
                first_warm, answer = workers[name].run()  # the session's first queries (what a just-started service pays)
                sides[name] = {"worker_startup_s": round(workers[name].startup_s, 2), "first_warm_run_s": round(first_warm, 2),
                               "instances": answer["detail"].get("instances"), "cold": [], "warm": [], "jobs": []}
            changed = 0
            for n in range(runs):
                if not full:
                    changed = _new_snapshots([workdir / f"{name}-{kind}" for name in roots for kind in ("warm", "cold")],
                                             0.01, seed=n)
                for name in (list(roots) if n % 2 == 0 else list(roots)[::-1]):
                    sides[name]["cold"].append(_cold(workdir / f"{name}-cold", master, full, roots[name]))
                    seconds, answer = workers[name].run(full)
                    sides[name]["warm"].append(seconds)
                    sides[name]["jobs"].append(answer["detail"].get("spark_jobs"))
            rss = [workers["new"].rss()]  # after each run (the worker collects garbage after each one)
            for _ in range(rss_runs):
                workers["new"].run(True)
                rss.append(workers["new"].rss())
        finally:
            for worker in workers.values():
                worker.stop()
    result: dict[str, Any] = {"mode": mode, "instances_changed_per_refresh": None if full else changed, "master": master,
                              "baseline": baseline, "load_avg_after": [round(x, 1) for x in psutil.getloadavg()],
                              "targets": {"warm_s": 3.0, "ratio": 0.25, "rss_growth": 0.10}}
    for name, side in sides.items():
        cold_median, warm_median = statistics.median(side["cold"]), statistics.median(side["warm"])
        result[name] = {**{k: v for k, v in side.items() if k not in ("cold", "warm")},
                        "cold_runs_s": [round(x, 2) for x in side["cold"]], "warm_runs_s": [round(x, 2) for x in side["warm"]],
                        "cold_median_s": round(cold_median, 2), "warm_median_s": round(warm_median, 2),
                        "ratio_warm_over_cold": round(warm_median / cold_median, 3)}
    if "main" in result:
        result["new_warm_over_main_warm"] = round(result["new"]["warm_median_s"] / result["main"]["warm_median_s"], 3)
        result["new_cold_over_main_cold"] = round(result["new"]["cold_median_s"] / result["main"]["cold_median_s"], 3)
    # A run's garbage collection leaves the heap at different sizes: compare the medians of the first and the
    # last ten samples (the trend), and report single samples every 10 runs.
    window = min(10, len(rss))
    base, end = statistics.median(rss[:window]), statistics.median(rss[-window:])
    result["new"].update({
        "rss_mb_by_run": [(i, round(b / 2**20, 1)) for i, b in enumerate(rss) if i % 10 == 0 or i == len(rss) - 1],
        "rss_mb_first_10_median": round(base / 2**20, 1), "rss_mb_last_10_median": round(end / 2**20, 1),
        "rss_growth": round(end / base - 1, 3) if base else None})
    return result


def _sample(pids: dict[str, int]) -> dict[str, tuple[float, int]]:
    """Per component: (CPU seconds of its process tree so far, RSS bytes of the tree)."""
    out = {}
    for name, pid in pids.items():
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        cpu = rss = 0.0
        for proc in procs:
            try:
                times = proc.cpu_times()
                cpu += times.user + times.system + times.children_user + times.children_system
                rss += proc.memory_info().rss
            except psutil.Error:
                continue
        out[name] = (cpu, int(rss))
    return out


def bench_resources(clusters: int, topics: int, seconds: float, clients: int, poll_s: float,
                    analyze_s: float) -> dict[str, Any]:
    """serve on a lab benchmark fleet: average cores and peak RSS per component over the window."""
    with tempfile.TemporaryDirectory(prefix="serve-res-") as tmp:
        workdir = Path(tmp)
        lab_file = _lab_toml(workdir, clusters, topics)
        # The demo's client fleet pushes to the first clusters (KIP-1324 on the benchmark profile).
        text = lab_file.read_text(encoding="utf-8").replace('profile = "apache-kafka-4-kraft-kip885"\n',
                                                            'profile = "apache-kafka-4-kraft-kip885"\n'
                                                            "policy = { push_config = true }\n")
        lab_file.write_text(text, encoding="utf-8")
        fleet_file = workdir / "lab-clusters.toml"
        with (workdir / "lab.log").open("wb") as log:
            lab = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config", str(lab_file), "--fleet-file",
                                    str(fleet_file), "--clients", str(clients)], cwd=REPO, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        serve = None
        try:
            deadline = time.monotonic() + 600
            while "pushed" not in (workdir / "lab.log").read_text(errors="replace"):
                if lab.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"lab did not start; see {workdir / 'lab.log'}")
                time.sleep(1)
            sink = workdir / "lab-state" / "sink"
            config = workdir / "clusters.toml"
            config.write_text(
                f"[settings]\npoll_interval_s = {poll_s}\nrequest_timeout_s = 30\npoll_deadline_s = 60\n\n"
                f"[service]\nanalyze_interval_s = {analyze_s}\n\n"
                f'[[client_configs]]\nname = "sink"\nsink = "{sink}"\ninterval_s = 30\n\n'
                + fleet_file.read_text(encoding="utf-8"), encoding="utf-8")
            metrics_port, ui_port = free_port(), free_port()
            with (workdir / "serve.log").open("wb") as log:
                serve = subprocess.Popen([sys.executable, "-m", "backend", "serve", "--config", str(config), "--lake",
                                          str(workdir / "lake"), "--metrics-port", str(metrics_port), "--ui-port",
                                          str(ui_port), "--no-api"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            status_file = workdir / "lake" / "_state" / "service" / "status.json"
            pids: dict[str, int] = {}
            deadline = time.monotonic() + 120
            while len(pids) < 5 and time.monotonic() < deadline:
                time.sleep(1)
                try:
                    status = json.loads(status_file.read_text())
                except (OSError, ValueError):
                    continue
                pids = {"supervisor": serve.pid, **{n: c["pid"] for n, c in status["components"].items() if c.get("pid")}}
            supervisor_only = psutil.Process(serve.pid)
            first = _sample(pids)
            first_own = sum(supervisor_only.cpu_times()[:2])
            began = time.monotonic()
            peak: dict[str, int] = {}
            while time.monotonic() - began < seconds:
                for name, (_cpu, rss) in _sample(pids).items():
                    peak[name] = max(peak.get(name, 0), rss if name != "supervisor" else supervisor_only.memory_info().rss)
                time.sleep(2)
            last = _sample(pids)
            own = sum(supervisor_only.cpu_times()[:2]) - first_own
            window = time.monotonic() - began
            status = json.loads(status_file.read_text())
            result: dict[str, Any] = {"clusters": clusters, "topics_per_cluster": topics, "clients": clients,
                                      "window_s": round(window), "poll_interval_s": poll_s,
                                      "analyze_interval_s": analyze_s, "components": {}}
            for name in pids:
                if name not in first or name not in last:
                    continue
                cpu = own if name == "supervisor" else last[name][0] - first[name][0]
                result["components"][name] = {"avg_cores": round(cpu / window, 3),
                                              "peak_rss_mb": round(peak.get(name, 0) / 2**20)}
            result["jobs"] = {n: {"runs": c.get("runs"), "last_duration_s": c.get("last_duration_s")}
                              for n, c in status["components"].items() if n in ("poll", "ingest", "analyze")}
            return result
        finally:
            for proc in (serve, lab):
                if proc is not None and proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its JSON."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    warm = sub.add_parser("warm", help="cold analyze vs the warm driver, and the driver's RSS over many runs")
    warm.add_argument("--runs", type=int, default=5)
    warm.add_argument("--rss-runs", type=int, default=100)
    warm.add_argument("--clients", type=int, default=400)
    warm.add_argument("--master", default="local[*]")
    warm.add_argument("--mode", choices=("full", "refresh"), default="full")
    warm.add_argument("--baseline", default="main", help="git ref run side by side with this checkout ('' for none)")
    res = sub.add_parser("resources", help="CPU and RSS of each component of serve on a benchmark fleet")
    res.add_argument("--clusters", type=int, default=20)
    res.add_argument("--topics", type=int, default=2000)
    res.add_argument("--clients", type=int, default=400)
    res.add_argument("--seconds", type=float, default=300)
    res.add_argument("--poll-interval", type=float, default=30)
    res.add_argument("--analyze-interval", type=float, default=120)
    args = parser.parse_args(argv)
    if args.what == "warm":
        result = bench_warm(args.runs, args.rss_runs, args.clients, args.master, args.mode, args.baseline)
    else:
        result = bench_resources(args.clusters, args.topics, args.seconds, args.clients, args.poll_interval,
                                 args.analyze_interval)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
