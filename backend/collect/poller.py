"""The poller: all clusters concurrently, each within its deadline; results go to the lake."""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from backend.collect.checks import run_checks
from backend.collect.client_metrics import BrokerRoles, ClientMetricsCollector
from backend.collect.configs import ConfigCollector
from backend.collect.groups import ClientGroupConfigs, GroupCollector
from backend.collect.probing import ProbeOutcome, Prober, default_prober
from backend.collect.topics import TopicFetchError, TopicTable, TopicTables
from backend.collect.validate import sanitize_snapshot, summarize
from backend.config import ClusterConfig, Fleet, Settings
from backend.kafka.admin import (
    AdminCallError,
    AdminClientCache,
    ClusterDescription,
    MetadataView,
    NodeInfo,
    TopicListing,
)
from backend.kafka.admin_helpers import AdminHelpers
from backend.kafka.zk import ZkView, read_zookeeper
from backend.search.updates import open_fleet_indexer
from backend.standards.engine import StandardsEngine
from backend.store.commit import CommitConflict
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, LakeError, new_poll_id
from backend.store.model import (
    MISSING_BROKER_ERROR,
    BrokerSnapshot,
    ClusterSnapshot,
    FleetPoll,
    TopicSnapshot,
)
from backend.store.snapshots import load_previous_state

log = logging.getLogger(__name__)

# librdkafka in helper processes (one shared; isolated ones only while a helper died): a broker that makes
# librdkafka abort() takes down a helper, never the poller. AdminClientCache() runs it in process (benchmarks).
DEFAULT_CLIENTS = AdminHelpers()
AdminClients = AdminClientCache | AdminHelpers
DEFAULT_TOPIC_TABLES = TopicTables()
# Cluster names whose poll thread is still running (a hung cluster is not polled twice at once).
_IN_FLIGHT: set[str] = set()
_IN_FLIGHT_LOCK = threading.Lock()


def scrub(text: str | None, cluster: ClusterConfig) -> str | None:
    """Remove the cluster's secrets from a text (errors from libraries may echo configuration)."""
    if not text:
        return text
    metrics_password = cluster.broker_metrics.password() if cluster.broker_metrics is not None else None
    for secret in (cluster.password(), cluster.ssl_key_password(), metrics_password):
        if secret:
            text = text.replace(secret, "***")
    return text


