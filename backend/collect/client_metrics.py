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
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from backend.collect.schedule import ClusterSchedule
from backend.config import BrokerMetricsSource, ClusterConfig, Settings
from backend.kafka.admin import NodeInfo
from backend.kafka.broker_metrics import DIALECT_STRIMZI, UNKNOWN, ConnectionSample, DeprecatedSample, PageReading
from backend.kafka.client_floors import JAVA_NAMES
from backend.kafka.metrics_fetch import (
    Endpoint,
    MetricsFetchError,
    fill_template,
    read_exporter,
    read_prometheus,
    ssl_context,
)
from backend.store.inventory_model import Baseline, DeprecatedUse, InventorySnapshot, SoftwareConnections

DOC = "docs/client-inventory.md"
# At most this many client software versions are kept per cluster; the rest are summed into one row, so a
# client that invents a new name per connection cannot grow the lake, the pages or /metrics without bound.
MAX_SOFTWARE = 200
OTHER = "(other)"
EITHER = "either"  # a connection without a name on an inter-broker listener clients share: a broker's or a client's
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
                now: datetime | None = None, *, roles: BrokerRoles | None = None) -> InventorySnapshot:
        """Read the cluster's inventory now (every endpoint concurrently), fold it with the last one, remember it.

        `roles` tells the brokers' own connections (controller and inter-broker listeners) from the clients'.
        """
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
        snapshot = _fold(source, settings, brokers, readings, endpoints, previous, collected_at, roles)
        snapshot.duration_ms = (time.monotonic() - started) * 1000
        with self._lock:
            self._last[cluster.name] = snapshot
            self.stats["collections"] += 1
            self.stats["endpoints_read"] += sum(1 for e in endpoints.values() if e is None)
            self.stats["endpoints_failed"] += sum(1 for e in endpoints.values() if e is not None)
        return snapshot


@dataclass(frozen=True)
class BrokerRoles:
    """What tells the brokers' own connections from the clients' on a cluster.

    A connection is the brokers' own when it comes in on a controller listener (KRaft's controller.listener.names),
    or on the inter-broker listener from Apache Kafka's Java client at a version one of the cluster's brokers runs
    (where clients share that listener, an application on the very same Java client version counts here too).
    """

    controller_listeners: frozenset[str] = frozenset({"CONTROLLER"})
    inter_broker_listener: str | None = "PLAINTEXT"  # Kafka's default: security.inter.broker.protocol's name
    broker_versions: frozenset[str] = frozenset()

    @classmethod
    def of(cls, configs: Mapping[int, Mapping[str, Any]] | None, broker_versions: Iterable[str | None]) -> BrokerRoles:
        """From the brokers' configs as last read (broker id -> name -> ConfigValue-like with `.value`), if any."""
        controllers: set[str] = set()
        inter: set[str] = set()
        for values in (configs or {}).values():
            names = getattr(values.get("controller.listener.names"), "value", None)
            controllers.update(n.strip().upper() for n in (names or "").split(",") if n.strip())
            name = getattr(values.get("inter.broker.listener.name"), "value", None)
            if name:
                inter.add(name.strip().upper())
            elif values:
                protocol = getattr(values.get("security.inter.broker.protocol"), "value", None)
                inter.add((protocol or "PLAINTEXT").strip().upper())
        return cls(controller_listeners=frozenset(controllers or {"CONTROLLER"}),
                   inter_broker_listener=next(iter(sorted(inter)), "PLAINTEXT"),
                   broker_versions=frozenset(v for v in broker_versions if v))

    def role(self, listener: str, software_name: str, software_version: str, *, shared: bool = True) -> str:
        """`broker` for the brokers' own connections, else `client`; `either` for a connection without a software
        name on an inter-broker listener that clients share (`shared`): the brokers' replica fetchers send no name
        (checked on 4.3.1), so such a connection may be theirs or an old client's."""
        upper = listener.upper()
        if upper in self.controller_listeners:
            return "broker"
        if upper == (self.inter_broker_listener or "").upper():
            if not shared:
                return "broker"  # a listener of the brokers' own: every connection on it is theirs
            if software_name in JAVA_NAMES and software_version in self.broker_versions:
                return "broker"
            if software_name == UNKNOWN:
                return EITHER
        return "client"

    def shared_listeners(self, rows: Iterable[ConnectionSample]) -> set[str]:
        """The listeners clients connect to: any with a named connection that is not the brokers' own (this
        product's probe counts: it connects where clients do)."""
        return {c.listener.upper() for c in rows
                if c.software_name != UNKNOWN and self.role(c.listener, c.software_name, c.software_version) != "broker"}


