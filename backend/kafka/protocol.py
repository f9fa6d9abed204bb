"""Kafka wire codec: headers, message encode/decode, error codes (the module callers import).

Primitives and frames live in backend.kafka.wire, message schemas in backend.kafka.schemas;
both are re-exported here, so ``from backend.kafka import protocol as P`` is all a caller needs.

Bodies are plain dicts whose keys are the snake_case forms of the field names in Apache
Kafka's message JSON (clients/src/main/resources/common/message/*.json), e.g. ClusterId ->
"cluster_id". Decoded bodies contain every field of the schema; fields that do not exist in
the decoded version hold Kafka's default. UUIDs are 22-char URL-safe base64 strings, the
way Kafka prints them (``Uuid.toString()``); encoders also accept ``uuid.UUID``.

Every decode path checks remaining bytes before trusting a length, so malformed input
raises ``ProtocolError`` at once and never allocates by an untrusted count.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from backend.kafka.schemas import (
    API_API_VERSIONS,
    API_CONSUMER_GROUP_DESCRIBE,
    API_DESCRIBE_CLUSTER,
    API_DESCRIBE_CONFIGS,
    API_DESCRIBE_GROUPS,
    API_DESCRIBE_SHARE_GROUP_OFFSETS,
    API_FIND_COORDINATOR,
    API_LIST_GROUPS,
    API_LIST_OFFSETS,
    API_METADATA,
    API_OFFSET_FETCH,
    API_SASL_AUTHENTICATE,
    API_SASL_HANDSHAKE,
    API_SHARE_GROUP_DESCRIBE,
    API_VERSIONS_CLIENT_INSTANCE_ID_VERSION,
    API_VERSIONS_MAX_VERSION,
    DESCRIBE_CLUSTER_KIP885_VERSION,
    PUSH_CONFIG_API_KEY,
    SCHEMAS,
    Field,
    MessageSchema,
    _in,
    _schema,
    _vrange,
    supported_versions,
)
from backend.kafka.wire import (
    DEFAULT_MAX_METADATA_ELEMENTS,
    DEFAULT_MAX_METADATA_RESPONSE_BYTES,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    ELEMENTS_PER_PARTITION,
    MAX_SMALL_RESPONSE_BYTES,
    MAX_SMALL_RESPONSE_ELEMENTS,
    ZERO_UUID,
    ProtocolError,
    Reader,
    Writer,
    frame_length,
    kafka_str_to_uuid,
    read_frame,
    read_frame_async,
    split_frame,
    uuid_to_kafka_str,
)

# Re-exported so callers need only `from backend.kafka import protocol as P`.
__all__ = [
    "API_CONSUMER_GROUP_DESCRIBE", "API_DESCRIBE_GROUPS", "API_DESCRIBE_SHARE_GROUP_OFFSETS", "API_FIND_COORDINATOR",
    "API_LIST_GROUPS",
    "API_LIST_OFFSETS", "API_OFFSET_FETCH", "API_SHARE_GROUP_DESCRIBE", "GROUP_ERRORS",
    "API_API_VERSIONS", "API_DESCRIBE_CLUSTER", "API_DESCRIBE_CONFIGS", "API_METADATA", "API_SASL_AUTHENTICATE",
    "API_SASL_HANDSHAKE", "API_VERSIONS_CLIENT_INSTANCE_ID_VERSION", "API_VERSIONS_MAX_VERSION",
    "CLUSTER_AUTHORIZATION_FAILED", "CONFIG_SOURCES", "CONFIG_TOO_LARGE", "CONFIG_TYPES",
    "DESCRIBE_CONFIGS_TYPES", "RESOURCE_BROKER", "RESOURCE_TOPIC",
    "DEFAULT_MAX_METADATA_ELEMENTS", "DEFAULT_MAX_METADATA_RESPONSE_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES", "DEFAULT_MAX_RESPONSE_BYTES", "ELEMENTS_PER_PARTITION",
    "MAX_SMALL_RESPONSE_BYTES", "MAX_SMALL_RESPONSE_ELEMENTS", "DESCRIBE_CLUSTER_KIP885_VERSION",
    "ERROR_NAMES", "ERROR_NONE", "ILLEGAL_SASL_STATE", "INVALID_CONFIG", "INVALID_REQUEST",
    "MISMATCHED_ENDPOINT_TYPE", "PUSH_CONFIG_API_KEY", "SASL_AUTHENTICATION_FAILED", "SCHEMAS",
    "UNKNOWN_SERVER_ERROR", "UNKNOWN_TOPIC_OR_PARTITION", "UNSUPPORTED_ENDPOINT_TYPE",
    "UNSUPPORTED_SASL_MECHANISM", "UNSUPPORTED_VERSION", "ZERO_UUID", "Field", "MessageSchema",
    "ProtocolError", "Reader", "RequestHeader", "UnsupportedVersionError", "Writer",
    "decode_request", "decode_request_header", "decode_response", "encode_request",
    "encode_response", "error_name", "frame_length", "kafka_str_to_uuid", "read_frame",
    "read_frame_async", "request_header_version", "response_header_version", "split_frame",
    "supported_versions", "uuid_to_kafka_str",
]

ERROR_NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INVALID_CONFIG = 40
SASL_AUTHENTICATION_FAILED = 58
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
# Errors of the group APIs (Kafka's Errors enum): retriable ones send the reader to the coordinator again.
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
GROUP_AUTHORIZATION_FAILED = 30
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_ID = 100
GROUP_ERRORS: dict[int, str] = {
    LEADER_NOT_AVAILABLE: "LEADER_NOT_AVAILABLE", NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
    COORDINATOR_LOAD_IN_PROGRESS: "COORDINATOR_LOAD_IN_PROGRESS", COORDINATOR_NOT_AVAILABLE: "COORDINATOR_NOT_AVAILABLE",
    NOT_COORDINATOR: "NOT_COORDINATOR", GROUP_AUTHORIZATION_FAILED: "GROUP_AUTHORIZATION_FAILED",
    TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED", GROUP_ID_NOT_FOUND: "GROUP_ID_NOT_FOUND",
    UNKNOWN_TOPIC_ID: "UNKNOWN_TOPIC_ID", 24: "INVALID_GROUP_ID", 25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS", 78: "OFFSET_NOT_AVAILABLE", 113: "STALE_MEMBER_EPOCH",
}
# KIP-1324's CONFIG_TOO_LARGE has no number yet. Kafka's highest error code is 133 in 4.3.1
# and 136 in 4.4.0; codes are assigned sequentially, so 1324 (the KIP number) stays clear.
CONFIG_TOO_LARGE = 1324

ERROR_NAMES: dict[int, str] = {
    ERROR_NONE: "NONE",
    UNKNOWN_SERVER_ERROR: "UNKNOWN_SERVER_ERROR",
    UNKNOWN_TOPIC_OR_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
    CLUSTER_AUTHORIZATION_FAILED: "CLUSTER_AUTHORIZATION_FAILED",
    UNSUPPORTED_SASL_MECHANISM: "UNSUPPORTED_SASL_MECHANISM",
    ILLEGAL_SASL_STATE: "ILLEGAL_SASL_STATE",
    UNSUPPORTED_VERSION: "UNSUPPORTED_VERSION",
    INVALID_CONFIG: "INVALID_CONFIG",
    INVALID_REQUEST: "INVALID_REQUEST",
    SASL_AUTHENTICATION_FAILED: "SASL_AUTHENTICATION_FAILED",
    MISMATCHED_ENDPOINT_TYPE: "MISMATCHED_ENDPOINT_TYPE",
    UNSUPPORTED_ENDPOINT_TYPE: "UNSUPPORTED_ENDPOINT_TYPE",
    CONFIG_TOO_LARGE: "CONFIG_TOO_LARGE",
    **GROUP_ERRORS,
}

# ConfigDef.Type ordinals, the values of PushConfig's ConfigType.
CONFIG_TYPES: dict[int, str] = {
    0: "BOOLEAN", 1: "STRING", 2: "INT", 3: "SHORT", 4: "LONG", 5: "DOUBLE", 6: "LIST",
    7: "CLASS", 8: "PASSWORD",
}
# DescribeConfigs: ConfigResource.Type codes the product asks about.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# DescribeConfigs ConfigSource (v1+), as Kafka names them (DescribeConfigsResponse.ConfigSource).
CONFIG_SOURCES: dict[int, str] = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}
# DescribeConfigs ConfigType (v3+): not PushConfig's numbering (0 is UNKNOWN here).
DESCRIBE_CONFIGS_TYPES: dict[int, str] = {
    0: "UNKNOWN", 1: "BOOLEAN", 2: "STRING", 3: "INT", 4: "SHORT", 5: "LONG", 6: "DOUBLE", 7: "LIST",
    8: "CLASS", 9: "PASSWORD",
}


class UnsupportedVersionError(ProtocolError):
    """A request whose api key or version this codec does not implement (header still parsed)."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


