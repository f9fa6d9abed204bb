"""Kafka wire codec: frames, headers, primitives and the messages the fleet view speaks.

Bodies are plain dicts whose keys are the snake_case forms of the field names in Apache
Kafka's message JSON (clients/src/main/resources/common/message/*.json), e.g. ClusterId ->
"cluster_id". Decoded bodies contain every field of the schema; fields that do not exist in
the decoded version hold Kafka's default. UUIDs are 22-char URL-safe base64 strings, the
way Kafka prints them (``Uuid.toString()``); encoders also accept ``uuid.UUID``.

Every decode path checks remaining bytes before trusting a length, so malformed input
raises ``ProtocolError`` at once and never allocates by an untrusted count.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------

API_METADATA = 3
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_CLUSTER = 60

# KIP-1324 leaves PushConfig's key as "NEXT". Apache Kafka assigns keys sequentially and
# 4.3.1 (the newest broker the tests run) uses 0..92, so taking the next key would collide
# as soon as Kafka adds an API. 1324 (the KIP number) is far above the sequential range,
# unused by Apache Kafka and by the forks we fingerprint, and still a positive int16.
PUSH_CONFIG_API_KEY = 1324

# KIP-885 puts BrokerSoftwareName/Version in the next free DescribeCluster version. Kafka
# 4.3.1's DescribeClusterRequest.json/Response.json say "validVersions": "0-2" (v1 added
# EndpointType in 3.7, v2 IncludeFencedBrokers/IsFenced in 4.0), and so does 4.4.0, so the
# next free one is 3.
DESCRIBE_CLUSTER_KIP885_VERSION = 3

# KIP-1324 proposes ApiVersions v5 with ClientInstanceId, but Apache Kafka 4.4.0 already
# released v5 for KIP-1242 (ClusterId, NodeId; checked in kafka-clients-4.4.0.jar). A draft
# KIP must not reuse a released version, so ClientInstanceId goes in the next free one, v6,
# on top of v5's fields.
API_VERSIONS_CLIENT_INSTANCE_ID_VERSION = 6
API_VERSIONS_MAX_VERSION = API_VERSIONS_CLIENT_INSTANCE_ID_VERSION

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
# KIP-1324's CONFIG_TOO_LARGE has no number yet. Kafka 4.3.1's highest error code is 133 and
# codes are assigned sequentially, so 1324 (the KIP number) stays clear of future codes.
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
}

# ConfigDef.Type ordinals, the values of PushConfig's ConfigType.
CONFIG_TYPES: dict[int, str] = {
    0: "BOOLEAN", 1: "STRING", 2: "INT", 3: "SHORT", 4: "LONG", 5: "DOUBLE", 6: "LIST",
    7: "CLASS", 8: "PASSWORD",
}

DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_LATEST = 0x7FFF
_INT32_MIN = -(2**31)


class ProtocolError(ValueError):
    """Malformed or unsupported bytes on the wire."""


class UnsupportedVersionError(ProtocolError):
    """A request whose api key or version this codec does not implement (header still parsed)."""

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message)
        self.header = header


def error_name(code: int) -> str:
    """Kafka's name for an error code, or ``ERROR_<code>`` when unknown here."""
    return ERROR_NAMES.get(code, f"ERROR_{code}")


# ---------------------------------------------------------------------------------------
# UUIDs
# ---------------------------------------------------------------------------------------


