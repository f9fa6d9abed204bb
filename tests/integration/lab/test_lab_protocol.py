"""The lab broker's answers over a real socket: ApiVersions (KIP-511 fallback), DescribeCluster (KIP-885), errors."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.kafka import protocol as P
from backend.lab.fleet import LabFleet
from tests.integration.lab.conftest import RawClient

Connect = Callable[..., RawClient]


def _first_broker(lab: LabFleet, cluster: str, broker_id: int | None = None) -> tuple[str, int]:
    brokers = lab.clusters[cluster].brokers
    b = next(b for b in brokers if broker_id is None or b.id == broker_id)
    return b.host, b.port


@pytest.mark.parametrize(("cluster", "kip885", "describe_max"), [
    ("k4", True, P.DESCRIBE_CLUSTER_KIP885_VERSION), ("rp", True, P.DESCRIBE_CLUSTER_KIP885_VERSION),
    ("k43", False, 2), ("k39", False, 1), ("k28", False, 0),
])
def test_kip885_is_advertised_only_by_profiles_that_have_it(lab: LabFleet, raw_client: Connect, cluster: str,
                                                             kip885: bool, describe_max: int) -> None:
    c = raw_client(*_first_broker(lab, cluster))
    body = c.request(P.API_API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    apis = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert body["error_code"] == 0
    assert apis[P.API_DESCRIBE_CLUSTER][1] == describe_max
    assert (apis[P.API_DESCRIBE_CLUSTER][1] >= P.DESCRIBE_CLUSTER_KIP885_VERSION) is kip885
    assert (P.PUSH_CONFIG_API_KEY in apis) is lab.runtimes[cluster].spec.policy.push_config


def test_describe_cluster_kip885_reports_each_brokers_own_version(lab: LabFleet, raw_client: Connect) -> None:
    seen = {}
    for b in lab.clusters["k4"].brokers:
        c = raw_client(b.host, b.port)
        out = c.request(P.API_DESCRIBE_CLUSTER, P.DESCRIBE_CLUSTER_KIP885_VERSION,
                        {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert out["error_code"] == 0 and out["cluster_id"] == lab.clusters["k4"].cluster_id
        seen[b.id] = (out["broker_software_name"], out["broker_software_version"])
    assert seen == {1: ("Kafka", "4.3.1"), 2: ("Kafka", "4.3.1"), 3: ("Kafka", "4.2.0")}
    c = raw_client(*_first_broker(lab, "rp"))
    out = c.request(P.API_DESCRIBE_CLUSTER, P.DESCRIBE_CLUSTER_KIP885_VERSION, {})
    assert (out["broker_software_name"], out["broker_software_version"]) == ("Redpanda", "v24.2.7")


def test_released_profile_closes_on_the_kip885_version_it_does_not_advertise(lab: LabFleet, raw_client: Connect) -> None:
    c = raw_client(*_first_broker(lab, "k43"))
    out = c.request(P.API_DESCRIBE_CLUSTER, 2, {"include_fenced_brokers": False})
    assert out["error_code"] == 0 and len(out["brokers"]) == 2
    c.sock.sendall(P.encode_request(P.API_DESCRIBE_CLUSTER, P.DESCRIBE_CLUSTER_KIP885_VERSION, 99, "t", {}))
    with pytest.raises(P.ProtocolError, match="connection closed"):
        P.read_frame(c.sock, deadline=time.monotonic() + 5)


def test_api_versions_unsupported_version_gets_kip511_v0_fallback(lab: LabFleet, raw_client: Connect) -> None:
    c = raw_client(*_first_broker(lab, "k28"))  # Kafka 2.8 serves ApiVersions v0-v3
    out = c.request(P.API_API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    assert out["error_code"] == P.UNSUPPORTED_VERSION
    assert out["_decoded_version"] == 0
    assert out["api_keys"] == [{"api_key": P.API_API_VERSIONS, "min_version": 0, "max_version": 3}]
    ok = c.request(P.API_API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert ok["error_code"] == 0 and len(ok["api_keys"]) > 50


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_every_version_answers(lab: LabFleet, raw_client: Connect, version: int) -> None:
    c = raw_client(*_first_broker(lab, "k39"))
    out = c.request(P.API_API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"})
    assert out["error_code"] == 0
    assert {k["api_key"] for k in out["api_keys"]} >= {0, 1, 3, 18, 60}


@pytest.mark.parametrize("version", [0, 1, 4, 9, 10, 12])
def test_metadata_versions(lab: LabFleet, raw_client: Connect, version: int) -> None:
    c = raw_client(*_first_broker(lab, "k4"))
    out = c.request(P.API_METADATA, version, {"topics": [{"name": "orders"}, {"name": "missing"}]})
    by_name = {t["name"]: t for t in out["topics"]}
    assert by_name["missing"]["error_code"] == P.UNKNOWN_TOPIC_OR_PARTITION
    orders = by_name["orders"]
    assert orders["error_code"] == 0 and len(orders["partitions"]) == 6
    assert sorted(b["node_id"] for b in out["brokers"]) == [1, 2, 3]
    if version >= 2:
        assert out["cluster_id"] == lab.clusters["k4"].cluster_id
    if version >= 10:
        assert orders["topic_id"] == lab.topic_id("k4", "orders")


def test_metadata_v12_lookup_by_topic_id(lab: LabFleet, raw_client: Connect) -> None:
    c = raw_client(*_first_broker(lab, "k4"))
    tid = lab.topic_id("k4", "audit")
    out = c.request(P.API_METADATA, 12, {"topics": [{"topic_id": tid, "name": None}]})
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in out["topics"]] == [("audit", tid, 0)]
    unknown = P.uuid_to_kafka_str(bytes(range(16)))
    out = c.request(P.API_METADATA, 12, {"topics": [{"topic_id": unknown, "name": None}]})
    assert out["topics"][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID


def test_unknown_api_key_and_garbage_close_cleanly_and_broker_keeps_serving(lab: LabFleet, raw_client: Connect) -> None:
    host, port = _first_broker(lab, "k39")
    with socket.create_connection((host, port), timeout=5) as s:
        header = struct.pack(">hhih", 9999, 0, 7, 1) + b"x"
        s.sendall(struct.pack(">i", len(header)) + header)
        s.settimeout(5)
        assert s.recv(100) == b""  # closed, no answer
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x03\xff\xff\xff")
        s.settimeout(5)
        assert s.recv(100) == b""
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">i", 2**31 - 1))  # claims a 2 GiB request
        s.settimeout(5)
        assert s.recv(100) == b""
    c = raw_client(host, port)
    assert c.request(P.API_METADATA, 9, {"topics": None})["cluster_id"] == lab.clusters["k39"].cluster_id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.binary(min_size=0, max_size=64), api_key=st.sampled_from([3, 17, 18, 36, 60, P.PUSH_CONFIG_API_KEY, 7, -1]),
       version=st.integers(min_value=-2, max_value=20))
def test_random_request_bodies_never_take_the_broker_down(lab: LabFleet, api_key: int, version: int,
                                                          payload: bytes) -> None:
    host, port = _first_broker(lab, "k4")
    frame = struct.pack(">hhih", api_key, version, 1, 1) + b"f" + payload
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        s.settimeout(5)
        try:
            s.recv(1 << 16)  # an answer or a close, never a hang
        except ConnectionResetError:
            pass
    c = RawClient(host, port)
    try:
        assert c.request(P.API_METADATA, 1, {"topics": []})["controller_id"] == 1
    finally:
        c.close()
