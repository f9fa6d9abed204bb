"""Hostile broker answers cost bounded memory and time: per-API frame caps, element budget, decode deadline."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import psutil
import pytest

from backend.collect.topics import listing_from_metadata, metadata_element_budget
from backend.kafka import protocol as P
from backend.kafka.probe import probe_broker
from tests.unit.kafka.scripted_broker import API_TABLE_43, ScriptedBroker, api_versions_body

pytestmark = pytest.mark.timeout(120)

HUGE = 99 * 1024 * 1024  # a length prefix the old 100 MiB cap for every API accepted


def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def metadata_v12(correlation_id: int, partitions: int, replicas: tuple[int, ...] = ()) -> bytes:
    """A Metadata v12 response payload of one topic with `partitions` partitions, built without the encoder."""
    ids = _uvarint(len(replicas) + 1) + struct.pack(f">{len(replicas)}i", *replicas)
    partition = struct.pack(">hiii", 0, 0, 1, 0) + ids + ids + b"\x01\x00"
    return (
        struct.pack(">i", correlation_id) + b"\x00" + struct.pack(">i", 0)
        + b"\x02" + struct.pack(">i", 1) + b"\x02h" + struct.pack(">i", 1) + b"\x00\x00"  # one broker
        + b"\x02c" + struct.pack(">i", 1)  # cluster id, controller
        + b"\x02" + b"\x00\x00" + b"\x02t" + bytes(16) + b"\x00"  # one topic
        + _uvarint(partitions + 1) + partition * partitions
        + b"\x80\x00\x00\x00\x00" + b"\x00"
    )


def test_crafted_builder_matches_the_encoder() -> None:
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "cluster_id": "c", "controller_id": 1,
            "topics": [{"name": "t", "topic_id": P.ZERO_UUID, "partitions": [
                {"partition_index": 0, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3]}] * 3}]}
    assert P.encode_response(P.API_METADATA, 12, 5, body)[4:] == metadata_v12(5, 3, (1, 2, 3))


def _serve(metadata: Any = None, api_versions: Any = None) -> ScriptedBroker:
    def handler(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes | None:
        if header.api_key == P.API_API_VERSIONS:
            if api_versions is not None:
                return api_versions(header)
            return P.encode_response(header.api_key, header.api_version, header.correlation_id,
                                     api_versions_body(API_TABLE_43))
        if header.api_key == P.API_DESCRIBE_CLUSTER:
            return P.encode_response(header.api_key, header.api_version, header.correlation_id, {
                "cluster_id": "scripted", "controller_id": 1,
                "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": 1}]})
        if header.api_key == P.API_METADATA and metadata is not None:
            return metadata(header)
        return b""

    return ScriptedBroker(handler)


def test_small_apis_refuse_a_large_frame_at_once() -> None:
    # Only the length prefix is sent: the old cap would wait for 99 MiB until the timeout.
    with _serve(api_versions=lambda h: struct.pack(">i", 2 * 1024 * 1024)) as broker:
        result = probe_broker("127.0.0.1", broker.port, timeout_s=10)
    assert not result.ok and result.error_kind == "protocol"
    assert "exceeds the cap of 1048576" in (result.error or "")


def test_metadata_over_the_byte_cap_is_refused() -> None:
    with _serve(metadata=lambda h: struct.pack(">i", HUGE)) as broker:
        result = probe_broker("127.0.0.1", broker.port, timeout_s=10, with_metadata=True)
    assert not result.ok and "exceeds the cap" in (result.error or "")
    assert f"{P.DEFAULT_MAX_METADATA_RESPONSE_BYTES}" in (result.error or "")


def test_crafted_metadata_under_the_cap_stops_at_the_element_budget() -> None:
    """~900,000 empty partitions in 15.5 MiB: decoding stops at the budget, memory stays bounded."""
    count = (P.DEFAULT_MAX_METADATA_RESPONSE_BYTES - 512 * 1024) // 18
    payload_cache: dict[int, bytes] = {}

    def answer(h: P.RequestHeader) -> bytes:
        payload = payload_cache.setdefault(h.correlation_id, metadata_v12(h.correlation_id, count))
        return struct.pack(">i", len(payload)) + payload

    process = psutil.Process()
    before = process.memory_info().rss
    with _serve(metadata=answer) as broker:
        result = probe_broker("127.0.0.1", broker.port, timeout_s=30, with_metadata=True)
    grown = process.memory_info().rss - before
    assert not result.ok and result.error_kind == "protocol", result.error
    assert "element limit" in (result.error or "")
    assert grown < 700 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MiB"


def test_decode_stops_at_the_deadline() -> None:
    payload = metadata_v12(1, 50_000)
    with pytest.raises(P.ProtocolError, match="passed the deadline"):
        P.decode_response(P.API_METADATA, 12, payload, deadline=time.monotonic() - 1)


def test_defaults_fit_200000_partitions_at_rf3() -> None:
    payload = metadata_v12(1, 200_000, (1, 2, 3))
    assert len(payload) < P.DEFAULT_MAX_METADATA_RESPONSE_BYTES
    budget = metadata_element_budget(P.DEFAULT_MAX_METADATA_RESPONSE_BYTES)
    _corr, body = P.decode_response(P.API_METADATA, 12, payload, max_elements=budget)
    assert listing_from_metadata(body).topics[0].partitions == 200_000
    assert budget >= P.DEFAULT_MAX_METADATA_ELEMENTS
    with pytest.raises(P.ProtocolError, match="element limit"):
        P.decode_response(P.API_METADATA, 12, payload, max_elements=budget // 2)