def uuid_to_kafka_str(value: uuid.UUID | bytes) -> str:
    """Kafka's text form of a UUID: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(raw) != 16:
        raise ProtocolError(f"uuid needs 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def kafka_str_to_uuid(text: str) -> uuid.UUID:
    """Parse Kafka's 22-char base64 UUID text into ``uuid.UUID``."""
    if not isinstance(text, str) or len(text) != 22:
        raise ProtocolError(f"Kafka uuid text must be 22 characters, got {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"invalid Kafka uuid text {text!r}: {exc}") from None
    if len(raw) != 16 or uuid_to_kafka_str(raw) != text:
        raise ProtocolError(f"invalid Kafka uuid text {text!r}")
    return uuid.UUID(bytes=raw)


def _uuid_bytes(value: Any) -> bytes:
    if value is None:
        return bytes(16)
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    if isinstance(value, str):
        return kafka_str_to_uuid(value).bytes
    raise ProtocolError(f"cannot encode {value!r} as a uuid")


# ---------------------------------------------------------------------------------------
# Primitive reader / writer
# ---------------------------------------------------------------------------------------

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class Reader:
    """Cursor over a bytes payload; every read checks bounds and raises ProtocolError."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        """Bytes left to read."""
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise ProtocolError(
                f"truncated input reading {what}: need {n} bytes at offset {pos}, "
                f"{self.end - pos} left"
            )
        self.pos = pos + n
        return pos

    def int8(self) -> int:
        """Signed 8-bit integer."""
        return _I8.unpack_from(self.buf, self._need(1, "int8"))[0]

    def int16(self) -> int:
        """Signed 16-bit big-endian integer."""
        return _I16.unpack_from(self.buf, self._need(2, "int16"))[0]

    def uint16(self) -> int:
        """Unsigned 16-bit big-endian integer."""
        return _U16.unpack_from(self.buf, self._need(2, "uint16"))[0]

    def int32(self) -> int:
        """Signed 32-bit big-endian integer."""
        return _I32.unpack_from(self.buf, self._need(4, "int32"))[0]

    def uint32(self) -> int:
        """Unsigned 32-bit big-endian integer."""
        return _U32.unpack_from(self.buf, self._need(4, "uint32"))[0]

    def int64(self) -> int:
        """Signed 64-bit big-endian integer."""
        return _I64.unpack_from(self.buf, self._need(8, "int64"))[0]

    def float64(self) -> float:
        """IEEE-754 double."""
        return _F64.unpack_from(self.buf, self._need(8, "float64"))[0]

    def boolean(self) -> bool:
        """Bool as one byte (any non-zero is true, like Kafka)."""
        return self.buf[self._need(1, "bool")] != 0

    def raw(self, n: int, what: str = "bytes") -> bytes:
        """Exactly n bytes."""
        start = self._need(n, what)
        return bytes(self.buf[start : start + n])

    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes (32 bits)."""
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:  # the common one-byte case
                self.pos = pos + 1
                return b
        return self._uvar(5, "unsigned varint")

    def uvarlong(self) -> int:
        """Unsigned varint of at most 10 bytes (64 bits)."""
        return self._uvar(10, "unsigned varlong")

    def _uvar(self, max_len: int, what: str) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        value = shift = 0
        for i in range(max_len):
            if pos + i >= end:
                raise ProtocolError(f"truncated input reading {what} at offset {self.pos}")
            b = buf[pos + i]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos + i + 1
                if value > (0xFFFFFFFF if max_len == 5 else 0xFFFFFFFFFFFFFFFF):
                    raise ProtocolError(f"{what} out of range at offset {pos}")
                return value
            shift += 7
        raise ProtocolError(f"{what} longer than {max_len} bytes at offset {pos}")

    def varint(self) -> int:
        """Zig-zag signed varint (32 bits)."""
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def varlong(self) -> int:
        """Zig-zag signed varlong (64 bits)."""
        v = self.uvarlong()
        return (v >> 1) ^ -(v & 1)

    def _text(self, n: int, what: str) -> str:
        start = self._need(n, what)
        try:
            return self.buf[start : start + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{what} at offset {start} is not UTF-8: {exc.reason}") from None

    def string(self, nullable: bool = False) -> str | None:
        """Classic string: int16 length (-1 = null when nullable)."""
        n = self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"invalid string length {n} at offset {self.pos - 2}")
        return self._text(n, "string")

    def compact_string(self, nullable: bool = False) -> str | None:
        """Compact string: uvarint length+1 (0 = null when nullable)."""
        n = self.uvarint()
        if n == 0:
            if nullable:
                return None
            raise ProtocolError(f"null compact string for non-nullable field at offset {self.pos}")
        return self._text(n - 1, "compact string")

    def bytes_(self, nullable: bool = False) -> bytes | None:
        """Classic bytes: int32 length (-1 = null when nullable)."""
        n = self.int32()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"invalid bytes length {n} at offset {self.pos - 4}")
        return self.raw(n)

    def compact_bytes(self, nullable: bool = False) -> bytes | None:
        """Compact bytes: uvarint length+1 (0 = null when nullable)."""
        n = self.uvarint()
        if n == 0:
            if nullable:
                return None
            raise ProtocolError(f"null compact bytes for non-nullable field at offset {self.pos}")
        return self.raw(n - 1, "compact bytes")

    def uuid(self) -> str:
        """16-byte UUID as Kafka's 22-char text."""
        return uuid_to_kafka_str(self.raw(16, "uuid"))

    def array_len(self, compact: bool, nullable: bool, min_item: int) -> int | None:
        """Element count of an array, checked against the bytes left (None = null)."""
        at = self.pos
        if compact:
            n = self.uvarint() - 1
        else:
            n = self.int32()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ProtocolError(f"invalid array length {n} at offset {at}")
        if n * min_item > self.end - self.pos:
            raise ProtocolError(
                f"array count {n} at offset {at} exceeds the {self.end - self.pos} bytes left"
            )
        return n

    def tagged_fields(self) -> dict[int, bytes]:
        """Raw tagged fields: {tag: bytes}."""
        count = self.uvarint()
        if count > self.end - self.pos:
            raise ProtocolError(f"tagged field count {count} exceeds the bytes left")
        out: dict[int, bytes] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise ProtocolError(f"tagged fields out of order or repeated (tag {tag})")
            last = tag
            size = self.uvarint()
            out[tag] = self.raw(size, "tagged field")
        return out


