"""Prometheus metrics of the fleet: what the latest poll saw, the open incidents, the client-config alerts.

The values come from the poller's own FleetPoll after each cycle (and two small lake files read once per
cycle: the open incidents and the latest client-config alerts), never from a lake scan at scrape time.
Every label value goes through `label_value` (hidden characters made visible, cut to MAX_LABEL_CHARS); the
client library then escapes quotes, backslashes and line breaks in the exposition format. New collectors
label their series through `label_value` too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.collect.group_metrics import group_families
from backend.collect.standards_metrics import standards_families
from backend.plain_text import visible
from backend.store import readers
from backend.store.model import NO_DATA_STATUSES, STATUSES, FleetPoll
from backend.store.progress import load_state
from backend.store.tables import read_table

PREFIX = "kafka_fleet"
MAX_LABEL_CHARS = 128
CONFIG_ALERTS_EVERY_S = 60.0
log = logging.getLogger(__name__)


def label_value(value: object) -> str:
    """A Prometheus label value from any (untrusted) value: controls, bidi and other hidden characters shown
    visibly (`backend.plain_text.visible`: CR as ␍, ESC as ␛, U+202E as <U+202E>), cut to MAX_LABEL_CHARS."""
    text = visible(value)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


@dataclass
class _Snapshot:
    poll: FleetPoll | None = None
    last_success: dict[str, float] = field(default_factory=dict)
    recreations: Counter[str] = field(default_factory=Counter)
    open_incidents: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    config_alerts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    config_alerts_read_at: float = float("-inf")
    policy_file: dict[str, Any] = field(default_factory=dict)


class FleetMetrics(Collector):
    """A Prometheus collector fed by the poller's on_poll callback; scrapes only format what it holds."""

    def __init__(self, lake: str, *, group_max_groups: int = 500, group_max_topics: int = 2_000) -> None:
        """Collect for the fleet whose polls are written to `lake` (group series limited per cluster)."""
        self.lake = lake
        self.group_limits = (group_max_groups, group_max_topics)
        self._lock = threading.Lock()
        self._state = _Snapshot()

    def update(self, poll: FleetPoll) -> None:
        """Take in one finished poll cycle (the poller's on_poll callback); never raises for lake trouble."""
        incidents = self._read_open_incidents()
        policy_file = self._read_policy_file()
        with self._lock:
            state = self._state
            state.poll = poll
            for snapshot in poll.clusters:
                if snapshot.status not in NO_DATA_STATUSES:
                    state.last_success[snapshot.cluster_name] = snapshot.polled_at.timestamp()
            for alert in poll.alerts:
                if alert.rule == "topic_recreated":
                    state.recreations[alert.cluster_name] += 1
            if incidents is not None:
                state.open_incidents = incidents
            if policy_file is not None:
                state.policy_file = policy_file
            if time.monotonic() - state.config_alerts_read_at >= CONFIG_ALERTS_EVERY_S:
                state.config_alerts_read_at = time.monotonic()
                alerts = self._read_config_alerts(poll)
                if alerts is not None:
                    state.config_alerts = alerts

    def _read_open_incidents(self) -> Counter[tuple[str, str, str]] | None:
        try:
            frame = readers.incidents(self.lake, open_only=True)
        except Exception as exc:  # noqa: BLE001 - metrics never stop the poller
            log.warning("metrics: open incidents not readable: %s", exc)
            return None
        return Counter(zip(frame["cluster_name"], frame["rule"], frame["severity"], strict=True))

    def _read_policy_file(self) -> dict[str, Any] | None:
        try:
            saved = load_state(self.lake, "standards", "policy_file")
        except Exception as exc:  # noqa: BLE001 - metrics never stop the poller
            log.warning("metrics: policy file state not readable: %s", exc)
            return None
        return {k: saved.get(k) for k in ("error", "error_at", "loaded_at", "using")}

    def _read_config_alerts(self, poll: FleetPoll) -> Counter[tuple[str, str, str]] | None:
        try:
            table = read_table(self.lake, "results/config_alerts").select(["cluster_id", "rule_id", "severity"])
        except Exception as exc:  # noqa: BLE001 - metrics never stop the poller
            log.warning("metrics: client-config alerts not readable: %s", exc)
            return None
        names: dict[str, list[str]] = {}
        for snapshot in poll.clusters:
            if snapshot.cluster_id:
                names.setdefault(snapshot.cluster_id, []).append(snapshot.cluster_name)
        counts: Counter[tuple[str, str, str]] = Counter()
        for cluster_id, rule, severity in zip(*(table.column(c).to_pylist() for c in table.column_names),
                                              strict=True):
            # Two configured clusters with one id both carry the id's alerts; an unknown id keeps its id.
            for name in names.get(cluster_id, [f"id:{cluster_id}"]):
                counts[(name, rule, severity)] += 1
        return counts

    def collect(self) -> Iterator[Metric]:
        """Metric families for one scrape."""
        with self._lock:
            state = self._state
            poll = state.poll
            families = _cluster_families(poll) if poll is not None else []
            if poll is not None:
                families += group_families(poll, max_groups=self.group_limits[0], max_topics=self.group_limits[1])
                families += standards_families(poll, state.policy_file, label=label_value)
            last = GaugeMetricFamily(f"{PREFIX}_last_successful_poll_timestamp_seconds",
                                     "Unix time of the last poll that reached the cluster.", labels=["cluster"])
            for name, at in sorted(state.last_success.items()):
                last.add_metric([label_value(name)], at)
            recreated = CounterMetricFamily(f"{PREFIX}_topic_recreations",
                                            "Topics deleted and recreated under the same name (new topic id) "
                                            "seen since the poller started.", labels=["cluster"])
            for name in sorted({*state.recreations, *(s.cluster_name for s in poll.clusters)} if poll else []):
                recreated.add_metric([label_value(name)], state.recreations.get(name, 0))
            incidents = GaugeMetricFamily(f"{PREFIX}_open_incidents", "Open fleet incidents by rule and severity.",
                                          labels=["cluster", "rule", "severity"])
            for (name, rule, severity), count in sorted(state.open_incidents.items()):
                incidents.add_metric([label_value(name), label_value(rule), label_value(severity)], count)
            config = GaugeMetricFamily(f"{PREFIX}_client_config_alerts",
                                       "Client-config misconfiguration alerts of the latest pipeline run.",
                                       labels=["cluster", "rule", "severity"])
            for (name, rule, severity), count in sorted(state.config_alerts.items()):
                config.add_metric([label_value(name), label_value(rule), label_value(severity)], count)
        yield from families
        yield from (last, recreated, incidents, config)


