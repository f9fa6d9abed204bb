"""ZooKeeper-mode lab clusters register in a real ZooKeeper in the KIP-78 / KIP-516 layout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from backend.lab.fleet import LabFleet
from tests.integration.lab.conftest import make_config


@pytest.fixture(scope="module")
def zk_lab(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A lab whose k39 and k28 clusters register in the rig's ZooKeeper."""
    fleet = LabFleet(make_config(tmp_path_factory.mktemp("zklab"), zookeeper.connect))
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def zk(zookeeper: Any) -> Iterator[KazooClient]:
    """An independent kazoo session, reading what the lab wrote."""
    client = KazooClient(hosts=zookeeper.connect, timeout=5)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def _json(zk: KazooClient, path: str) -> Any:
    return json.loads(zk.get(path)[0])


def test_kip78_and_kip516_layout(zk_lab: LabFleet, zk: KazooClient) -> None:
    info = zk_lab.clusters["k39"]
    assert info.zookeeper_error is None
    root = "/lab/k39"
    assert _json(zk, f"{root}/cluster/id") == {"version": "1", "id": info.cluster_id}
    assert sorted(zk.get_children(f"{root}/brokers/ids"), key=int) == ["1", "2"]
    for b in info.brokers:
        reg = _json(zk, f"{root}/brokers/ids/{b.id}")
        assert reg["host"] == b.host and reg["port"] == b.port and reg["rack"] == b.rack
        assert reg["endpoints"] == [f"PLAINTEXT://{b.host}:{b.port}"]
        assert reg["version"] == 5 and reg["jmx_port"] == -1 and "features" in reg and reg["timestamp"].isdigit()
        assert zk.exists(f"{root}/brokers/ids/{b.id}").ephemeralOwner != 0
    controller = _json(zk, f"{root}/controller")
    assert controller["version"] == 1 and controller["brokerid"] == 1 and controller["timestamp"].isdigit()
    topic = _json(zk, f"{root}/brokers/topics/reports")
    assert topic["version"] == 3 and topic["topic_id"] == zk_lab.topic_id("k39", "reports")
    assert topic["partitions"] == {"0": [1, 2], "1": [2, 1], "2": [1, 2], "3": [2, 1]}
    state = _json(zk, f"{root}/brokers/topics/reports/partitions/0/state")
    assert state["leader"] == 1 and state["isr"] == [1, 2]
    assert _json(zk, f"{root}/brokers/topics/__consumer_offsets")["topic_id"] == zk_lab.topic_id("k39", "__consumer_offsets")


def test_misrouted_cluster_holds_another_clusters_id(zk_lab: LabFleet, zk: KazooClient) -> None:
    zk_id = _json(zk, "/lab/k28/cluster/id")["id"]
    assert zk_id == zk_lab.clusters["k39"].cluster_id
    assert zk_id != zk_lab.clusters["k28"].cluster_id


def test_recreate_create_delete_and_broker_stop_update_zookeeper(zk_lab: LabFleet, zk: KazooClient) -> None:
    root = "/lab/k39"
    old = _json(zk, f"{root}/brokers/topics/reports")["topic_id"]
    new = zk_lab.recreate_topic("k39", "reports").topic_id
    assert new != old and _json(zk, f"{root}/brokers/topics/reports")["topic_id"] == new
    zk_lab.create_topic("k39", "zk-fresh", partitions=2, replication_factor=1)
    assert _json(zk, f"{root}/brokers/topics/zk-fresh")["partitions"] == {"0": [1], "1": [2]}
    zk_lab.delete_topic("k39", "zk-fresh")
    assert zk.exists(f"{root}/brokers/topics/zk-fresh") is None
    zk_lab.stop_broker("k39", 1)
    try:
        assert zk.get_children(f"{root}/brokers/ids") == ["2"]
        assert _json(zk, f"{root}/controller")["brokerid"] == 2
    finally:
        zk_lab.start_broker("k39", 1)
    assert sorted(zk.get_children(f"{root}/brokers/ids")) == ["1", "2"]
    assert _json(zk, f"{root}/controller")["brokerid"] == 1


def test_unreachable_zookeeper_is_reported_and_the_lab_still_serves(tmp_path: Path) -> None:
    from tests.rig.procs import free_port

    with LabFleet(make_config(tmp_path, f"127.0.0.1:{free_port()}")) as fleet:
        assert "unreachable" in (fleet.clusters["k39"].zookeeper_error or "")
        assert fleet.clusters["k4"].zookeeper_error is None


def test_fleet_file_points_the_poller_at_the_lab(zk_lab: LabFleet, tmp_path: Path, zookeeper: Any) -> None:
    from backend.config import load_fleet

    path = zk_lab.write_fleet_file(tmp_path / "clusters.toml")
    fleet = load_fleet(path, secrets_path=tmp_path / "none.toml")
    by_name = {c.name: c for c in fleet.clusters}
    assert set(by_name) == set(zk_lab.clusters)
    for name, info in zk_lab.clusters.items():
        assert ",".join(by_name[name].bootstrap_servers) == info.bootstrap
        assert by_name[name].tags["profile"] == info.profile
    assert by_name["k39"].zookeeper is not None
    assert by_name["k39"].zookeeper.connect == zookeeper.connect and by_name["k39"].zookeeper.chroot == "/lab/k39"
    assert by_name["k4"].zookeeper is None