class Writer:
    """Append-only byte builder for the primitives."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def getvalue(self) -> bytes:
        """Everything written so far."""
        return b"".join(self.parts)

    def _pack(self, fmt: struct.Struct, value: Any, what: str) -> None:
        try:
            self.parts.append(fmt.pack(value))
        except (struct.error, TypeError) as exc:
            raise ProtocolError(f"cannot encode {value!r} as {what}: {exc}") from None

    def int8(self, v: int) -> None:
        """Signed 8-bit integer."""
        self._pack(_I8, v, "int8")

    def int16(self, v: int) -> None:
        """Signed 16-bit integer."""
        self._pack(_I16, v, "int16")

    def uint16(self, v: int) -> None:
        """Unsigned 16-bit integer."""
        self._pack(_U16, v, "uint16")

    def int32(self, v: int) -> None:
        """Signed 32-bit integer."""
        self._pack(_I32, v, "int32")

    def uint32(self, v: int) -> None:
        """Unsigned 32-bit integer."""
        self._pack(_U32, v, "uint32")

    def int64(self, v: int) -> None:
        """Signed 64-bit integer."""
        self._pack(_I64, v, "int64")

    def float64(self, v: float) -> None:
        """IEEE-754 double."""
        self._pack(_F64, v, "float64")

    def boolean(self, v: bool) -> None:
        """Bool as one byte."""
        self.parts.append(b"\x01" if v else b"\x00")

    def raw(self, b: bytes) -> None:
        """Bytes as-is."""
        self.parts.append(bytes(b))

    def uvarint(self, v: int) -> None:
        """Unsigned varint (up to 32 bits)."""
        if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFF:
            raise ProtocolError(f"cannot encode {v!r} as unsigned varint")
        self.parts.append(_uvar_bytes(v))

    def uvarlong(self, v: int) -> None:
        """Unsigned varint (up to 64 bits)."""
        if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            raise ProtocolError(f"cannot encode {v!r} as unsigned varlong")
        self.parts.append(_uvar_bytes(v))

    def varint(self, v: int) -> None:
        """Zig-zag signed varint (32 bits)."""
        if not isinstance(v, int) or not -(2**31) <= v < 2**31:
            raise ProtocolError(f"cannot encode {v!r} as varint")
        self.uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        """Zig-zag signed varlong (64 bits)."""
        if not isinstance(v, int) or not -(2**63) <= v < 2**63:
            raise ProtocolError(f"cannot encode {v!r} as varlong")
        self.uvarlong(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def string(self, v: str | None, nullable: bool = False) -> None:
        """Classic string (int16 length)."""
        if v is None:
            if not nullable:
                raise ProtocolError("null for a non-nullable string")
            self.parts.append(b"\xff\xff")
            return
        data = _utf8(v)
        if len(data) > 0x7FFF:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        self.parts.append(_I16.pack(len(data)))
        self.parts.append(data)

    def compact_string(self, v: str | None, nullable: bool = False) -> None:
        """Compact string (uvarint length+1)."""
        if v is None:
            if not nullable:
                raise ProtocolError("null for a non-nullable string")
            self.parts.append(b"\x00")
            return
        data = _utf8(v)
        if len(data) > 0x7FFF:
            raise ProtocolError(f"string of {len(data)} bytes is longer than 32767")
        self.parts.append(_uvar_bytes(len(data) + 1))
        self.parts.append(data)

    def bytes_(self, v: bytes | None, nullable: bool = False) -> None:
        """Classic bytes (int32 length)."""
        if v is None:
            if not nullable:
                raise ProtocolError("null for non-nullable bytes")
            self.parts.append(b"\xff\xff\xff\xff")
            return
        self.parts.append(_I32.pack(len(v)))
        self.parts.append(bytes(v))

    def compact_bytes(self, v: bytes | None, nullable: bool = False) -> None:
        """Compact bytes (uvarint length+1)."""
        if v is None:
            if not nullable:
                raise ProtocolError("null for non-nullable bytes")
            self.parts.append(b"\x00")
            return
        self.parts.append(_uvar_bytes(len(v) + 1))
        self.parts.append(bytes(v))

    def uuid(self, v: Any) -> None:
        """UUID from Kafka text, uuid.UUID or 16 bytes (None = zero uuid)."""
        self.parts.append(_uuid_bytes(v))

    def array_len(self, n: int | None, compact: bool, nullable: bool) -> None:
        """Array element count (None = null array)."""
        if n is None:
            if not nullable:
                raise ProtocolError("null for a non-nullable array")
            self.parts.append(b"\x00" if compact else b"\xff\xff\xff\xff")
        elif compact:
            self.parts.append(_uvar_bytes(n + 1))
        else:
            self.parts.append(_I32.pack(n))

    def tagged_fields(self, tags: dict[int, bytes]) -> None:
        """Tagged fields section from raw {tag: bytes}, in ascending tag order."""
        self.parts.append(_uvar_bytes(len(tags)))
        for tag in sorted(tags):
            data = tags[tag]
            self.parts.append(_uvar_bytes(tag))
            self.parts.append(_uvar_bytes(len(data)))
            self.parts.append(bytes(data))


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _uvar_bytes(v: int) -> bytes:
    if v < 0x80:
        return _ONE_BYTE[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _utf8(v: Any) -> bytes:
    if not isinstance(v, str):
        raise ProtocolError(f"expected a string, got {type(v).__name__}")
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ProtocolError(f"string is not encodable as UTF-8: {exc.reason}") from None


# ---------------------------------------------------------------------------------------
# Schemas (a small mirror of Kafka's message JSON)
# ---------------------------------------------------------------------------------------


def _vrange(spec: str | None) -> tuple[int, int] | None:
    """Kafka version spec ("3+", "8-10", "5", "none") -> inclusive range or None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), _LATEST)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


