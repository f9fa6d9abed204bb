"""The client inventory of each cluster, read from its brokers' own JMX metrics at its own interval (read-only).

A cluster with [clusters.broker_metrics] is read when `settings.client_metrics_interval_s` has passed for it,
alongside the poll's probe and within the poll's deadline: every broker's exporter page (the `metrics_url`
template filled from Metadata, concurrently) or one Prometheus query. The answer becomes an InventorySnapshot:
connections by client software (KIP-511) and the deprecated requests (KIP-896) with, per series, when its
count last grew. A failure is the cluster's status, never an exception; a missing series is a status that says
which rule to add (docs/client-inventory.md), never a silent zero.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from urllib.parse import urlsplit

from backend.collect.schedule import ClusterSchedule
from backend.config import BrokerMetricsSource, ClusterConfig, Settings
from backend.kafka.admin import NodeInfo
from backend.kafka.broker_metrics import (
    DIALECT_DEFAULT,
    DIALECT_STRIMZI,
    EXPORTS_KIP896,
    ConnectionSample,
    DeprecatedSample,
    PageReading,
)
from backend.kafka.metrics_fetch import (
    Endpoint,
    MetricsFetchError,
    fill_template,
    read_exporter,
    read_prometheus,
    ssl_context,
)
from backend.store.inventory_model import DeprecatedUse, InventorySnapshot, SoftwareConnections

DOC = "docs/client-inventory.md"
# At most this many client software versions are kept per cluster; the rest are summed into one row, so a
# client that invents a new name per connection cannot grow the lake, the pages or /metrics without bound.
MAX_SOFTWARE = 200
OTHER = "(other)"
KIP511_RULE = ("kafka.server<type=socket-server-metrics, clientSoftwareName=(.+), clientSoftwareVersion=(.+), "
               "listener=(.+), networkProcessor=(.+)><>connections")
KIP896_RULE = ("kafka.network<type=RequestMetrics, name=DeprecatedRequestsPerSec, request=(.+), version=(.+), "
               "clientSoftwareName=(.+), clientSoftwareVersion=(.+)><>Count")


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


class ClientMetricsCollector(ClusterSchedule[InventorySnapshot]):
    """When each cluster's inventory is due, and the last one read (per series: when its count last grew)."""

    def __init__(self) -> None:
        """Start with nothing read: every cluster with a source is due at its first poll."""
        super().__init__()
        self.stats = {"collections": 0, "endpoints_read": 0, "endpoints_failed": 0}

    def due(self, cluster: ClusterConfig, settings: Settings, now: float | None = None) -> bool:
        """Whether the cluster's inventory should be read in this poll."""
        return cluster.broker_metrics is not None and self._is_due(cluster.name, settings.client_metrics_interval_s,
                                                                   now)

    def collect(self, cluster: ClusterConfig, settings: Settings, brokers: Sequence[NodeInfo], deadline: float,
                now: datetime | None = None) -> InventorySnapshot:
        """Read the cluster's inventory now (every endpoint concurrently), fold it with the last one, remember it."""
        source = cluster.broker_metrics
        assert source is not None
        started = time.monotonic()
        with self._lock:
            previous = self._last.get(cluster.name)
            self._next_due[cluster.name] = started + settings.client_metrics_interval_s
        collected_at = now or datetime.now(UTC)
        timeout = max(0.1, min(source.timeout_s or settings.request_timeout_s, deadline - time.monotonic()))
        endpoints: dict[str, str | None] = {}
        readings: list[tuple[int | None, PageReading]] = []
        try:
            context = ssl_context(source)
        except (OSError, ValueError) as exc:
            context = None
            endpoints[source.label] = f"TLS settings unusable: {exc}"
        if source.metrics_url and not endpoints:
            targets = [Endpoint(n.broker_id, fill_template(source.metrics_url, host=n.host, broker_id=n.broker_id,
                                                           port=n.port)) for n in sorted(brokers, key=lambda n: n.broker_id)]
            if not targets:
                endpoints[source.metrics_url] = "no broker listed by Metadata to fill the template with"

            def read(endpoint: Endpoint) -> tuple[Endpoint, PageReading | str]:
                try:
                    return endpoint, read_exporter(endpoint, source, timeout_s=timeout,
                                                   max_bytes=settings.client_metrics_max_bytes, context=context)
                except MetricsFetchError as exc:
                    return endpoint, str(exc)

            workers = max(1, min(len(targets), settings.probe_concurrency))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"metrics-{cluster.name}"[:30]) as pool:
                for endpoint, answer in pool.map(read, targets):
                    shown = endpoint.url.split("?", 1)[0]
                    if isinstance(answer, str):
                        endpoints[shown] = answer
                    else:
                        endpoints[shown] = None
                        readings.append((endpoint.broker_id, answer))
        elif source.prometheus and not endpoints:
            try:
                reading = read_prometheus(source, timeout_s=timeout, max_bytes=settings.client_metrics_max_bytes,
                                          context=context)
                endpoints[source.prometheus] = None
                readings.append((None, reading))
            except MetricsFetchError as exc:
                endpoints[source.prometheus] = str(exc)
        snapshot = self._fold(cluster, source, settings, brokers, readings, endpoints, previous, collected_at)
        snapshot.duration_ms = (time.monotonic() - started) * 1000
        with self._lock:
            self._last[cluster.name] = snapshot
            self.stats["collections"] += 1
            self.stats["endpoints_read"] += sum(1 for e in endpoints.values() if e is None)
            self.stats["endpoints_failed"] += sum(1 for e in endpoints.values() if e is not None)
        return snapshot

    def _fold(self, cluster: ClusterConfig, source: BrokerMetricsSource, settings: Settings,
              brokers: Sequence[NodeInfo], readings: list[tuple[int | None, PageReading]],
              endpoints: dict[str, str | None], previous: InventorySnapshot | None,
              at: datetime) -> InventorySnapshot:
        by_host = _broker_by_host(brokers)
        connections: list[SoftwareConnections] = []
        samples: list[tuple[int | None, DeprecatedSample]] = []
        kip511 = kip896 = 0
        dialect: str | None = None
        request_metrics = False
        for broker_id, reading in readings:
            kip511 += reading.kip511_series
            kip896 += reading.kip896_series
            dialect = dialect or reading.dialect
            request_metrics = request_metrics or reading.request_metrics
            for c in reading.connections:
                connections.append(_connection(c, broker_id if broker_id is not None else by_host.get(_host_of(c.endpoint))))
            for d in reading.deprecated:
                samples.append((broker_id if broker_id is not None else by_host.get(_host_of(d.endpoint)), d))
        connections = _bounded(connections)
        deprecated = _deprecated(samples, previous, at)
        read_ok = [e for e, err in endpoints.items() if err is None]
        failed = {e: err for e, err in endpoints.items() if err is not None}
        where = source.label
        if not read_ok:
            status, kip896_status = "error", "unavailable"
            message = "; ".join(f"{err}" for err in failed.values()) or f"nothing read from {where}"
        elif kip511 == 0:
            status, kip896_status = "no_kip511", "reported" if kip896 else "unavailable"
            message = (f"no KIP-511 series (connections by client software) at {where}: the exporter's rules drop "
                       f"them; add the rule for `{KIP511_RULE}` ({DOC})")
        else:
            status = "partial" if failed else "ok"
            if kip896:
                kip896_status = "reported"
                message = None
            elif _exports_kip896(source, dialect, request_metrics):
                kip896_status = "none"
                message = None
            else:
                kip896_status = "not_exported"
                named = {DIALECT_STRIMZI: "Strimzi's rules drop RequestMetrics", DIALECT_DEFAULT: "no RequestMetrics"}
                why = named.get(dialect or "", "the exporter's rules may drop them")
                message = (f"no KIP-896 series (requests on removed protocol versions) at {where} ({why}): add the rule "
                           f"for `{KIP896_RULE}` ({DOC}), or set exports_deprecated_requests = true if your rules "
                           "export them")
            if failed:
                message = "; ".join(filter(None, [message, *failed.values()]))
        return InventorySnapshot(collected_at=at, source=source.kind, source_label=where, status=status,
                                 kip896=kip896_status, window_s=settings.client_metrics_window_s, dialect=dialect,
                                 message=message, endpoints=endpoints, connections=tuple(connections),
                                 deprecated=tuple(deprecated))