def error_name(code: int) -> str:
    """Kafka's name for an error code, or ``ERROR_<code>`` when unknown here."""
    return ERROR_NAMES.get(code, f"ERROR_{code}")


# ---------------------------------------------------------------------------------------
# Schema compilation: (fields, version, flexible) -> encode/decode closures
# ---------------------------------------------------------------------------------------

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]

_SCALAR_MIN = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "float64": 8, "bool": 1,
               "uuid": 16, "string": 1, "bytes": 1}


def _scalar_decoder(t: str, nullable: bool, flex: bool) -> Decoder:
    if t == "int8":
        return Reader.int8
    if t == "int16":
        return Reader.int16
    if t == "int32":
        return Reader.int32
    if t == "int64":
        return Reader.int64
    if t == "float64":
        return Reader.float64
    if t == "bool":
        return Reader.boolean
    if t == "uuid":
        return Reader.uuid
    if t == "string":
        if flex:
            return lambda r: r.compact_string(nullable)
        return lambda r: r.string(nullable)
    if t == "bytes":
        if flex:
            return lambda r: r.compact_bytes(nullable)
        return lambda r: r.bytes_(nullable)
    raise AssertionError(f"unknown type {t}")


def _scalar_encoder(t: str, nullable: bool, flex: bool) -> Encoder:
    if t == "int8":
        return Writer.int8
    if t == "int16":
        return Writer.int16
    if t == "int32":
        return Writer.int32
    if t == "int64":
        return Writer.int64
    if t == "float64":
        return Writer.float64
    if t == "bool":
        return lambda w, v: w.boolean(bool(v))
    if t == "uuid":
        return Writer.uuid
    if t == "string":
        if flex:
            return lambda w, v: w.compact_string(v, nullable)
        return lambda w, v: w.string(v, nullable)
    if t == "bytes":
        if flex:
            return lambda w, v: w.compact_bytes(v, nullable)
        return lambda w, v: w.bytes_(v, nullable)
    raise AssertionError(f"unknown type {t}")


