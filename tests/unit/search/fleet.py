"""A small fleet of poll snapshots for the search tests, written through the real FleetWriter."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from backend.store.group_model import GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.inventory_model import InventorySnapshot, SoftwareConnections
from backend.store.lake import new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, FleetPoll, TopicSnapshot

START = datetime.now(UTC).replace(microsecond=0) - timedelta(days=2)


def topics(*names: str, ids: dict[str, str] | None = None) -> list[TopicSnapshot]:
    """Topics with ids id-<name> (or as given)."""
    return [TopicSnapshot(n, (ids or {}).get(n, f"id-{n}"), partitions=3, replication_factor=3) for n in names]


def brokers(*ids: int, host: str = "h", rack: str | None = "r1", version: str = "4.3.1") -> list[BrokerSnapshot]:
    """Reachable brokers reporting their version (KIP-885)."""
    return [BrokerSnapshot(b, f"{host}{b}.example", 9092, rack=rack, reachable=True, software_name="Apache Kafka",
                           software_version=version, version_provenance="reported") for b in ids]


def configs(at: datetime, *, retention: str = "168", overrides: dict[str, dict[str, str]] | None = None,
            broker_ids: tuple[int, ...] = (1, 2)) -> ConfigSnapshot:
    """Broker configs (one secret among them) and topic overrides."""
    by_broker = {}
    for b in broker_ids:
        by_broker[b] = {
            "log.retention.hours": ConfigValue(retention, "STATIC_BROKER_CONFIG", True, False, "INT"),
            "min.insync.replicas": ConfigValue("2", "DYNAMIC_DEFAULT_BROKER_CONFIG", False, False, "INT"),
            "ssl.key.password": ConfigValue(None, "STATIC_BROKER_CONFIG", False, True, "PASSWORD", "sensitive"),
            "sasl.jaas.config": ConfigValue("org.x.PlainLoginModule required password=\"hunter2\";",
                                            "STATIC_BROKER_CONFIG", False, False, "STRING"),
        }
    topic_overrides = {t: {k: ConfigValue(v, "DYNAMIC_TOPIC_CONFIG", False, False, "STRING") for k, v in o.items()}
                       for t, o in (overrides or {}).items()}
    return ConfigSnapshot(collected_at=at, brokers=by_broker, topics=topic_overrides, version=4)


def groups(at: datetime, members: dict[str, list[str]], types: dict[str, str] | None = None,
           lags: dict[str, int] | None = None, topic: str = "orders") -> GroupSnapshot:
    """Groups with members of the given client ids (one member per entry), reading one topic."""
    states = {g: GroupState(g, group_type=(types or {}).get(g, "classic"), protocol_type="consumer", state="Stable",
                            members=len(m), topics=1, partitions=1, topic_names=(topic,),
                            lag=(lags or {}).get(g, 0), status="ok") for g, m in members.items()}
    member_tuples = {g: tuple(GroupMember(f"{g}-{i}", c, "/10.0.0.1") for i, c in enumerate(m)) for g, m in members.items()}
    offsets = {g: (PartitionLag(topic, 0, 10, 10 + (lags or {}).get(g, 0)),) for g in members}
    return GroupSnapshot(collected_at=at, groups=states, members=member_tuples, offsets=offsets)


def inventory(at: datetime, software: list[tuple[str, str, int]]) -> InventorySnapshot:
    """The brokers' count of connections by client software."""
    rows = tuple(SoftwareConnections(1, "h1:7071", "PLAINTEXT", n, v, c) for n, v, c in software)
    return InventorySnapshot(collected_at=at, source="metrics_url", source_label="http://{host}:7071/metrics",
                             status="ok", kip896="none", window_s=3600.0, connections=rows)


def cluster(name: str, at: datetime, poll_id: str, **over: object) -> ClusterSnapshot:
    """One cluster's snapshot (ok, two brokers) with the given parts."""
    base = ClusterSnapshot(name, "ok", at, poll_id, tags={"env": "prod"}, cluster_id=f"CID-{name}", controller_id=1,
                           brokers=brokers(1, 2))
    return replace(base, **over)  # type: ignore[arg-type]


def poll(at: datetime, snapshots: list[ClusterSnapshot]) -> FleetPoll:
    """A poll of the given cluster snapshots (their poll id and time set to the poll's)."""
    poll_id = new_poll_id(at)
    when = poll_id_time(poll_id)
    return FleetPoll(poll_id, when, [replace(s, poll_id=poll_id, polled_at=when) for s in snapshots], [], 1.0)
