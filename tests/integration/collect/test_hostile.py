"""One cluster never breaks the others: hostile ZooKeeper data and hostile brokers (issue 13, items 1-3)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from backend.collect.poller import poll_fleet, run_poller
from backend.collect.probing import ProbeOutcome, default_prober
from backend.config import ClusterConfig
from backend.kafka.admin import NodeInfo
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


@pytest.fixture
def tarpit() -> Iterator[int]:
    """A port on 127.0.0.1 that completes TCP handshakes (kernel backlog) and never answers."""
    sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_a_cluster_of_400_silent_brokers_does_not_starve_the_others(
    lab_fleet: LabFleet, tarpit: int, tmp_path: Path
) -> None:
    """DescribeCluster's broker list is broker-controlled: prod-us 'lists' 400 brokers that never answer."""
    deadline_s = 6.0
    fleet = fleet_from(
        settings_toml(request_timeout_s=3, poll_deadline_s=deadline_s) + lab_toml(lab_fleet, tmp_path, ["prod-eu", "prod-us"]),
        tmp_path,
    )
    hostile: dict[int, ProbeOutcome] = {}
    hostile_started = threading.Event()

    def prober(cluster: ClusterConfig, nodes: Sequence[NodeInfo], timeout_s: float) -> dict[int, ProbeOutcome]:
        if cluster.name == "prod-us":
            nodes = [*nodes, *(NodeInfo(1000 + i, "127.0.0.1", tarpit, None) for i in range(400))]
            threading.Timer(0.3, hostile_started.set).start()
        else:
            hostile_started.wait(5)  # the worst order: the silent brokers' probes are queued first
            timeout_s = max(0.1, timeout_s - 0.3)
        settings = fleet.settings
        found = default_prober(cluster, nodes, timeout_s, concurrency=settings.probe_concurrency,
                               max_brokers=settings.max_brokers_probed)
        if cluster.name == "prod-us":
            hostile.update(found)
        return found

    started = time.monotonic()
    poll = poll_fleet(fleet, prober=prober)
    elapsed = time.monotonic() - started
    eu = poll.cluster("prod-eu")
    assert eu.status == "ok", eu.error
    assert len(eu.brokers) == len(lab_fleet.clusters["prod-eu"].brokers)
    assert all(b.reachable and b.software_version for b in eu.brokers)
    assert elapsed < deadline_s + 1.0 + 2.0, elapsed  # the poll's deadline, its grace, scheduling
    silent = [o for i, o in hostile.items() if i >= 1000]
    assert len(silent) == 400 and not any(o.reachable for o in silent)
    capped = [o for o in silent if "max_brokers_probed" in (o.error or "")]
    assert len(capped) == len(hostile) - fleet.settings.max_brokers_probed
    assert any("deadline" in (o.error or "") for o in silent)