@dataclass
class _Compiled:
    decode: Callable[[Reader], dict[str, Any]]
    encode: Callable[[Writer, dict[str, Any]], None]
    min_size: int
    fields: int = 1  # entries of a decoded dict


_FIXED_FORMATS = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "float64": "d", "bool": "?"}
_INT32_ARRAYS: dict[int, struct.Struct] = {}


def _int32_array(n: int) -> struct.Struct:
    st = _INT32_ARRAYS.get(n)
    if st is None:
        st = struct.Struct(f">{n}i")
        if len(_INT32_ARRAYS) < 4096:
            _INT32_ARRAYS[n] = st
    return st


def _field_codec(f: Field, version: int, flex: bool) -> tuple[Decoder, Encoder, int]:
    nullable = _in(_vrange(f.nullable), version)
    if f.type.startswith("[]"):
        inner = f.type[2:]
        if inner == "struct":
            sub = _compile(f.fields, version, flex)
            item_dec: Decoder = sub.decode
            item_enc: Encoder = sub.encode
            item_min = max(1, sub.min_size)
            # A decoded struct costs about one dict entry per field: count it that way.
            extra_weight = max(0, sub.fields - 1)
        else:
            extra_weight = 0
            item_dec = _scalar_decoder(inner, False, flex)
            item_enc = _scalar_encoder(inner, False, flex)
            item_min = _SCALAR_MIN[inner]
        name = f.name

        def dec_array(r: Reader) -> list[Any] | None:
            n = r.array_len(flex, nullable, item_min)
            if n is None:
                return None
            if extra_weight and r.budget is not None:
                r.spend(n * extra_weight, r.pos)
            return [item_dec(r) for _ in range(n)]

        def dec_int32_array(r: Reader) -> list[Any] | None:
            if flex:
                pos = r.pos
                if pos < r.end and 0 < r.buf[pos] < 0x80:  # one-byte count, not null
                    one = r.buf[pos] - 1
                    if pos + 1 + 4 * one <= r.end:
                        if r.budget is not None:
                            r.budget -= one
                            if r.budget < 0:
                                r.spend(0, pos)  # raises with the standard message
                        st = _int32_array(one)
                        r.pos = pos + 1 + st.size
                        return list(st.unpack_from(r.buf, pos + 1))
            n = r.array_len(flex, nullable, 4)  # checked against the bytes left
            if n is None:
                return None
            st = _int32_array(n)
            values = list(st.unpack_from(r.buf, r.pos))
            r.pos += st.size
            return values

        def enc_array(w: Writer, v: Any) -> None:
            if v is None:
                w.array_len(None, flex, nullable)
                return
            if not isinstance(v, (list, tuple)):
                raise ProtocolError(f"field {name}: expected a list, got {type(v).__name__}")
            w.array_len(len(v), flex, nullable)
            for item in v:
                item_enc(w, item)

        def enc_int32_array(w: Writer, v: Any) -> None:
            if not isinstance(v, (list, tuple)):
                enc_array(w, v)  # None, or a type error with the field name
                return
            w.array_len(len(v), flex, nullable)
            try:
                w.parts.append(_int32_array(len(v)).pack(*v))
            except (struct.error, TypeError) as exc:
                raise ProtocolError(f"field {name}: cannot encode {v!r} as int32s: {exc}") from None

        if inner == "int32":
            return dec_int32_array, enc_int32_array, (1 if flex else 4)
        return dec_array, enc_array, (1 if flex else 4)
    if f.type == "struct":  # one nested struct (Kafka's non-array struct fields, never nullable)
        nested = _compile(f.fields, version, flex)
        struct_name = f.name

        def enc_struct(w: Writer, v: Any) -> None:
            if not isinstance(v, dict):
                raise ProtocolError(f"field {struct_name}: expected a dict, got {type(v).__name__}")
            nested.encode(w, v)

        return nested.decode, enc_struct, nested.min_size
    size = _SCALAR_MIN[f.type]
    if f.type in ("string", "bytes"):
        size = 1 if flex else (2 if f.type == "string" else 4)
    return _scalar_decoder(f.type, nullable, flex), _scalar_encoder(f.type, nullable, flex), size


