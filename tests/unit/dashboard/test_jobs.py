"""The background job registry with real child processes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from backend.jobs import JobRegistry, command_for


def _wait(registry: JobRegistry, kind: str, timeout_s: float = 30.0) -> str:
    job = registry.current(kind)
    assert job is not None
    deadline = time.monotonic() + timeout_s
    while job.state == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    return job.state


def test_job_runs_in_background_and_reports_its_last_lines(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path)
    script = "import time\nfor i in range(12): print('line', i, flush=True)\ntime.sleep(0.3)"
    started = time.monotonic()
    job = registry.start("poll", [sys.executable, "-c", script])
    assert time.monotonic() - started < 2.0  # start does not wait for the job
    again = registry.start("poll", [sys.executable, "-c", "print('second')"])
    assert again is job  # one job per kind at a time
    assert _wait(registry, "poll") == "succeeded"
    status = registry.status(job, lines=3)
    assert status.tail == ["line 9", "line 10", "line 11"]
    assert status.returncode == 0


def test_failed_job_is_reported_as_failed(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path)
    registry.start("analyze", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    assert _wait(registry, "analyze") == "failed"
    status = registry.status(registry.current("analyze"))  # type: ignore[arg-type]
    assert status.returncode == 3 and status.tail == ["boom"]


def test_stop_all_terminates_running_jobs(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path)
    job = registry.start("poll", [sys.executable, "-c", "import time; time.sleep(60)"])
    registry.stop_all()
    assert job.returncode is not None and job.state == "failed"


def test_command_for_builds_the_cli_commands() -> None:
    assert command_for("poll", lake="L", fleet_file="f.toml")[2:] == ["backend", "poll", "--once", "--config", "f.toml", "--lake", "L"]
    assert command_for("analyze", lake="L")[2:] == ["backend", "analyze", "--lake", "L"]
    with pytest.raises(ValueError, match="unknown job kind"):
        command_for("delete-topics", lake="L")


def test_poll_now_against_a_fleet_file_with_no_cluster_fails_visibly(tmp_path: Path) -> None:
    registry = JobRegistry(tmp_path)
    registry.start("poll", command_for("poll", lake=str(tmp_path / "lake"), fleet_file=str(tmp_path / "missing.toml")),
                   cwd=Path(__file__).resolve().parents[3])
    assert _wait(registry, "poll", 60) == "failed"
    assert registry.status(registry.current("poll")).tail  # type: ignore[arg-type]
