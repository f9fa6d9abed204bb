"""`python -m backend serve` on the lab fleet: polls on schedule, health and readiness, a killed poller comes
back, SIGTERM stops everything, and the next start continues the lake."""

from __future__ import annotations

import os
import signal
import urllib.request
from pathlib import Path

import pytest

from backend.lab.fleet import LabFleet
from backend.store import readers
from tests.integration.service.conftest import write_service_fleet
from tests.integration.service.servicerig import pid_alive, start_service


def _polls(lake: Path) -> int:
    return int(readers.poll_history(lake)["poll_id"].nunique())


@pytest.mark.slow
def test_serve_polls_restarts_a_killed_poller_and_stops_cleanly(service_lab: LabFleet, tmp_path: Path) -> None:
    fleet_file = write_service_fleet(service_lab, tmp_path / "clusters.toml", poll_interval_s=2)
    lake = tmp_path / "lake"
    service = start_service(fleet_file, lake, tmp_path / "serve.log", ui=True, extra=["--no-analyze"])
    try:
        # Polls happen on schedule: counted in the lake and in /metrics.
        service.wait("3 polls in the lake", lambda: _polls(lake) >= 3)
        runs = service.metric("kafka_fleet_job_runs_total", job="poll", outcome="ok") or 0
        assert runs >= 3, service.logs()
        status, body = service.readyz()
        assert status == 200, body
        assert body["ready"] is True
        poll = body["components"]["poll"]
        assert poll["up"] and poll["last_outcome"] == "ok" and poll["age_s"] < 3 * 2, poll
        assert poll["detail"]["clusters"] == len(service_lab.clusters)
        # The poller's per-cluster series come through the service's port.
        assert service.metric("kafka_fleet_cluster_up", cluster="prod-eu") == 1.0
        # The UI runs on its port.
        assert service.ui_port is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{service.ui_port}/_stcore/health", timeout=5) as r:
            assert r.read().strip() == b"ok"

        # kill -9 of the poller: restarted with backoff, counted, and it polls again.
        old_pid = poll["pid"]
        os.kill(old_pid, signal.SIGKILL)
        service.wait("the poller restart counted", lambda: service.metric(
            "kafka_fleet_component_restarts_total", component="poll") == 1.0)
        restarted = service.wait("a new poller pid", lambda: (c := service.component("poll"))["pid"] != old_pid
                                 and c["up"] and c)
        assert restarted["restarts"] == 1 and "code -9" in (restarted["last_exit"] or ""), restarted
        before = _polls(lake)
        service.wait("polls after the restart", lambda: _polls(lake) >= before + 2)
        service.wait("poll ok runs counted after the restart", lambda: (service.metric(
            "kafka_fleet_job_runs_total", job="poll", outcome="ok") or 0) >= runs + 2)
        children = [restarted["pid"], service.component("ui")["pid"]]

        took = service.terminate(signal.SIGTERM)
        assert took < 15 and service.proc.returncode == 0, service.logs()
        assert not any(pid_alive(pid) for pid in children), children
    finally:
        service.kill()

    # The lake readers find a consistent lake, and the next start continues it.
    state = readers.latest_fleet_state(lake)
    assert set(state.clusters["cluster_name"]) == set(service_lab.clusters)
    polls = _polls(lake)
    again = start_service(fleet_file, lake, tmp_path / "serve2.log", extra=["--no-analyze"])
    try:
        again.wait("polls after a restart of the service", lambda: _polls(lake) >= polls + 2)
        assert again.readyz()[0] == 200
        took = again.terminate(signal.SIGINT)
        assert took < 15 and again.proc.returncode == 0, again.logs()
    finally:
        again.kill()
