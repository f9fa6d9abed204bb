"""`python -m backend lab`: starts the fleet, pushes a generated client fleet, prints where things are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.configs.ingest import ingest_sink
from backend.lab.cli import main

REPO = Path(__file__).resolve().parents[3]


def _lab_file(tmp: Path) -> Path:
    path = tmp / "lab.toml"
    path.write_text("""
[lab]
state_dir = "state"

[[clusters]]
name = "eu"
profile = "apache-kafka-4-kraft-kip885"
policy = { push_config = true }
brokers = [{ id = 1, rack = "a" }, { id = 2, rack = "b" }]
topics = [{ name = "orders", partitions = 3, replication_factor = 2 }]

[[clusters]]
name = "edge"
profile = "redpanda-like-24"
policy = { push_config = true }
brokers = [{ id = 0 }]

[[clusters]]
name = "old"
profile = "apache-kafka-2.8-zk"
brokers = [{ id = 1 }]
""")
    return path


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "backend", "lab", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)


def test_lab_command_pushes_configs_that_ingest_accepts(tmp_path: Path) -> None:
    run = _run("--config", str(_lab_file(tmp_path)), "--clients", "40", "--seed", "5", "--duration", "0.5")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "pushed 40 client configs: accepted=40" in out
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    for name in ("eu", "edge", "old"):
        line = next(line for line in out.splitlines() if line.startswith(f"cluster {name} "))
        assert f"id={state['clusters'][name]['cluster_id']}" in line
        assert re.search(r"bootstrap=127\.0\.0\.1:\d+", line)
    assert "sink=" in next(line for line in out.splitlines() if line.startswith("cluster eu "))
    assert (tmp_path / "state" / "clusters.toml").exists()

    lake = tmp_path / "lake"
    result = ingest_sink(str(lake), tmp_path / "state" / "sink")
    assert result.records_read == 40
    assert result.quarantined_total == 0
    assert result.records_written == 40


def test_same_seed_gives_the_same_fleet_of_configs(tmp_path: Path) -> None:
    def configs(folder: Path) -> list[tuple[str, list[object]]]:
        folder.mkdir()
        assert main(["--config", str(_lab_file(folder)), "--clients", "15", "--seed", "9", "--duration", "0"]) == 0
        lines = [json.loads(x) for f in sorted((folder / "state" / "sink").rglob("*.jsonl")) for x in f.read_text().splitlines()]
        return sorted((r["client_instance_id"], r["configs"]) for r in lines)

    assert configs(tmp_path / "one") == configs(tmp_path / "two")


def test_bad_lab_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "lab.toml"
    bad.write_text('[[clusters]]\nname = "x"\nprofile = "kafka-9000"\nbrokers = [{ id = 1 }]\n')
    assert main(["--config", str(bad)]) == 2
    assert "unknown profile 'kafka-9000'" in capsys.readouterr().err
    assert main(["--config", str(tmp_path / "nope.toml")]) == 2
    assert "lab config not found" in capsys.readouterr().err
    assert main(["--config", str(_lab_file(tmp_path)), "--clients", "-1"]) == 2
    assert "--clients must be >= 0" in capsys.readouterr().err


def test_lab_runs_until_interrupted_and_serves_meanwhile(tmp_path: Path) -> None:
    import signal

    from confluent_kafka.admin import AdminClient

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    # Ctrl-C's default disposition in the child, as in a terminal: a runner started in the
    # background (nohup, `&` in a script) ignores SIGINT, and Python keeps an inherited ignore.
    proc = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config", str(_lab_file(tmp_path))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        bootstrap = None
        for line in proc.stdout:
            if line.startswith("cluster eu "):
                bootstrap = re.search(r"bootstrap=(\S+)", line).group(1)  # type: ignore[union-attr]
            if line.startswith("cluster old "):
                break
        assert bootstrap is not None
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
        assert "orders" in admin.list_topics(timeout=10).topics
        assert proc.poll() is None  # still running
        del admin  # its connection is dropped by the lab's shutdown either way; do not wait on it
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)  # drains both pipes, so a full pipe cannot hold the exit up
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
