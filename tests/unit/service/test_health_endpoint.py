"""The service's endpoint: /healthz, /readyz (200 or 503 with the body), /metrics (own series + the poller's)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from backend.collect.metrics import FleetMetrics, start_metrics_server
from backend.service.health import HealthServer, ServiceCollector, fetch_metrics
from backend.service.status import JobRecord


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_endpoint_paths_and_the_merged_exposition(tmp_path: Any) -> None:
    poll = JobRecord("poll", "poll", runs=Counter({"ok": 3, "error": 1}), last_finished_at=100.0, last_duration_s=0.5,
                     last_success_at=99.0)
    sources = [JobRecord("ingest", "a", runs=Counter({"ok": 2}), last_finished_at=50.0, last_duration_s=1.0,
                         last_success_at=50.0),
               JobRecord("ingest", "b", runs=Counter({"error": 4}), last_finished_at=60.0, last_duration_s=2.0)]
    ready = {"value": False}
    poller = start_metrics_server(FleetMetrics(str(tmp_path / "lake")), 0)  # the poller worker's own endpoint
    upstream = {"port": poller.port}
    server = HealthServer(
        "127.0.0.1", 0,
        collector=ServiceCollector(lambda: ({"poll": [poll], "ingest": sources}, {"poll": (True, 2), "ui": (False, 0)})),
        readiness=lambda: (ready["value"], {"ready": ready["value"], "components": {}}),
        upstream=lambda: fetch_metrics(upstream["port"]))
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert _get(f"{base}/healthz") == (200, b"ok\n")
        code, body = _get(f"{base}/readyz")
        assert code == 503 and json.loads(body)["ready"] is False
        ready["value"] = True
        assert _get(f"{base}/readyz")[0] == 200
        assert _get(f"{base}/nope")[0] == 404

        code, body = _get(f"{base}/metrics")
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(body.decode()) for s in family.samples}
        assert samples[("kafka_fleet_job_runs_total", (("job", "poll"), ("outcome", "ok")))] == 3
        assert samples[("kafka_fleet_job_runs_total", (("job", "ingest"), ("outcome", "error")))] == 4
        assert samples[("kafka_fleet_job_runs_total", (("job", "analyze"), ("outcome", "ok")))] == 0
        assert samples[("kafka_fleet_job_last_duration_seconds", (("job", "ingest"),))] == 2.0  # the latest run
        assert samples[("kafka_fleet_job_last_success_timestamp_seconds", (("job", "ingest"),))] == 50.0
        assert ("kafka_fleet_job_last_success_timestamp_seconds", (("job", "analyze"),)) not in samples
        assert samples[("kafka_fleet_component_restarts_total", (("component", "poll"),))] == 2
        assert samples[("kafka_fleet_component_up", (("component", "ui"),))] == 0
        assert b"kafka_fleet_open_incidents" in body  # the poller's families come through

        poller.close()  # the poller is gone: the service's own series still answer
        code, body = _get(f"{base}/metrics")
        assert code == 200 and b"kafka_fleet_job_runs_total" in body and b"kafka_fleet_open_incidents" not in body
    finally:
        server.close()
