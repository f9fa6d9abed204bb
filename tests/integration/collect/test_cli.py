"""`python -m backend poll` as a user runs it: one line per cluster, exit code, lake written."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from backend.lab.fleet import LabFleet
from backend.store import readers
from tests.integration.collect.conftest import lab_toml, settings_toml
from tests.rig.procs import REPO


def _run(config: Path, lake: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend", "poll", "--config", str(config), "--lake", str(lake), "--once",
         "--secrets", str(tmp_path / "none.toml")],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_poll_once_prints_a_line_per_cluster_and_fails_when_one_is_down(lab_fleet: LabFleet, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(settings_toml(request_timeout_s=3, poll_deadline_s=6) + lab_toml(lab_fleet, tmp_path, ["prod-eu"]))
    lake = tmp_path / "lake"
    ok = _run(config, lake, tmp_path)
    assert ok.returncode == 0, ok.stderr
    lines = [line for line in ok.stdout.splitlines() if " status=" in line]
    assert len(lines) == 1
    assert "prod-eu status=ok brokers=3/3" in lines[0]
    assert f"cluster_id={lab_fleet.clusters['prod-eu'].cluster_id}" in lines[0]

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with config.open("a") as fh:
        fh.write(f'\n[[clusters]]\nname = "gone"\nbootstrap_servers = ["127.0.0.1:{port}"]\n')
    failed = _run(config, lake, tmp_path)
    assert failed.returncode == 1
    assert "gone status=down" in failed.stdout
    assert "prod-eu status=ok" in failed.stdout
    history = readers.poll_history(lake)
    assert history.groupby("cluster_name").size().to_dict() == {"gone": 1, "prod-eu": 2}