@dataclass(frozen=True)
class Field:
    """One field of a message schema."""

    name: str
    type: str  # int8 int16 int32 int64 float64 bool string bytes uuid, []<scalar>, []struct
    versions: str = "0+"
    nullable: str | None = None
    default: Any = None
    tag: int | None = None
    fields: tuple[Field, ...] = ()
    alias: str | None = None  # extra key accepted on encode only

    def default_value(self) -> Any:
        """Kafka's default for this field when absent."""
        if self.default is not None:
            return self.default
        if self.nullable is not None:
            return None
        t = self.type
        if t.startswith("[]"):
            return []
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "uuid":
            return ZERO_UUID
        if t == "float64":
            return 0.0
        return 0


def F(name: str, type_: str, versions: str = "0+", **kw: Any) -> Field:
    """Short constructor for schema tables."""
    fields = kw.pop("fields", ())
    return Field(name, type_, versions, fields=tuple(fields), **kw)


@dataclass(frozen=True)
class MessageSchema:
    """Request and response schema of one API."""

    api_key: int
    name: str
    valid_versions: tuple[int, int]
    flexible_from: int | None
    request: tuple[Field, ...]
    response: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        """True when this version uses compact types and tagged fields."""
        return self.flexible_from is not None and version >= self.flexible_from


