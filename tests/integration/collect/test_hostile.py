"""One cluster never breaks the others: hostile ZooKeeper data and hostile brokers (issue 13, items 1-3)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from backend.collect.poller import run_poller
from backend.lab.fleet import LabFleet
from backend.store import readers
from backend.store.lake import Lake
from tests.integration.collect.conftest import fleet_from, lab_toml, settings_toml
from tests.rig.kafka import ZooKeeperServer

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def bad_registration(lab_fleet: LabFleet, zookeeper: ZooKeeperServer) -> Iterator[str]:
    """A broker registration with a string port (and other wrong types) in analytics-zk's real ZooKeeper."""
    chroot = lab_fleet.clusters["analytics-zk"].zookeeper_chroot
    zk = KazooClient(hosts=zookeeper.connect + chroot, timeout=10)
    zk.start(timeout=15)
    path = "/brokers/ids/77"
    registration = {"version": 5, "host": ["not", "a", "host"], "port": "9092x", "rack": 12,
                    "endpoints": ["PLAINTEXT://h:1"], "jmx_port": -1, "timestamp": "x"}
    zk.create(path, json.dumps(registration).encode(), makepath=True)
    try:
        yield "analytics-zk"
    finally:
        zk.delete(path)
        zk.stop()
        zk.close()


def test_bad_zookeeper_registration_degrades_only_its_cluster(
    lab_fleet: LabFleet, bad_registration: str, tmp_path: Path
) -> None:
    fleet = fleet_from(
        settings_toml(request_timeout_s=5, poll_deadline_s=15) + lab_toml(lab_fleet, tmp_path, ["analytics-zk", "prod-eu"]),
        tmp_path,
    )
    lake = Lake(tmp_path / "lake")
    polls = []
    stop = threading.Event()

    def on_poll(poll: object) -> None:
        polls.append(poll)
        if len(polls) == 2:
            stop.set()

    run_poller(fleet, lake, interval_s=0.5, on_poll=on_poll, stop=stop)  # survives, and polls again
    assert len(polls) == 2
    state = readers.latest_fleet_state(lake)
    clusters = state.clusters.set_index("cluster_name")
    assert clusters.loc["prod-eu", "status"] == "ok", clusters.loc["prod-eu", "error"]
    assert clusters.loc[bad_registration, "status"] == "degraded"
    error = clusters.loc[bad_registration, "error"]
    assert "broker 77 port" in error and "'9092x'" in error and "broker 77 host" in error, error
    brokers = state.brokers
    eu = brokers[brokers.cluster_name == "prod-eu"]
    assert len(eu) == len(lab_fleet.clusters["prod-eu"].brokers) and eu.reachable.all()
    topics = state.topics
    assert set(topics[topics.cluster_name == "prod-eu"].topic) >= {"orders", "payments", "clickstream"}
    bad = brokers[(brokers.cluster_name == bad_registration) & (brokers.broker_id == 77)]
    assert len(bad) == 1 and bad.port.isna().all() and bad.host.isna().all()
    # Both cycles were written: the poller kept running after the bad data.
    history = readers.poll_history(lake, cluster_name="prod-eu")
    assert history.poll_id.nunique() == 2