def _fold(source: BrokerMetricsSource, settings: Settings, brokers: Sequence[NodeInfo],
          readings: list[tuple[int | None, PageReading]], endpoints: dict[str, str | None],
          previous: InventorySnapshot | None, at: datetime, roles: BrokerRoles | None = None) -> InventorySnapshot:
    """This read's pages folded with the last inventory (pure; docs/client-inventory.md, "How absence is judged").

    Per endpoint (an exporter page, or a Prometheus `instance`): one that could not be read keeps its last rows and
    its baseline; counts are compared only between two reads of the same broker process (its start time, or a count
    that went down, tells a restart); a series or a client that went away stays as evidence until the window ends.
    """
    roles = roles or BrokerRoles()
    window = settings.client_metrics_window_s
    by_host = _broker_by_host(brokers)
    connections: list[SoftwareConnections] = []
    samples: list[tuple[int | None, DeprecatedSample]] = []
    kip511 = kip896 = 0
    dialect: str | None = None
    started: dict[str, float] = {}
    kip511_at: set[str] = set()
    kip896_at: set[str] = set()
    broker_of: dict[str, int] = {}
    for fixed, reading in readings:
        kip511 += reading.kip511_series
        kip896 += reading.kip896_series
        dialect = dialect or reading.dialect
        started.update(reading.started)
        kip511_at |= reading.kip511_endpoints
        kip896_at |= reading.kip896_endpoints
        for where, bid in reading.broker_ids.items():
            broker_of.setdefault(where, bid)
        for where in reading.kip511_endpoints | set(reading.started):
            if fixed is not None:
                broker_of[where] = fixed
            elif where not in broker_of and _host_of(where) in by_host:
                broker_of[where] = by_host[_host_of(where)]
        shared = roles.shared_listeners(reading.connections)
        for c in reading.connections:
            connections.append(SoftwareConnections(
                fixed if fixed is not None else broker_of.get(c.endpoint), c.endpoint, c.listener, c.software_name,
                c.software_version, c.connections,
                role=roles.role(c.listener, c.software_name, c.software_version, shared=c.listener.upper() in shared)))
        for d in reading.deprecated:
            samples.append((fixed if fixed is not None else broker_of.get(d.endpoint), d))
    read_ok = [e for e, err in endpoints.items() if err is None]
    failed = {e: err for e, err in endpoints.items() if err is not None}
    where = source.label
    # The endpoints this read saw whole: each exporter page with KIP-511 series, or each Prometheus instance with them.
    seen = set(kip511_at) if read_ok else set()
    if source.prometheus and read_ok and kip511:
        for text in _missing_brokers(brokers, seen, broker_of):
            failed[text] = (f"{text}: no series in the Prometheus answer ({where}): it does not scrape this broker, or "
                            "its exporter is down, so nothing can be said of its clients")
    elif kip511:
        for endpoint in sorted(set(read_ok) - kip511_at):
            failed[endpoint] = f"{endpoint}: no KIP-511 series on this page (the other brokers' pages have them)"
    listed = {n.broker_id for n in brokers}
    before = previous.baselines if previous is not None else {}
    # What a baseline proves: the rules export KIP-896 (a series on one broker's page shows it for the cluster, whose
    # brokers run the same rules; or the fleet file says so), so a meter new at the next read is new use.
    exported = seen if kip896_at or source.exports_deprecated_requests else set()
    connections = _held_connections(_bounded(connections), previous, seen, listed, at, window)
    deprecated = _deprecated(samples, previous, seen, started, listed, at, window)
    baselines = {e: Baseline(started.get(e), at, e in exported) for e in seen}
    kept = {r.endpoint for r in connections} | {d.endpoint for d in deprecated}
    baselines.update({e: b for e, b in before.items() if e not in seen and e in kept})
    endpoints = {**endpoints, **{e: why for e, why in failed.items() if e not in endpoints}}
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
            kip896_status, message = "reported", None
        elif source.exports_deprecated_requests:
            kip896_status, message = "none", None
        else:
            kip896_status = "not_exported"
            why = ("Strimzi's rules drop RequestMetrics" if dialect == DIALECT_STRIMZI else
                   "either no client used a removed version since the brokers started (a broker creates the meter at "
                   "the first such request) or the exporter's rules drop it: the page cannot tell which")
            message = (f"no KIP-896 series (requests on removed protocol versions) at {where} ({why}): add the rule "
                       f"for `{KIP896_RULE}` ({DOC}), then set exports_deprecated_requests = true so that no series "
                       "counts as none")
        if failed:
            message = "; ".join(filter(None, [message, *failed.values()]))
    return InventorySnapshot(collected_at=at, source=source.kind, source_label=where, status=status,
                             kip896=kip896_status, window_s=window, dialect=dialect, message=message,
                             endpoints=endpoints, baselines=baselines, connections=tuple(connections),
                             deprecated=tuple(deprecated))


