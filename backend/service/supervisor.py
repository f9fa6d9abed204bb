"""The supervisor behind `serve`: starts the workers and the UI, schedules their runs, restarts what dies.

Components (each its own process group, dying with the supervisor):
- ``poll``: the poller worker, polling on the fleet's interval and serving its per-cluster metrics on loopback;
- ``ingest``: the ingest worker, one client-config source per run request;
- ``analyze``: the warm Spark driver, one analysis per run request, never two at once;
- ``ui``: ``streamlit run dashboard/app.py``;
- ``api``: ``python -m backend.api``, the read-only HTTP API and MCP tools (uvicorn) on its own port.

The supervisor also rolls the audit journals (`<state_dir>/audit/`) into the lake's `audit` table on a thread of its
own, and counts the records it rolled for /metrics.

One thread runs the loop below; one reader thread per worker channel feeds its events into a queue; the
HTTP endpoint reads a snapshot under the lock. Every run's outcome lands in a JobRecord.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.audit.journal import journal_dir
from backend.audit.store import AuditCompactor
from backend.auth.exposure import ui_environment
from backend.config import Fleet
from backend.service import status as st
from backend.service.health import HealthServer, ServiceCollector, fetch_metrics
from backend.service.procs import ChildProcess, free_port
from backend.service.status import JobRecord

log = logging.getLogger("backend.service")
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
APP = PACKAGE_ROOT / "dashboard" / "app.py"
QUICK_FAILURE_S = 60.0  # a child that ran less than this before dying counts towards a longer backoff
LOG_ROTATE_EVERY_S = 60.0
WORKERS = ("poll", "ingest", "analyze")


@dataclass
class ServicePlan:
    """Everything serve needs, resolved from the fleet file and the command line."""

    fleet: Fleet
    fleet_file: Path
    lake: str
    state_dir: Path
    secrets: str | None = None
    ui: bool = True
    ui_address: str = "127.0.0.1"
    ui_port: int = 8501
    metrics_address: str = "127.0.0.1"
    metrics_port: int = 9308
    api: bool = True
    api_address: str = "127.0.0.1"
    api_port: int = 8502
    analyze: bool = True
    spark_master: str | None = None
    # --insecure-no-login: the UI may serve beyond loopback without login (with [auth] required = false).
    insecure_no_login: bool = False
    python: str = sys.executable
    out: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    banner: Callable[[Supervisor], None] | None = None  # replaces the default banner (the demo prints its own)
    stop_event: threading.Event | None = None  # set by the caller to stop the service (the demo's signal handler)


@dataclass
class Component:
    """One supervised child: its process, restart bookkeeping and what the supervisor knows of its work."""

    name: str
    child: ChildProcess
    restarts: int = 0
    quick_failures: int = 0
    restart_at: float | None = None  # monotonic time of a pending restart
    last_exit: str | None = None
    hello: dict[str, Any] | None = None
    busy: dict[str, Any] | None = None  # the run request in progress
    busy_since: float | None = None
    generation: int = 0
    replace_after_run: str | None = None  # why the child is replaced once idle (memory bound)
    expected_exit: str | None = None  # set when the supervisor itself stopped the child to replace it

    @property
    def up(self) -> bool:
        """Whether its process runs."""
        return self.child.running()

    @property
    def ready(self) -> bool:
        """Up and has said hello (a worker) or simply up (the UI)."""
        return self.up and (self.hello is not None or not self.child.with_channel)


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One line for several sources: the latest run, the latest success and error, summed run counts."""
    if not records:
        return {}
    runs: dict[str, int] = {}
    for record in records:
        for outcome, n in record["runs"].items():
            runs[outcome] = runs.get(outcome, 0) + n
    started = [r for r in records if r["last_started_at"]]
    latest = max(started, key=lambda r: r["last_started_at"]) if started else records[0]
    successes = [r for r in records if r["last_success_at"]]
    errors = [r for r in records if r["last_error_at"]]
    newest_success = max(successes, key=lambda r: r["last_success_at"]) if successes else None
    newest_error = max(errors, key=lambda r: r["last_error_at"]) if errors else None
    due = [r["next_due_at"] for r in records if r["next_due_at"]]
    return {
        "runs": runs,
        "running": any(r["running"] for r in records),
        "last_started_at": latest["last_started_at"],
        "last_outcome": latest["last_outcome"],
        "last_duration_s": latest["last_duration_s"],
        "last_success_at": newest_success["last_success_at"] if newest_success else None,
        "age_s": newest_success["age_s"] if newest_success else None,
        "last_error": f"{newest_error['name']}: {newest_error['last_error']}" if newest_error else None,
        "last_error_at": newest_error["last_error_at"] if newest_error else None,
        "next_due_at": min(due) if due else None,
        "failing_sources": sorted(r["name"] for r in records if r["last_outcome"] == "error"),
    }