_COMPILED: dict[tuple[int, int, bool, bool], _Compiled] = {}

# A decode step writes one or more fields of the dict being built.
_Step = Callable[[Reader, dict[str, Any]], None]


def _fixed_step(names: tuple[str, ...], types: tuple[str, ...]) -> _Step:
    st = struct.Struct(">" + "".join(_FIXED_FORMATS[t] for t in types))
    size = st.size
    what = "+".join(types)

    def step(r: Reader, out: dict[str, Any]) -> None:
        pos = r.pos
        if pos + size > r.end:
            r._need(size, what)  # raises with the standard message
        out.update(zip(names, st.unpack_from(r.buf, pos), strict=True))
        r.pos = pos + size

    return step


def _field_step(name: str, dec: Decoder) -> _Step:
    def step(r: Reader, out: dict[str, Any]) -> None:
        out[name] = dec(r)

    return step


def _decode_steps(regular: list[tuple[str, Decoder, Encoder, Any, str | None]],
                  fixed_types: dict[str, str]) -> list[_Step]:
    """Group runs of fixed-size scalars into one struct unpack each."""
    steps: list[_Step] = []
    run: list[tuple[str, str]] = []
    for name, dec, _enc, _default, _alias in regular:
        if name in fixed_types:
            run.append((name, fixed_types[name]))
            continue
        if run:
            steps.append(_fixed_step(tuple(n for n, _ in run), tuple(t for _, t in run)))
            run = []
        steps.append(_field_step(name, dec))
    if run:
        steps.append(_fixed_step(tuple(n for n, _ in run), tuple(t for _, t in run)))
    return steps


