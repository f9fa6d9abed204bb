"""Round trips: primitives and every message/version encode then decode to the same value."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.kafka import protocol as P
from tests.unit.kafka import strategies as S

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.integers(0, 0xFFFFFFFF))
def test_unsigned_varint_roundtrip(value: int) -> None:
    w = P.Writer()
    w.uvarint(value)
    data = w.getvalue()
    assert len(data) <= 5
    r = P.Reader(data)
    assert r.uvarint() == value
    assert r.remaining() == 0


@FAST
@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_signed_varint_and_varlong_roundtrip(v32: int, v64: int) -> None:
    w = P.Writer()
    w.varint(v32)
    w.varlong(v64)
    r = P.Reader(w.getvalue())
    assert (r.varint(), r.varlong()) == (v32, v64)


@FAST
@given(st.none() | st.text(max_size=40), st.none() | st.binary(max_size=40), st.booleans())
def test_strings_and_bytes_roundtrip_classic_and_compact(text: str | None, data: bytes | None, compact: bool) -> None:
    w = P.Writer()
    if compact:
        w.compact_string(text, nullable=True)
        w.compact_bytes(data, nullable=True)
    else:
        w.string(text, nullable=True)
        w.bytes_(data, nullable=True)
    r = P.Reader(w.getvalue())
    if compact:
        assert (r.compact_string(nullable=True), r.compact_bytes(nullable=True)) == (text, data)
    else:
        assert (r.string(nullable=True), r.bytes_(nullable=True)) == (text, data)
    assert r.remaining() == 0


@FAST
@given(st.dictionaries(st.integers(0, 1000), st.binary(max_size=8), max_size=4))
def test_tagged_fields_roundtrip(tags: dict[int, bytes]) -> None:
    w = P.Writer()
    w.tagged_fields(tags)
    assert P.Reader(w.getvalue()).tagged_fields() == tags


@FAST
@given(st.uuids())
def test_uuid_text_is_kafkas_22_char_urlsafe_base64(value: uuid.UUID) -> None:
    text = P.uuid_to_kafka_str(value)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert P.kafka_str_to_uuid(text) == value
    w = P.Writer()
    w.uuid(text)
    assert P.Reader(w.getvalue()).uuid() == text


def test_zero_uuid_is_all_a_and_means_no_topic_id() -> None:
    assert P.uuid_to_kafka_str(uuid.UUID(int=0)) == P.ZERO_UUID == "AAAAAAAAAAAAAAAAAAAAAA"
    # A topic id Kafka printed (kafka-topics --describe style) parses back to the same bytes.
    assert P.uuid_to_kafka_str(P.kafka_str_to_uuid("Ywl8b6X0Rq2mOKS-bN1vWA")) == "Ywl8b6X0Rq2mOKS-bN1vWA"


def test_kafka_str_to_uuid_rejects_bad_text() -> None:
    for bad in ("short", "A" * 23, "!!!!!!!!!!!!!!!!!!!!!!", "AAAAAAAAAAAAAAAAAAAAAB"):
        with pytest.raises(P.ProtocolError):
            P.kafka_str_to_uuid(bad)


@pytest.mark.parametrize(("api_key", "version"), S.all_versions())
def test_request_roundtrip_every_message_version(api_key: int, version: int) -> None:
    schema = P.SCHEMAS[api_key]
    flexible = schema.is_flexible(version)

    @FAST
    @given(S.body(schema.request, version, flexible), st.integers(0, 2**31 - 1), st.none() | st.text(max_size=10))
    def check(body: dict, correlation_id: int, client_id: str | None) -> None:
        frame = P.encode_request(api_key, version, correlation_id, client_id, body)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        header, decoded = P.decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            api_key, version, correlation_id, client_id)
        assert header.header_version == (2 if flexible else 1)
        assert decoded == S.expected(schema.request, version, flexible, body)

    check()


@pytest.mark.parametrize(("api_key", "version"), S.all_versions())
def test_response_roundtrip_every_message_version(api_key: int, version: int) -> None:
    schema = P.SCHEMAS[api_key]
    flexible = schema.is_flexible(version)

    @FAST
    @given(S.body(schema.response, version, flexible), st.integers(-(2**31), 2**31 - 1))
    def check(body: dict, correlation_id: int) -> None:
        frame = P.encode_response(api_key, version, correlation_id, body)
        corr, decoded = P.decode_response(api_key, version, frame[4:])
        assert corr == correlation_id
        decoded.pop("_decoded_version", None)
        assert decoded == S.expected(schema.response, version, flexible, body)

    check()


def test_api_versions_response_uses_header_v0_even_when_flexible() -> None:
    frame = P.encode_response(P.API_API_VERSIONS, 3, 7, {"api_keys": []})
    # correlation id then straight into the body's error_code: no header tag buffer.
    assert frame[4:8] == (7).to_bytes(4, "big")
    assert frame[8:10] == b"\x00\x00"
    flexible_other = P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 7, {"cluster_id": "c"})
    assert flexible_other[8] == 0  # response header v1: empty tagged fields


def test_kip511_fallback_decodes_a_v0_body_sent_for_an_unsupported_version() -> None:
    v0 = P.encode_response(P.API_API_VERSIONS, 0, 5, {
        "error_code": P.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": P.API_API_VERSIONS, "min_version": 0, "max_version": 2}],
    })
    corr, body = P.decode_response(P.API_API_VERSIONS, 3, v0[4:])
    assert corr == 5
    assert body["error_code"] == P.UNSUPPORTED_VERSION
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 2}]
    assert body["_decoded_version"] == 0


def test_describe_cluster_kip885_fields_only_in_the_kip885_version() -> None:
    body = {"cluster_id": "abc", "broker_software_name": "Kafka", "broker_software_version": "4.3.1",
            "brokers": [{"broker_id": 1, "host": "h", "port": 9092, "rack": None, "is_fenced": False}]}
    v = P.DESCRIBE_CLUSTER_KIP885_VERSION
    _, new = P.decode_response(P.API_DESCRIBE_CLUSTER, v, P.encode_response(P.API_DESCRIBE_CLUSTER, v, 1, body)[4:])
    assert (new["broker_software_name"], new["broker_software_version"]) == ("Kafka", "4.3.1")
    old_frame = P.encode_response(P.API_DESCRIBE_CLUSTER, v - 1, 1, body)
    _, old = P.decode_response(P.API_DESCRIBE_CLUSTER, v - 1, old_frame[4:])
    assert old["broker_software_name"] is None and old["cluster_id"] == "abc"
    assert b"Kafka" not in old_frame


def test_metadata_v12_topic_ids_and_v0_defaults() -> None:
    tid = P.uuid_to_kafka_str(uuid.uuid4())
    body = {"cluster_id": "cid", "controller_id": 2,
            "brokers": [{"node_id": 1, "host": "a", "port": 1, "rack": "r1"}],
            "topics": [{"error_code": 0, "name": "t", "topic_id": tid, "is_internal": True,
                        "partitions": [{"partition_index": 0, "leader_id": 1, "replica_nodes": [1, 2],
                                        "isr_nodes": [1], "offline_replicas": [2]}]}]}
    _, v12 = P.decode_response(P.API_METADATA, 12, P.encode_response(P.API_METADATA, 12, 1, body)[4:])
    assert v12["topics"][0]["topic_id"] == tid and v12["topics"][0]["partitions"][0]["offline_replicas"] == [2]
    _, v0 = P.decode_response(P.API_METADATA, 0, P.encode_response(P.API_METADATA, 0, 1, body)[4:])
    assert v0["cluster_id"] is None and v0["controller_id"] == -1
    assert v0["topics"][0]["topic_id"] == P.ZERO_UUID and v0["topics"][0]["is_internal"] is False
    # The alias broker_id is accepted for Metadata's node_id when encoding.
    aliased = {"brokers": [{"broker_id": 7, "host": "a", "port": 1}], "topics": []}
    _, dec = P.decode_response(P.API_METADATA, 1, P.encode_response(P.API_METADATA, 1, 1, aliased)[4:])
    assert dec["brokers"][0]["node_id"] == 7


def test_api_versions_client_instance_id_in_its_version_only() -> None:
    cid = P.uuid_to_kafka_str(uuid.uuid4())
    body = {"client_software_name": "lab", "client_software_version": "1", "client_instance_id": cid}
    v = P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION
    _, got = P.decode_request(P.encode_request(P.API_API_VERSIONS, v, 1, "c", body)[4:])
    assert got["client_instance_id"] == cid
    _, older = P.decode_request(P.encode_request(P.API_API_VERSIONS, v - 1, 1, "c", body)[4:])
    assert older["client_instance_id"] == P.ZERO_UUID


def test_push_config_request_matches_kip1324_layout() -> None:
    body = {"configs": [{"config_key": "acks", "config_value": "all", "config_type": 1, "is_default": False}]}
    frame = P.encode_request(P.PUSH_CONFIG_API_KEY, 0, 3, "app", body)
    header, got = P.decode_request(frame[4:])
    assert header.api_key == P.PUSH_CONFIG_API_KEY and header.header_version == 2
    assert got == body
    # flexible v0: compact array (1 entry -> 0x02), compact strings, int8, bool, tag buffers.
    assert frame.endswith(b"\x02\x05acks\x04all\x01\x00\x00\x00")


def test_unknown_tagged_fields_survive_a_roundtrip() -> None:
    body = {"cluster_id": "c", "_unknown_tagged_fields": {9: b"\x01\x02"}}
    _, got = P.decode_response(P.API_DESCRIBE_CLUSTER, 0, P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 1, body)[4:])
    assert got["_unknown_tagged_fields"] == {9: b"\x01\x02"}


def test_encode_rejects_wrong_types_with_protocol_error() -> None:
    with pytest.raises(P.ProtocolError, match="port"):
        P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 1, {"brokers": [{"port": "nine"}]})
    with pytest.raises(P.ProtocolError, match="cluster_id"):
        P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 1, {"cluster_id": None})
    with pytest.raises(P.ProtocolError, match="brokers"):
        P.encode_response(P.API_DESCRIBE_CLUSTER, 0, 1, {"brokers": "b1"})
    with pytest.raises(P.ProtocolError, match="not implemented"):
        P.encode_request(0, 9, 1, "c", {})
