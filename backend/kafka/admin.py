"""Read-only confluent-kafka AdminClient wrapper: cluster description and topics, all with timeouts."""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import hashlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

if TYPE_CHECKING:  # the librdkafka helper process imports this module: it stays free of pandas and pyarrow
    from backend.config import ClusterConfig

TOPIC_BATCH_SIZE = 1000
_KAFKA_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_ZERO_ID = "AAAAAAAAAAAAAAAAAAAAAA"
LIBRDKAFKA_LOG = logging.getLogger("backend.kafka.librdkafka")
_AUTH_CODES = {
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
}
_AUTH_HINTS = (
    "authentication failed",
    "sasl authentication",
    "invalid credentials",
    "ssl handshake failed",
)


class AdminCallError(Exception):
    """A failed admin call; `kind` is "auth" (authentication), "crashed" (the librdkafka helper died), else "error"."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A broker as DescribeCluster lists it."""

    broker_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    """DescribeCluster: cluster id, controller and live brokers."""

    cluster_id: str | None
    controller_id: int | None
    brokers: list[NodeInfo]
    authorized_operations: list[str] | None


@dataclass(frozen=True, slots=True)
class MetadataView:
    """Metadata for all topics: cluster id, controller, brokers and topic names."""

    cluster_id: str | None
    controller_id: int | None
    brokers: list[NodeInfo]
    topic_names: list[str]


@dataclass(slots=True)
class TopicInfo:
    """A topic with its id and partition health."""

    topic: str
    topic_id: str | None
    internal: bool
    partitions: int
    replication_factor: int
    under_replicated: int
    offline_partitions: int
    replica_broker_ids: set[int] = field(default_factory=set)


@dataclass(slots=True)
class TopicListing:
    """All topics of a cluster, and the topics whose description failed (name -> error)."""

    topics: list[TopicInfo]
    failed: dict[str, str]


def normalize_topic_id(value: Any) -> str | None:
    """Return a topic id as Kafka prints it (URL-safe base64, no padding); None for null/zero ids."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    if len(text) == 22 and _KAFKA_ID_CHARS.issuperset(text):
        return None if text == _ZERO_ID else text  # already Kafka's form (the common case)
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return text
    if len(raw) != 16:
        return text
    if raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def is_auth_error(error: object) -> bool:
    """Return whether a KafkaError/exception/text is an authentication failure."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(kafka_error, KafkaError) and kafka_error.code() in _AUTH_CODES:
        return True
    text = str(kafka_error).lower()
    return any(hint in text for hint in _AUTH_HINTS)


