"""Malformed input: every case raises ProtocolError at once with a clear message, memory bounded."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.kafka import protocol as P
from tests.unit.kafka import strategies as S

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALL = S.all_versions()


@FUZZ
@given(st.binary(max_size=200), st.sampled_from(ALL))
def test_random_bytes_only_ever_raise_protocol_error(data: bytes, key_version: tuple[int, int]) -> None:
    api_key, version = key_version
    for decode in (lambda: P.decode_request(data), lambda: P.decode_response(api_key, version, data)):
        try:
            decode()
        except P.ProtocolError:
            pass


@FUZZ
@given(st.sampled_from(ALL), st.data())
def test_mutated_valid_frames_only_ever_raise_protocol_error(key_version: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = key_version
    schema = P.SCHEMAS[api_key]
    flexible = schema.is_flexible(version)
    body = data.draw(S.body(schema.response, version, flexible))
    payload = bytearray(P.encode_response(api_key, version, 1, body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        if not payload:
            break
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    try:
        P.decode_response(api_key, version, bytes(payload[:cut]))
    except P.ProtocolError:
        pass


def test_truncated_frame() -> None:
    with pytest.raises(P.ProtocolError, match="truncated frame: length 16, only 3"):
        P.split_frame(b"\x00\x00\x00\x10abc")
    with pytest.raises(P.ProtocolError, match="no complete length prefix"):
        P.split_frame(b"\x00\x00")
    payload, rest = P.split_frame(b"\x00\x00\x00\x02hiXY")
    assert (payload, rest) == (b"hi", b"XY")


def test_negative_and_two_gigabyte_lengths_are_refused_before_reading() -> None:
    with pytest.raises(P.ProtocolError, match="negative frame length -1"):
        P.frame_length(b"\xff\xff\xff\xff", P.DEFAULT_MAX_RESPONSE_BYTES)
    with pytest.raises(P.ProtocolError, match="exceeds the cap of 104857600"):
        P.frame_length((2**31 - 1).to_bytes(4, "big"), P.DEFAULT_MAX_RESPONSE_BYTES)
    with pytest.raises(P.ProtocolError, match="exceeds the cap of 1048576"):
        P.frame_length((2 * 1024 * 1024).to_bytes(4, "big"), P.DEFAULT_MAX_REQUEST_BYTES)
    assert P.frame_length((100).to_bytes(4, "big"), 100) == 100


def test_garbage_varint_longer_than_five_bytes() -> None:
    with pytest.raises(P.ProtocolError, match="longer than 5 bytes"):
        P.Reader(b"\xff\xff\xff\xff\xff\x01").uvarint()
    with pytest.raises(P.ProtocolError, match="out of range"):
        P.Reader(b"\xff\xff\xff\xff\x7f").uvarint()  # 35 bits
    with pytest.raises(P.ProtocolError, match="truncated"):
        P.Reader(b"\x80\x80").uvarint()
    # A compact string length made of garbage inside a real message.
    frame = b"\x00\x00\x00\x01" + b"\x00" + b"\x00\x00\x00\x00" + b"\x00\x00" + b"\x00" + b"\xff" * 6
    with pytest.raises(P.ProtocolError, match="longer than 5 bytes"):
        P.decode_response(P.API_DESCRIBE_CLUSTER, 0, frame)


def test_string_length_past_the_end() -> None:
    with pytest.raises(P.ProtocolError, match=r"need 16 bytes at offset 2, 3 left"):
        P.Reader(b"\x00\x10abc").string()
    with pytest.raises(P.ProtocolError, match="invalid string length -2"):
        P.Reader(b"\xff\xfe").string(nullable=True)
    with pytest.raises(P.ProtocolError, match="not UTF-8"):
        P.Reader(b"\x00\x02\xff\xfe").string()


def test_array_count_larger_than_remaining_bytes_fails_fast_without_allocating() -> None:
    # Metadata v1 response: throttle absent, brokers count = 2**31-1 with 3 bytes behind it.
    payload = b"\x00\x00\x00\x01" + b"\x7f\xff\xff\xff" + b"abc"
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(P.ProtocolError, match="array count 2147483647 at offset 4 exceeds the 3 bytes left"):
        P.decode_response(P.API_METADATA, 1, payload)
    elapsed = time.perf_counter() - start
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1_000_000, f"decoder allocated {peak} bytes for a 11-byte payload"
    assert elapsed < 1.0
    with pytest.raises(P.ProtocolError, match="invalid array length -2"):
        P.Reader(b"\xff\xff\xff\xfe").array_len(False, True, 4)


def test_trailing_bytes_and_unknown_api_key_are_errors() -> None:
    ok = P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 1, {"cluster_id": "c"})[4:]
    with pytest.raises(P.ProtocolError, match="trailing"):
        P.decode_response(P.API_DESCRIBE_CLUSTER, 0, ok + b"\x00")
    header_only = (0).to_bytes(2, "big") + (9).to_bytes(2, "big") + (5).to_bytes(4, "big") + b"\xff\xff"
    with pytest.raises(P.UnsupportedVersionError) as info:
        P.decode_request(header_only)
    assert info.value.header.correlation_id == 5 and info.value.header.api_key == 0
    future_api_versions = P.encode_request(P.API_API_VERSIONS, 3, 9, "c", {})[4:]
    future_api_versions = future_api_versions[:2] + (99).to_bytes(2, "big") + future_api_versions[4:]
    with pytest.raises(P.UnsupportedVersionError, match="ApiVersions version 99") as info2:
        P.decode_request(future_api_versions)
    assert info2.value.header.api_version == 99


def _serve_once(data: bytes, close: bool = True) -> tuple[socket.socket, threading.Thread]:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname(), timeout=5)

    def run() -> None:
        conn, _ = listener.accept()
        conn.sendall(data)
        if close:
            conn.close()
        else:
            time.sleep(2)
            conn.close()
        listener.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return client, thread


def test_read_frame_from_socket_cases() -> None:
    client, t = _serve_once(b"\x00\x00\x00\x03abc")
    assert P.read_frame(client, 10) == b"abc"
    client.close()
    t.join()

    client, t = _serve_once(b"\x00\x00\x00\x0aabc")
    with pytest.raises(P.ProtocolError, match=r"connection closed while reading frame body \(3 of 10"):
        P.read_frame(client, 100)
    client.close()
    t.join()

    client, t = _serve_once((2**31 - 1).to_bytes(4, "big"), close=False)
    start = time.monotonic()
    with pytest.raises(P.ProtocolError, match="exceeds the cap of 1024"):
        P.read_frame(client, 1024, deadline=time.monotonic() + 5)
    assert time.monotonic() - start < 1.0
    client.close()
    t.join()

    client, t = _serve_once(b"\x00\x00\x00\x05ab", close=False)
    with pytest.raises(TimeoutError):
        P.read_frame(client, 100, deadline=time.monotonic() + 0.3)
    client.close()
    t.join()


def test_read_frame_async_cases() -> None:
    async def run(data: bytes, cap: int) -> bytes:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await P.read_frame_async(reader, cap)

    assert asyncio.run(run(b"\x00\x00\x00\x02ok", 10)) == b"ok"
    with pytest.raises(P.ProtocolError, match="reading frame length"):
        asyncio.run(run(b"\x00\x00", 10))
    with pytest.raises(P.ProtocolError, match="exceeds the cap of 10"):
        asyncio.run(run(b"\x00\x00\x00\x0b" + b"x" * 11, 10))
    with pytest.raises(P.ProtocolError, match="negative"):
        asyncio.run(run(b"\x80\x00\x00\x00", 10))
    with pytest.raises(P.ProtocolError, match=r"frame body \(1 of 4"):
        asyncio.run(run(b"\x00\x00\x00\x04x", 10))


def test_tagged_fields_out_of_order_or_oversized() -> None:
    with pytest.raises(P.ProtocolError, match="out of order"):
        P.Reader(b"\x02\x05\x00\x03\x00").tagged_fields()
    with pytest.raises(P.ProtocolError, match="tagged field count"):
        P.Reader(b"\x7f").tagged_fields()