_API_VERSIONS = MessageSchema(
    API_API_VERSIONS, "ApiVersions", (0, API_VERSIONS_MAX_VERSION), 3,
    request=(
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
        # v5 (Kafka 4.4, KIP-1242): the cluster and node the client expects.
        F("cluster_id", "string", "5+", nullable="5+"),
        F("node_id", "int32", "5+", default=-1),
        # v6 (KIP-1324 draft, see API_VERSIONS_CLIENT_INSTANCE_ID_VERSION).
        F("client_instance_id", "uuid", f"{API_VERSIONS_CLIENT_INSTANCE_ID_VERSION}+"),
    ),
    response=(
        F("error_code", "int16"),
        F("api_keys", "[]struct", fields=(
            F("api_key", "int16"), F("min_version", "int16"), F("max_version", "int16"),
        )),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", "[]struct", "3+", tag=0, fields=(
            F("name", "string", "3+"), F("min_version", "int16", "3+"),
            F("max_version", "int16", "3+"),
        )),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        F("finalized_features", "[]struct", "3+", tag=2, fields=(
            F("name", "string", "3+"), F("max_version_level", "int16", "3+"),
            F("min_version_level", "int16", "3+"),
        )),
        F("zk_migration_ready", "bool", "3+", tag=3),
    ),
)

_METADATA = MessageSchema(
    API_METADATA, "Metadata", (0, 13), 9,
    request=(
        F("topics", "[]struct", nullable="1+", fields=(
            F("topic_id", "uuid", "10+"),
            F("name", "string", nullable="10+"),
        )),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+"),
        F("brokers", "[]struct", fields=(
            F("node_id", "int32", alias="broker_id"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "1+", nullable="1+"),
        )),
        F("cluster_id", "string", "2+", nullable="2+"),
        F("controller_id", "int32", "1+", default=-1),
        F("topics", "[]struct", fields=(
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", "10+"),
            F("is_internal", "bool", "1+"),
            F("partitions", "[]struct", fields=(
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", "7+", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", "5+"),
            )),
            F("topic_authorized_operations", "int32", "8+", default=_INT32_MIN),
        )),
        F("cluster_authorized_operations", "int32", "8-10", default=_INT32_MIN),
        F("error_code", "int16", "13+"),
    ),
)

_DESCRIBE_CLUSTER = MessageSchema(
    API_DESCRIBE_CLUSTER, "DescribeCluster", (0, DESCRIBE_CLUSTER_KIP885_VERSION), 0,
    request=(
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=1),
        F("include_fenced_brokers", "bool", "2+"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", "[]struct", fields=(
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+"),
            F("is_fenced", "bool", "2+"),
        )),
        # KIP-885: top-level (per answering broker), after Brokers, before
        # ClusterAuthorizedOperations, as the KIP's JSON orders them.
        F("broker_software_name", "string", f"{DESCRIBE_CLUSTER_KIP885_VERSION}+",
          nullable=f"{DESCRIBE_CLUSTER_KIP885_VERSION}+"),
        F("broker_software_version", "string", f"{DESCRIBE_CLUSTER_KIP885_VERSION}+",
          nullable=f"{DESCRIBE_CLUSTER_KIP885_VERSION}+"),
        F("cluster_authorized_operations", "int32", default=_INT32_MIN),
    ),
)

_SASL_HANDSHAKE = MessageSchema(
    API_SASL_HANDSHAKE, "SaslHandshake", (0, 1), None,
    request=(F("mechanism", "string"),),
    response=(F("error_code", "int16"), F("mechanisms", "[]string")),
)

_SASL_AUTHENTICATE = MessageSchema(
    API_SASL_AUTHENTICATE, "SaslAuthenticate", (0, 2), 2,
    request=(F("auth_bytes", "bytes"),),
    response=(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+"),
    ),
)

_PUSH_CONFIG = MessageSchema(
    PUSH_CONFIG_API_KEY, "PushConfig", (0, 0), 0,
    request=(
        F("configs", "[]struct", fields=(
            F("config_key", "string"),
            F("config_value", "string"),
            F("config_type", "int8"),
            F("is_default", "bool"),
        )),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ),
)

SCHEMAS: dict[int, MessageSchema] = {
    s.api_key: s
    for s in (_API_VERSIONS, _METADATA, _DESCRIBE_CLUSTER, _SASL_HANDSHAKE, _SASL_AUTHENTICATE,
              _PUSH_CONFIG)
}


def supported_versions(api_key: int) -> tuple[int, int]:
    """(min, max) version this codec implements for an api key."""
    try:
        return SCHEMAS[api_key].valid_versions
    except KeyError:
        raise ProtocolError(f"api key {api_key} is not implemented by this codec") from None


