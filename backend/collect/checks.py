"""Fleet checks: pure functions from (previous, current) cluster snapshots to alerts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from backend.collect.client_checks import inventory_alerts
from backend.collect.config_checks import config_alerts
from backend.collect.group_checks import group_alerts
from backend.store.model import Alert, BrokerSnapshot, ClusterSnapshot

KIP78_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-78%3A+Cluster+Id"
KIP516_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-516%3A+Topic+Identifiers"
KIP885_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-885%3A+Expose+Broker%27s+Name+and+Version+to+Clients"
REPLICATION_URL = "https://kafka.apache.org/documentation/#replication"
BASIC_OPS_URL = "https://kafka.apache.org/documentation/#basic_ops"
CONTROLLER_URL = "https://kafka.apache.org/documentation/#kraft"

# Provenances that state a fact; guesses are never compared as if they were versions.
FACT_PROVENANCES = frozenset({"reported", "zookeeper"})
SAMPLE_LIMIT = 20

RULES: tuple[str, ...] = (
    "zk_cluster_id_mismatch",
    "duplicate_cluster_id",
    "version_skew",
    "broker_upgraded",
    "topic_recreated",
    "zk_topic_id_mismatch",
    "topic_created",
    "topic_deleted",
    "controller_changed",
    "broker_missing",
    "under_replicated",
    "offline_partitions",
)


def _version_of(broker: BrokerSnapshot) -> tuple[str | None, str | None] | None:
    if not broker.reachable or broker.version_provenance not in FACT_PROVENANCES:
        return None
    if broker.software_version is None and broker.software_name is None:
        return None
    return (broker.software_name, broker.software_version)


def _label(version: tuple[str | None, str | None]) -> str:
    return f"{version[0] or '?'} {version[1] or '?'}"


def zk_cluster_id_mismatch(current: ClusterSnapshot) -> list[Alert]:
    """KIP-78: the id in ZooKeeper differs from the id the brokers report (misrouted cluster)."""
    if not (current.zk_cluster_id and current.cluster_id) or current.zk_cluster_id == current.cluster_id:
        return []
    return [
        Alert(
            rule="zk_cluster_id_mismatch",
            severity="critical",
            cluster_name=current.cluster_name,
            subject="cluster id",
            evidence={
                "metadata_cluster_id": current.cluster_id,
                "zk_cluster_id": current.zk_cluster_id,
            },
            explanation=(
                f"ZooKeeper /cluster/id is {current.zk_cluster_id} but the brokers report "
                f"{current.cluster_id}: the bootstrap servers and the ZooKeeper path point at different clusters."
            ),
            doc_url=KIP78_URL,
        )
    ]


def duplicate_cluster_id(clusters: Iterable[ClusterSnapshot]) -> list[Alert]:
    """Two configured clusters report the same cluster id (one is probably configured twice)."""
    by_id: dict[str, list[str]] = defaultdict(list)
    for snapshot in clusters:
        if snapshot.has_data and snapshot.cluster_id:
            by_id[snapshot.cluster_id].append(snapshot.cluster_name)
    alerts = []
    for cluster_id, names in sorted(by_id.items()):
        if len(names) < 2:
            continue
        names = sorted(names)
        for name in names:
            alerts.append(
                Alert(
                    rule="duplicate_cluster_id",
                    severity="critical",
                    cluster_name=name,
                    subject=f"cluster id {cluster_id}",
                    evidence={"cluster_id": cluster_id, "clusters": names},
                    explanation=f"Clusters {', '.join(names)} all report cluster id {cluster_id}: they are one cluster.",
                    doc_url=KIP78_URL,
                )
            )
    return alerts


def version_skew(current: ClusterSnapshot) -> list[Alert]:
    """Brokers of one cluster run different software or versions (facts only, never guesses)."""
    versions: dict[tuple[str | None, str | None], list[int]] = defaultdict(list)
    for broker in current.brokers:
        version = _version_of(broker)
        if version is not None:
            versions[version].append(broker.broker_id)
    if len(versions) < 2:
        return []
    evidence = {_label(v): sorted(ids) for v, ids in sorted(versions.items(), key=lambda kv: str(kv[0]))}
    names = {v[0] for v in versions}
    what = "different software" if len(names) > 1 else "different versions"
    return [
        Alert(
            rule="version_skew",
            severity="warning",
            cluster_name=current.cluster_name,
            subject="broker versions",
            evidence={"brokers_by_version": evidence},
            explanation=f"Brokers run {what}: " + "; ".join(f"{k} on {v}" for k, v in evidence.items()) + ".",
            doc_url=KIP885_URL,
        )
    ]


def broker_upgraded(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """A broker's software name or version changed since the previous poll."""
    if previous is None:
        return []
    before = {b.broker_id: _version_of(b) for b in previous.brokers}
    alerts = []
    for broker in current.brokers:
        now = _version_of(broker)
        old = before.get(broker.broker_id)
        if now is None or old is None or now == old:
            continue
        alerts.append(
            Alert(
                rule="broker_upgraded",
                severity="info",
                cluster_name=current.cluster_name,
                subject=f"broker {broker.broker_id}",
                evidence={
                    "broker_id": broker.broker_id,
                    "old_software_name": old[0],
                    "old_software_version": old[1],
                    "new_software_name": now[0],
                    "new_software_version": now[1],
                },
                explanation=f"Broker {broker.broker_id} changed from {_label(old)} to {_label(now)}.",
                doc_url=KIP885_URL,
            )
        )
    return alerts


