"""What the service knows about its jobs, and the files the UI shares with it.

The service state directory holds `status.json` (rewritten every second by the supervisor: each
component's last run, next run, last error), `requests/` (one file per "run this now" request from the
UI, consumed by the supervisor) and `logs/`. The UI reads and writes only these files: no second
process writes the lake beside the service, and nothing is listening for requests on a network port.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.store.location import parse_lake

STATUS_FILE = "status.json"
REQUESTS_DIR = "requests"
LOCK_FILE = "serve.lock"
ENV_SERVICE_DIR = "FLEETVIEW_SERVICE_DIR"
STALE_AFTER_S = 15.0  # a status file not rewritten for this long means the service is not running
REQUESTABLE = ("poll", "analyze", "ingest")
JOBS = ("poll", "ingest", "analyze")


def iso(epoch: float | None) -> str | None:
    """An epoch time as ISO-8601 UTC, or None."""
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


@dataclass
class JobRecord:
    """The runs of one job (or one ingest source): counts, the last run, the last success and error."""

    job: str
    name: str
    runs: Counter[str] = field(default_factory=Counter)
    running_since: float | None = None
    last_started_at: float | None = None
    last_finished_at: float | None = None
    last_outcome: str | None = None
    last_duration_s: float | None = None
    last_success_at: float | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    next_due_at: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def started(self, at: float) -> None:
        """A run began."""
        self.running_since = self.last_started_at = at

    def finished(self, outcome: str, duration_s: float | None, error: str | None, at: float,
                 detail: dict[str, Any] | None = None) -> None:
        """A run ended with outcome ok, error or cancelled."""
        self.runs[outcome] += 1
        self.running_since = None
        self.last_finished_at = at
        self.last_outcome = outcome
        self.last_duration_s = duration_s
        if outcome == "ok":
            self.last_success_at = at
        if error:
            self.last_error, self.last_error_at = error, at
        if detail is not None:
            self.detail = detail

    def to_json(self, now: float) -> dict[str, Any]:
        """The record for /readyz and status.json (times ISO-8601 UTC, ages in seconds)."""
        return {
            "job": self.job,
            "name": self.name,
            "running": self.running_since is not None,
            "running_for_s": None if self.running_since is None else round(now - self.running_since, 1),
            "runs": dict(self.runs),
            "last_started_at": iso(self.last_started_at),
            "last_outcome": self.last_outcome,
            "last_duration_s": None if self.last_duration_s is None else round(self.last_duration_s, 3),
            "last_success_at": iso(self.last_success_at),
            "age_s": None if self.last_success_at is None else round(now - self.last_success_at, 1),
            "last_error": self.last_error,
            "last_error_at": iso(self.last_error_at),
            "next_due_at": iso(self.next_due_at),
            "detail": self.detail,
        }


def default_state_dir(lake: str, configured: str = "") -> Path:
    """The service state directory: [service] state_dir, else <lake>/_state/service for a local lake."""
    if configured.strip():
        return Path(configured).expanduser().resolve()
    where = parse_lake(lake)
    if not where.local:
        raise ValueError(f"the lake {lake} is not local: set [service] state_dir in the fleet file "
                         "(a local directory for the service's status, requests and logs)")
    return Path(where.path("_state", "service"))


def write_status(state_dir: Path, status: dict[str, Any]) -> None:
    """Replace status.json atomically."""
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = state_dir / f".{STATUS_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(status, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, state_dir / STATUS_FILE)


def read_status(state_dir: Path | str | None, *, stale_after_s: float = STALE_AFTER_S) -> dict[str, Any] | None:
    """The running service's status, or None when there is none (no file, a stale one, or its process gone)."""
    if not state_dir:
        return None
    path = Path(state_dir) / STATUS_FILE
    try:
        status = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(status, dict):
        return None
    updated = status.get("updated_epoch")
    if not isinstance(updated, int | float) or time.time() - updated > stale_after_s:
        return None
    pid = status.get("pid")
    if isinstance(pid, int):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
    return status


def request_job(state_dir: Path | str, job: str) -> Path:
    """Ask the running service to run a job now (a request file it consumes); returns the file."""
    if job not in REQUESTABLE:
        raise ValueError(f"unknown job {job!r}; known: {', '.join(REQUESTABLE)}")
    requests = Path(state_dir) / REQUESTS_DIR
    requests.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{job}-{uuid.uuid4().hex[:8]}.json"
    tmp = requests / f".{name}.tmp"
    tmp.write_text(json.dumps({"job": job, "requested_at": time.time()}), encoding="utf-8")
    os.replace(tmp, requests / name)
    return requests / name


def take_requests(state_dir: Path) -> list[str]:
    """The jobs asked for since the last call, oldest first; each request file is consumed."""
    requests = state_dir / REQUESTS_DIR
    try:
        names = sorted(n for n in os.listdir(requests) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    jobs: list[str] = []
    for name in names:
        path = requests / name
        try:
            job = json.loads(path.read_text(encoding="utf-8")).get("job")
        except (OSError, ValueError, AttributeError):
            job = None
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        if job in REQUESTABLE:
            jobs.append(str(job))
    return jobs


def service_state_dir(lake: str, environ: Mapping[str, str] | None = None, configured: str = "") -> Path | None:
    """The service's state directory for a UI on this lake: $FLEETVIEW_SERVICE_DIR (set by serve for its UI), else
    [service] state_dir, else <lake>/_state/service for a local lake; None for a remote lake without either."""
    env = os.environ if environ is None else environ
    if env.get(ENV_SERVICE_DIR):
        return Path(env[ENV_SERVICE_DIR])
    try:
        return default_state_dir(lake, configured)
    except ValueError:
        return None


def service_for_lake(lake: str, environ: Mapping[str, str] | None = None) -> tuple[Path | None, dict[str, Any] | None]:
    """(state directory, status) of the service running on this lake; status None when none runs.

    The directory is $FLEETVIEW_SERVICE_DIR (set by serve for its UI), else <lake>/_state/service for a local lake.
    A service running on another lake does not count.
    """
    state_dir = service_state_dir(lake, environ)
    if state_dir is None:
        return None, None
    status = read_status(state_dir)
    if status is None:
        return state_dir, None
    try:
        same = parse_lake(str(status.get("lake") or "")).root == parse_lake(lake).root
    except ValueError:
        same = False
    return state_dir, status if same else None