def describe_error(error: object) -> str:
    """Return a one-line error text from a KafkaException/KafkaError/other exception."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(kafka_error, KafkaError):
        return f"{kafka_error.name()}: {kafka_error.str()}"
    return f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)


class ClusterAdmin:
    """One AdminClient for one cluster, reused across polls; remembers recent client-level errors."""

    def __init__(self, cluster: ClusterConfig | None, request_timeout_s: float = 10.0, *,
                 name: str | None = None, conf: dict[str, Any] | None = None) -> None:
        """Create the AdminClient for a cluster, or for `name` from a librdkafka `conf` (connects lazily)."""
        if cluster is not None:
            name, conf = cluster.name, cluster.librdkafka_config(request_timeout_s)
        if name is None or conf is None:
            raise ValueError("ClusterAdmin needs a cluster, or a name and a librdkafka configuration")
        self.cluster_name = name
        self._errors: deque[KafkaError] = deque(maxlen=20)
        self._lock = threading.Lock()
        conf = dict(conf)
        conf.update(
            {
                "error_cb": self._on_error,
                "client.id": "fleetview-poller",
                "reconnect.backoff.max.ms": 2000,
                "log_level": 2,
            }
        )
        conf["logger"] = LIBRDKAFKA_LOG
        self.client = AdminClient(conf)

    def _on_error(self, error: KafkaError) -> None:
        with self._lock:
            self._errors.append(error)

    def paused(self) -> str | None:
        """Why librdkafka is not used for this cluster now (never, in process: None)."""
        return None

    def resume(self) -> None:
        """End a pause early (nothing to do in process)."""

    def take_errors(self) -> list[KafkaError]:
        """Return and forget the client-level errors seen since the last call."""
        self.client.poll(0)
        with self._lock:
            errors = list(self._errors)
            self._errors.clear()
        return errors

    def describe_cluster(self, timeout_s: float) -> ClusterDescription:
        """DescribeCluster with authorized operations; raise AdminCallError on failure or timeout."""
        future = self.client.describe_cluster(include_authorized_operations=True, request_timeout=timeout_s)
        result = self._wait(future, timeout_s, "DescribeCluster")
        ops = result.authorized_operations
        return ClusterDescription(
            cluster_id=result.cluster_id,
            controller_id=result.controller.id if result.controller is not None else None,
            brokers=sorted(
                (NodeInfo(n.id, n.host, n.port, n.rack) for n in result.nodes),
                key=lambda n: n.broker_id,
            ),
            authorized_operations=[getattr(op, "name", str(op)) for op in ops] if ops else None,
        )

    def metadata(self, timeout_s: float) -> MetadataView:
        """A fresh Metadata request for all topics (also refreshes the client's controller view)."""
        try:
            metadata = self.client.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise self._call_error(exc, "Metadata") from None
        brokers = sorted(
            (NodeInfo(int(b.id), str(b.host), int(b.port), None) for b in metadata.brokers.values()),
            key=lambda n: n.broker_id,
        )
        controller = metadata.controller_id
        return MetadataView(
            cluster_id=metadata.cluster_id,
            controller_id=controller if controller is not None and controller >= 0 else None,
            brokers=brokers,
            topic_names=sorted(metadata.topics),
        )

    def list_topic_names(self, timeout_s: float) -> list[str]:
        """Metadata for all topics; return their names."""
        return self.metadata(timeout_s).topic_names

    def describe_topics(
        self,
        names: Iterable[str],
        timeout_s: float,
        *,
        batch_size: int = TOPIC_BATCH_SIZE,
        deadline: float | None = None,
    ) -> TopicListing:
        """Describe topics in concurrent batches; topics that fail are listed in `failed`."""
        names = list(names)
        futures: dict[str, Any] = {}
        for start in range(0, len(names), batch_size):
            batch = names[start : start + batch_size]
            futures.update(self.client.describe_topics(TopicCollection(batch), request_timeout=timeout_s))
        topics: list[TopicInfo] = []
        failed: dict[str, str] = {}
        end = min(deadline, time.monotonic() + timeout_s) if deadline else time.monotonic() + timeout_s
        concurrent.futures.wait(futures.values(), timeout=max(0.05, end - time.monotonic()))
        for name, future in futures.items():
            if not future.done():
                failed[name] = f"DescribeTopics timed out after {timeout_s:g}s"
                continue
            try:
                description = future.result()
            except KafkaException as exc:
                kafka_error = exc.args[0] if exc.args else None
                if isinstance(kafka_error, KafkaError) and kafka_error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    continue  # deleted between listing and describing
                failed[name] = describe_error(exc)
                continue
            topics.append(_topic_info(description))
        return TopicListing(topics=topics, failed=failed)

    def _wait(self, future: Any, timeout_s: float, what: str) -> Any:
        try:
            return future.result(timeout=timeout_s + 1.0)
        except KafkaException as exc:
            raise self._call_error(exc, what) from None
        except TimeoutError:
            raise self._call_error(None, what, f"{what} timed out after {timeout_s:g}s") from None

    def _call_error(self, exc: KafkaException | None, what: str, fallback: str = "") -> AdminCallError:
        client_errors = self.take_errors()
        auth = (exc is not None and is_auth_error(exc)) or any(is_auth_error(e) for e in client_errors)
        parts = [f"{what} failed: {describe_error(exc)}" if exc is not None else fallback]
        if client_errors:
            parts.append("client: " + describe_error(client_errors[-1]))
        return AdminCallError("; ".join(parts), kind="auth" if auth else "error")


def topic_info(name: str, topic_id: Any, internal: bool,
               partitions: Iterable[tuple[int, Sequence[int], int]]) -> TopicInfo:
    """A TopicInfo from each partition's (leader id, replica ids, ISR size); a leader below 0 is offline."""
    replicas_max = under = offline = count = 0
    replica_ids: set[int] = set()
    for leader, replicas, isr_size in partitions:
        count += 1
        replica_ids.update(replicas)
        replicas_max = max(replicas_max, len(replicas))
        if leader < 0:
            offline += 1
        if isr_size < len(replicas):
            under += 1
    return TopicInfo(
        topic=name,
        topic_id=normalize_topic_id(topic_id),
        internal=bool(internal),
        partitions=count,
        replication_factor=replicas_max,
        under_replicated=under,
        offline_partitions=offline,
        replica_broker_ids=replica_ids,
    )


def _topic_info(description: Any) -> TopicInfo:
    return topic_info(
        description.name,
        description.topic_id,
        description.is_internal,
        (
            (-1 if p.leader is None else p.leader.id, [node.id for node in p.replicas or []], len(p.isr or []))
            for p in description.partitions or []
        ),
    )


class AdminClientCache:
    """One ClusterAdmin per cluster name, rebuilt when the cluster's configuration changes."""

    def __init__(self) -> None:
        """Create an empty cache."""
        self._clients: dict[str, tuple[str, ClusterAdmin]] = {}
        self._lock = threading.Lock()

    def get(self, cluster: ClusterConfig, request_timeout_s: float) -> ClusterAdmin:
        """Return the cached ClusterAdmin for a cluster, creating it on first use."""
        fingerprint = _config_fingerprint(cluster, request_timeout_s)
        with self._lock:
            cached = self._clients.get(cluster.name)
            if cached is not None and cached[0] == fingerprint:
                return cached[1]
            admin = ClusterAdmin(cluster, request_timeout_s)
            self._clients[cluster.name] = (fingerprint, admin)
            return admin

    def names(self) -> list[str]:
        """Return the cluster names with a cached client."""
        with self._lock:
            return sorted(self._clients)

    def clear(self) -> None:
        """Drop every cached client."""
        with self._lock:
            self._clients.clear()


def _config_fingerprint(cluster: ClusterConfig, request_timeout_s: float) -> str:
    return config_fingerprint(cluster.librdkafka_config(request_timeout_s))


def config_fingerprint(conf: dict[str, Any]) -> str:
    """A digest of a librdkafka configuration (so the secret is never held as text outside the client config)."""
    return hashlib.sha256(json.dumps(conf, sort_keys=True, default=str).encode()).hexdigest()