class Supervisor:
    """Runs the service until stop() (SIGTERM/SIGINT in `serve`)."""

    def __init__(self, plan: ServicePlan) -> None:
        """Prepare the components of plan (nothing starts before run())."""
        if plan.ui and plan.ui_port == 0:
            plan.ui_port = free_port(plan.ui_address)
        if plan.api and plan.api_port == 0:
            plan.api_port = free_port(plan.api_address)
        self.plan = plan
        self.settings = plan.fleet.settings
        self.service = plan.fleet.service
        self.poll_interval_s = plan.fleet.settings.poll_interval_s
        self.logs = plan.state_dir / "logs"
        self._lock = threading.RLock()
        self._events: queue.Queue[tuple[str, int, dict[str, Any] | None]] = queue.Queue()
        self._stop = threading.Event()
        self.started_epoch = time.time()
        self.components: dict[str, Component] = {}
        self.records: dict[str, list[JobRecord]] = {job: [] for job in st.JOBS}
        self.poll_record = JobRecord("poll", "poll")
        self.records["poll"].append(self.poll_record)
        now = time.time()
        self.sources = {source.label: source for source in plan.fleet.client_configs}
        self.source_records = {label: JobRecord("ingest", label, next_due_at=now) for label in self.sources}
        self.records["ingest"].extend(self.source_records.values())
        self.analyze_record = JobRecord("analyze", "analyze", next_due_at=now + self.service.analyze_interval_s)
        self.records["analyze"].append(self.analyze_record)
        self._first_analyze_pending = True
        self._schedule_file = plan.state_dir / "schedule.json"
        self.last_full_at = self._load_last_full(now)
        self.http: HealthServer | None = None
        self.audit_counts: Counter[tuple[str, str]] = Counter()
        self.audit_errors = 0
        self._audit_thread: threading.Thread | None = None
        self._compactor: AuditCompactor | None = None
        self._build_components()

    # ------------------------------------------------------------------ components

    def _worker_cmd(self, job: str) -> list[str]:
        cmd = [self.plan.python, "-m", "backend.service.worker", job, "--config", str(self.plan.fleet_file),
               "--lake", self.plan.lake]
        if self.plan.secrets:
            cmd += ["--secrets", self.plan.secrets]
        if job == "analyze" and self.plan.spark_master:
            cmd += ["--master", self.plan.spark_master]
        return cmd

    def _build_components(self) -> None:
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))}
        poll = ChildProcess("poll", self._worker_cmd("poll"), self.logs / "poll.log", env=env, cwd=PACKAGE_ROOT,
                            with_channel=True, term_leader_only=True)
        self.components["poll"] = Component("poll", poll)
        if self.plan.ui:
            ui_env = {**env, "FLEETVIEW_LAKE": self.plan.lake, "FLEETVIEW_FLEET": str(self.plan.fleet_file),
                      st.ENV_SERVICE_DIR: str(self.plan.state_dir), **ui_environment(self.plan.insecure_no_login)}
            ui = ChildProcess("ui", [self.plan.python, "-m", "streamlit", "run", str(APP),
                                     "--server.port", str(self.plan.ui_port), "--server.address", self.plan.ui_address,
                                     "--server.headless", "true", "--browser.gatherUsageStats", "false",
                                     "--server.fileWatcherType", "none",
                                     # no raw table export (formulas): also where .streamlit/ is not beside the app
                                     "--client.disableDataExport", "true",
                                     *(["--secrets.files", self.plan.secrets] if self.plan.secrets else []),
                                     *(["--server.baseUrlPath", self.service.ui_base_path.strip("/")]
                                       if self.service.ui_base_path.strip("/") else [])],
                              self.logs / "ui.log", env=ui_env, cwd=PACKAGE_ROOT)
            self.components["ui"] = Component("ui", ui)
        if self.plan.api:
            service = self.service
            secrets = self.plan.secrets or str(Path(self.plan.fleet.settings.secrets_file).resolve())
            api = ChildProcess("api", [self.plan.python, "-m", "backend.api", "--config", str(self.plan.fleet_file),
                                       "--lake", self.plan.lake, "--journal-dir", str(journal_dir(self.plan.state_dir)),
                                       "--secrets", secrets, "--address", self.plan.api_address,
                                       "--port", str(self.plan.api_port), "--rate", repr(service.api_rate_per_s),
                                       "--burst", str(service.api_rate_burst)],
                               self.logs / "api.log", env=env, cwd=PACKAGE_ROOT)
            self.components["api"] = Component("api", api)
        if self.sources:
            ingest = ChildProcess("ingest", self._worker_cmd("ingest"), self.logs / "ingest.log", env=env,
                                  cwd=PACKAGE_ROOT, with_channel=True, term_leader_only=True)
            self.components["ingest"] = Component("ingest", ingest)
        if self.plan.analyze:
            analyze = ChildProcess("analyze", self._worker_cmd("analyze"), self.logs / "analyze.log", env=env,
                                   cwd=PACKAGE_ROOT, with_channel=True, term_leader_only=True)
            self.components["analyze"] = Component("analyze", analyze)

    def _load_last_full(self, now: float) -> float:
        """When the last full analysis ran (schedule.json); a first start counts as one (a first run is full anyway)."""
        try:
            value = json.loads(self._schedule_file.read_text(encoding="utf-8")).get("last_full_analyze")
            if isinstance(value, int | float):
                return float(value)
        except (OSError, ValueError, AttributeError):
            pass
        self._save_last_full(now)
        return now

    def _save_last_full(self, at: float) -> None:
        try:
            self._schedule_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._schedule_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"last_full_analyze": at}), encoding="utf-8")
            os.replace(tmp, self._schedule_file)
        except OSError as exc:
            log.error("schedule not saved to %s: %s", self._schedule_file, exc)

    def _start(self, component: Component) -> None:
        component.hello = None
        component.busy = component.busy_since = None
        component.generation += 1
        component.child.start()
        if component.child.channel is not None:
            channel, generation = component.child.channel, component.generation

            def read() -> None:
                for message in channel.messages():
                    self._events.put((component.name, generation, message))
                self._events.put((component.name, generation, None))

            threading.Thread(target=read, name=f"{component.name}-events", daemon=True).start()
        log.info("%s started (pid %s)", component.name, component.child.pid)

    # ------------------------------------------------------------------ the loop

    def stop(self) -> None:
        """Ask run() to stop every child and return (safe from a signal handler)."""
        self._stop.set()

    def open_endpoint(self) -> int:
        """Bind the metrics/health endpoint (raises OSError when the port is taken); returns its port."""
        if self.http is None:
            self.http = HealthServer(self.plan.metrics_address, self.plan.metrics_port,
                                     collector=ServiceCollector(self._metrics_snapshot, audit=self._audit_snapshot),
                                     readiness=self.readiness,
                                     upstream=self._poller_metrics)
        return self.http.port

    def run(self) -> int:
        """Start everything, supervise until stop(), then stop every child; returns the exit code."""
        self.plan.state_dir.mkdir(parents=True, exist_ok=True)
        self.open_endpoint()
        self._audit_thread = threading.Thread(target=self._roll_audit, name="audit-compactor", daemon=True)
        self._audit_thread.start()
        try:
            for component in self.components.values():
                self._start(component)
            (self.plan.banner or Supervisor._banner)(self)
            last_status = last_rotate = 0.0
            while not self._stop.is_set():
                if self.plan.stop_event is not None and self.plan.stop_event.is_set():
                    break
                self._drain_events(timeout_s=0.25)
                now = time.monotonic()
                self._check_children(now)
                self._take_requests()
                with self._lock:
                    self._schedule(time.time())
                if now - last_status >= 1.0:
                    self._write_status()
                    last_status = now
                if now - last_rotate >= LOG_ROTATE_EVERY_S:
                    for component in self.components.values():
                        component.child.rotate_log()
                    last_rotate = now
        finally:
            self._shutdown()
        return 0

    def _roll_audit(self) -> None:
        """Roll the audit journals into the lake's audit table every audit_compact_interval_s until stop."""
        while not self._stop.wait(self.service.audit_compact_interval_s):
            self._roll_audit_once()

    def _roll_audit_once(self) -> None:
        if self._compactor is None:
            self._compactor = AuditCompactor(self.plan.lake, journal_dir(self.plan.state_dir),
                                             self.plan.fleet.settings.audit_retention_days)
        try:
            result = self._compactor.run_once()
        except Exception as exc:  # noqa: BLE001 - a lake error must not end the compactor; it tries again
            log.error("audit: rolling the journals failed: %s", exc)
            return
        with self._lock:
            self.audit_counts.update(result.counts())
            self.audit_errors += 1 if result.error else 0

    def api_url(self) -> str:
        """The API's base URL (what `serve` prints as `API: ...`)."""
        return f"http://{self._display_host(self.plan.api_address)}:{self.plan.api_port}/api/v1"

    def _banner(self) -> None:
        out = self.plan.out
        assert self.http is not None
        out(f"fleetview serve: {len(self.plan.fleet.clusters)} clusters from {self.plan.fleet_file}, lake {self.plan.lake}")
        poll = self.components["poll"]
        out(f"  poller: every {self.poll_interval_s:g}s, pid {poll.child.pid}, log {poll.child.log}")
        if "ingest" in self.components:
            for label, source in self.sources.items():
                out(f"  ingest: {label} ({source.kind} {source.location}) every {source.interval_s:g}s")
        if "analyze" in self.components:
            full = self.service.full_analyze_interval_s
            out(f"  analyze: warm Spark driver, refresh every {self.service.analyze_interval_s:g}s"
                + (f", full run every {full:g}s" if full else "") + f", log {self.components['analyze'].child.log}")
        if "ui" in self.components:
            ui = self.components["ui"]
            out(f"  ui: http://{self._display_host(self.plan.ui_address)}:{self.plan.ui_port}  (pid {ui.child.pid}, log {ui.child.log})")
        base = f"http://{self._display_host(self.plan.metrics_address)}:{self.http.port}"
        out(f"  metrics: {base}/metrics  health: {base}/healthz  {base}/readyz")
        if "api" in self.components:
            out(f"API: {self.api_url()}")
        out(f"  service state: {self.plan.state_dir}")

    @staticmethod
    def _display_host(address: str) -> str:
        return "localhost" if address in ("127.0.0.1", "0.0.0.0", "::", "") else address

    def _drain_events(self, timeout_s: float) -> None:
        try:
            item = self._events.get(timeout=timeout_s)
        except queue.Empty:
            return
        while True:
            self._handle_event(*item)
            try:
                item = self._events.get_nowait()
            except queue.Empty:
                return

    def _handle_event(self, name: str, generation: int, message: dict[str, Any] | None) -> None:
        component = self.components.get(name)
        if component is None or generation != component.generation or message is None:
            return
        event = message.get("event")
        at = float(message.get("at") or time.time())
        with self._lock:
            if event == "hello":
                component.hello = message
            elif name == "poll":
                self._poll_event(event, message, at)
            elif name == "ingest":
                self._ingest_event(component, event, message, at)
            elif name == "analyze":
                self._analyze_event(component, event, message, at)

    def _poll_event(self, event: Any, message: dict[str, Any], at: float) -> None:
        record = self.poll_record
        if event == "start":
            record.started(at)
            record.next_due_at = None
        elif event == "done":
            record.finished(str(message.get("outcome") or "error"), message.get("duration_s"), message.get("error"), at,
                            message.get("detail") if isinstance(message.get("detail"), dict) else None)
            record.next_due_at = (record.last_started_at or at) + self.poll_interval_s
            self.components["poll"].quick_failures = 0

    def _ingest_event(self, component: Component, event: Any, message: dict[str, Any], at: float) -> None:
        record = self.source_records.get(str(message.get("source")))
        if record is None:
            return
        if event == "start":
            record.started(at)
        elif event == "done":
            detail = message.get("detail") if isinstance(message.get("detail"), dict) else None
            record.finished(str(message.get("outcome") or "error"), message.get("duration_s"), message.get("error"), at,
                            detail)
            source = self.sources[record.name]
            record.next_due_at = max(at, (record.last_started_at or at) + source.interval_s)
            component.busy = component.busy_since = None
            component.quick_failures = 0

    def _analyze_event(self, component: Component, event: Any, message: dict[str, Any], at: float) -> None:
        record = self.analyze_record
        if event == "hello":
            return
        if event == "start":
            record.started(at)
            record.next_due_at = None
            return
        if event != "done":
            return
        raw = message.get("detail")
        detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
        outcome = str(message.get("outcome") or "error")
        record.finished(outcome, message.get("duration_s"), message.get("error"), at, detail)
        record.next_due_at = at + self.service.analyze_interval_s
        component.busy = component.busy_since = None
        component.quick_failures = 0
        if outcome == "ok" and detail.get("full"):
            self.last_full_at = at
            self._save_last_full(at)
        rss = detail.get("rss_bytes")
        bound = self.service.analyze_max_rss_mb * 1024 * 1024
        if isinstance(rss, int | float) and rss > bound:
            component.replace_after_run = (f"replaced: the Spark driver's memory {rss / 2**20:.0f} MiB passed "
                                           f"analyze_max_rss_mb={self.service.analyze_max_rss_mb}")

    def _schedule(self, now: float) -> None:
        """Send the runs that are due to idle workers (one run per worker at a time)."""
        ingest = self.components.get("ingest")
        if ingest is not None and ingest.ready and ingest.busy is None:
            due = [r for r in self.source_records.values() if r.next_due_at is not None and r.next_due_at <= now]
            if due:
                record = min(due, key=lambda r: r.next_due_at or now)
                self._send_run(ingest, {"source": record.name})
                record.next_due_at = None
        analyze = self.components.get("analyze")
        if analyze is None or not analyze.ready or analyze.busy is not None:
            return
        if analyze.replace_after_run and analyze.expected_exit is None:
            analyze.expected_exit = analyze.replace_after_run
            analyze.replace_after_run = None
            log.warning("analyze: %s", analyze.expected_exit)
            analyze.child.terminate()
            return
        record = self.analyze_record
        if self._first_analyze_pending and self.poll_record.last_success_at is not None and all(
                r.last_finished_at is not None for r in self.source_records.values()):
            record.next_due_at = now  # the first run sees the first poll's brokers and every source's first data
        if record.next_due_at is None or record.next_due_at > now:
            return
        interval = self.service.full_analyze_interval_s
        full = interval > 0 and now - self.last_full_at >= interval
        self._first_analyze_pending = False
        self._send_run(analyze, {"full": full})
        record.next_due_at = None

    def _send_run(self, component: Component, fields: dict[str, Any]) -> None:
        request = {"op": "run", "id": uuid.uuid4().hex, **fields}
        if component.child.channel is not None and component.child.channel.send(request):
            component.busy, component.busy_since = request, time.monotonic()

    def _check_children(self, now: float) -> None:
        for component in self.components.values():
            child = component.child
            if component.restart_at is not None:
                if now >= component.restart_at and not self._stop.is_set():
                    component.restart_at = None
                    with self._lock:
                        component.restarts += 1
                    self._start(component)
                continue
            if child.proc is None:
                continue
            if child.running():
                if component.busy_since is not None and now - component.busy_since > self.service.job_timeout_s:
                    log.error("%s: the run took longer than job_timeout_s=%gs; replacing the worker", component.name,
                              self.service.job_timeout_s)
                    component.busy_since = None
                    child.kill_group()
                continue
            code = child.proc.returncode
            if component.expected_exit is not None:
                component.last_exit = component.expected_exit
                component.expected_exit = None
                child.kill_group()
                child.close_channel()
                with self._lock:
                    component.restarts += 1
                self._start(component)
                continue
            ran_s = now - child.started_at
            tail = child.tail(8)
            component.last_exit = f"exited with code {code} after {ran_s:.0f}s"
            child.kill_group()  # what the leader left behind (e.g. a JVM)
            child.close_channel()
            with self._lock:
                self._abandon_run(component, f"the {component.name} process {component.last_exit}")
            component.quick_failures = component.quick_failures + 1 if ran_s < QUICK_FAILURE_S else 1
            delay = min(self.service.restart_backoff_max_s,
                        self.service.restart_backoff_s * 2 ** (component.quick_failures - 1))
            component.restart_at = now + delay
            log.error("%s %s; restarting it in %.1fs (restart %d). Last lines:\n%s", component.name,
                      component.last_exit, delay, component.restarts + 1, tail)

    def _abandon_run(self, component: Component, why: str) -> None:
        """A worker died: its run in progress (if any) ends as an error."""
        at = time.time()
        running = {"poll": [self.poll_record], "ingest": list(self.source_records.values()),
                   "analyze": [self.analyze_record]}.get(component.name, [])
        for record in running:
            if record.running_since is not None:
                record.finished("error", at - record.running_since, why, at)
                if record.job == "ingest":
                    record.next_due_at = at + self.sources[record.name].interval_s
                elif record.job == "analyze":
                    record.next_due_at = at + self.service.analyze_interval_s
        if component.busy is not None and component.name == "ingest":
            pending = self.source_records.get(str(component.busy.get("source")))
            if pending is not None and pending.next_due_at is None:
                pending.next_due_at = at + self.sources[pending.name].interval_s
        if component.busy is not None and component.name == "analyze" and self.analyze_record.next_due_at is None:
            self.analyze_record.next_due_at = at + self.service.analyze_interval_s
        component.busy = component.busy_since = None

    def _take_requests(self) -> None:
        for job in st.take_requests(self.plan.state_dir):
            log.info("requested from the UI: %s now", job)
            self.run_now(job)

    def run_now(self, job: str) -> None:
        """Run a job as soon as its worker is free (poll: at once)."""
        now = time.time()
        with self._lock:
            if job == "poll":
                poll = self.components["poll"]
                if poll.child.channel is not None:
                    poll.child.channel.send({"op": "run", "id": uuid.uuid4().hex})
            elif job == "analyze" and "analyze" in self.components:
                if self.analyze_record.running_since is None:
                    self.analyze_record.next_due_at = now
            elif job == "ingest":
                for record in self.source_records.values():
                    if record.running_since is None:
                        record.next_due_at = now

    # ------------------------------------------------------------------ status, readiness, metrics

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, body): ready when the poller's last success is younger than 3 poll intervals."""
        body = self.status()
        age = body["components"]["poll"]["age_s"]
        limit = 3 * self.poll_interval_s
        ready = age is not None and age < limit
        body["ready"] = ready
        body["reason"] = ("the poller's last success is recent" if ready else
                          "no successful poll yet" if age is None else
                          f"the poller's last success is {age:.0f}s old (limit {limit:g}s: 3 poll intervals)")
        return ready, body

    def status(self) -> dict[str, Any]:
        """Every component's state (the body of /readyz and of status.json)."""
        now = time.time()
        with self._lock:
            components: dict[str, Any] = {}
            for name, component in self.components.items():
                entry: dict[str, Any] = {"up": component.up, "pid": component.child.pid,
                                         "restarts": component.restarts, "last_exit": component.last_exit}
                if name == "poll":
                    entry.update(self.poll_record.to_json(now))
                    entry["interval_s"] = self.poll_interval_s
                elif name == "ui":
                    base = self.service.ui_base_path.strip("/")
                    entry["url"] = (f"http://{self._display_host(self.plan.ui_address)}:{self.plan.ui_port}/"
                                    + (f"{base}/" if base else ""))
                elif name == "api":
                    entry["url"] = self.api_url()
                elif name == "ingest":
                    entry.update(_summary([r.to_json(now) for r in self.source_records.values()]))
                    entry["sources"] = {label: {**r.to_json(now), "kind": self.sources[label].kind,
                                                "interval_s": self.sources[label].interval_s}
                                        for label, r in self.source_records.items()}
                elif name == "analyze":
                    entry.update(self.analyze_record.to_json(now))
                    entry["interval_s"] = self.service.analyze_interval_s
                    full_every = self.service.full_analyze_interval_s
                    entry["last_full_at"] = st.iso(self.last_full_at)
                    entry["next_full_at"] = st.iso(self.last_full_at + full_every) if full_every else None
                    rss = self.analyze_record.detail.get("rss_bytes") or (component.hello or {}).get("rss_bytes")
                    entry["rss_mb"] = round(rss / 2**20, 1) if isinstance(rss, int | float) else None
                components[name] = entry
            return {
                "pid": os.getpid(),
                "started_at": st.iso(self.started_epoch),
                "updated_at": st.iso(now),
                "updated_epoch": now,
                "lake": self.plan.lake,
                "fleet_file": str(self.plan.fleet_file),
                "metrics_url": f"http://{self._display_host(self.plan.metrics_address)}:{self.http.port}" if self.http else None,
                "components": components,
            }

    def _write_status(self) -> None:
        try:
            st.write_status(self.plan.state_dir, self.status())
        except OSError as exc:
            log.error("service status not written to %s: %s", self.plan.state_dir, exc)

    def _metrics_snapshot(self) -> tuple[dict[str, list[JobRecord]], dict[str, tuple[bool, int]]]:
        with self._lock:
            records = {job: [JobRecord(**{**vars(r), "runs": Counter(r.runs), "detail": {}}) for r in rs]
                       for job, rs in self.records.items()}
            components = {name: (c.up, c.restarts) for name, c in self.components.items()}
        return records, components

    def _audit_snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.audit_counts)

    def _poller_metrics(self) -> str | None:
        poll = self.components["poll"]
        hello = poll.hello if poll.up else None
        return fetch_metrics(int(hello["metrics_port"])) if hello and hello.get("metrics_port") else None

    # ------------------------------------------------------------------ stopping

    def _shutdown(self) -> None:
        started = time.monotonic()
        self._stop.set()
        for component in self.components.values():
            component.restart_at = None
            component.child.terminate()
        deadline = started + self.service.stop_timeout_s
        for component in self.components.values():
            proc = component.child.proc
            if proc is not None and proc.poll() is None:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except Exception:  # noqa: BLE001 - TimeoutExpired: killed below
                    log.error("%s did not stop within %.0fs; killing it", component.name, self.service.stop_timeout_s)
        for component in self.components.values():
            component.child.kill_group()
            component.child.close_channel()
        if self._audit_thread is not None:
            self._audit_thread.join(timeout=5)
            self._roll_audit_once()  # what the children wrote before they stopped
        if self.http is not None:
            self.http.close()
        try:
            status = self.status()
            status["stopped"] = True
            status["updated_epoch"] = 0  # readers see no running service
            st.write_status(self.plan.state_dir, status)
        except OSError:
            pass
        if self.plan.banner is None:
            self.plan.out(f"fleetview serve: stopped {len(self.components)} processes in "
                          f"{time.monotonic() - started:.1f}s")
