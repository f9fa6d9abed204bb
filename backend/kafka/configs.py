"""DescribeConfigs (api key 32, read-only) asked of one broker: its own configuration and topics', in batches.

A broker answers DescribeConfigs for its own broker resource only (Kafka refuses another broker's id),
so the caller asks every broker for itself; topic resources can go to any broker. Topics are sent
in batches; an answer with the same bytes as the last answer to the same batch is not decoded again
(`ConfigsMemo`), so an unchanged cluster of 10,000 topics costs the transfer and a digest.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.kafka import probe
from backend.kafka import protocol as P
from backend.kafka.answers import Checked, only_requested

CLIENT_ID = "fleetview-configs"
DEFAULT_BATCH = 200
# 200 topics x ~40 entries x ~60 bytes is about 0.5 MB; the cap leaves room for long values.
MAX_CONFIGS_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_CONFIGS_ELEMENTS = MAX_CONFIGS_RESPONSE_BYTES // 4


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One configuration as the broker describes it; value is None for sensitive or unset configs."""

    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name, e.g. STATIC_BROKER_CONFIG (v0 answers: DEFAULT_CONFIG or UNKNOWN)
    read_only: bool
    sensitive: bool
    config_type: str | None = None  # v3+
    synonyms: tuple[tuple[str, str | None, str], ...] = ()  # (name, value, source), asked only with synonyms


@dataclass(frozen=True, slots=True)
class ResourceConfigs:
    """The answer for one resource (a broker id or a topic name)."""

    resource_type: int
    name: str
    error: str | None
    entries: tuple[ConfigEntry, ...]


@dataclass
class ConfigsAnswer:
    """Outcome of asking one broker; a failure is data (ok False, error, error_kind), never an exception."""

    host: str
    port: int
    ok: bool = False
    error: str | None = None
    error_kind: str | None = None
    version: int | None = None
    resources: list[ResourceConfigs] = field(default_factory=list)
    requests: int = 0
    decoded: int = 0  # answers decoded
    reused: int = 0  # answers identical to the last one of their batch, not decoded again
    batch_keys: set[bytes] = field(default_factory=set)  # the memo keys of the batches asked
    unrequested: int = 0  # resources in the answers that were not asked for (dropped)
    repeated: int = 0  # resources answered twice (the second dropped)
    unrequested_sample: str | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)

    def answer_problem(self) -> str | None:
        """What the broker answered beyond the question (None: nothing), as one line."""
        return Checked([], self.unrequested, self.repeated, self.unrequested_sample).problem("config resources")


class ConfigsMemo:
    """Per batch of resources, the last answer (its digest) and the resources parsed from it."""

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._memos: dict[bytes, tuple[probe.ResponseMemo, list[ResourceConfigs]]] = {}

    def get(self, key: bytes) -> tuple[probe.ResponseMemo, list[ResourceConfigs]]:
        """The memo of one batch (created empty on first use)."""
        with self._lock:
            found = self._memos.get(key)
            if found is None:
                found = (probe.ResponseMemo(), [])
                self._memos[key] = found
            return found

    def put(self, key: bytes, memo: probe.ResponseMemo, parsed: list[ResourceConfigs]) -> None:
        """Remember the parsed resources of a freshly decoded answer."""
        with self._lock:
            self._memos[key] = (memo, parsed)

    def keep_only(self, keys: set[bytes]) -> None:
        """Forget batches that were not asked for in the last round (topics deleted, batches moved)."""
        with self._lock:
            for key in [k for k in self._memos if k not in keys]:
                del self._memos[key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._memos)


def resource_label(resource: ResourceConfigs) -> str:
    """'topic orders', 'broker 2': a resource as the problem lines name it."""
    kind = {P.RESOURCE_TOPIC: "topic", P.RESOURCE_BROKER: "broker"}.get(resource.resource_type,
                                                                        f"resource type {resource.resource_type}")
    return f"{kind} {resource.name}"


