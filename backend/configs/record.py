"""The KIP-1324 snapshot record: validation, client-type inference and the sensitive filter."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backend.configs.known_keys import is_librdkafka, type_markers
from backend.configs.sensitive import (
    DroppedKeys,
    address_list_shape,
    credential_shape,
    safe_excerpt,
    sensitive_reason,
    unparsed_excerpt,
)
from backend.plain_text import has_surrogate
from backend.store.config_schemas import CLIENT_TYPES, CONFIG_TYPES

MAX_RECORD_BYTES = 10 * 1024
EXCERPT_CHARS = 512

REQUIRED_FIELDS = ("snapshot_id", "received_at", "cluster_id", "broker_id", "client_instance_id",
                   "configs")
OPTIONAL_STR_FIELDS = ("client_id", "client_software_name", "client_software_version",
                       "principal", "client_address")


@dataclass(frozen=True)
class ConfigEntry:
    """One pushed configuration value."""

    key: str
    value: str | None
    type: str
    is_default: bool


@dataclass(frozen=True)
class Snapshot:
    """A validated snapshot record, sensitive keys already removed."""

    snapshot_id: str
    received_at: datetime
    cluster_id: str
    broker_id: int
    client_instance_id: str
    client_id: str | None
    client_type: str | None
    client_type_inferred: bool
    client_software_name: str | None
    client_software_version: str | None
    principal: str | None
    client_address: str | None
    configs: tuple[ConfigEntry, ...]
    source: str
    position: str


@dataclass(frozen=True)
class Rejected:
    """A record refused by validation; raw_excerpt is already redacted."""

    source: str
    position: str
    reason: str
    detail: str
    raw_excerpt: str | None


@dataclass
class ParseOutcome:
    """Result of validating one raw record."""

    snapshot: Snapshot | None = None
    rejected: Rejected | None = None
    dropped: DroppedKeys = field(default_factory=DroppedKeys)


class _Invalid(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def infer_client_type(keys: set[str]) -> str | None:
    """Infer the client type from config keys when the record has none (sink, topic, .properties).

    The key sets come from the real client definitions (``known_keys.type_markers``), first match
    wins: a key only Streams defines -> streams; a consumer key a share consumer refuses
    (``auto.offset.reset``, ``session.timeout.ms``, ``group.protocol``, ...) -> consumer, even with
    share.* keys, which every 4.1+ consumer defines too; ``share.acquire.mode`` /
    ``share.acknowledgement.mode`` -> share_consumer; a key only consumers define (``group.id``,
    ``max.poll.records``, ``fetch.min.bytes``, ...) -> consumer; a key only producers define
    (``acks``, ``linger.ms``, ``enable.idempotence``, ...) -> producer; ``bootstrap.controllers`` or
    ``default.api.timeout.ms`` -> admin; otherwise None (counted as untyped). A Java log block's
    header names its type and is never inferred.
    """
    markers = type_markers()
    if keys & markers["streams"]:
        return "streams"
    if keys & markers["consumer_only"]:
        return "consumer"
    if keys & markers["share"]:
        return "share_consumer"
    if keys & markers["consumer"]:
        return "consumer"
    if keys & markers["producer"]:
        return "producer"
    if keys & markers["admin"]:
        return "admin"
    return None


def excerpt(raw: str) -> str:
    """A quarantine excerpt of ``raw`` from the allow-list (sensitive.safe_excerpt); no value if it does not parse."""
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return unparsed_excerpt(raw)
    return safe_excerpt(parsed, EXCERPT_CHARS)


def _require_str(obj: dict[str, Any], name: str, nullable: bool) -> str | None:
    value = obj.get(name)
    if value is None:
        if nullable:
            return None
        raise _Invalid("missing_field", f"{name} is missing")
    if not isinstance(value, str):
        raise _Invalid("wrong_type", f"{name} must be a string, got {type(value).__name__}")
    if not nullable and not value:
        raise _Invalid("invalid_value", f"{name} is empty")
    return value


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Invalid("invalid_value", "received_at is not ISO-8601") from None
    if parsed.tzinfo is None:
        raise _Invalid("invalid_value", "received_at has no UTC offset")
    return parsed.astimezone(UTC)


_BOOL_VALUES = {"true", "false"}


def _check_value(key: str, value: str | None, typ: str) -> None:
    if value is None:
        return
    try:
        if typ in ("INT", "SHORT", "LONG"):
            int(value)
        elif typ == "DOUBLE":
            float(value)
    except ValueError:
        raise _Invalid("invalid_value", f"value of {key} is not a valid {typ}") from None
    if typ == "BOOLEAN" and value.lower() not in _BOOL_VALUES:
        raise _Invalid("invalid_value", f"value of {key} is not a valid BOOLEAN")


def _entries(raw_configs: object) -> list[ConfigEntry]:
    if not isinstance(raw_configs, list):
        raise _Invalid("wrong_type", "configs must be a list")
    entries = []
    for i, item in enumerate(raw_configs):
        if not isinstance(item, dict):
            raise _Invalid("wrong_type", f"configs[{i}] must be an object")
        for name in ("key", "type", "is_default"):
            if name not in item or item[name] is None:
                raise _Invalid("missing_field", f"configs[{i}].{name} is missing")
        key, typ, is_default, value = item["key"], item["type"], item["is_default"], item.get("value")
        if not isinstance(key, str) or not key:
            raise _Invalid("wrong_type", f"configs[{i}].key must be a non-empty string")
        if not isinstance(typ, str):
            raise _Invalid("wrong_type", f"configs[{i}].type must be a string")
        if typ not in CONFIG_TYPES:
            raise _Invalid("invalid_value", f"configs[{i}].type is not a ConfigDef type")
        if not isinstance(is_default, bool):
            raise _Invalid("wrong_type", f"configs[{i}].is_default must be a boolean")
        if value is not None and not isinstance(value, str):
            raise _Invalid("wrong_type", f"configs[{i}].value must be a string or null")
        entries.append(ConfigEntry(key, value, typ, is_default))
    return entries


_NAMED_FIELDS = frozenset({*REQUIRED_FIELDS, *OPTIONAL_STR_FIELDS, "received_at", "client_type", "key", "value", "type",
                           "is_default"})


def _not_text(value: object, where: str, depth: int = 0) -> str | None:
    """Where the record holds a string that is not text (a lone surrogate: JSON's \\udcff, which no lake can store);
    known fields by name, others as '(a field)', never a value."""
    if isinstance(value, str):
        return where if has_surrogate(value) else None
    if depth > 8:
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            name = k if isinstance(k, str) and k in _NAMED_FIELDS else "(a field)"
            inner = f"{where}.{name}" if where else name
            if isinstance(k, str) and has_surrogate(k):
                return f"{inner} (its name)"
            if found := _not_text(v, inner, depth + 1):
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if found := _not_text(v, f"{where}[{i}]", depth + 1):
                return found
    return None


def validate_record(obj: object, source: str, position: str) -> ParseOutcome:
    """Validate a parsed record and filter its sensitive keys; never raises on bad input."""
    outcome = ParseOutcome()
    try:
        if not isinstance(obj, dict):
            raise _Invalid("wrong_type", "record must be a JSON object")
        if where := _not_text(obj, ""):
            raise _Invalid("not_text", f"{where} holds a lone surrogate (not UTF-8 text)")
        for name in REQUIRED_FIELDS:
            if obj.get(name) is None:
                raise _Invalid("missing_field", f"{name} is missing")
        snapshot_id = _require_str(obj, "snapshot_id", nullable=False)
        received_raw = _require_str(obj, "received_at", nullable=False)
        cluster_id = _require_str(obj, "cluster_id", nullable=False)
        instance = _require_str(obj, "client_instance_id", nullable=False)
        broker_id = obj["broker_id"]
        if isinstance(broker_id, bool) or not isinstance(broker_id, int):
            raise _Invalid("wrong_type", "broker_id must be an integer")
        if not -(2**31) <= broker_id < 2**31:
            raise _Invalid("invalid_value", "broker_id out of int32 range")
        try:
            instance = str(uuid.UUID(instance or ""))
        except ValueError:
            raise _Invalid("invalid_value", "client_instance_id is not a UUID") from None
        optional = {name: _require_str(obj, name, nullable=True) for name in OPTIONAL_STR_FIELDS}
        client_type = _require_str(obj, "client_type", nullable=True)
        if client_type is not None and client_type not in CLIENT_TYPES:
            raise _Invalid("invalid_value", f"client_type is not one of {', '.join(sorted(CLIENT_TYPES))}")
        received_at = _parse_time(received_raw or "")
        entries = _entries(obj["configs"])
        for entry in entries:
            _check_value(entry.key, entry.value, entry.type)
    except _Invalid as bad:
        outcome.rejected = Rejected(source, position, bad.reason, bad.detail, safe_excerpt(obj, EXCERPT_CHARS))
        return outcome

    inferred = False
    if client_type is None:
        client_type = infer_client_type({e.key for e in entries})
        inferred = client_type is not None
    rdkafka = is_librdkafka(optional["client_software_name"], optional["client_software_version"])
    unknown_software = optional["client_software_name"] is None
    kept = []
    for entry in entries:
        if sensitive_reason(entry.key, entry.type, client_type, rdkafka or unknown_software):
            outcome.dropped.add(entry.key)
        elif credential_shape(entry.value) or address_list_shape(entry.key, entry.value):
            # a secret under a harmless key: dropped and counted the same way
            outcome.dropped.add(entry.key)
        else:
            kept.append(entry)
    for name, value in optional.items():
        if credential_shape(value):
            outcome.dropped.add(name)
            optional[name] = None
    outcome.snapshot = Snapshot(
        snapshot_id=snapshot_id or "",
        received_at=received_at,
        cluster_id=cluster_id or "",
        broker_id=broker_id,
        client_instance_id=instance,
        client_id=optional["client_id"],
        client_type=client_type,
        client_type_inferred=inferred,
        client_software_name=optional["client_software_name"],
        client_software_version=optional["client_software_version"],
        principal=optional["principal"],
        client_address=optional["client_address"],
        configs=tuple(kept),
        source=source,
        position=position,
    )
    return outcome


def parse_json_record(raw: str | bytes, source: str, position: str, *, size: int | None = None) -> ParseOutcome:
    """Parse and validate one JSON line; oversize or malformed input becomes a Rejected.

    ``size`` is the line's real length when ``raw`` holds only its start (a line too long to read whole).
    """
    size = size or (len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "replace")))
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if size > MAX_RECORD_BYTES:
        return ParseOutcome(rejected=Rejected(
            source, position, "too_large", f"{size} bytes > {MAX_RECORD_BYTES}", unparsed_excerpt(text)))
    try:
        if isinstance(raw, bytes):
            raw.decode("utf-8")
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:
        return ParseOutcome(rejected=Rejected(
            source, position, "malformed_json", str(err)[:200], unparsed_excerpt(text)))
    return validate_record(obj, source, position)
