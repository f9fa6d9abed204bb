"""The service's HTTP endpoint on the metrics port: /metrics, /healthz, /readyz.

/metrics is the service's own job series followed by the poller worker's per-cluster series, fetched
from the worker's loopback endpoint with a timeout (a dead or slow poller leaves only the service's
series, and `kafka_fleet_component_up{component="poll"}` says so).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.service.status import JOBS, JobRecord

PREFIX = "kafka_fleet"
UPSTREAM_TIMEOUT_S = 2.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
log = logging.getLogger(__name__)


class ServiceCollector(Collector):
    """The job and component series, from a snapshot the supervisor hands over at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple[dict[str, list[JobRecord]], dict[str, tuple[bool, int]]]], *,
                 audit: Callable[[], dict[tuple[str, str], int]] | None = None) -> None:
        """snapshot() -> ({job: [records]}, {component: (up, restarts)}); audit() -> {(kind, outcome): records}."""
        self.snapshot = snapshot
        self.audit = audit

    def collect(self) -> Iterator[Metric]:
        """Metric families for one scrape."""
        jobs, components = self.snapshot()
        runs = CounterMetricFamily(f"{PREFIX}_job_runs", "Runs of each service job by outcome (ok, error, cancelled).",
                                   labels=["job", "outcome"])
        duration = GaugeMetricFamily(f"{PREFIX}_job_last_duration_seconds", "How long the job's last run took.",
                                     labels=["job"])
        success = GaugeMetricFamily(f"{PREFIX}_job_last_success_timestamp_seconds",
                                    "Unix time the job last finished successfully.", labels=["job"])
        for job in JOBS:
            records = jobs.get(job, [])
            totals: dict[str, int] = {"ok": 0, "error": 0}
            for record in records:
                for outcome, n in record.runs.items():
                    totals[outcome] = totals.get(outcome, 0) + n
            for outcome, n in sorted(totals.items()):
                runs.add_metric([job, outcome], n)
            finished = [r for r in records if r.last_finished_at is not None and r.last_duration_s is not None]
            if finished:
                latest = max(finished, key=lambda r: r.last_finished_at or 0.0)
                duration.add_metric([job], float(latest.last_duration_s or 0.0))
            successes = [r.last_success_at for r in records if r.last_success_at is not None]
            if successes:
                success.add_metric([job], max(successes))
        restarts = CounterMetricFamily(f"{PREFIX}_component_restarts",
                                       "Times the service restarted a component's process.", labels=["component"])
        up = GaugeMetricFamily(f"{PREFIX}_component_up", "1 while the component's process runs.", labels=["component"])
        for name, (alive, count) in sorted(components.items()):
            restarts.add_metric([name], count)
            up.add_metric([name], 1.0 if alive else 0.0)
        yield from (runs, duration, success, restarts, up)
        if self.audit is not None:
            audit = CounterMetricFamily(f"{PREFIX}_audit_records", "Audit records rolled into the lake, by kind "
                                        "(login, logout, view, operate, export, api, mcp, refusal) and outcome.",
                                        labels=["kind", "outcome"])
            for (kind, outcome), n in sorted(self.audit().items()):
                audit.add_metric([kind, outcome], n)
            yield audit


class HealthServer:
    """ThreadingHTTPServer on a daemon thread serving the three paths."""

    def __init__(self, host: str, port: int, *, collector: ServiceCollector,
                 readiness: Callable[[], tuple[bool, dict[str, Any]]], upstream: Callable[[], str | None]) -> None:
        """Bind host:port (0 picks a free port); raises OSError when it cannot."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        self.registry = registry
        self.readiness = readiness
        self.upstream = upstream
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._send(200, "text/plain; charset=utf-8", b"ok\n")
                elif path == "/readyz":
                    ready, body = outer.readiness()
                    self._send(200 if ready else 503, "application/json",
                               json.dumps(body, indent=1, sort_keys=True, default=str).encode())
                elif path == "/metrics":
                    self._send(200, CONTENT_TYPE, outer.metrics())
                else:
                    self._send(404, "text/plain; charset=utf-8", b"not found: /metrics, /healthz, /readyz\n")

            def _send(self, code: int, content_type: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.address = host
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="service-http", daemon=True)
        self._thread.start()

    def metrics(self) -> bytes:
        """The service's series, then the poller's."""
        own = generate_latest(self.registry)
        theirs = self.upstream()
        if not theirs:
            return own
        return own + (theirs if theirs.endswith("\n") else theirs + "\n").encode()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def fetch_metrics(port: int | None, timeout_s: float = UPSTREAM_TIMEOUT_S) -> str | None:
    """The exposition text of a loopback metrics endpoint, or None when it does not answer in time."""
    if not port:
        return None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as response:
            text = response.read().decode("utf-8", errors="replace")
    except OSError as exc:
        log.debug("poller metrics not available: %s", exc)
        return None
    # The service's families come first; the poller's own must not repeat a name (they do not).
    return text
