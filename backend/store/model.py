"""Snapshot and alert dataclasses shared by the poller, the checks and the lake writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from backend.store.group_model import GroupSnapshot
from backend.store.inventory_model import InventorySnapshot
from backend.store.standards_model import StandardsSnapshot

STATUSES = ("ok", "degraded", "down", "auth_failed", "misrouted")
NO_DATA_STATUSES = frozenset({"down", "auth_failed"})
PROVENANCES = ("reported", "zookeeper", "guessed", "unknown")
MISSING_BROKER_ERROR = "not registered with the cluster"  # a broker ZooKeeper knows but the cluster does not list


@dataclass(slots=True)
class BrokerSnapshot:
    """One broker as seen in one poll."""

    broker_id: int
    host: str | None
    port: int | None
    rack: str | None = None
    is_controller: bool = False
    reachable: bool = False
    software_name: str | None = None
    software_version: str | None = None
    version_provenance: str = "unknown"
    version_min: str | None = None
    version_max: str | None = None
    version_confidence: str | None = None
    api_versions_json: str | None = None
    probe_ms: float | None = None
    error: str | None = None


@dataclass(slots=True)
class TopicSnapshot:
    """One topic as seen in one poll."""

    topic: str
    topic_id: str | None
    zk_topic_id: str | None = None
    partitions: int = 0
    replication_factor: int = 0
    internal: bool = False
    under_replicated: int = 0
    offline_partitions: int = 0


class ConfigValue(NamedTuple):
    """One broker config or topic override as stored; value is None when unset or withheld."""

    value: str | None
    source: str  # Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, ...
    read_only: bool = False
    sensitive: bool = False  # the broker marks it sensitive
    config_type: str | None = None
    withheld: str | None = None  # why the value is not kept: sensitive, password_type, key_rule, credential_shape, ...


@dataclass(slots=True)
class ConfigSnapshot:
    """A cluster's configuration as last read with DescribeConfigs: every broker's configs, each topic's overrides.

    A new object per collection (never mutated after): polls in between carry the same object, so an
    unchanged configuration costs the writer and the checks an identity test.
    """

    collected_at: datetime
    brokers: dict[int, dict[str, ConfigValue]] = field(default_factory=dict)
    topics: dict[str, dict[str, ConfigValue]] = field(default_factory=dict)  # overrides only (DYNAMIC_TOPIC_CONFIG)
    version: int | None = None  # DescribeConfigs version spoken
    errors: dict[str, str] = field(default_factory=dict)  # what could not be read ("broker 2", "topics"): kept as before
    duration_ms: float = 0.0


@dataclass(slots=True)
class ClusterSnapshot:
    """One cluster in one poll: status row plus its brokers, topics and ZooKeeper nodes."""

    cluster_name: str
    status: str
    polled_at: datetime
    poll_id: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    cluster_id: str | None = None
    zk_cluster_id: str | None = None
    controller_id: int | None = None
    brokers: list[BrokerSnapshot] = field(default_factory=list)
    topics: list[TopicSnapshot] = field(default_factory=list)
    zk_nodes: list[tuple[str, str]] = field(default_factory=list)
    missing_broker_ids: list[int] = field(default_factory=list)
    duration_ms: float = 0.0
    configs: ConfigSnapshot | None = None  # the last collected configuration (None: never read, or collection off)
    groups: GroupSnapshot | None = None  # the last read of its consumer groups (None: never read, or reading off)
    inventory: InventorySnapshot | None = None  # the last client inventory read from the brokers' JMX metrics
    standards: StandardsSnapshot | None = None  # the policies' results of this poll (None: no policy evaluated)

    @property
    def has_data(self) -> bool:
        """Whether the poll reached the cluster and returned brokers/topics."""
        return self.status not in NO_DATA_STATUSES

    @property
    def live_brokers(self) -> list[BrokerSnapshot]:
        """Brokers the cluster lists as registered (missing ones excluded)."""
        missing = set(self.missing_broker_ids)
        return [b for b in self.brokers if b.broker_id not in missing]

    @property
    def brokers_reachable(self) -> int:
        """Number of brokers the probe reached."""
        return sum(1 for b in self.brokers if b.reachable)

    @property
    def partition_count(self) -> int:
        """Total partitions over all topics."""
        return sum(t.partitions for t in self.topics)

    @property
    def under_replicated(self) -> int:
        """Under-replicated partitions over all topics."""
        return sum(t.under_replicated for t in self.topics)

    @property
    def offline_partitions(self) -> int:
        """Partitions without a leader over all topics."""
        return sum(t.offline_partitions for t in self.topics)


@dataclass(frozen=True, slots=True)
class Alert:
    """A fleet alert raised by a check."""

    rule: str
    severity: str
    cluster_name: str
    subject: str
    evidence: dict[str, Any]
    explanation: str
    doc_url: str


@dataclass(slots=True)
class FleetPoll:
    """One poll cycle over the whole fleet."""

    poll_id: str
    polled_at: datetime
    clusters: list[ClusterSnapshot]
    alerts: list[Alert]
    duration_ms: float
    # Set by run_poller when writing the poll to the lake failed (the poll's data is then not in the lake).
    write_error: str | None = None
    # (rule, cluster) pairs this poll could not judge (a policy without evidence): their open incidents are neither
    # refreshed nor resolved, as for a cluster without data.
    hold: set[tuple[str, str]] = field(default_factory=set)

    def cluster(self, name: str) -> ClusterSnapshot:
        """Return the snapshot of one cluster by name."""
        for snapshot in self.clusters:
            if snapshot.cluster_name == name:
                return snapshot
        raise KeyError(name)