def _exports_kip896(source: BrokerMetricsSource, dialect: str | None, request_metrics: bool) -> bool:
    """Whether no KIP-896 series means no such request: said by the fleet file, else known of the rules' dialect."""
    if source.exports_deprecated_requests is not None:
        return source.exports_deprecated_requests
    # An exporter page shows whether RequestMetrics are kept at all; a Prometheus answer only has our series.
    return dialect in EXPORTS_KIP896 and (request_metrics or source.prometheus is not None)


def _host_of(endpoint: str) -> str:
    return _host(endpoint if "://" in endpoint else f"http://{endpoint}")


def _broker_by_host(brokers: Sequence[NodeInfo]) -> dict[str, int]:
    """Broker id by host, for a Prometheus `instance`; a host shared by two brokers maps to none."""
    seen: dict[str, list[int]] = {}
    for node in brokers:
        seen.setdefault(node.host, []).append(node.broker_id)
    return {host: ids[0] for host, ids in seen.items() if len(ids) == 1}


def _connection(c: ConnectionSample, broker_id: int | None) -> SoftwareConnections:
    return SoftwareConnections(broker_id, c.endpoint, c.listener, c.software_name, c.software_version, c.connections)


def _bounded(rows: list[SoftwareConnections]) -> list[SoftwareConnections]:
    """At most MAX_SOFTWARE software versions (the most connected); the rest summed per endpoint and listener."""
    totals: dict[tuple[str, str], int] = {}
    for r in rows:
        totals[(r.software_name, r.software_version)] = totals.get((r.software_name, r.software_version), 0) + r.connections
    if len(totals) <= MAX_SOFTWARE:
        return rows
    keep = {k for k, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv))[:MAX_SOFTWARE]}
    out = [r for r in rows if (r.software_name, r.software_version) in keep]
    other: dict[tuple[int | None, str, str], int] = {}
    for r in rows:
        if (r.software_name, r.software_version) not in keep:
            other[(r.broker_id, r.endpoint, r.listener)] = other.get((r.broker_id, r.endpoint, r.listener), 0) + r.connections
    out += [SoftwareConnections(b, e, listener, OTHER, OTHER, n) for (b, e, listener), n in sorted(other.items(), key=str)]
    return out


