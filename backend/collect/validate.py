"""Checks every value a broker or ZooKeeper gave a snapshot against the lake's types, ranges and lengths.

Anything that would not fit a lake column is replaced (None, or dropped for an unusable key)
and named in the returned problems, so the cluster becomes `degraded` with the reason and the
other clusters' rows are written as usual.
"""

from __future__ import annotations

import threading
from typing import Any

from backend.configs.sensitive import safe_error_text
from backend.store.model import PROVENANCES, STATUSES, BrokerSnapshot, ClusterSnapshot, TopicSnapshot

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_ID_CHARS = 256  # cluster ids, topic ids, versions, racks
MAX_HOST_CHARS = 255  # RFC 1035 host name
MAX_TOPIC_CHARS = 249  # Kafka's own limit
MAX_TEXT_CHARS = 4096  # error texts
MAX_JSON_CHARS = 64 * 1024  # api_versions_json
MAX_ZK_VALUE_CHARS = 1024 * 1024  # ZooKeeper's jute.maxbuffer default
MAX_PROBLEMS_SHOWN = 5

# Per cluster, the last topic row list found valid (rows are read-only once built).
_CHECKED_TOPICS: dict[str, list[TopicSnapshot]] = {}
_CHECKED_LOCK = threading.Lock()


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        self.items.append(text)


