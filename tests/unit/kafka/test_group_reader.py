"""The consumer protocol's member bytes, decoded as Kafka writes them (v0-v3), the read-only set, and OffsetFetch v8/v9
answers decoded directly exactly as the generic codec reads them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.kafka import groups as kg
from backend.kafka import probe
from backend.kafka import protocol as P
from backend.kafka.wire import Writer
from backend.lab.groups import encode_assignment, encode_subscription
from tests.unit.kafka import strategies as S


def _subscription_v3(topics: list[str], rack: str | None) -> bytes:
    w = Writer()
    w.int16(3)
    w.array_len(len(topics), False, False)
    for t in topics:
        w.string(t)
    w.bytes_(b"user-data", nullable=True)
    w.array_len(1, False, False)  # owned partitions
    w.string(topics[0])
    w.array_len(2, False, False)
    w.int32(0)
    w.int32(1)
    w.int32(7)  # generation
    w.string(rack, nullable=True)
    return w.getvalue()


def test_subscription_and_assignment_bytes_decode_in_every_layout() -> None:
    assert kg.decode_subscription(encode_subscription(["orders", "pay"])) == (("orders", "pay"), None)
    assert kg.decode_subscription(_subscription_v3(["orders"], "rack-a")) == (("orders",), "rack-a")
    assert kg.decode_assignment(encode_assignment([("pay", 1), ("orders", 2), ("orders", 0)])) == (
        ("orders", 0), ("orders", 2), ("pay", 1))
    assert kg.decode_assignment(b"") == () and kg.decode_subscription(None) == ((), None)
    with pytest.raises(P.ProtocolError):
        kg.decode_assignment(b"\x00\x00\x7f\xff\xff\xff")  # a count the bytes cannot hold


def test_a_broken_member_blob_costs_only_that_members_assignment() -> None:
    member = kg._classic_member({"member_id": "m", "client_id": "c", "client_host": "/h",
                                 "member_assignment": b"\x00\x00\x7f", "member_metadata": b"junk"}, "consumer")
    assert (member.member_id, member.assignment, member.subscribed) == ("m", (), ())
    connect = kg._classic_member({"member_id": "w", "client_id": "c", "client_host": "/h",
                                  "member_assignment": b"whatever", "member_metadata": b""}, "connect")
    assert connect.assignment == ()  # other protocol types carry their own formats: not decoded


def test_group_reads_are_the_only_group_requests_the_connection_may_send() -> None:
    assert probe.GROUP_READ_API_KEYS <= probe.READ_ONLY_API_KEYS
    assert not {8, 11, 12, 13, 14, 42, 47, 68, 76} & probe.READ_ONLY_API_KEYS  # commits, joins, deletes, heartbeats
    assert kg.batch_key(1, 15, 5, ["a", "b"]) != kg.batch_key(2, 15, 5, ["a", "b"])


def _generic_offsets(payload: bytes, version: int) -> list[tuple[str, kg.OffsetsOfGroup]]:
    """What the generic codec reads from the same bytes, reduced as the reader reduces it."""
    _cid, body = P.decode_response(P.API_OFFSET_FETCH, version, payload)
    out = []
    for g in body["groups"]:
        offsets, failed = {}, 0
        for t in g["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    failed += 1
                elif p["committed_offset"] >= 0:
                    offsets[(t["name"], p["partition_index"])] = p["committed_offset"]
        out.append((g["group_id"], (g["error_code"], offsets, failed)))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([8, 9]).flatmap(
    lambda v: st.tuples(st.just(v), S.body(P.SCHEMAS[P.API_OFFSET_FETCH].response, v, True))))
def test_offset_fetch_answers_decode_as_the_generic_codec_reads_them(case: tuple[int, dict[str, Any]]) -> None:
    version, body = case
    payload = P.encode_response(P.API_OFFSET_FETCH, version, 7, body)[4:]  # the frame's payload
    assert kg.decode_offset_fetch_groups(payload, version) == _generic_offsets(payload, version)


def test_a_broken_offset_fetch_answer_is_a_protocol_error_and_the_budget_holds() -> None:
    body = {"throttle_time_ms": 0, "groups": [
        {"group_id": "g", "error_code": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": p, "committed_offset": 5, "committed_leader_epoch": -1, "metadata": "",
             "error_code": 0} for p in range(50)]}]}]}
    payload = P.encode_response(P.API_OFFSET_FETCH, 9, 1, body)[4:]
    assert kg.decode_offset_fetch_groups(payload, 9)[0][1][1][("t", 49)] == 5
    for broken in (payload[:-3], payload + b"\x00"):  # cut short, one byte too many
        with pytest.raises(P.ProtocolError):
            kg.decode_offset_fetch_groups(broken, 9)
    with pytest.raises(P.ProtocolError, match="element limit"):
        kg.decode_offset_fetch_groups(payload, 9, max_elements=100)  # 50 partitions weigh 5 fields each
    with pytest.raises(P.ProtocolError):
        kg.decode_offset_fetch_groups(payload, 10)
