"""`python -m backend serve` on the lab fleet: polls on schedule, health and readiness, a killed poller comes
back, SIGTERM stops everything, and the next start continues the lake."""

from __future__ import annotations

import os
import signal
import urllib.request
from pathlib import Path

import pytest

from backend.lab.clientgen import push_client_fleet
from backend.lab.fleet import LabFleet
from backend.pipeline.state_store import LakePaths, load_state
from backend.service.status import request_job
from backend.store import readers
from backend.store.tables import read_table
from tests.integration.service.conftest import write_service_fleet
from tests.integration.service.servicerig import is_loopback, listening_sockets, pid_alive, start_service


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

        # SIGTERM while a poll is in progress (slow brokers make it last): the poller finishes it, and
        # everything stops within 15 s.
        for broker in service_lab.runtimes["prod-eu"].brokers:
            service_lab.set_fault("prod-eu", broker, latency_ms=1000)
        service.wait("a poll in progress", lambda: service.component("poll")["running"], 60)
        took = service.terminate(signal.SIGTERM)
        assert took < 15 and service.proc.returncode == 0, service.logs()
        assert not any(pid_alive(pid) for pid in children), children
    finally:
        service_lab.clear_faults()
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


def _instances_in_lake(lake: Path) -> int:
    table = read_table(str(lake), "client_configs")
    return len(set(table.column("client_instance_id").to_pylist()))


def _instances_in_results(lake: Path) -> int:
    return int(sum(read_table(str(lake), "results/client_versions").column("instances").to_pylist()))


@pytest.mark.slow
def test_serve_ingests_and_analyzes_on_schedule_and_a_sigterm_during_analyze_leaves_a_consistent_lake(
        service_lab: LabFleet, tmp_path: Path) -> None:
    _clients, outcomes = push_client_fleet(service_lab, 60, seed=7)
    assert outcomes and all(o.status == "accepted" for o in outcomes)
    sink = service_lab.config.sink_dir
    sources = (f'[[client_configs]]\nname = "lab-sink"\nsink = "{sink}"\ninterval_s = 2\n\n'
               f'[[client_configs]]\nname = "gone"\nsink = "{tmp_path / "no-such-dir"}"\ninterval_s = 2\n\n')
    fleet_file = write_service_fleet(service_lab, tmp_path / "clusters.toml", poll_interval_s=3,
                                     service="analyze_interval_s = 5\n", sources=sources)
    lake = tmp_path / "lake"
    service = start_service(fleet_file, lake, tmp_path / "serve.log", ui=True)
    try:
        # Ingest and analyze run on schedule: counted from /metrics and the lake.
        service.wait("2 analyze runs", lambda: (service.metric("kafka_fleet_job_runs_total", job="analyze",
                                                               outcome="ok") or 0) >= 2, 300)
        # On its defaults nothing the service started listens beyond loopback: the supervisor's health port, the
        # poller's metrics, the UI, and the warm Spark driver's JVM (its RPC and block-manager ports).
        sockets = listening_sockets(service.proc.pid)
        names = {name for _local, _pid, name in sockets}
        assert "java" in names and len(sockets) >= 5, sockets
        assert [s for s in sockets if not is_loopback(s[0])] == [], sockets
        assert _instances_in_results(lake) == _instances_in_lake(lake) > 0
        sources_status = service.component("ingest")["sources"]
        assert sources_status["lab-sink"]["runs"].get("ok", 0) >= 2, sources_status
        # The broken source is a status with its error; the other components go on.
        gone = sources_status["gone"]
        assert gone["last_outcome"] == "error" and "does not exist" in gone["last_error"], gone
        assert (service.metric("kafka_fleet_job_runs_total", job="ingest", outcome="error") or 0) >= 2
        assert service.readyz()[0] == 200

        # New pushes reach the lake by the next ingest; SIGTERM while the analysis runs.
        before = _instances_in_lake(lake)
        push_client_fleet(service_lab, 40, seed=8)
        service.wait("the new pushes ingested", lambda: _instances_in_lake(lake) > before, 60)
        request_job(service.state_dir, "analyze")  # what the UI's Recompute does while the service runs
        service.wait("an analysis in progress", lambda: service.component("analyze")["running"], 60)
        took = service.terminate(signal.SIGTERM)
        assert took < 15 and service.proc.returncode == 0, service.logs()
    finally:
        service.kill()

    # The lake is consistent for its readers: the pipeline's committed state is whole, every results table reads.
    state = load_state(LakePaths(str(lake)))
    assert state is not None, "the committed pipeline state survives a stop during a run"
    for name in ("distributions", "config_alerts", "client_versions", "drift_keys"):
        read_table(str(lake), f"results/{name}")
    assert set(readers.latest_fleet_state(lake).clusters["cluster_name"]) == set(service_lab.clusters)

    # The next start continues from the committed state: every instance counted exactly once. Its driver
    # is bounded below what a JVM takes, so after that run it is replaced (counted as a restart).
    bounded = write_service_fleet(service_lab, tmp_path / "bounded.toml", poll_interval_s=3, sources=sources,
                                  service="analyze_interval_s = 5\nanalyze_max_rss_mb = 256\n")
    again = start_service(bounded, lake, tmp_path / "serve2.log")
    try:
        again.wait("an analysis after the restart", lambda: (again.metric(
            "kafka_fleet_job_runs_total", job="analyze", outcome="ok") or 0) >= 1, 300)
        assert _instances_in_results(lake) == _instances_in_lake(lake), again.logs()
        assert not list((lake / "results").glob(".old-*")) and not list((lake / "results").glob(".tmp-*"))
        again.wait("the driver replaced for its memory", lambda: again.metric(
            "kafka_fleet_component_restarts_total", component="analyze") == 1.0, 60)
        analyze = again.component("analyze")
        assert "analyze_max_rss_mb=256" in (analyze["last_exit"] or "") and analyze["rss_mb"] > 256, analyze
        assert again.terminate(signal.SIGTERM) < 15
    finally:
        again.kill()