def _missing_brokers(brokers: Sequence[NodeInfo], seen: set[str], broker_of: dict[str, int]) -> list[str]:
    """The brokers Metadata lists that a Prometheus answer holds no KIP-511 series of ("broker 2 (host:port)")."""
    mapped = {broker_of[e] for e in seen if e in broker_of}
    unmapped = [e for e in seen if e not in broker_of]
    missing = [n for n in sorted(brokers, key=lambda n: n.broker_id) if n.broker_id not in mapped]
    if not unmapped:
        return [f"broker {n.broker_id} ({n.host}:{n.port})" for n in missing]
    if len(seen) < len(brokers):  # instances that cannot be told apart: only how many are missing is known
        return [f"{len(brokers) - len(seen)} of the {len(brokers)} brokers Metadata lists (the answer's instances "
                "cannot be matched to broker ids: give each broker its own host, or keep the default rules' app-info "
                "series)"]
    return []


def _host_of(endpoint: str) -> str:
    return _host(endpoint if "://" in endpoint else f"http://{endpoint}")


def _broker_by_host(brokers: Sequence[NodeInfo]) -> dict[str, int]:
    """Broker id by host, for a Prometheus `instance`; a host shared by two brokers maps to none."""
    seen: dict[str, list[int]] = {}
    for node in brokers:
        seen.setdefault(node.host, []).append(node.broker_id)
    return {host: ids[0] for host, ids in seen.items() if len(ids) == 1}


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


def _carried(broker_id: int | None, endpoint: str, seen: set[str], listed: set[int]) -> bool:
    """Whether rows of an endpoint this read did not see whole are kept as they were (their page failed, or their
    broker is still listed): they are its last known state and the baseline of the next read."""
    return endpoint not in seen and broker_id is not None and broker_id in listed


def _held_connections(rows: list[SoftwareConnections], previous: InventorySnapshot | None, seen: set[str],
                      listed: set[int], at: datetime, window_s: float) -> list[SoftwareConnections]:
    """This read's connection rows with when each was last above zero, plus the rows it no longer shows: an endpoint
    not read keeps its rows; a client whose series went away stays (0 connections) until the window ends."""
    before = {(r.endpoint, r.listener, r.software_name, r.software_version): r
              for r in (previous.connections if previous is not None else ())}
    out: list[SoftwareConnections] = []
    keys = set()
    for r in rows:
        key = (r.endpoint, r.listener, r.software_name, r.software_version)
        keys.add(key)
        old = before.get(key)
        last = at if r.connections > 0 else (old.last_seen_at if old is not None else None)
        out.append(replace(r, last_seen_at=last))
    since = at - timedelta(seconds=window_s)
    for key, old in before.items():
        if key in keys:
            continue
        if _carried(old.broker_id, old.endpoint, seen, listed):
            out.append(old)
        elif old.last_seen_at is not None and old.last_seen_at >= since:
            out.append(replace(old, connections=0))  # gone from a page read whole: held until the window ends
    return sorted(out, key=lambda r: (r.endpoint, r.listener, r.software_name, r.software_version))


def _deprecated(samples: list[tuple[int | None, DeprecatedSample]], previous: InventorySnapshot | None,
                seen: set[str], started: dict[str, float], listed: set[int], at: datetime,
                window_s: float) -> list[DeprecatedUse]:
    """Each deprecated series with when its count last grew between two reads of the same broker process."""
    before = {(d.endpoint, d.request, d.version, d.software_name, d.software_version): d
              for d in (previous.deprecated if previous is not None else ())}
    baselines = previous.baselines if previous is not None else {}
    out: list[DeprecatedUse] = []
    keys: set[tuple[str, str, int, str, str]] = set()
    for broker_id, s in samples:
        key = (s.endpoint, s.request, s.version, s.software_name, s.software_version)
        if key in keys:
            continue
        keys.add(key)
        old = before.get(key)
        base = baselines.get(s.endpoint)
        start = started.get(s.endpoint)
        restarted = base is not None and base.same_process(start) is False
        rate: float | None = None
        if old is not None:
            first = old.first_seen_at
            if restarted or s.count < old.count:  # a new broker process: all it counted came after the last read
                last = at if s.count > 0 else old.last_increase_at
            elif s.count > old.count:
                last = at
                since = old.last_seen_at or (previous.collected_at if previous is not None else None)
                dt = (at - since).total_seconds() if since is not None else 0.0
                rate = (s.count - old.count) / dt if dt > 0 else None
            else:
                last, rate = old.last_increase_at, 0.0
        else:
            first = at
            if base is not None and (base.kip896 or (restarted and start is not None
                                                     and start > base.read_at.timestamp())):
                last = at  # a meter the broker created since its last good read: new use
            elif start is not None and s.count > 0:
                last = datetime.fromtimestamp(start, UTC)  # counted since the broker started, when exactly unknown
            else:
                last = None  # counted before the product watched: undetermined until watched for a whole window
        out.append(DeprecatedUse(broker_id, s.endpoint, s.request, s.version, s.software_name, s.software_version,
                                 s.count, first, last, rate, at))
    for key, old in before.items():
        if key in keys:
            continue
        if _carried(old.broker_id, old.endpoint, seen, listed) or old.held(at, window_s):
            out.append(old)  # not read, or gone from its page (a restart, rules that changed): evidence kept
    return sorted(out, key=lambda d: (d.endpoint, d.request, d.version, d.software_name, d.software_version))
