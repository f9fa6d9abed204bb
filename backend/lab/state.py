"""Persistent lab state (JSON): cluster ids, topic ids and last ports, stable across restarts."""

from __future__ import annotations

import json
import os
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.kafka.protocol import uuid_to_kafka_str
from backend.lab.model import ClusterSpec, TopicSpec

STATE_VERSION = 1
INTERNAL_TOPIC_PARTITIONS = 50


def new_kafka_id() -> str:
    """A random id in Kafka's text form (22-char URL-safe base64), never starting with '-'."""
    while True:
        text = uuid_to_kafka_str(uuid.uuid4())
        if not text.startswith("-"):
            return text


@dataclass
class TopicState:
    """A topic as the lab holds it."""

    name: str
    topic_id: str
    partitions: int
    replication_factor: int
    internal: bool = False


def partition_assignment(topic: TopicState, broker_ids: Sequence[int]) -> dict[int, list[int]]:
    """Round-robin replica placement: partition p starts at broker p mod n (stable across restarts)."""
    ids = sorted(broker_ids)
    n = len(ids)
    rf = min(topic.replication_factor, n)
    return {p: [ids[(p + j) % n] for j in range(rf)] for p in range(topic.partitions)}


@dataclass
class ClusterState:
    """Everything about one cluster that must survive a restart."""

    cluster_id: str
    topics: dict[str, TopicState] = field(default_factory=dict)
    deleted_topics: set[str] = field(default_factory=set)
    ports: dict[int, int] = field(default_factory=dict)


class LabState:
    """The state file; every mutation is saved at once (atomic rename)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.clusters: dict[str, ClusterState] = {}
        self._lock = threading.RLock()
        # Bumped on every change of topics or ids; keys the brokers' cached Metadata answers.
        self.generation = 0

    @classmethod
    def load(cls, path: Path) -> LabState:
        """Read the state file, or start empty when it does not exist."""
        state = cls(path)
        if not state.path.exists():
            return state
        try:
            raw = json.loads(state.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"lab state file {state.path} is unreadable: {exc}") from exc
        for name, c in raw.get("clusters", {}).items():
            state.clusters[name] = ClusterState(
                cluster_id=c["cluster_id"],
                topics={t["name"]: TopicState(**t) for t in c.get("topics", [])},
                deleted_topics=set(c.get("deleted_topics", [])),
                ports={int(k): int(v) for k, v in c.get("ports", {}).items()},
            )
        return state

    def to_json(self) -> dict[str, Any]:
        """The JSON document written to disk."""
        return {
            "version": STATE_VERSION,
            "clusters": {
                name: {
                    "cluster_id": c.cluster_id,
                    "topics": [vars(t) for t in sorted(c.topics.values(), key=lambda t: t.name)],
                    "deleted_topics": sorted(c.deleted_topics),
                    "ports": {str(k): v for k, v in sorted(c.ports.items())},
                }
                for name, c in sorted(self.clusters.items())
            },
        }

    def save(self) -> None:
        """Write the state file atomically."""
        with self._lock:
            self.generation += 1
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = json.dumps(self.to_json(), indent=1, sort_keys=True)
            fd, tmp = tempfile.mkstemp(prefix=".state-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def ensure_cluster(self, spec: ClusterSpec) -> ClusterState:
        """Create the cluster's state on first sight and add topics new to lab.toml."""
        with self._lock:
            self.generation += 1
            cs = self.clusters.get(spec.name)
            if cs is None:
                cs = ClusterState(cluster_id=new_kafka_id())
                self.clusters[spec.name] = cs
            rf_internal = min(3, len(spec.brokers))
            for name in spec.profile.internal_topics:
                if name not in cs.topics:
                    cs.topics[name] = TopicState(name, new_kafka_id(), INTERNAL_TOPIC_PARTITIONS, rf_internal, True)
            for t in spec.topics:
                if t.name not in cs.topics and t.name not in cs.deleted_topics:
                    cs.topics[t.name] = TopicState(t.name, new_kafka_id(), t.partitions, t.replication_factor)
            return cs

    def create_topic(self, cluster: str, topic: TopicSpec) -> TopicState:
        """Add a topic with a fresh id; ValueError if it exists."""
        with self._lock:
            cs = self.clusters[cluster]
            if topic.name in cs.topics:
                raise ValueError(f"topic {topic.name!r} already exists in cluster {cluster!r}")
            ts = TopicState(topic.name, new_kafka_id(), topic.partitions, topic.replication_factor)
            cs.topics[topic.name] = ts
            cs.deleted_topics.discard(topic.name)
            self.save()
            return ts

    def delete_topic(self, cluster: str, name: str) -> TopicState:
        """Remove a topic; KeyError if it does not exist."""
        with self._lock:
            cs = self.clusters[cluster]
            ts = cs.topics.pop(name)
            cs.deleted_topics.add(name)
            self.save()
            return ts

    def recreate_topic(self, cluster: str, name: str) -> TopicState:
        """Give an existing topic a new id (delete + create under the same name)."""
        with self._lock:
            cs = self.clusters[cluster]
            old = cs.topics[name]
            ts = TopicState(name, new_kafka_id(), old.partitions, old.replication_factor, old.internal)
            cs.topics[name] = ts
            self.save()
            return ts

    def topics(self, cluster: str) -> list[TopicState]:
        """A snapshot of the cluster's topics, sorted by name."""
        with self._lock:
            return sorted(self.clusters[cluster].topics.values(), key=lambda t: t.name)
