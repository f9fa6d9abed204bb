"""Broker and topic configurations of a cluster (DescribeConfigs, read-only), read at their own slower interval.

The poll asks for them when `settings.config_interval_s` has passed for a cluster (every broker
its own broker resource, one broker every topic in batches), alongside the per-broker probe and
within the poll's deadline. What a broker or a batch did not answer keeps its last known values
(and is named in the snapshot's errors). Values the broker marks sensitive, of type PASSWORD,
covered by the sensitive-key rules of backend.configs.sensitive, or shaped like a credential are
never kept: the entry keeps its name and source, the value is None and `withheld` says why.

Only what was asked is kept: resources the brokers add to an answer are dropped (`backend.kafka.answers`), and
topics whose names the Metadata validator refuses are never asked about. Every error text (the brokers' own
messages included) passes `safe_error_text` (the secret rules of values, cut to 4 KiB) before it is kept.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from backend.collect.probing import cluster_resolver
from backend.collect.schedule import ClusterSchedule
from backend.collect.validate import valid_topic_name
from backend.config import ClusterConfig, Settings
from backend.configs.sensitive import credential_shape, is_sensitive_key, kip1324_rule, safe_error_text
from backend.kafka import configs as kc
from backend.kafka import protocol as P
from backend.kafka.admin import NodeInfo
from backend.kafka.probe import ProbeSecurity, Resolver
from backend.store.model import ConfigSnapshot, ConfigValue

MAX_VALUE_CHARS = 16_384
_NAME = re.compile(r"[A-Za-z0-9._\-]{1,255}")
TOPIC_OVERRIDE = "DYNAMIC_TOPIC_CONFIG"
OVERRIDE_SOURCES = frozenset({TOPIC_OVERRIDE})


def withheld_reason(name: str, value: str | None, sensitive: bool, config_type: str | None) -> str | None:
    """Why a config's value must not be stored (None: it may be)."""
    if sensitive:
        return "sensitive"
    if config_type == "PASSWORD":
        return "password_type"
    if is_sensitive_key(name) or kip1324_rule(name, config_type) is not None:
        return "key_rule"
    if value is not None and credential_shape(value) is not None:
        return "credential_shape"
    if value is not None and len(value) > MAX_VALUE_CHARS:
        return "too_long"
    return None


def config_value(entry: kc.ConfigEntry) -> ConfigValue:
    """The stored form of one entry: the value only when no rule withholds it."""
    why = withheld_reason(entry.name, entry.value, entry.sensitive, entry.config_type)
    return ConfigValue(None if why else entry.value, entry.source, entry.read_only, entry.sensitive,
                       entry.config_type, why)


def _entries(entries: Sequence[kc.ConfigEntry], *, overrides_only: bool) -> tuple[dict[str, ConfigValue], int]:
    out: dict[str, ConfigValue] = {}
    refused = 0
    for entry in entries:
        if overrides_only and entry.source != TOPIC_OVERRIDE:
            continue
        if not _NAME.fullmatch(entry.name):
            refused += 1
            continue
        out[entry.name] = config_value(entry)
    return out, refused