def _compile(fields: tuple[Field, ...], version: int, flex: bool) -> _Compiled:
    regular: list[tuple[str, Decoder, Encoder, Any, str | None]] = []
    tagged: dict[int, tuple[str, Decoder, Encoder, Any]] = {}
    absent: dict[str, Any] = {}
    fixed_types: dict[str, str] = {}
    min_size = 1 if flex else 0
    for f in fields:
        if not _in(_vrange(f.versions), version):
            absent[f.name] = f.default_value()
            continue
        dec, enc, size = _field_codec(f, version, flex)
        if f.tag is not None:
            if flex:
                tagged[f.tag] = (f.name, dec, enc, f.default_value())
            else:
                absent[f.name] = f.default_value()
            continue
        regular.append((f.name, dec, enc, f.default_value(), f.alias))
        if f.type in _FIXED_FORMATS:
            fixed_types[f.name] = f.type
        min_size += size
    steps = _decode_steps(regular, fixed_types)
    defaults = dict(absent)
    for name, _dec, _enc, default in tagged.values():
        defaults[name] = default
    list_defaults = tuple(name for name, value in defaults.items() if isinstance(value, list))

    def decode_tags(r: Reader, out: dict[str, Any]) -> None:
        raw = r.tagged_fields()
        unknown: dict[int, bytes] = {}
        for tag, data in raw.items():
            known = tagged.get(tag)
            if known is None:
                unknown[tag] = data
                continue
            sub = Reader(data)
            out[known[0]] = known[1](sub)
            if sub.remaining():
                raise ProtocolError(f"tagged field {known[0]} has {sub.remaining()} extra bytes")
        if unknown:
            out["_unknown_tagged_fields"] = unknown

    def decode(r: Reader) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for step in steps:
            step(r, out)
        if defaults:
            out.update(defaults)
            for name in list_defaults:
                out[name] = []  # never share one mutable default between bodies
        if flex:
            pos = r.pos
            if pos < r.end and r.buf[pos] == 0:
                r.pos = pos + 1  # the common case: no tagged fields
            else:
                decode_tags(r, out)
        return out

    def encode(w: Writer, body: dict[str, Any]) -> None:
        if not isinstance(body, dict):
            raise ProtocolError(f"expected a dict, got {type(body).__name__}")
        for name, _dec, enc, default, alias in regular:
            if name in body:
                value = body[name]
            elif alias is not None and alias in body:
                value = body[alias]
            else:
                value = default
            try:
                enc(w, value)
            except ProtocolError as exc:
                raise ProtocolError(f"field {name}: {exc}") from None
        if flex:
            tags: dict[int, bytes] = dict(body.get("_unknown_tagged_fields") or {})
            for tag, (name, _dec, enc, default) in tagged.items():
                value = body.get(name, default)
                if value == default or value is None:
                    continue
                sub = Writer()
                enc(sub, value)
                tags[tag] = sub.getvalue()
            w.tagged_fields(tags)

    return _Compiled(decode, encode, min_size, max(1, len(regular) + len(defaults)))


def _message_codec(api_key: int, version: int, is_request: bool) -> _Compiled:
    key = (api_key, version, is_request, True)
    compiled = _COMPILED.get(key)
    if compiled is None:
        schema = _schema(api_key, version)
        fields = schema.request if is_request else schema.response
        compiled = _compile(fields, version, schema.is_flexible(version))
        _COMPILED[key] = compiled
    return compiled