def _schema(api_key: int, api_version: int) -> MessageSchema:
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise ProtocolError(f"api key {api_key} is not implemented by this codec")
    lo, hi = schema.valid_versions
    if not lo <= api_version <= hi:
        raise ProtocolError(f"{schema.name} v{api_version} not implemented (have v{lo}-v{hi})")
    return schema


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
        else:
            item_dec = _scalar_decoder(inner, False, flex)
            item_enc = _scalar_encoder(inner, False, flex)
            item_min = _SCALAR_MIN[inner]
        name = f.name

        def dec_array(r: Reader) -> list[Any] | None:
            n = r.array_len(flex, nullable, item_min)
            if n is None:
                return None
            return [item_dec(r) for _ in range(n)]

        def dec_int32_array(r: Reader) -> list[Any] | None:
            if flex:
                pos = r.pos
                if pos < r.end and 0 < r.buf[pos] < 0x80:  # one-byte count, not null
                    one = r.buf[pos] - 1
                    if pos + 1 + 4 * one <= r.end:
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

    return _Compiled(decode, encode, min_size)


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


def _frame(payload: bytes, max_bytes: int | None = None) -> bytes:
    if max_bytes is not None and len(payload) > max_bytes:
        raise ProtocolError(f"frame of {len(payload)} bytes exceeds the cap of {max_bytes}")
    return _I32.pack(len(payload)) + payload


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
    codec = _message_codec(api_key, api_version, False)
    w = Writer()
    w.int32(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        w.tagged_fields({})
    codec.encode(w, body)
    return _frame(w.getvalue())


def decode_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, dict[str, Any]]:
    """Decode a response payload (no length prefix) -> (correlation_id, body).

    An ApiVersions response that does not parse at the requested version is parsed as v0,
    as KIP-511 brokers answer unsupported ApiVersions versions with a v0 body.
    """
    schema = _schema(api_key, api_version)
    r = Reader(payload)
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
        r = Reader(payload, start)
        body = _message_codec(api_key, 0, False).decode(r)
        _check_consumed(r, schema.name)
        body["_decoded_version"] = 0
    return correlation_id, body


def _check_consumed(r: Reader, name: str) -> None:
    if r.remaining():
        raise ProtocolError(f"{name}: {r.remaining()} unexpected trailing bytes")


def frame_length(prefix: bytes, max_bytes: int) -> int:
    """Validate a 4-byte frame length prefix against the cap."""
    if len(prefix) != 4:
        raise ProtocolError(f"frame length prefix needs 4 bytes, got {len(prefix)}")
    n = _I32.unpack(prefix)[0]
    if n < 0:
        raise ProtocolError(f"negative frame length {n}")
    if n > max_bytes:
        raise ProtocolError(f"frame length {n} exceeds the cap of {max_bytes} bytes")
    return n


def split_frame(data: bytes, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> tuple[bytes, bytes]:
    """Split one complete frame off a buffer -> (payload, rest); ProtocolError if incomplete."""
    if len(data) < 4:
        raise ProtocolError(f"truncated frame: {len(data)} bytes, no complete length prefix")
    n = frame_length(bytes(data[:4]), max_bytes)
    if len(data) - 4 < n:
        raise ProtocolError(f"truncated frame: length {n}, only {len(data) - 4} bytes present")
    return bytes(data[4 : 4 + n]), bytes(data[4 + n :])


def _recv_exact(sock: socket.socket, n: int, deadline: float | None, what: str) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"timed out reading {what}")
            sock.settimeout(left)
        chunk = sock.recv(min(n - len(buf), 1 << 16))
        if not chunk:
            raise ProtocolError(
                f"connection closed while reading {what} ({len(buf)} of {n} bytes received)"
            )
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
               deadline: float | None = None) -> bytes:
    """Read one frame's payload from a blocking socket, bounded by a monotonic deadline."""
    n = frame_length(_recv_exact(sock, 4, deadline, "frame length"), max_bytes)
    return _recv_exact(sock, n, deadline, "frame body")


async def read_frame_async(reader: asyncio.StreamReader,
                           max_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> bytes:
    """Read one frame's payload from an asyncio stream (wrap in asyncio.wait_for for a timeout)."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError(
            f"connection closed while reading frame length ({len(exc.partial)} of 4 bytes)"
        ) from None
    n = frame_length(prefix, max_bytes)
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError(
            f"connection closed while reading frame body ({len(exc.partial)} of {n} bytes)"
        ) from None