class ConfigCollector(ClusterSchedule[ConfigSnapshot]):
    """When each cluster's configuration is due, and the last one read (merged: unanswered parts kept)."""

    def __init__(self) -> None:
        """Start with nothing read: every cluster is due at its first poll."""
        super().__init__()
        self._memos: dict[str, kc.ConfigsMemo] = {}
        self.stats = {"collections": 0, "answers_decoded": 0, "answers_reused": 0}

    def due(self, cluster_name: str, settings: Settings, now: float | None = None) -> bool:
        """Whether the cluster's configuration should be read in this poll."""
        return self._is_due(cluster_name, settings.config_interval_s, now)

    def forget(self) -> None:
        """Drop every schedule, stored reading and memo."""
        super().forget()
        with self._lock:
            self._memos.clear()

    def collect(self, cluster: ClusterConfig, settings: Settings, brokers: Sequence[NodeInfo],
                topics: Sequence[str], deadline: float, keep_brokers: Iterable[int] = ()) -> ConfigSnapshot:
        """Read every broker's configs and every topic's overrides now; merge with the last read; remember it.

        A broker that does not answer keeps its last known configs; so does one in `keep_brokers` (brokers the
        cluster still knows but does not list now, e.g. stopped with replicas assigned); the others are dropped.
        """
        started = time.monotonic()
        topics = [t for t in topics if valid_topic_name(t)]  # a name the Metadata validator refused is not asked
        with self._lock:
            previous = self._last.get(cluster.name)
            memo = self._memos.setdefault(cluster.name, kc.ConfigsMemo())
            self._next_due[cluster.name] = started + settings.config_interval_s
        security = ProbeSecurity.from_cluster(cluster)
        resolver = cluster_resolver(cluster.name)

        def timeout() -> float:
            return max(0.1, min(settings.request_timeout_s, deadline - time.monotonic()))

        def ask(node: NodeInfo) -> kc.ConfigsAnswer:
            return kc.describe_configs(node.host, node.port, [(P.RESOURCE_BROKER, str(node.broker_id))],
                                       security=security, timeout_s=timeout(), resolver=resolver)

        errors: dict[str, str] = {}
        brokers_out: dict[int, dict[str, ConfigValue]] = {}
        live = sorted(brokers, key=lambda n: n.broker_id)
        version: int | None = None
        workers = max(1, min(len(live), settings.probe_concurrency))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"configs-{cluster.name}"[:30]) as pool:
            topic_call = pool.submit(self._topics, live, topics, security, resolver, memo, deadline, settings)
            answers = list(pool.map(ask, live)) if live else []
            topics_out, topic_errors, topic_version, failed_topics = topic_call.result()
        for node, answer in zip(live, answers, strict=True):
            # The answer holds only the broker's own resource (what was asked): anything else was dropped.
            resource = answer.resources[0] if answer.ok and answer.resources else None
            notes = [n for n in (answer.answer_problem(),) if n]
            if resource is not None and resource.error is None:
                entries, refused = _entries(resource.entries, overrides_only=False)
                brokers_out[node.broker_id] = entries
                version = version or answer.version
                if refused:
                    notes.append(f"{refused} config names refused (not a config name)")
                if notes:
                    errors[f"broker {node.broker_id}"] = safe_error_text("; ".join(notes))
                continue
            why = answer.error or (resource.error if resource else "no answer") or "?"
            errors[f"broker {node.broker_id}"] = safe_error_text("; ".join([why, *notes]))
            if previous is not None and node.broker_id in previous.brokers:
                brokers_out[node.broker_id] = previous.brokers[node.broker_id]
        listed = {n.broker_id for n in live}
        for bid in sorted(set(keep_brokers) - listed):
            if previous is not None and bid in previous.brokers:
                brokers_out[bid] = previous.brokers[bid]
                errors[f"broker {bid}"] = "not listed by the cluster now (last known configs kept)"
        errors.update(topic_errors)
        version = version or topic_version
        before = previous.topics if previous else {}
        if topics_out is None:  # no broker answered for the topics: keep the last overrides of topics that still exist
            existing = set(topics)
            topics_out = {t: c for t, c in before.items() if t in existing}
        for topic in failed_topics:  # described with an error: keep what was known
            if topic in before:
                topics_out[topic] = before[topic]
        snapshot = ConfigSnapshot(collected_at=datetime.now(UTC), brokers=brokers_out, topics=topics_out,
                                  version=version, errors=errors, duration_ms=(time.monotonic() - started) * 1000)
        if previous is not None:
            # Unchanged parts keep the previous objects, so an unchanged configuration compares by identity.
            if snapshot.brokers == previous.brokers:
                snapshot.brokers = previous.brokers
            if snapshot.topics == previous.topics:
                snapshot.topics = previous.topics
        with self._lock:
            self._last[cluster.name] = snapshot
            self.stats["collections"] += 1
        return snapshot

    def _topics(self, live: Sequence[NodeInfo], topics: Sequence[str], security: ProbeSecurity, resolver: Resolver,
                memo: kc.ConfigsMemo, deadline: float, settings: Settings
                ) -> tuple[dict[str, dict[str, ConfigValue]] | None, dict[str, str], int | None, list[str]]:
        """Every topic's overrides from the first broker that answers (None when none did), and the topics that failed."""
        if not topics:
            return {}, {}, None, []
        resources = [(P.RESOURCE_TOPIC, t) for t in sorted(topics)]
        failures = []
        for node in live:
            left = deadline - time.monotonic()
            if left <= 0.1:
                failures.append("poll deadline reached")
                break
            answer = kc.describe_configs(node.host, node.port, resources, security=security,
                                         timeout_s=min(left, settings.request_timeout_s * 3),
                                         batch_size=settings.config_batch_topics, memo=memo, resolver=resolver,
                                         topic_sources=OVERRIDE_SOURCES)
            with self._lock:
                self.stats["answers_decoded"] += answer.decoded
                self.stats["answers_reused"] += answer.reused
            if not answer.ok:
                failures.append(f"broker {node.broker_id}: {answer.error}")
                continue
            memo.keep_only(answer.batch_keys)
            out: dict[str, dict[str, ConfigValue]] = {}
            errors: dict[str, str] = {}
            failed: list[str] = []
            refused = 0
            for resource in answer.resources:
                if resource.error is not None:
                    if not resource.error.startswith("UNKNOWN_TOPIC_OR_PARTITION"):  # else: deleted since Metadata
                        failed.append(resource.name)
                    continue
                entries, bad = _entries(resource.entries, overrides_only=True)
                refused += bad
                if entries:
                    out[resource.name] = entries
            if failed:
                errors["topics"] = f"{len(failed)} topics could not be described (e.g. {failed[0]})"
            if refused:
                errors["topic configs"] = f"{refused} config names refused (not a config name)"
            if problem := answer.answer_problem():
                errors["topic answer"] = problem
            return out, {k: safe_error_text(v) for k, v in errors.items()}, answer.version, failed
        return None, {"topics": safe_error_text("; ".join(failures) or "no broker to ask")}, None, []