def batch_key(version: int, synonyms: bool, batch: Sequence[tuple[int, str]],
              sources: frozenset[int] | None = None) -> bytes:
    """The memo key of one batch of resources (with what is kept of its answer)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{version}|{int(synonyms)}|{sorted(sources) if sources else ''}".encode())
    for kind, name in batch:
        digest.update(f"\x1f{kind}\x1e{name}".encode("utf-8", "surrogatepass"))
    return digest.digest()


def _entry(raw: dict[str, Any], version: int, synonyms: bool) -> ConfigEntry:
    if version >= 1:
        source = P.CONFIG_SOURCES.get(raw.get("config_source", -1), "UNKNOWN")
    else:
        source = "DEFAULT_CONFIG" if raw.get("is_default") else "UNKNOWN"
    return ConfigEntry(
        name=raw["name"],
        value=raw.get("value"),
        source=source,
        read_only=bool(raw.get("read_only")),
        sensitive=bool(raw.get("is_sensitive")),
        config_type=P.DESCRIBE_CONFIGS_TYPES.get(raw.get("config_type", 0)) if version >= 3 else None,
        synonyms=tuple((s["name"], s.get("value"), P.CONFIG_SOURCES.get(s.get("source", 0), "UNKNOWN"))
                       for s in raw.get("synonyms") or ()) if synonyms else (),
    )


def _parse(body: dict[str, Any], version: int, synonyms: bool,
           sources: frozenset[int] | None = None) -> list[ResourceConfigs]:
    out = []
    for result in body.get("results") or []:
        code = result.get("error_code") or 0
        error = None
        if code:
            error = P.error_name(code) + (f": {result['error_message']}" if result.get("error_message") else "")
        configs = result.get("configs") or ()
        if sources is not None and version >= 1 and result.get("resource_type") == P.RESOURCE_TOPIC:
            configs = [c for c in configs if c.get("config_source") in sources]
        entries = tuple(_entry(c, version, synonyms) for c in configs)
        out.append(ResourceConfigs(int(result.get("resource_type", 0)), str(result.get("resource_name", "")),
                                   error, entries))
    return out


def describe_configs(host: str, port: int, resources: Sequence[tuple[int, str]], *,
                     security: probe.ProbeSecurity | None = None, timeout_s: float = 10.0,
                     batch_size: int = DEFAULT_BATCH, include_synonyms: bool = False,
                     client_id: str = CLIENT_ID, memo: ConfigsMemo | None = None,
                     resolver: probe.Resolver | None = None,
                     max_response_bytes: int = MAX_CONFIGS_RESPONSE_BYTES,
                     topic_sources: frozenset[str] | None = None) -> ConfigsAnswer:
    """Ask one broker for the configs of `resources` ((P.RESOURCE_BROKER, "1"), (P.RESOURCE_TOPIC, "orders"), ...).

    One connection, ApiVersions (and SASL), then DescribeConfigs at the highest version both sides
    speak, `batch_size` resources per request, all within timeout_s. Resources answered before a
    failure are kept in the answer. topic_sources: keep only topic entries of these ConfigSource names
    (e.g. {"DYNAMIC_TOPIC_CONFIG"}: the overrides), from v1 answers.
    """
    sec = security or probe.ProbeSecurity()
    start = time.monotonic()
    deadline = start + timeout_s
    answer = ConfigsAnswer(host=host, port=port)
    secrets = (sec.password, sec.ssl_key_password)
    ctx, problems = probe.tls_context(sec)
    if problems:
        answer.error, answer.error_kind = "; ".join(problems), "config"
        return answer
    session = probe.ProbeResult(host=host, port=port)
    codes = {c for c, name in P.CONFIG_SOURCES.items() if name in topic_sources} if topic_sources else None
    sources = frozenset(codes) if codes is not None else None
    try:
        sock, conn = probe.open_connection(host, port, sec, ctx, deadline, client_id, session, resolver=resolver)
        try:
            offered = session.api_versions.get(P.API_DESCRIBE_CONFIGS)
            ours = P.supported_versions(P.API_DESCRIBE_CONFIGS)
            if offered is None or offered[0] > ours[1]:
                raise probe.ProbeFailure("unsupported", "the broker offers no DescribeConfigs version this client speaks")
            version = min(offered[1], ours[1])
            answer.version = version
            cap = max(P.MAX_SMALL_RESPONSE_BYTES, max_response_bytes)
            elements = max(P.MAX_SMALL_RESPONSE_ELEMENTS, cap // 4)
            step = max(1, batch_size)
            for first in range(0, len(resources), step):
                batch = resources[first:first + step]
                body = {"resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}
                                      for kind, name in batch],
                        "include_synonyms": include_synonyms, "include_documentation": False}
                key = batch_key(version, include_synonyms, batch, sources)
                answer.batch_keys.add(key)
                response_memo, parsed = memo.get(key) if memo is not None else (probe.ResponseMemo(), [])
                before = response_memo.body
                decoded = conn.request(P.API_DESCRIBE_CONFIGS, version, body, memo=response_memo,
                                       cap=cap, max_elements=elements)
                answer.requests += 1
                if memo is not None and decoded is before and parsed:
                    answer.reused += 1
                else:
                    parsed = _parse(decoded, version, include_synonyms, sources)
                    answer.decoded += 1
                    if memo is not None:
                        memo.put(key, response_memo, parsed)
                # Only the resources of this batch: a broker may add others (any name, any length).
                checked = only_requested(batch, parsed, key=lambda r: (r.resource_type, r.name), label=resource_label)
                answer.resources.extend(checked.kept)
                answer.unrequested += checked.unrequested
                answer.repeated += checked.repeated
                answer.unrequested_sample = answer.unrequested_sample or checked.sample
        finally:
            sock.close()
        answer.ok = True
    except probe.ReadOnlyViolation:
        raise
    except (probe.ProbeFailure, OSError, P.ProtocolError, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as exc:
        kind, message = probe.failure_of(exc, host, port, timeout_s)
        answer.error_kind, answer.error = kind, probe.scrub_secrets(message, secrets)
    answer.timings_ms["total"] = round((time.monotonic() - start) * 1000, 3)
    return answer
