"""The consumer protocol's member bytes, decoded as Kafka writes them (v0-v3), and the read-only set."""

from __future__ import annotations

import pytest

from backend.kafka import groups as kg
from backend.kafka import probe
from backend.kafka import protocol as P
from backend.kafka.wire import Writer
from backend.lab.groups import encode_assignment, encode_subscription


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