def _int(value: Any, what: str, problems: _Problems, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        problems.add(f"{what}: {_shown(value)} is not an integer in [{lo}, {hi}]")
        return None
    return value


def _str(value: Any, what: str, problems: _Problems, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.add(f"{what}: {_shown(value)} is not a string")
        return None
    if len(value) > limit:
        problems.add(f"{what}: {len(value)} characters, more than {limit}")
        return value[:limit]
    if "\x00" in value:
        problems.add(f"{what}: contains a NUL character")
        return value.replace("\x00", "\ufffd")
    return value


def _float(value: Any, what: str, problems: _Problems) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e12:
        problems.add(f"{what}: {_shown(value)} is not a finite number")
        return None
    return float(value)


def _shown(value: Any) -> str:
    """A short, plain-text rendering of a hostile value for an error message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _broker(b: BrokerSnapshot, problems: _Problems) -> bool:
    """Fix one broker row in place; False when its id is unusable (the row is dropped)."""
    broker_id = _int(b.broker_id, "broker id", problems, lo=-1)
    if broker_id is None:
        return False
    where = f"broker {broker_id}"
    b.host = _str(b.host, f"{where} host", problems, MAX_HOST_CHARS)
    b.port = _int(b.port, f"{where} port", problems, lo=0, hi=65535)
    b.rack = _str(b.rack, f"{where} rack", problems, MAX_ID_CHARS)
    b.is_controller = bool(b.is_controller) if isinstance(b.is_controller, bool) else False
    b.reachable = b.reachable if isinstance(b.reachable, bool) else False
    b.software_name = _str(b.software_name, f"{where} software name", problems, MAX_ID_CHARS)
    b.software_version = _str(b.software_version, f"{where} software version", problems, MAX_ID_CHARS)
    if b.version_provenance not in PROVENANCES:
        problems.add(f"{where} provenance: {_shown(b.version_provenance)} is not one of {', '.join(PROVENANCES)}")
        b.version_provenance = "unknown"
    b.version_min = _str(b.version_min, f"{where} version_min", problems, MAX_ID_CHARS)
    b.version_max = _str(b.version_max, f"{where} version_max", problems, MAX_ID_CHARS)
    b.version_confidence = _str(b.version_confidence, f"{where} confidence", problems, MAX_ID_CHARS)
    b.api_versions_json = _str(b.api_versions_json, f"{where} api versions", problems, MAX_JSON_CHARS)
    b.probe_ms = _float(b.probe_ms, f"{where} probe_ms", problems)
    b.error = safe_error_text(_str(b.error, f"{where} error", problems, MAX_TEXT_CHARS), MAX_TEXT_CHARS)
    return True


def valid_topic_name(name: object) -> bool:
    """Whether a topic name from a broker is kept: a string of 1-249 characters (Kafka's own limit), no NUL.

    The one rule for topic names: Metadata rows, and what the config and future collectors may ask about."""
    return isinstance(name, str) and 0 < len(name) <= MAX_TOPIC_CHARS and "\x00" not in name


def _topic(t: TopicSnapshot, problems: _Problems) -> bool:
    """Fix one topic row in place; False when its name is unusable (the row is dropped)."""
    if not valid_topic_name(t.topic):
        problems.add(f"topic name {_shown(t.topic)} is not a string of 1-{MAX_TOPIC_CHARS} characters without NUL")
        return False
    where = f"topic {t.topic[:60]}"
    t.topic_id = _str(t.topic_id, f"{where} id", problems, MAX_ID_CHARS)
    t.zk_topic_id = _str(t.zk_topic_id, f"{where} ZooKeeper id", problems, MAX_ID_CHARS)
    t.partitions = _int(t.partitions, f"{where} partitions", problems, lo=0) or 0
    t.replication_factor = _int(t.replication_factor, f"{where} replication factor", problems, lo=0) or 0
    t.internal = t.internal if isinstance(t.internal, bool) else False
    t.under_replicated = _int(t.under_replicated, f"{where} under-replicated", problems, lo=0) or 0
    t.offline_partitions = _int(t.offline_partitions, f"{where} offline partitions", problems, lo=0) or 0
    return True


def sanitize_snapshot(snapshot: ClusterSnapshot) -> list[str]:
    """Make every value of a snapshot fit the lake's schema, in place; return what had to change."""
    problems = _Problems()
    if snapshot.status not in STATUSES:
        problems.add(f"status {_shown(snapshot.status)} is not one of {', '.join(STATUSES)}")
        snapshot.status = "degraded"
    snapshot.cluster_id = _str(snapshot.cluster_id, "cluster id", problems, MAX_ID_CHARS)
    snapshot.zk_cluster_id = _str(snapshot.zk_cluster_id, "ZooKeeper /cluster/id", problems, MAX_ID_CHARS)
    snapshot.controller_id = _int(snapshot.controller_id, "controller id", problems, lo=-1)
    snapshot.error = safe_error_text(_str(snapshot.error, "error", problems, MAX_TEXT_CHARS * 4), MAX_TEXT_CHARS * 4)
    snapshot.brokers = [b for b in snapshot.brokers if _broker(b, problems)]
    seen: set[int] = set()
    unique: list[BrokerSnapshot] = []
    for b in snapshot.brokers:
        if b.broker_id in seen:
            problems.add(f"broker id {b.broker_id} listed twice")
            continue
        seen.add(b.broker_id)
        unique.append(b)
    snapshot.brokers = unique
    snapshot.missing_broker_ids = [i for i in snapshot.missing_broker_ids if i in seen]
    # Topic rows are reused by the next poll when the listing is unchanged (the same list
    # object): a list checked before is not checked again, and it is only rebuilt when bad.
    with _CHECKED_LOCK:
        checked = _CHECKED_TOPICS.get(snapshot.cluster_name) is snapshot.topics
    if not checked:
        if not all(_topic_ok(t) for t in snapshot.topics):
            snapshot.topics = [t for t in snapshot.topics if _topic(t, problems)]
        with _CHECKED_LOCK:
            _CHECKED_TOPICS[snapshot.cluster_name] = snapshot.topics
    nodes: list[tuple[str, str]] = []
    for path, value in snapshot.zk_nodes:
        p = _str(path, "ZooKeeper path", problems, MAX_HOST_CHARS * 4)
        v = _str(value, f"ZooKeeper {str(path)[:80]}", problems, MAX_ZK_VALUE_CHARS)
        if p is not None and v is not None:
            nodes.append((p, v))
    snapshot.zk_nodes = nodes
    return problems.items


def _topic_ok(t: TopicSnapshot) -> bool:
    """Fast check of one topic row (the common case: a well-formed row, unchanged)."""
    return (
        type(t.topic) is str and valid_topic_name(t.topic)
        and (t.topic_id is None or (type(t.topic_id) is str and len(t.topic_id) <= MAX_ID_CHARS))
        and (t.zk_topic_id is None or (type(t.zk_topic_id) is str and len(t.zk_topic_id) <= MAX_ID_CHARS))
        and all(type(n) is int and 0 <= n <= INT32_MAX
                for n in (t.partitions, t.replication_factor, t.under_replicated, t.offline_partitions))
        and type(t.internal) is bool
    )


def summarize(problems: list[str]) -> str:
    """One line naming the first problems and how many there were."""
    shown = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
    more = f" (and {len(problems) - MAX_PROBLEMS_SHOWN} more)" if len(problems) > MAX_PROBLEMS_SHOWN else ""
    return f"invalid data from the cluster or ZooKeeper: {shown}{more}"
