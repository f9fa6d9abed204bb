"""Background jobs started from the dashboard (poll, analyze): start, status, last output lines."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

JOB_KINDS = ("poll", "analyze")


@dataclass
class Job:
    """One background CLI process and where its output goes."""

    job_id: str
    kind: str
    command: list[str]
    log_path: Path
    started_at: float
    process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def returncode(self) -> int | None:
        """Exit code, or None while running."""
        return self.process.poll()

    @property
    def state(self) -> str:
        """running, succeeded or failed."""
        code = self.returncode
        if code is None:
            return "running"
        return "succeeded" if code == 0 else "failed"


@dataclass(frozen=True)
class JobStatus:
    """A snapshot of a job for display."""

    job_id: str
    kind: str
    state: str
    returncode: int | None
    elapsed_s: float
    tail: list[str]


def command_for(kind: str, *, lake: str, fleet_file: str | None = None) -> list[str]:
    """The CLI command of a job kind (python -m backend poll --once / analyze)."""
    if kind not in JOB_KINDS:
        raise ValueError(f"unknown job kind {kind!r}; known: {', '.join(JOB_KINDS)}")
    command = [sys.executable, "-m", "backend", kind]
    if kind == "poll":
        command.append("--once")
    if fleet_file:
        command += ["--config", fleet_file]
    command += ["--lake", lake]
    return command


class JobRegistry:
    """Starts at most one job per kind at a time and remembers the recent ones."""

    def __init__(self, log_dir: Path | None = None, keep: int = 20) -> None:
        """Create a registry writing job logs under log_dir (a temp dir by default)."""
        self.log_dir = log_dir or Path(tempfile.mkdtemp(prefix="fleetview-jobs-"))
        self._jobs: deque[Job] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def start(self, kind: str, command: list[str], cwd: Path | None = None) -> Job:
        """Start a job unless one of the same kind is still running (then return that one)."""
        with self._lock:
            running = self.current(kind)
            if running is not None and running.state == "running":
                return running
            job_id = f"{kind}-{uuid.uuid4().hex[:8]}"
            log_path = self.log_dir / f"{job_id}.log"
            with open(log_path, "wb") as log:
                process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)
            job = Job(job_id, kind, command, log_path, time.monotonic(), process)
            self._jobs.append(job)
            return job

    def current(self, kind: str) -> Job | None:
        """The newest job of a kind, if any."""
        return next((j for j in reversed(self._jobs) if j.kind == kind), None)

    def status(self, job: Job, lines: int = 8) -> JobStatus:
        """State, exit code, elapsed seconds and the last output lines of a job."""
        tail: deque[str] = deque(maxlen=lines)
        try:
            with open(job.log_path, encoding="utf-8", errors="replace") as log:
                tail.extend(line.rstrip("\n") for line in log)
        except FileNotFoundError:
            pass
        return JobStatus(job.job_id, job.kind, job.state, job.returncode,
                         round(time.monotonic() - job.started_at, 1), list(tail))

    def stop_all(self, timeout_s: float = 5.0) -> None:
        """Terminate every running job (used by tests and on shutdown)."""
        for job in list(self._jobs):
            if job.process.poll() is None:
                job.process.terminate()
                try:
                    job.process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    job.process.kill()
                    job.process.wait(timeout=timeout_s)


def run_job(kind: str, registry: JobRegistry, *, lake: str, fleet_file: str | None, cwd: Path | None = None) -> str:
    """Poll now / Recompute: ask the running service to do it, else start today's background job.

    Returns "service" when the service took the request (no second process writes the lake beside it),
    else "background".
    """
    from backend.service.status import request_job, service_for_lake

    state_dir, status = service_for_lake(lake)
    # A service that does not run this job (serve --no-analyze) leaves it to the background job.
    if status is not None and state_dir is not None and kind in (status.get("components") or {}):
        request_job(state_dir, kind)
        return "service"
    command = command_for(kind, lake=lake, fleet_file=fleet_file)
    registry.start(kind, command, cwd=cwd)
    return "background"
