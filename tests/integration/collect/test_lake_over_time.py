"""The poller against the lab fleet for hundreds of polls: reader work stays flat, a lasting skew is one incident."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from backend.collect.poller import run_poller
from backend.lab.fleet import LabFleet
from backend.store import readers
from backend.store.lake import Lake
from backend.store.model import FleetPoll
from backend.store.stats import read_stats
from tests.integration.collect.conftest import fleet_from, lab_toml, settings_toml

pytestmark = pytest.mark.timeout(600)
POLLS = 500


def _work(lake: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for name, call in (
        ("latest_fleet_state", lambda: readers.latest_fleet_state(lake)),
        ("latest_clusters", lambda: readers.latest_clusters(lake)),
        ("cluster_topics", lambda: readers.latest_topics(lake, "prod-us")),
        ("cluster_brokers", lambda: readers.latest_brokers(lake, "prod-us")),
        ("open_incidents", lambda: readers.incidents(lake, open_only=True)),
    ):
        with read_stats() as stats:
            call()
        out[name] = (stats.files_opened, stats.rows_read)
    return out


def test_hundreds_of_polls_of_an_unchanging_lab_fleet(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-eu", "prod-us"]), tmp_path)
    lake = tmp_path / "lake"
    polls: list[FleetPoll] = []
    work: dict[int, dict[str, tuple[int, int]]] = {}
    stop = threading.Event()

    def on_poll(poll: FleetPoll) -> None:
        polls.append(poll)
        if len(polls) in (50, POLLS):
            work[len(polls)] = _work(lake)
        if len(polls) >= POLLS:
            stop.set()

    run_poller(fleet, lake, interval_s=0.001, stop=stop, on_poll=on_poll)
    assert len(polls) == POLLS
    assert all(c.status == "ok" for p in polls for c in p.clusters), [
        (c.cluster_name, c.status, c.error) for p in polls for c in p.clusters if c.status != "ok"][:3]
    # The same files and rows after 500 polls as after 50: reads follow the fleet, not the history.
    assert work[POLLS] == work[50]
    assert work[50]["cluster_topics"][1] >= len(readers.latest_topics(lake, "prod-us")) > 0
    # prod-us runs broker 3 on another version for all 500 polls: one incident, seen by every poll.
    skew = readers.incidents(lake, "prod-us", rule="version_skew")
    assert len(skew) == 1
    assert skew.iloc[0]["status"] == "open" and skew.iloc[0]["polls_seen"] == POLLS
    assert len(readers.alerts(lake, rule="version_skew")) == 1
    # Nothing changed after the first poll: the change log holds only the first sightings.
    log = readers.changes(lake)
    assert set(log["poll_id"]) == {polls[0].poll_id}, log[log["poll_id"] != polls[0].poll_id][["kind", "subject", "before_json", "after_json", "seen_at"]].to_dict("records")
    # Ids and versions in the lake's current state are what the lab brokers report.
    brokers = readers.latest_brokers(lake, "prod-us").set_index("broker_id")
    assert brokers.loc[3, "software_version"] == "4.2.0"
    assert set(readers.latest_clusters(lake)["cluster_id"]) == {
        lab_fleet.clusters["prod-eu"].cluster_id, lab_fleet.clusters["prod-us"].cluster_id}
    assert len(readers.poll_history(lake, "prod-us")) == POLLS
    # Compaction ran between polls: status files stay few (one per hour, plus at most 100 since the last run).
    assert len(Lake(lake).files("cluster_snapshots")) <= 3 + 100
