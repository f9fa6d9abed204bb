"""`poll`, `ingest` and `analyze` run on their own stop cleanly on SIGTERM: the write in progress finishes (or
nothing of it is committed), the exit is prompt, and the next run continues from the lake's committed state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from backend.configs.ingest import ingest_sink
from backend.lab.clientgen import push_client_fleet
from backend.lab.fleet import LabFleet
from backend.pipeline.state_store import LakePaths, load_state
from backend.store import readers
from backend.store.progress import load_state as load_progress_state
from backend.store.tables import read_table
from tests.integration.service.conftest import SPARK_ENV, write_service_fleet
from tests.rig.procs import REPO, log_tail


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "backend", *args], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **SPARK_ENV})


def _wait_for(proc: subprocess.Popen[bytes], log: Path, what: str, check: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited before {what}:\n{log_tail(log)}"
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}:\n{log_tail(log)}")


def _stop(proc: subprocess.Popen[bytes], log: Path) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"no exit within 15 s of SIGTERM:\n{log_tail(log)}") from None


@pytest.mark.slow
def test_poll_finishes_its_poll_on_sigterm(service_lab: LabFleet, tmp_path: Path) -> None:
    fleet_file = write_service_fleet(service_lab, tmp_path / "clusters.toml")
    lake, log = tmp_path / "lake", tmp_path / "poll.log"
    proc = _start(["poll", "--config", str(fleet_file), "--lake", str(lake), "--interval", "1"], log)
    try:
        _wait_for(proc, log, "the first poll", lambda: "prod-eu status=" in log.read_text())
        for broker in service_lab.runtimes["prod-eu"].brokers:
            service_lab.set_fault("prod-eu", broker, latency_ms=1500)  # the next poll takes a while
        time.sleep(2.0)  # inside a slow poll (a fast one that began before the faults may finish meanwhile)
        printed = log.read_text().count("prod-eu status=")  # read at the signal: the slow poll (9 s) is in progress
        assert _stop(proc, log) == 0
        # The poll in progress was finished and written: one more line than before the signal.
        assert log.read_text().count("prod-eu status=") == printed + 1, log_tail(log)
    finally:
        service_lab.clear_faults()
        if proc.poll() is None:
            proc.kill()
    polls = readers.poll_history(lake)["poll_id"].nunique()
    assert polls == printed + 1
    assert set(readers.latest_fleet_state(lake).clusters["cluster_name"]) == set(service_lab.clusters)


@pytest.mark.slow
def test_ingest_finishes_its_write_on_sigterm(service_lab: LabFleet, tmp_path: Path) -> None:
    push_client_fleet(service_lab, 40, seed=21)
    real = [line for path in sorted(Path(str(service_lab.config.sink_dir)).rglob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
    sink = tmp_path / "sink" / "c"
    sink.mkdir(parents=True)
    with (sink / "broker-1.jsonl").open("w") as out:  # the lab's real records, many times over (new ids)
        for _ in range(max(1, 30_000 // len(real))):
            for line in real:
                record = json.loads(line)
                record["snapshot_id"], record["client_instance_id"] = str(uuid.uuid4()), str(uuid.uuid4())
                out.write(json.dumps(record) + "\n")
    lines = sum(1 for _ in (sink / "broker-1.jsonl").open())
    lake, log = tmp_path / "lake", tmp_path / "ingest.log"
    proc = _start(["ingest", "--sink", str(sink.parent), "--lake", str(lake)], log)
    try:
        cpu = psutil.Process(proc.pid)
        _wait_for(proc, log, "the ingest at work", lambda: sum(cpu.cpu_times()[:2]) > 1.5, 60)
        assert _stop(proc, log) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert "stopped by a signal after saving its progress" in text, text
    # The whole write landed, and the saved position covers exactly what is in the lake.
    assert len(set(read_table(str(lake), "client_configs").column("snapshot_id").to_pylist())) == lines
    (progress,) = [v for v in (load_progress_state(str(lake), "ingest", p.stem)
                               for p in (lake / "_state" / "ingest").glob("*.json"))]
    assert progress["c/broker-1.jsonl"]["line"] == lines
    again = ingest_sink(str(lake), sink.parent)
    assert again.records_read == 0  # the next run continues after the committed position


@pytest.mark.slow
def test_analyze_cancels_on_sigterm_and_the_next_run_completes(service_lab: LabFleet, tmp_path: Path) -> None:
    push_client_fleet(service_lab, 40, seed=31)
    lake = tmp_path / "lake"
    assert ingest_sink(str(lake), str(service_lab.config.sink_dir)).records_written > 0
    log = tmp_path / "analyze.log"
    proc = _start(["analyze", "--lake", str(lake), "--master", "local[2]"], log)
    try:
        _wait_for(proc, log, "the analysis at work", lambda: "shuffle partitions" in log.read_text(), 180)
        code = _stop(proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 143, log_tail(log)
    assert "the previous state stays current" in log.read_text()
    assert load_state(LakePaths(str(lake))) is None  # a first run stopped: nothing committed

    rerun = subprocess.run([sys.executable, "-m", "backend", "analyze", "--lake", str(lake), "--master", "local[2]"],
                           cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, **SPARK_ENV})
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert load_state(LakePaths(str(lake))) is not None
    instances = len(set(read_table(str(lake), "client_configs").column("client_instance_id").to_pylist()))
    assert sum(read_table(str(lake), "results/client_versions").column("instances").to_pylist()) == instances