# ---------------------------------------------------------------------------------------
# Headers and frames
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestHeader:
    """Request header v1/v2 (v2 adds tagged fields)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1
    tagged_fields: dict[int, bytes] = field(default_factory=dict)


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1."""
    schema = SCHEMAS.get(api_key)
    return 2 if schema is not None and schema.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions always 0 (KIP-511)."""
    if api_key == API_API_VERSIONS:
        return 0
    schema = SCHEMAS.get(api_key)
    return 1 if schema is not None and schema.is_flexible(api_version) else 0


_FRAME_LENGTH = struct.Struct(">i")


CORRELATION_ID = struct.Struct(">i")  # a response frame starts with it


def _frame(payload: bytes, max_bytes: int | None = None) -> bytes:
    if max_bytes is not None and len(payload) > max_bytes:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds the cap of {max_bytes}")
    return _FRAME_LENGTH.pack(len(payload)) + payload


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   body: dict[str, Any]) -> bytes:
    """A full request frame (4-byte length + header + body)."""
    codec = _message_codec(api_key, api_version, True)
    w = Writer()
    w.int16(api_key)
    w.int16(api_version)
    w.int32(correlation_id)
    w.string(client_id, nullable=True)  # always classic, even in header v2
    if request_header_version(api_key, api_version) >= 2:
        w.tagged_fields({})
    codec.encode(w, body)
    return _frame(w.getvalue())


def decode_request_header(payload: bytes) -> tuple[RequestHeader, int]:
    """Parse a request header; returns it and the offset where the body starts."""
    r = Reader(payload)
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    client_id = r.string(nullable=True)
    hv = request_header_version(api_key, api_version)
    tags = r.tagged_fields() if hv >= 2 else {}
    return RequestHeader(api_key, api_version, correlation_id, client_id, hv, tags), r.pos


def decode_request(payload: bytes) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a request payload (no length prefix).

    Raises UnsupportedVersionError (with ``.header``) for an api key or version this codec
    does not implement, so a server can still answer with UNSUPPORTED_VERSION.
    """
    header, pos = decode_request_header(payload)
    schema = SCHEMAS.get(header.api_key)
    if schema is None:
        raise UnsupportedVersionError(f"unsupported api key {header.api_key}", header)
    lo, hi = schema.valid_versions
    if not lo <= header.api_version <= hi:
        raise UnsupportedVersionError(
            f"unsupported {schema.name} version {header.api_version} (v{lo}-v{hi})", header
        )
    r = Reader(payload, pos)
    body = _message_codec(header.api_key, header.api_version, True).decode(r)
    _check_consumed(r, schema.name)
    return header, body


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    body: dict[str, Any]) -> bytes:
    """A full response frame (4-byte length + header + body)."""
    return response_frame(api_key, api_version, correlation_id,
                          encode_response_body(api_key, api_version, body))


def encode_response_body(api_key: int, api_version: int, body: dict[str, Any]) -> bytes:
    """The encoded response body alone, to be framed (and reused) by response_frame."""
    w = Writer()
    _message_codec(api_key, api_version, False).encode(w, body)
    return w.getvalue()


def response_frame(api_key: int, api_version: int, correlation_id: int, encoded_body: bytes) -> bytes:
    """A full response frame around an already encoded body."""
    header = CORRELATION_ID.pack(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        header += b"\x00"  # empty tagged fields
    return _frame(header + encoded_body)


def decode_response(api_key: int, api_version: int, payload: bytes, *,
                    max_elements: int | None = None,
                    deadline: float | None = None) -> tuple[int, dict[str, Any]]:
    """Decode a response payload (no length prefix) -> (correlation_id, body).

    An ApiVersions response that does not parse at the requested version is parsed as v0,
    as KIP-511 brokers answer unsupported ApiVersions versions with a v0 body. max_elements
    bounds the array elements decoded and deadline (monotonic) stops a long decode: both raise
    ProtocolError.
    """
    schema = _schema(api_key, api_version)
    r = Reader(payload, max_elements=max_elements, deadline=deadline)
    correlation_id = r.int32()
    if response_header_version(api_key, api_version) >= 1:
        r.tagged_fields()
    start = r.pos
    try:
        body = _message_codec(api_key, api_version, False).decode(r)
        _check_consumed(r, schema.name)
    except ProtocolError:
        if api_key != API_API_VERSIONS or api_version == 0:
            raise
        r = Reader(payload, start, max_elements=max_elements, deadline=deadline)
        body = _message_codec(api_key, 0, False).decode(r)
        _check_consumed(r, schema.name)
        body["_decoded_version"] = 0
    return correlation_id, body


def _check_consumed(r: Reader, name: str) -> None:
    if r.remaining():
        raise ProtocolError(f"{name}: {r.remaining()} unexpected trailing bytes")