def topic_recreated(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """KIP-516: a topic name now has a different topic id (deleted and recreated between polls)."""
    if previous is None or previous.topics is current.topics:  # the poller reuses unchanged rows
        return []
    old_ids = {t.topic: t.topic_id for t in previous.topics if t.topic_id}
    alerts = []
    for topic in current.topics:
        old = old_ids.get(topic.topic)
        if old is None or topic.topic_id is None or topic.topic_id == old:
            continue
        alerts.append(
            Alert(
                rule="topic_recreated",
                severity="warning",
                cluster_name=current.cluster_name,
                subject=topic.topic,
                evidence={
                    "topic": topic.topic,
                    "old_topic_id": old,
                    "new_topic_id": topic.topic_id,
                },
                explanation=(
                    f"Topic {topic.topic} was deleted and recreated: its id changed from {old} to "
                    f"{topic.topic_id}; consumers and their committed offsets refer to the old topic."
                ),
                doc_url=KIP516_URL,
            )
        )
    return alerts


def zk_topic_id_mismatch(current: ClusterSnapshot) -> list[Alert]:
    """KIP-516: the topic id in ZooKeeper differs from the one the brokers report."""
    alerts = []
    for topic in current.topics:
        if not (topic.zk_topic_id and topic.topic_id) or topic.zk_topic_id == topic.topic_id:
            continue
        alerts.append(
            Alert(
                rule="zk_topic_id_mismatch",
                severity="critical",
                cluster_name=current.cluster_name,
                subject=topic.topic,
                evidence={
                    "topic": topic.topic,
                    "metadata_topic_id": topic.topic_id,
                    "zk_topic_id": topic.zk_topic_id,
                },
                explanation=(
                    f"Topic {topic.topic} has id {topic.topic_id} in Metadata but {topic.zk_topic_id} in ZooKeeper /brokers/topics."
                ),
                doc_url=KIP516_URL,
            )
        )
    return alerts


def topic_created(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """Topics present now that were absent in the previous poll."""
    if previous is None or previous.topics is current.topics:  # the poller reuses unchanged rows
        return []
    before = {t.topic for t in previous.topics}
    return [
        Alert(
            rule="topic_created",
            severity="info",
            cluster_name=current.cluster_name,
            subject=t.topic,
            evidence={
                "topic": t.topic,
                "topic_id": t.topic_id,
                "partitions": t.partitions,
            },
            explanation=f"Topic {t.topic} appeared with {t.partitions} partitions.",
            doc_url=BASIC_OPS_URL,
        )
        for t in current.topics
        if t.topic not in before
    ]


def topic_deleted(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """Topics present in the previous poll that are gone now."""
    if previous is None or previous.topics is current.topics:  # the poller reuses unchanged rows
        return []
    now = {t.topic for t in current.topics}
    return [
        Alert(
            rule="topic_deleted",
            severity="info",
            cluster_name=current.cluster_name,
            subject=t.topic,
            evidence={"topic": t.topic, "topic_id": t.topic_id},
            explanation=f"Topic {t.topic} (id {t.topic_id}) is gone.",
            doc_url=BASIC_OPS_URL,
        )
        for t in previous.topics
        if t.topic not in now
    ]


def controller_changed(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """The active controller moved to another node since the previous poll."""
    if previous is None:
        return []
    old, new = previous.controller_id, current.controller_id
    if old is None or new is None or old < 0 or new < 0 or old == new:
        return []
    return [
        Alert(
            rule="controller_changed",
            severity="info",
            cluster_name=current.cluster_name,
            subject="controller",
            evidence={"old_controller_id": old, "new_controller_id": new},
            explanation=f"The controller moved from node {old} to node {new}.",
            doc_url=CONTROLLER_URL,
        )
    ]


def broker_missing(previous: ClusterSnapshot | None, current: ClusterSnapshot) -> list[Alert]:
    """A broker seen before, or still named as a replica, is no longer registered."""
    live = {b.broker_id for b in current.live_brokers}
    reasons: dict[int, str] = {}
    if previous is not None:
        for broker in previous.live_brokers:
            if broker.broker_id not in live:
                reasons[broker.broker_id] = "listed in the previous poll"
    for broker_id in current.missing_broker_ids:
        if broker_id not in live:
            reasons.setdefault(broker_id, "still assigned as a replica or registered elsewhere")
    return [
        Alert(
            rule="broker_missing",
            severity="critical",
            cluster_name=current.cluster_name,
            subject=f"broker {broker_id}",
            evidence={
                "broker_id": broker_id,
                "reason": reason,
                "live_brokers": sorted(live),
            },
            explanation=f"Broker {broker_id} is not registered with the cluster ({reason}).",
            doc_url=REPLICATION_URL,
        )
        for broker_id, reason in sorted(reasons.items())
    ]


def _partition_alert(current: ClusterSnapshot, rule: str, attr: str, severity: str, what: str) -> list[Alert]:
    affected = [t for t in current.topics if getattr(t, attr) > 0]
    if not affected:
        return []
    total = sum(getattr(t, attr) for t in affected)
    sample = {t.topic: getattr(t, attr) for t in affected[:SAMPLE_LIMIT]}
    return [
        Alert(
            rule=rule,
            severity=severity,
            cluster_name=current.cluster_name,
            subject="partitions",
            evidence={"partitions": total, "topics": len(affected), "sample": sample},
            explanation=f"{total} partitions in {len(affected)} topics are {what}.",
            doc_url=REPLICATION_URL,
        )
    ]


def under_replicated(current: ClusterSnapshot) -> list[Alert]:
    """Partitions whose in-sync replica set is smaller than their replica set."""
    return _partition_alert(
        current,
        "under_replicated",
        "under_replicated",
        "warning",
        "under-replicated (ISR < replicas)",
    )


def offline_partitions(current: ClusterSnapshot) -> list[Alert]:
    """Partitions without a leader: nobody can produce to or consume from them."""
    return _partition_alert(
        current,
        "offline_partitions",
        "offline_partitions",
        "critical",
        "offline (no leader)",
    )


_SINGLE: tuple[Callable[[ClusterSnapshot], list[Alert]], ...] = (
    zk_cluster_id_mismatch,
    version_skew,
    zk_topic_id_mismatch,
    under_replicated,
    offline_partitions,
)
_PAIRED: tuple[Callable[[ClusterSnapshot | None, ClusterSnapshot], list[Alert]], ...] = (
    broker_upgraded,
    topic_recreated,
    topic_created,
    topic_deleted,
    controller_changed,
    broker_missing,
)


def run_checks(previous: Mapping[str, ClusterSnapshot] | None, current: Iterable[ClusterSnapshot]) -> list[Alert]:
    """Run every rule over a poll (the config rules too); clusters without data (down, auth_failed) raise nothing."""
    current = list(current)
    previous = previous or {}
    alerts: list[Alert] = []
    for snapshot in current:
        if not snapshot.has_data:
            continue
        before = previous.get(snapshot.cluster_name)
        if before is not None and not before.has_data:
            before = None
        for single in _SINGLE:
            alerts.extend(single(snapshot))
        for paired in _PAIRED:
            alerts.extend(paired(before, snapshot))
        alerts.extend(config_alerts(snapshot))  # backend.collect.config_checks.RULES
        alerts.extend(group_alerts(snapshot))  # backend.collect.group_checks.RULES
        alerts.extend(inventory_alerts(before, snapshot))  # backend.collect.client_checks.RULES
    alerts.extend(duplicate_cluster_id(current))
    return alerts