def _deprecated(samples: list[tuple[int | None, DeprecatedSample]], previous: InventorySnapshot | None,
                at: datetime) -> list[DeprecatedUse]:
    """Each deprecated series with when its count last grew (a count that went down: the broker restarted)."""
    before = {(d.endpoint, d.request, d.version, d.software_name, d.software_version): d
              for d in (previous.deprecated if previous is not None else ())}
    dt = (at - previous.collected_at).total_seconds() if previous is not None else 0.0
    out: list[DeprecatedUse] = []
    seen: set[tuple[str, str, int, str, str]] = set()
    for broker_id, s in samples:
        key = (s.endpoint, s.request, s.version, s.software_name, s.software_version)
        if key in seen:
            continue
        seen.add(key)
        old = before.get(key)
        if old is None:
            last = at if s.count > 0 else None
            out.append(DeprecatedUse(broker_id, s.endpoint, s.request, s.version, s.software_name, s.software_version,
                                     s.count, at, last, None))
            continue
        if s.count > old.count:
            rate = (s.count - old.count) / dt if dt > 0 else None
            last = at
        elif s.count < old.count:  # reset: the broker restarted; what it counted since is new use
            rate, last = None, (at if s.count > 0 else old.last_increase_at)
        else:
            rate, last = 0.0, old.last_increase_at
        out.append(DeprecatedUse(broker_id, s.endpoint, s.request, s.version, s.software_name, s.software_version,
                                 s.count, old.first_seen_at, last, rate))
    return sorted(out, key=lambda d: (d.endpoint, d.request, d.version, d.software_name, d.software_version))