class _Call(threading.Thread):
    """Runs a function in a daemon thread so a caller can stop waiting at a deadline."""

    def __init__(self, fn: Callable[[], object], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._fn = fn
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._fn()
        except Exception as exc:  # noqa: BLE001 - handed to the caller, who turns it into a status row
            self.error = exc

    def wait(self, until: float) -> bool:
        self.join(max(0.0, until - time.monotonic()))
        return not self.is_alive()


def poll_cluster(
    cluster: ClusterConfig,
    settings: Settings,
    *,
    previous: ClusterSnapshot | None = None,
    clients: AdminClients | None = None,
    prober: Prober | None = None,
    topic_tables: TopicTables | None = None,
    configs: ConfigCollector | None = None,
    groups: GroupCollector | None = None,
    client_metrics: ClientMetricsCollector | None = None,
) -> ClusterSnapshot:
    """Poll one cluster: DescribeCluster, topics with ids, per-broker probe and ZooKeeper.

    Topics come from one Metadata request to a broker; when no broker answers it, from
    librdkafka's Metadata + DescribeTopics in batches. When due (settings.config_interval_s),
    every broker's configs and the topics' overrides (DescribeConfigs) are read alongside the probe, and when
    due (settings.group_interval_s) the consumer groups (backend.collect.groups).
    """
    started = time.monotonic()
    deadline = started + settings.poll_deadline_s
    polled_at = datetime.now(UTC)
    clients = clients or DEFAULT_CLIENTS
    if prober is None:
        prober = functools.partial(
            default_prober, concurrency=settings.probe_concurrency, max_brokers=settings.max_brokers_probed
        )
    topic_tables = topic_tables or DEFAULT_TOPIC_TABLES
    configs = configs or ConfigCollector()  # no collector: this poll reads the configs when due, remembering nothing
    groups = groups or GroupCollector()  # likewise for the consumer groups
    client_metrics = client_metrics or ClientMetricsCollector()  # likewise: read when due, nothing remembered

    def timeout() -> float:
        return max(0.1, min(settings.request_timeout_s, deadline - time.monotonic()))

    def finish(snapshot: ClusterSnapshot) -> ClusterSnapshot:
        snapshot.duration_ms = (time.monotonic() - started) * 1000
        snapshot.error = scrub(snapshot.error, cluster)
        for broker in snapshot.brokers:
            broker.error = scrub(broker.error, cluster)
        return snapshot

    zk_call: _Call | None = None
    if cluster.zookeeper is not None:
        zk_config = cluster.zookeeper
        zk_call = _Call(lambda: read_zookeeper(zk_config, timeout()), f"zk-{cluster.name}")
        zk_call.start()

    admin = clients.get(cluster, settings.request_timeout_s)
    errors: list[str] = []
    table, table_error = _direct_table(cluster, previous, topic_tables, deadline, settings)
    # librdkafka runs in a helper process (backend.kafka.admin_helpers) that a malformed answer may kill; when it
    # killed this cluster's own helper, librdkafka is paused for it and the poll goes on with the built-in codec.
    paused = admin.paused()

    def retried(fn: Callable[[], Any]) -> Any:
        """A call its helper's death failed runs once more, on the helper the cluster is placed on now."""
        try:
            return fn()
        except AdminCallError as exc:
            if exc.kind != "crashed" or deadline - time.monotonic() < 1.0:
                raise
            log.warning("cluster %s: %s; trying once more", cluster.name, exc)
            return fn()

    def view_description(view: MetadataView) -> ClusterDescription:
        return ClusterDescription(cluster_id=view.cluster_id, controller_id=view.controller_id, brokers=view.brokers,
                                  authorized_operations=None)

    try:
        if paused is not None:
            if table is None:
                raise AdminCallError(f"no broker answered Metadata ({table_error}); {paused}", "paused")
            errors.append(paused)
            metadata = table.view
        elif table is None or _routing_changed(table.view, previous):
            # librdkafka routes DescribeCluster to the controller it last saw (a stopped broker
            # stays "controller" in its cache): a full Metadata through it refreshes that view.
            try:
                metadata = retried(lambda: admin.metadata(timeout()))
            except AdminCallError as exc:
                if exc.kind == "auth" or table is None:
                    raise
                errors.append(str(exc))  # the direct answer stands in (the brokers answered the built-in codec)
                metadata = table.view
        else:
            metadata = table.view
        if paused is not None:
            description = view_description(metadata)
        else:
            try:
                description = retried(lambda: admin.describe_cluster(timeout()))
            except AdminCallError as exc:
                if exc.kind == "auth":
                    raise
                errors.append(str(exc))
                description = view_description(metadata)
    except AdminCallError as exc:
        status = "auth_failed" if exc.kind == "auth" else "down"
        error = str(exc)
        if paused is None and (now_paused := admin.paused()) is not None:
            error = f"{error}; {now_paused}"  # its own helper died during this poll
        zk_view = _zk_result(zk_call, deadline)
        return finish(
            _row(
                cluster,
                polled_at,
                status,
                error=error,
                zk_cluster_id=zk_view.cluster_id if zk_view else None,
                zk_nodes=zk_view.nodes if zk_view else [],
            )
        )

    probe_call = _Call(lambda: prober(cluster, description.brokers, timeout()), f"probe-{cluster.name}")
    probe_call.start()
    if table is not None:
        listing = table.listing
    else:
        try:
            listing = retried(lambda: admin.describe_topics(metadata.topic_names, timeout(), deadline=deadline))
        except AdminCallError as exc:
            errors.append(f"topics: {exc}")
            listing = TopicListing(topics=[], failed={})
    if listing.failed:
        sample = ", ".join(sorted(listing.failed)[:5])
        errors.append(f"{len(listing.failed)} topics could not be described ({sample})")
    config_call: _Call | None = None
    if configs.due(cluster.name, settings) and description.brokers:
        names = [t.topic for t in listing.topics]
        known = [b.broker_id for b in previous.brokers] if previous is not None else []
        config_call = _Call(lambda: configs.collect(cluster, settings, description.brokers, names, deadline - 0.5,
                                                    keep_brokers=known), f"configs-{cluster.name}")
        config_call.start()
    group_call: _Call | None = None
    if groups.due(cluster.name, settings) and description.brokers:
        group_call = _Call(lambda: groups.collect(cluster, settings, description.brokers, deadline - 0.5,
                                                  cluster_id=description.cluster_id), f"groups-{cluster.name}")
        group_call.start()

    probes: dict[int, ProbeOutcome] = {}
    if probe_call.wait(deadline) and probe_call.error is None and isinstance(probe_call.result, dict):
        probes = probe_call.result
    elif probe_call.error is not None:
        errors.append(f"probe: {type(probe_call.error).__name__}: {probe_call.error}")
    else:
        errors.append("probe did not finish before the poll deadline")
    metrics_call: _Call | None = None
    if client_metrics.due(cluster, settings):
        # The brokers' JMX metrics (client inventory, KIP-511/KIP-896), read once the probe's and the config
        # reader's own short connections are closed, so the product does not count itself.
        if config_call is not None:
            config_call.wait(deadline - 1.0)
        read_configs = configs.last(cluster.name)
        roles = BrokerRoles.of(read_configs.brokers if read_configs is not None else None,
                               [p.software_version for p in probes.values()])
        metrics_call = _Call(lambda: client_metrics.collect(cluster, settings, description.brokers, deadline - 0.5,
                                                            roles=roles), f"client-metrics-{cluster.name}")
        metrics_call.start()
    zk_view = _zk_result(zk_call, deadline)
    if zk_call is not None and zk_view is None:
        errors.append("ZooKeeper read did not finish before the poll deadline")
    elif zk_view is not None and zk_view.error:
        errors.append(zk_view.error)

    snapshot = _assemble(cluster, polled_at, description, listing, probes, zk_view, previous)
    if paused is None and (now_paused := admin.paused()) is not None:
        errors.append(now_paused)  # its own helper died during this poll
    elif paused is not None and table is not None and _all_sane(description, probes):
        admin.resume()  # every broker answers the built-in codec sanely again: librdkafka on probation
    if config_call is not None and config_call.wait(deadline) and config_call.error is not None:
        log.warning("cluster %s: reading configs failed: %s", cluster.name,
                    scrub(f"{type(config_call.error).__name__}: {config_call.error}", cluster))
    snapshot.configs = configs.last(cluster.name)  # a read still running past the deadline lands in the next poll
    if group_call is not None and group_call.wait(deadline) and group_call.error is not None:
        log.warning("cluster %s: reading consumer groups failed: %s", cluster.name,
                    scrub(f"{type(group_call.error).__name__}: {group_call.error}", cluster))
    snapshot.groups = groups.last(cluster.name)  # likewise
    if metrics_call is not None and metrics_call.wait(deadline) and metrics_call.error is not None:
        log.warning("cluster %s: reading broker metrics failed: %s", cluster.name,
                    scrub(f"{type(metrics_call.error).__name__}: {metrics_call.error}", cluster))
    snapshot.inventory = client_metrics.last(cluster.name)
    snapshot.status = _status(snapshot, zk_view, zk_call is not None, errors)
    if snapshot.status == "misrouted":
        errors.insert(
            0,
            f"ZooKeeper /cluster/id is {snapshot.zk_cluster_id} but the brokers report {snapshot.cluster_id}",
        )
    if errors:
        snapshot.error = "; ".join(errors)
    return finish(snapshot)


def _all_sane(description: ClusterDescription, probes: dict[int, ProbeOutcome]) -> bool:
    """Whether every listed broker answered the probe without an error."""
    outcomes = [probes.get(node.broker_id) for node in description.brokers]
    return bool(outcomes) and all(o is not None and o.reachable and not o.error for o in outcomes)


def _direct_table(
    cluster: ClusterConfig,
    previous: ClusterSnapshot | None,
    topic_tables: TopicTables,
    deadline: float,
    settings: Settings,
) -> tuple[TopicTable | None, str]:
    """Every topic with its id from one Metadata request to a known broker; (None, why) if none answers.

    One decoded request replaces librdkafka's list + DescribeTopics (about 0.08 ms of CPU per
    topic), and an answer identical to the last one is not decoded again.
    """
    known = [(b.host, b.port) for b in previous.live_brokers if b.reachable and b.host and b.port] if previous else []
    bootstrap = []
    for server in cluster.bootstrap_servers:
        host, _, port = server.rpartition(":")
        if host and port.isdigit():
            bootstrap.append((host.strip("[]"), int(port)))
    # Half the poll's time at most, so the librdkafka path still has time to report why.
    budget = time.monotonic() + (deadline - time.monotonic()) / 2
    try:
        return topic_tables.fetch(cluster, known + bootstrap, budget, settings.request_timeout_s,
                                  max_response_bytes=settings.max_metadata_response_bytes), ""
    except TopicFetchError as exc:
        log.info("cluster %s: no direct Metadata answer, using DescribeTopics (%s)",
                 cluster.name, scrub(str(exc), cluster))
        return None, str(exc)


def _routing_changed(view: MetadataView, previous: ClusterSnapshot | None) -> bool:
    """Whether the brokers or the controller differ from the last good poll (or there was none)."""
    if previous is None or previous.status != "ok":
        return True
    live = {b.broker_id for b in previous.live_brokers}
    return previous.controller_id != view.controller_id or live != {n.broker_id for n in view.brokers}


def _row(cluster: ClusterConfig, polled_at: datetime, status: str, **fields: Any) -> ClusterSnapshot:
    return ClusterSnapshot(cluster_name=cluster.name, polled_at=polled_at, tags=dict(cluster.tags), status=status, **fields)


def _zk_result(call: _Call | None, deadline: float) -> ZkView | None:
    if call is None or not call.wait(deadline):
        return None
    if call.error is not None:
        return ZkView(error=f"ZooKeeper read failed: {type(call.error).__name__}: {call.error}")
    return call.result if isinstance(call.result, ZkView) else None


def _assemble(
    cluster: ClusterConfig,
    polled_at: datetime,
    description: ClusterDescription,
    listing: TopicListing,
    probes: dict[int, ProbeOutcome],
    zk_view: ZkView | None,
    previous: ClusterSnapshot | None,
) -> ClusterSnapshot:
    brokers = [_broker(node, description.controller_id, probes.get(node.broker_id)) for node in description.brokers]
    live = {node.broker_id for node in description.brokers}
    zk_ids = zk_view.topic_ids if zk_view is not None else {}
    topics, replica_ids = _topic_rows(cluster.name, listing, zk_ids)
    referenced = set(replica_ids)
    known: dict[int, tuple[str | None, int | None]] = {}
    if previous is not None:
        known.update({b.broker_id: (b.host, b.port) for b in previous.brokers})
        referenced |= {b.broker_id for b in previous.live_brokers}
    if zk_view is not None:
        for broker_id, registration in zk_view.broker_registrations.items():
            referenced.add(broker_id)
            known[broker_id] = (registration.get("host"), registration.get("port"))
    missing = sorted(referenced - live)
    for broker_id in missing:
        host, port = known.get(broker_id, (None, None))
        brokers.append(
            BrokerSnapshot(
                broker_id=broker_id,
                host=host,
                port=port,
                reachable=False,
                error=f"{MISSING_BROKER_ERROR} (not in DescribeCluster)",
            )
        )
    return _row(
        cluster,
        polled_at,
        "ok",
        cluster_id=description.cluster_id,
        zk_cluster_id=zk_view.cluster_id if zk_view is not None else None,
        controller_id=description.controller_id,
        brokers=brokers,
        topics=topics,
        zk_nodes=zk_view.nodes if zk_view is not None else [],
        missing_broker_ids=missing,
    )


# Per cluster, the rows built from the last topic listing: an unchanged listing (the same
# object, see TopicTables) with the same ZooKeeper ids reuses them instead of rebuilding thousands.
_ROWS: dict[str, tuple[TopicListing, dict[str, str | None], list[TopicSnapshot], frozenset[int]]] = {}
_ROWS_LOCK = threading.Lock()


def forget_topic_rows() -> None:
    """Drop the reused topic rows of every cluster."""
    with _ROWS_LOCK:
        _ROWS.clear()


def _topic_rows(
    name: str, listing: TopicListing, zk_ids: dict[str, str | None]
) -> tuple[list[TopicSnapshot], frozenset[int]]:
    """TopicSnapshot rows sorted by name (read-only once built) and every broker id holding a replica."""
    with _ROWS_LOCK:
        cached = _ROWS.get(name)
    if cached is not None and cached[0] is listing and cached[1] == zk_ids:
        return cached[2], cached[3]
    rows = [
        TopicSnapshot(
            topic=t.topic,
            topic_id=t.topic_id,
            zk_topic_id=zk_ids.get(t.topic),
            partitions=t.partitions,
            replication_factor=t.replication_factor,
            internal=t.internal,
            under_replicated=t.under_replicated,
            offline_partitions=t.offline_partitions,
        )
        for t in sorted(listing.topics, key=lambda t: t.topic)
    ]
    replicas = frozenset().union(*(t.replica_broker_ids for t in listing.topics))
    with _ROWS_LOCK:
        _ROWS[name] = (listing, dict(zk_ids), rows, replicas)
    return rows, replicas


def _broker(node: NodeInfo, controller_id: int | None, probe: ProbeOutcome | None) -> BrokerSnapshot:
    snapshot = BrokerSnapshot(
        broker_id=node.broker_id,
        host=node.host,
        port=node.port,
        rack=node.rack,
        is_controller=node.broker_id == controller_id,
    )
    if probe is None:
        snapshot.error = "not probed"
        return snapshot
    # Every probe field has a same-named BrokerSnapshot field.
    for field in dataclasses.fields(probe):
        setattr(snapshot, field.name, getattr(probe, field.name))
    return snapshot


def _status(snapshot: ClusterSnapshot, zk_view: ZkView | None, uses_zk: bool, errors: list[str]) -> str:
    if zk_view is not None and zk_view.cluster_id and snapshot.cluster_id and zk_view.cluster_id != snapshot.cluster_id:
        return "misrouted"
    unreachable = any(not b.reachable for b in snapshot.brokers)
    zk_failed = uses_zk and (zk_view is None or zk_view.error is not None)
    if unreachable or snapshot.offline_partitions or snapshot.missing_broker_ids or zk_failed or errors:
        return "degraded"
    return "ok"


def _begin(name: str) -> bool:
    with _IN_FLIGHT_LOCK:
        if name in _IN_FLIGHT:
            return False
        _IN_FLIGHT.add(name)
        return True


def _end(name: str) -> None:
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.discard(name)


def poll_fleet(
    fleet: Fleet,
    previous_state: dict[str, ClusterSnapshot] | None = None,
    *,
    clients: AdminClients | None = None,
    prober: Prober | None = None,
    configs: ConfigCollector | None = None,
    groups: GroupCollector | None = None,
    client_metrics: ClientMetricsCollector | None = None,
) -> FleetPoll:
    """Poll every cluster concurrently; a cluster that misses poll_deadline_s becomes a `down` row."""
    started = time.monotonic()
    polled_at = datetime.now(UTC)
    poll_id = new_poll_id(polled_at)
    settings = fleet.settings
    previous_state = previous_state or {}
    configs = configs or ConfigCollector()
    client_metrics = client_metrics or ClientMetricsCollector()
    # The per-call timeouts already stop at the deadline; the grace covers thread scheduling.
    deadline = started + settings.poll_deadline_s + 1.0
    calls: dict[str, _Call | None] = {}
    for cluster in fleet.clusters:
        if not _begin(cluster.name):
            calls[cluster.name] = None
            continue

        def run(cluster: ClusterConfig = cluster) -> ClusterSnapshot:
            try:
                return poll_cluster(
                    cluster,
                    settings,
                    previous=previous_state.get(cluster.name),
                    clients=clients,
                    prober=prober,
                    configs=configs,
                    groups=groups,
                    client_metrics=client_metrics,
                )
            finally:
                _end(cluster.name)

        call = _Call(run, f"poll-{cluster.name}")
        calls[cluster.name] = call
        call.start()

    snapshots: list[ClusterSnapshot] = []
    for cluster in fleet.clusters:
        snapshot = _collect(cluster, calls[cluster.name], deadline, polled_at, settings)
        snapshot.poll_id = poll_id
        snapshot.polled_at = polled_at
        if snapshot.status != "ok":
            log.warning("cluster %s: %s: %s", cluster.name, snapshot.status, snapshot.error)
        snapshots.append(snapshot)
    alerts = run_checks(previous_state, snapshots)
    return FleetPoll(
        poll_id=poll_id,
        polled_at=polled_at,
        clusters=snapshots,
        alerts=alerts,
        duration_ms=(time.monotonic() - started) * 1000,
    )


def _collect(
    cluster: ClusterConfig,
    call: _Call | None,
    deadline: float,
    polled_at: datetime,
    settings: Settings,
) -> ClusterSnapshot:
    if call is None:
        return _row(
            cluster,
            polled_at,
            "down",
            error="the previous poll of this cluster is still running",
        )
    if not call.wait(deadline):
        return _row(
            cluster,
            polled_at,
            "down",
            error=f"poll did not finish within poll_deadline_s={settings.poll_deadline_s:g}s",
            duration_ms=settings.poll_deadline_s * 1000,
        )
    if call.error is not None or not isinstance(call.result, ClusterSnapshot):
        error = scrub(f"poll failed: {type(call.error).__name__}: {call.error}", cluster)
        log.error("cluster %s: %s", cluster.name, error)
        return _row(cluster, polled_at, "down", error=error)
    return checked(call.result, cluster)


def checked(snapshot: ClusterSnapshot, cluster: ClusterConfig) -> ClusterSnapshot:
    """Make every value fit the lake's columns; a value that did not makes the cluster degraded."""
    problems = sanitize_snapshot(snapshot)
    if problems:
        reason = scrub(summarize(problems), cluster) or ""
        if snapshot.status == "ok":
            snapshot.status = "degraded"
        snapshot.error = f"{snapshot.error}; {reason}" if snapshot.error else reason
    return snapshot


def _sleep(stop: threading.Event, wake: threading.Event | None, seconds: float) -> None:
    if wake is None:
        stop.wait(seconds)
        return
    until = time.monotonic() + seconds
    while not stop.is_set() and not wake.is_set() and (left := until - time.monotonic()) > 0:
        wake.wait(min(left, 0.25))
    wake.clear()


def run_poller(
    fleet: Fleet,
    lake: Lake | str,
    interval_s: float | None = None,
    once: bool = False,
    *,
    on_poll: Callable[[FleetPoll], None] | None = None,
    stop: threading.Event | None = None,
    clients: AdminClients | None = None,
    prober: Prober | None = None,
    configs: ConfigCollector | None = None,
    groups: GroupCollector | None = None,
    client_metrics: ClientMetricsCollector | None = None,
    wake: threading.Event | None = None,
    on_start: Callable[[], None] | None = None,
    standards: StandardsEngine | None = None,
) -> FleetPoll | None:
    """Poll the fleet every interval_s (or once), write each poll to the lake, apply retention.

    ``stop`` ends the loop after the cycle in progress (its write included); ``wake`` starts the next cycle
    at once (and is cleared); ``on_start`` is called as each cycle begins. Broker and topic configurations
    are read inside the polls, every `settings.config_interval_s`.
    """
    lake = lake if isinstance(lake, Lake) else Lake(lake)
    interval_s = interval_s if interval_s is not None else fleet.settings.poll_interval_s
    if interval_s <= 0:
        raise ValueError(f"interval must be > 0 seconds, got {interval_s}")
    stop = stop or threading.Event()
    # The writer restarts from the lake's current state (migrating a v1 lake first) and keeps the
    # previous state in memory, so a poll of an unchanged fleet writes only its status rows.
    writer = FleetWriter(lake)
    # The search index follows every write (backend/search): built from the lake here when missing or behind.
    index = open_fleet_indexer(lake, retention_days=fleet.settings.retention_days)
    previous = load_previous_state(lake)
    # The run's own collector, seeded from this lake: what it remembers (the last read and when the next is due)
    # belongs to this lake and this fleet file, never to another poller of the same process. A process-wide one kept
    # another lake's reading of a same-named cluster as this lake's first state, then "changed" it when it fell due.
    configs = configs or ConfigCollector()
    configs.seed(writer.configs)  # the stored configurations: the checks' baseline until the first read
    groups = groups or GroupCollector()  # the run's own, like configs: what it remembers belongs to this lake
    groups.seed(writer.groups)  # the stored groups: their windows go on across restarts
    groups.client_configs = ClientGroupConfigs(lake.location)  # members' KIP-1324 configs per group (results)
    client_metrics = client_metrics or ClientMetricsCollector()  # the run's own too, for the same reason
    client_metrics.seed(writer.inventory)  # the stored inventories: the counts' baseline across a restart
    # The fleet file's policies (docs/standards.md), judged each poll; a refused file keeps the last good one.
    standards = standards or StandardsEngine.for_fleet(fleet, lake.location)
    standards.seed(writer.standards)
    last: FleetPoll | None = None
    while not stop.is_set():
        cycle_start = time.monotonic()
        if on_start is not None:
            on_start()
        last = poll_fleet(fleet, previous, clients=clients, prober=prober, configs=configs, groups=groups,
                          client_metrics=client_metrics)
        try:
            standards.evaluate(last)
        except Exception:
            log.exception("evaluating the policies of poll %s failed", last.poll_id)
        try:
            result = writer.write(last)
            for name, reason in result.degraded.items():
                log.error("cluster %s of poll %s not written: %s", name, last.poll_id, reason)
            if index is not None:
                index.apply_write(result, now=last.polled_at)
            writer.maintain(last.polled_at, fleet.settings.retention_days)
        except CommitConflict as exc:
            # Another writer committed the lake's state first: this poll was dropped whole, and the writer
            # starts the next one from the state that writer committed.
            log.error("poll %s not written to %s: %s", last.poll_id, lake.location, exc)
            last.write_error = f"the poll was not written: {exc}"
            if once:
                raise
        except (OSError, LakeError, ValueError, TypeError) as exc:
            # ValueError/TypeError: a row Arrow refused (ArrowInvalid/ArrowTypeError); the next
            # cycle still runs (values are validated in poll_fleet, so this is a bug, not data).
            log.error("writing poll %s to %s failed: %s", last.poll_id, lake.location, exc)
            last.write_error = f"writing the poll to the lake failed: {exc}"
            if once:
                raise
        for snapshot in last.clusters:
            if snapshot.has_data:
                previous[snapshot.cluster_name] = snapshot
        if on_poll is not None:
            on_poll(last)
        if once:
            break
        _sleep(stop, wake, max(0.0, interval_s - (time.monotonic() - cycle_start)))
    if last is not None:
        try:
            writer.close(last.polled_at)
        except (OSError, CommitConflict) as exc:
            log.error("flushing incidents to %s failed: %s", lake.location, exc)
    if index is not None:
        index.close()
    return last
