"""The supervisor behind `serve`: starts the workers and the UI, schedules their runs, restarts what dies.

Components (each its own process group, dying with the supervisor):
- ``poll``: the poller worker, polling on the fleet's interval and serving its per-cluster metrics on loopback;
- ``ingest``: the ingest worker, one client-config source per run request;
- ``analyze``: the warm Spark driver, one analysis per run request, never two at once;
- ``ui``: ``streamlit run dashboard/app.py``.

One thread runs the loop below; one reader thread per worker channel feeds its events into a queue; the
HTTP endpoint reads a snapshot under the lock. Every run's outcome lands in a JobRecord.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.auth.exposure import ui_environment
from backend.config import Fleet
from backend.service import status as st
from backend.service.health import HealthServer, ServiceCollector, fetch_metrics
from backend.service.procs import ChildProcess
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
    analyze: bool = True
    spark_master: str | None = None
    # --insecure-no-login: the UI may serve beyond loopback without login (with [auth] required = false).
    insecure_no_login: bool = False
    python: str = sys.executable
    out: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


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

    @property
    def up(self) -> bool:
        """Whether its process runs."""
        return self.child.running()

    @property
    def ready(self) -> bool:
        """Up and has said hello (a worker) or simply up (the UI)."""
        return self.up and (self.hello is not None or not self.child.with_channel)


class Supervisor:
    """Runs the service until stop() (SIGTERM/SIGINT in `serve`)."""

    def __init__(self, plan: ServicePlan) -> None:
        """Prepare the components of plan (nothing starts before run())."""
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
        self.http: HealthServer | None = None
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
                                     "--server.fileWatcherType", "none"],
                              self.logs / "ui.log", env=ui_env, cwd=PACKAGE_ROOT)
            self.components["ui"] = Component("ui", ui)

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
                                     collector=ServiceCollector(self._metrics_snapshot), readiness=self.readiness,
                                     upstream=self._poller_metrics)
        return self.http.port

    def run(self) -> int:
        """Start everything, supervise until stop(), then stop every child; returns the exit code."""
        self.plan.state_dir.mkdir(parents=True, exist_ok=True)
        self.open_endpoint()
        try:
            for component in self.components.values():
                self._start(component)
            self._banner()
            last_status = last_rotate = 0.0
            while not self._stop.is_set():
                self._drain_events(timeout_s=0.25)
                now = time.monotonic()
                self._check_children(now)
                self._take_requests()
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

    def _banner(self) -> None:
        out = self.plan.out
        assert self.http is not None
        out(f"fleetview serve: {len(self.plan.fleet.clusters)} clusters from {self.plan.fleet_file}, lake {self.plan.lake}")
        poll = self.components["poll"]
        out(f"  poller: every {self.poll_interval_s:g}s, pid {poll.child.pid}, log {poll.child.log}")
        if "ui" in self.components:
            ui = self.components["ui"]
            out(f"  ui: http://{self._display_host(self.plan.ui_address)}:{self.plan.ui_port}  (pid {ui.child.pid}, log {ui.child.log})")
        base = f"http://{self._display_host(self.plan.metrics_address)}:{self.http.port}"
        out(f"  metrics: {base}/metrics  health: {base}/healthz  {base}/readyz")
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
                component.quick_failures = 0 if name == "ui" else component.quick_failures
            elif name == "poll":
                self._poll_event(event, message, at)

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
            if child.proc is None or child.running():
                continue
            code = child.proc.returncode
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
        if component.name == "poll" and self.poll_record.running_since is not None:
            self.poll_record.finished("error", at - self.poll_record.running_since, why, at)
        component.busy = component.busy_since = None

    def _take_requests(self) -> None:
        for job in st.take_requests(self.plan.state_dir):
            log.info("requested from the UI: %s now", job)
            self.run_now(job)

    def run_now(self, job: str) -> None:
        """Run a job as soon as its worker is free (poll: at once)."""
        if job == "poll":
            poll = self.components["poll"]
            if poll.child.channel is not None:
                poll.child.channel.send({"op": "run", "id": uuid.uuid4().hex})

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
                    entry["url"] = f"http://{self._display_host(self.plan.ui_address)}:{self.plan.ui_port}"
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
            records = {job: [JobRecord(**vars(r)) for r in rs] for job, rs in self.records.items()}
            components = {name: (c.up, c.restarts) for name, c in self.components.items()}
        return records, components

    def _poller_metrics(self) -> str | None:
        poll = self.components["poll"]
        hello = poll.hello if poll.up else None
        return fetch_metrics(int(hello["metrics_port"])) if hello and hello.get("metrics_port") else None

    # ------------------------------------------------------------------ stopping

    def _shutdown(self) -> None:
        started = time.monotonic()
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
        if self.http is not None:
            self.http.close()
        try:
            status = self.status()
            status["stopped"] = True
            status["updated_epoch"] = 0  # readers see no running service
            st.write_status(self.plan.state_dir, status)
        except OSError:
            pass
        self.plan.out(f"fleetview serve: stopped {len(self.components)} processes in {time.monotonic() - started:.1f}s")
