"""Known client configuration keys, their ConfigDef types and defaults, per client type.

The Java clients' keys and defaults come from known_keys.json, generated from the real client definitions
(ProducerConfig, ConsumerConfig, ShareConsumerConfig, AdminClientConfig, StreamsConfig) of every
release from 2.8 to 4.4 by ``backend/configs/known_keys_build.py``; a test regenerates it from the
jars and compares. Two hand-kept lists complete it: the keys KIP-1324 proposes (in no release yet)
and the keys only librdkafka knows (its CONFIGURATION.md). A key outside all of them is a custom
key and is treated as sensitive (KIP-1324: Kafka cannot tell what an application's own key holds).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

TABLE_PATH = Path(__file__).with_name("known_keys.json")
JAVA_CLIENT_TYPES = ("producer", "consumer", "share_consumer", "admin", "streams")


def _parse(spec: str) -> dict[str, str]:
    """Parse 'TYPE: key key key' lines into {key: TYPE}."""
    out: dict[str, str] = {}
    for line in spec.strip().splitlines():
        typ, _, keys = line.partition(":")
        for key in keys.split():
            out[key] = typ.strip()
    return out


# Proposed by KIP-1324 for every client; no Apache Kafka release defines them yet.
KIP1324 = _parse("""
LIST: config.push.allowed.keys
BOOLEAN: enable.config.push
""")

# Streams forwards configs to its embedded clients under these prefixes.
STREAMS_CLIENT_PREFIXES = (
    "producer.",
    "consumer.",
    "main.consumer.",
    "restore.consumer.",
    "global.consumer.",
    "admin.",
)

# Keys only librdkafka (and clients built on it) knows; types are the nearest ConfigDef type.
LIBRDKAFKA = _parse("""
STRING: request.required.acks compression.codec partitioner debug broker.version.fallback
STRING: client.software.name client.software.version
INT: queue.buffering.max.messages queue.buffering.max.kbytes batch.num.messages
INT: message.send.max.retries message.timeout.ms socket.timeout.ms message.max.bytes
INT: receive.message.max.bytes max.in.flight topic.metadata.refresh.interval.ms
INT: statistics.interval.ms queued.min.messages queued.max.messages.kbytes fetch.wait.max.ms
INT: fetch.message.max.bytes fetch.error.backoff.ms coordinator.query.interval.ms log_level
INT: sticky.partitioning.linger.ms api.version.request.timeout.ms topic.metadata.propagation.max.ms
INT: fetch.queue.backoff.ms
DOUBLE: queue.buffering.max.ms
BOOLEAN: socket.keepalive.enable enable.auto.offset.store enable.partition.eof api.version.request
BOOLEAN: enable.gapless.guarantee topic.metadata.refresh.sparse log.connection.close
""")


@lru_cache(maxsize=1)
def table() -> dict[str, object]:
    """known_keys.json as written by known_keys_build.py."""
    data: dict[str, object] = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return data


def _spans() -> dict[str, dict[str, list[list[str]]]]:
    clients = table()["clients"]
    assert isinstance(clients, dict)
    return clients


def release_key(release: str) -> tuple[int, ...]:
    """Sort key of a release line such as "3.9"."""
    return tuple(int(p) for p in release.split("."))


def releases() -> tuple[str, ...]:
    """The release lines the table was built from, oldest first ("2.8", ..., "4.4")."""
    found = table()["releases"]
    assert isinstance(found, dict)
    return tuple(found)


@lru_cache(maxsize=8)
def java_keys(client_type: str) -> dict[str, str]:
    """Key -> ConfigDef type (of its newest release) that this Java client type defines in any release."""
    return {key: spans[-1][2] for key, spans in _spans().get(client_type, {}).items()}


@lru_cache(maxsize=4096)
def java_types(key: str) -> frozenset[str]:
    """Every ConfigDef type any Java client of any release declares ``key`` with (empty when none does)."""
    return frozenset(span[2] for keys in _spans().values() for span in keys.get(key, ()))


def key_releases(key: str, client_type: str) -> tuple[tuple[str, str], ...]:
    """(first, last) release spans in which this Java client type defines ``key``; () when it never does."""
    return tuple((s[0], s[1]) for s in _spans().get(client_type, {}).get(key, ()))


def default_spans(key: str, client_type: str) -> tuple[tuple[str, str, str | None], ...]:
    """(first, last, default) release spans of ``key``'s default in this Java client type (None: a null default)."""
    defaults = table().get("defaults", {})
    assert isinstance(defaults, dict)
    return tuple((s[0], s[1], s[2]) for s in defaults.get(client_type, {}).get(key, ()))


