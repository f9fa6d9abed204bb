"""Fixtures for lab tests: a lab fleet of every profile on free ports, and raw-request helpers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.kafka import protocol as P
from backend.lab.fleet import LabFleet
from backend.lab.model import LabConfig, parse_lab_config

PUSH_LIMIT = 2048


def lab_raw(state_dir: Path, zookeeper_connect: str | None = None) -> dict[str, Any]:
    """A lab definition with one cluster per profile (ZooKeeper-mode ones register when a connect is given)."""
    zk = {"connect": zookeeper_connect} if zookeeper_connect else {}
    return {
        "lab": {"state_dir": str(state_dir)},
        "clusters": [
            {"name": "k4", "profile": "apache-kafka-4-kraft-kip885",
             "policy": {"push_config": True, "client_config_max_bytes": PUSH_LIMIT},
             "brokers": [{"id": 1, "rack": "r1"}, {"id": 2, "rack": "r2"},
                         {"id": 3, "rack": "r3", "software_version": "4.2.0"}],
             "topics": [{"name": "orders", "partitions": 6, "replication_factor": 3},
                        {"name": "audit", "partitions": 2, "replication_factor": 2}]},
            {"name": "k43", "profile": "apache-kafka-4.3-kraft",
             "brokers": [{"id": 1}, {"id": 2}], "topics": [{"name": "events", "partitions": 3, "replication_factor": 2}]},
            {"name": "k39", "profile": "apache-kafka-3.9-zk", "zookeeper": {"chroot": "/lab/k39", **zk},
             "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}],
             "topics": [{"name": "reports", "partitions": 4, "replication_factor": 2}]},
            {"name": "k28", "profile": "apache-kafka-2.8-zk", "zookeeper": {"chroot": "/lab/k28", **zk},
             "misrouted_to": "k39",
             "brokers": [{"id": 101}, {"id": 102}, {"id": 103}],
             "topics": [{"name": "billing", "partitions": 3, "replication_factor": 3}]},
            {"name": "rp", "profile": "redpanda-like-24", "policy": {"push_config": True},
             "brokers": [{"id": 0}, {"id": 1}], "topics": [{"name": "telemetry", "partitions": 5, "replication_factor": 2}]},
        ],
    }


def make_config(tmp: Path, zookeeper_connect: str | None = None) -> LabConfig:
    """Parse the test lab definition with state under tmp."""
    return parse_lab_config(lab_raw(tmp / "state", zookeeper_connect), tmp)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A running lab fleet (no ZooKeeper) shared by one test module."""
    fleet = LabFleet(make_config(tmp_path_factory.mktemp("lab")))
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


class RawClient:
    """A blocking Kafka connection for sending codec-built requests to one broker."""

    def __init__(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.timeout_s = timeout_s
        self.correlation = 0

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def request(self, api_key: int, version: int, body: dict[str, Any], client_id: str | None = "lab-test",
                decode_version: int | None = None) -> dict[str, Any]:
        """Send one request and decode the answer (bounded by the timeout)."""
        self.correlation += 1
        self.sock.sendall(P.encode_request(api_key, version, self.correlation, client_id, body))
        payload = P.read_frame(self.sock, deadline=time.monotonic() + self.timeout_s)
        corr, out = P.decode_response(api_key, version if decode_version is None else decode_version, payload)
        assert corr == self.correlation
        return out


@pytest.fixture
def raw_client() -> Iterator[Callable[[str, int], RawClient]]:
    """Factory of RawClient connections, all closed after the test."""
    opened: list[RawClient] = []

    def connect(host: str, port: int, timeout_s: float = 5.0) -> RawClient:
        client = RawClient(host, port, timeout_s)
        opened.append(client)
        return client

    yield connect
    for c in opened:
        c.close()
