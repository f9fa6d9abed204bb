"""Each fault mode is observable by a client within a timeout, via the API and via the control file."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from backend.kafka import protocol as P
from backend.lab.faults import set_fault_in_file
from backend.lab.fleet import LabFleet
from tests.integration.lab.conftest import RawClient

Connect = Callable[..., RawClient]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def faulty(lab: LabFleet) -> Iterator[LabFleet]:
    """The module's lab, with every fault cleared after the test."""
    yield lab
    lab.clear_faults()


def _addr(lab: LabFleet, cluster: str, broker_id: int) -> tuple[str, int]:
    b = next(b for b in lab.clusters[cluster].brokers if b.id == broker_id)
    return b.host, b.port


def _metadata(c: RawClient) -> dict[str, object]:
    return c.request(P.API_METADATA, 12, {"topics": None})


def test_latency_delays_answers(faulty: LabFleet, raw_client: Connect) -> None:
    c = raw_client(*_addr(faulty, "k4", 2))
    t0 = time.monotonic()
    _metadata(c)
    fast = time.monotonic() - t0
    faulty.set_fault("k4", 2, latency_ms=400)
    t0 = time.monotonic()
    _metadata(c)
    slow = time.monotonic() - t0
    assert slow >= 0.4 > fast
    short = raw_client(*_addr(faulty, "k4", 2), timeout_s=0.2)
    with pytest.raises(TimeoutError):
        _metadata(short)


def test_refuse_stops_listening_but_broker_stays_in_metadata(faulty: LabFleet, raw_client: Connect) -> None:
    host, port = _addr(faulty, "k4", 3)
    faulty.set_fault("k4", 3, refuse=True)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    other = raw_client(*_addr(faulty, "k4", 1))
    assert 3 in [b["node_id"] for b in _metadata(other)["brokers"]]  # type: ignore[index]
    faulty.set_fault("k4", 3, refuse=False)
    assert _metadata(raw_client(host, port))["cluster_id"] == faulty.clusters["k4"].cluster_id


def test_drop_mid_response_closes_after_half_a_frame(faulty: LabFleet, raw_client: Connect) -> None:
    faulty.set_fault("k4", 1, drop_mid_response=True)
    c = raw_client(*_addr(faulty, "k4", 1))
    with pytest.raises(P.ProtocolError, match="connection closed"):
        _metadata(c)


def test_malformed_frame_fails_to_decode(faulty: LabFleet, raw_client: Connect) -> None:
    faulty.set_fault("k4", 1, malformed=True)
    c = raw_client(*_addr(faulty, "k4", 1))
    with pytest.raises(P.ProtocolError):
        _metadata(c)


def test_stop_and_start_broker(faulty: LabFleet, raw_client: Connect) -> None:
    host, port = _addr(faulty, "k4", 1)
    faulty.stop_broker("k4", 1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()
    md = _metadata(raw_client(*_addr(faulty, "k4", 2)))
    assert sorted(b["node_id"] for b in md["brokers"]) == [2, 3]  # type: ignore[index]
    assert md["controller_id"] == 2  # the controller moved off the stopped broker
    orders = next(t for t in md["topics"] if t["name"] == "orders")  # type: ignore[union-attr]
    assert all(1 not in p["isr_nodes"] and p["leader_id"] != 1 for p in orders["partitions"])
    assert any(p["offline_replicas"] == [1] for p in orders["partitions"])
    admin = AdminClient({"bootstrap.servers": faulty.clusters["k4"].bootstrap, "socket.timeout.ms": 5000})
    assert sorted(n.id for n in admin.describe_cluster(request_timeout=10).result(timeout=15).nodes) == [2, 3]
    faulty.start_broker("k4", 1)
    assert _metadata(raw_client(host, port))["controller_id"] == 1


def test_control_file_flips_a_fault_of_a_running_lab(faulty: LabFleet) -> None:
    host, port = _addr(faulty, "k39", 2)
    set_fault_in_file(faulty.control_file, "k39", 2, "refuse", True)
    deadline = time.monotonic() + 5
    refused = False
    while time.monotonic() < deadline and not refused:
        try:
            socket.create_connection((host, port), timeout=1).close()
            time.sleep(0.05)
        except ConnectionRefusedError:
            refused = True
    assert refused, "the control file change was not applied within 5 s"
    set_fault_in_file(faulty.control_file, "k39", 2, "refuse", False)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    else:
        pytest.fail("the broker did not listen again within 5 s")


def test_bad_control_file_is_ignored_and_the_lab_keeps_serving(faulty: LabFleet, raw_client: Connect) -> None:
    faulty.control_file.write_text('{"k4": {"1": {"explode": true}}}')
    time.sleep(0.5)
    assert _metadata(raw_client(*_addr(faulty, "k4", 1)))["cluster_id"] == faulty.clusters["k4"].cluster_id
    faulty.control_file.write_text("{}")


def test_cli_set_fault_writes_the_control_file(tmp_path: Path) -> None:
    lab_file = tmp_path / "lab.toml"
    lab_file.write_text('[lab]\nstate_dir = "st"\n[[clusters]]\nname = "a"\nprofile = "apache-kafka-3.9-zk"\n'
                        'brokers = [{ id = 1 }]\n')
    run = subprocess.run([sys.executable, "-m", "backend.lab.cli", "--config", str(lab_file),
                          "--set-fault", "a:1:latency_ms=250"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.returncode == 0, run.stderr
    assert '"latency_ms": 250' in (tmp_path / "st" / "faults.json").read_text()
    bad = subprocess.run([sys.executable, "-m", "backend.lab.cli", "--config", str(lab_file),
                          "--set-fault", "a:7:refuse=true"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert bad.returncode == 2 and "has no broker 7" in bad.stderr
