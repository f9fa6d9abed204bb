"""Kafka wire primitives: errors, UUID text, the bounds-checked Reader/Writer, and frames.

Every read checks the bytes left before trusting a length, so malformed input raises
``ProtocolError`` at once and never allocates by an untrusted count.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import struct
import time
import uuid
from typing import Any

DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
# Answers that never grow with the cluster's topics (ApiVersions, SASL, DescribeCluster with a
# few thousand brokers) fit well inside 1 MiB; a broker sending more is misbehaving.
MAX_SMALL_RESPONSE_BYTES = 1024 * 1024
# Metadata of 200,000 partitions at replication factor 3 is about 9 MB at v12 (~42 bytes per
# partition plus topic names); 16 MiB leaves room for long names and wider replica sets.
DEFAULT_MAX_METADATA_RESPONSE_BYTES = 16 * 1024 * 1024
# Decoded elements allowed per response (a struct counts one per field): a Metadata partition
# is 7-8 fields plus its replica, ISR and offline ids, 13 at RF 3; 16 leaves room.
# 200,000 partitions -> 3.2 M elements.
ELEMENTS_PER_PARTITION = 16
DEFAULT_MAX_METADATA_ELEMENTS = 200_000 * ELEMENTS_PER_PARTITION
MAX_SMALL_RESPONSE_ELEMENTS = 100_000

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

class ProtocolError(ValueError):
    """Malformed or unsupported bytes on the wire."""


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

    __slots__ = ("budget", "buf", "deadline", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None, *,
                 max_elements: int | None = None, deadline: float | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        # Array elements still allowed (None = only bounded by the bytes), and a monotonic
        # deadline checked at every array: decoding a hostile answer stops early.
        self.budget = max_elements
        self.deadline = deadline

    def spend(self, n: int, at: int) -> None:
        """Count n decoded array elements against the budget and check the deadline."""
        if self.budget is not None:
            self.budget -= n
            if self.budget < 0:
                raise ProtocolError(f"array at offset {at} exceeds the element limit of this response")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise ProtocolError(f"decoding passed the deadline at offset {at} of {self.end}")

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

    def take(self, n: int, what: str) -> int:
        """Step over n bytes (bounds checked); the offset they start at, for a caller's own unpacking."""
        return self._need(n, what)

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
        if self.budget is not None or self.deadline is not None:
            self.spend(n, at)
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