def default_in(key: str, client_type: str, release: str) -> tuple[bool, str | None]:
    """(whether ``key`` has a default in that release line, the default) for this Java client type."""
    at = release_key(release)
    for first, last, value in default_spans(key, client_type):
        if release_key(first) <= at <= release_key(last):
            return True, value
    return False, None


@lru_cache(maxsize=1)
def share_unsupported() -> frozenset[str]:
    """Consumer keys that a share consumer refuses (ShareConsumerConfig); a record with one is a consumer."""
    found = table()["share_unsupported"]
    assert isinstance(found, dict)
    return frozenset(found)


@lru_cache(maxsize=1)
def type_markers() -> dict[str, frozenset[str]]:
    """Keys that name a client type, from the real definitions (any release), for records without one.

    streams: keys only StreamsConfig defines; consumer_only: keys a share consumer refuses and no
    producer or admin client defines (a 4.x consumer also defines share.* keys); share: the share.*
    keys; consumer: keys only ConsumerConfig (and so ShareConsumerConfig) defines; producer: keys
    only ProducerConfig defines; admin: keys only AdminClientConfig defines, and default.api.timeout.ms
    (which only consumers share).
    """
    j = {t: frozenset(java_keys(t)) for t in JAVA_CLIENT_TYPES}
    consumer = j["consumer"] - j["producer"] - j["admin"]
    return {
        "streams": j["streams"] - j["producer"] - j["consumer"] - j["admin"],
        "consumer_only": share_unsupported() - j["producer"] - j["admin"],
        "share": frozenset(k for k in j["share_consumer"] if k.startswith("share.")),
        "consumer": consumer,
        "producer": j["producer"] - j["consumer"] - j["admin"],
        "admin": (j["admin"] - j["producer"] - j["consumer"] - j["streams"]) | {"default.api.timeout.ms"},
    }


@lru_cache(maxsize=1)
def _known_by_client_type() -> dict[str, dict[str, str]]:
    out = {t: {**java_keys(t), **KIP1324} for t in JAVA_CLIENT_TYPES}
    # A Streams app's own settings may carry its clients' keys unprefixed.
    out["streams"] = {**java_keys("admin"), **java_keys("consumer"), **java_keys("producer"), **out["streams"]}
    return out


@lru_cache(maxsize=1)
def _all_known() -> dict[str, str]:
    out: dict[str, str] = {}
    for known in _known_by_client_type().values():
        out.update(known)
    return {**out, **LIBRDKAFKA}


_RDKAFKA_NAME = re.compile(r"rdkafka|confluent-kafka|kcat", re.IGNORECASE)


def is_librdkafka(software_name: str | None, software_version: str | None = None) -> bool:
    """True when the client software is librdkafka or a client built on it."""
    text = f"{software_name or ''} {software_version or ''}"
    return bool(_RDKAFKA_NAME.search(text))


def known_type(key: str, client_type: str | None = None, librdkafka: bool = True) -> str | None:
    """The ConfigDef type of a known key for this client type, or None for an unknown key."""
    if client_type == "streams":
        for prefix in STREAMS_CLIENT_PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                return known_type(key[len(prefix):], None, librdkafka)
    known = _known_by_client_type().get(client_type or "")
    typ = known.get(key) if known is not None else _all_known().get(key)
    if typ is None and librdkafka:
        typ = LIBRDKAFKA.get(key)
    return typ