def _cluster_families(poll: FleetPoll) -> list[Metric]:
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ("cluster",)) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))

    up = gauge("cluster_up", "1 when the latest poll reached the cluster (status not down/auth_failed).")
    status = gauge("cluster_status", "1 for the cluster's status in the latest poll, 0 for the others.",
                   ("cluster", "status"))
    brokers = gauge("brokers", "Brokers the cluster lists (missing ones included).")
    reachable = gauge("brokers_reachable", "Brokers the per-broker probe reached.")
    info = gauge("broker_info", "One series per broker: software and version (KIP-885 or a guess) and where "
                 "the version comes from.", ("cluster", "broker_id", "software", "version", "provenance"))
    topics = gauge("topics", "Topics in the cluster.")
    partitions = gauge("partitions", "Partitions over all topics.")
    urp = gauge("under_replicated_partitions", "Partitions with fewer in-sync replicas than replicas.")
    offline = gauge("offline_partitions", "Partitions without a leader.")
    duration = gauge("poll_duration_seconds", "How long the latest poll of the cluster took.")
    for s in sorted(poll.clusters, key=lambda c: c.cluster_name):
        name = label_value(s.cluster_name)
        up.add_metric([name], 0.0 if s.status in NO_DATA_STATUSES else 1.0)
        for known in STATUSES:
            status.add_metric([name, known], 1.0 if s.status == known else 0.0)
        duration.add_metric([name], s.duration_ms / 1000.0)
        if s.status in NO_DATA_STATUSES:
            continue  # no data: no broker or topic counts rather than zeros
        brokers.add_metric([name], len(s.brokers))
        reachable.add_metric([name], s.brokers_reachable)
        topics.add_metric([name], len(s.topics))
        partitions.add_metric([name], s.partition_count)
        urp.add_metric([name], s.under_replicated)
        offline.add_metric([name], s.offline_partitions)
        for b in s.brokers:
            version = b.software_version or _range(b.version_min, b.version_max)
            info.add_metric([name, label_value(b.broker_id), label_value(b.software_name or "unknown"), label_value(version),
                             label_value(b.version_provenance)], 1.0)
    families = [up, status, brokers, reachable, info, topics, partitions, urp, offline, duration]
    return families + _inventory_families(poll)


MAX_SOFTWARE_SERIES = 50  # per cluster: the most connected software versions; the rest are summed as "other"


def _inventory_families(poll: FleetPoll) -> list[Metric]:
    """Client software connections (KIP-511) and deprecated requests in use (KIP-896), bounded per cluster."""
    connections = GaugeMetricFamily(f"{PREFIX}_client_connections", "Connections by client software and version, as "
                                    "the brokers count them (KIP-511), from the last client-inventory read.",
                                    labels=["cluster", "software", "version"])
    deprecated = GaugeMetricFamily(f"{PREFIX}_client_deprecated_requests_in_use", "1 for each request version Kafka "
                                   "4.0 removed that clients used within the window (KIP-896).",
                                   labels=["cluster", "request", "version", "software", "software_version"])
    status = GaugeMetricFamily(f"{PREFIX}_client_inventory_status", "1 for the status of the last client-inventory "
                               "read (ok, partial, no_kip511, error).", labels=["cluster", "status"])
    for s in sorted(poll.clusters, key=lambda c: c.cluster_name):
        inventory = s.inventory
        if inventory is None:
            continue
        name = label_value(s.cluster_name)
        for known in ("ok", "partial", "no_kip511", "error"):
            status.add_metric([name, known], 1.0 if inventory.status == known else 0.0)
        ranked = sorted(inventory.software().items(), key=lambda kv: (-kv[1], kv[0]))
        for (software, version), count in ranked[:MAX_SOFTWARE_SERIES]:
            connections.add_metric([name, label_value(software), label_value(version)], float(count))
        if len(ranked) > MAX_SOFTWARE_SERIES:
            connections.add_metric([name, "other", "other"], float(sum(n for _, n in ranked[MAX_SOFTWARE_SERIES:])))
        uses = sorted({(u.request, u.version, u.software_name, u.software_version) for u in inventory.in_use()})
        for request, api_version, software, software_version in uses[:MAX_SOFTWARE_SERIES]:
            deprecated.add_metric([name, label_value(request), str(api_version), label_value(software), label_value(software_version)],
                                  1.0)
    return [connections, deprecated, status]


def _range(low: str | None, high: str | None) -> str:
    if low and high and low != high:
        return f"{low}-{high}"
    return low or high or "unknown"


@dataclass
class MetricsServer:
    """The HTTP endpoint serving one registry (prometheus_client's WSGI server on a daemon thread)."""

    metrics: FleetMetrics
    address: str
    port: int
    server: Any

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def start_metrics_server(metrics: FleetMetrics, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve `metrics` on http://host:port/metrics; raises OSError when the port cannot be bound."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(metrics, host, int(server.server_address[1]), server)
