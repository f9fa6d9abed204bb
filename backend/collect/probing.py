"""Adapter from backend.kafka.probe results to broker snapshot fields (reachability, version truth)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass
from typing import Any

from backend.config import ClusterConfig
from backend.kafka import probe as probe_module
from backend.kafka.admin import NodeInfo

DEFAULT_PROBE_CONCURRENCY = 16
DEFAULT_MAX_BROKERS_PROBED = 256
# Per cluster: its own probe threads and its own name lookups, so a cluster whose brokers hang
# (or whose names never resolve) spends only its own budget, never another cluster's.
_POOLS: dict[tuple[str, int], ThreadPoolExecutor] = {}
_RESOLVERS: dict[str, probe_module.Resolver] = {}
_POOL_LOCK = threading.Lock()


def _probe_pool(cluster_name: str, concurrency: int) -> ThreadPoolExecutor:
    """The cluster's long-lived pool: starting threads for every poll cost more CPU than the probes."""
    with _POOL_LOCK:
        pool = _POOLS.get((cluster_name, concurrency))
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"probe-{cluster_name[:20]}")
            _POOLS[(cluster_name, concurrency)] = pool
        return pool


def cluster_resolver(cluster_name: str) -> probe_module.Resolver:
    """The cluster's own name resolver (its hung lookups never delay another cluster's)."""
    with _POOL_LOCK:
        resolver = _RESOLVERS.get(cluster_name)
        if resolver is None:
            resolver = _RESOLVERS[cluster_name] = probe_module.Resolver()
        return resolver


@dataclass(slots=True)
class ProbeOutcome:
    """What the per-broker probe learned about one broker."""

    reachable: bool
    software_name: str | None = None
    software_version: str | None = None
    version_provenance: str = "unknown"
    version_min: str | None = None
    version_max: str | None = None
    version_confidence: str | None = None
    api_versions_json: str | None = None
    probe_ms: float | None = None
    error: str | None = None


Prober = Callable[[ClusterConfig, Sequence[NodeInfo], float], dict[int, ProbeOutcome]]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _api_versions_json(value: Any) -> str | None:
    """The probe's {api_key: (min, max)} table as JSON text."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    table: dict[str, Any] = {}
    for key, entry in dict(value).items():
        if isinstance(entry, (tuple, list)) and len(entry) == 2:
            table[str(key)] = [int(entry[0]), int(entry[1])]
        else:
            table[str(key)] = str(entry)
    return json.dumps(table, sort_keys=True)


def _probe_ms(result: Any, fallback: float) -> float:
    timings = getattr(result, "timings_ms", None)
    if isinstance(timings, dict):
        for key in ("total_ms", "total"):
            if isinstance(timings.get(key), (int, float)):
                return float(timings[key])
        numbers = [v for v in timings.values() if isinstance(v, (int, float))]
        if numbers:
            return float(sum(numbers))
    return fallback


def outcome_from_result(result: Any, elapsed_ms: float) -> ProbeOutcome:
    """Map a backend.kafka.probe.ProbeResult onto a ProbeOutcome."""
    error = _text(getattr(result, "error", None))
    reachable = getattr(result, "ok", None)
    if reachable is None:
        reachable = error is None
    provenance = getattr(result, "provenance", None) or "unknown"
    if provenance not in ("reported", "guessed", "unknown", "zookeeper"):
        provenance = "unknown"
    return ProbeOutcome(
        reachable=bool(reachable),
        software_name=_text(getattr(result, "software_name", None)),
        software_version=_text(getattr(result, "software_version", None)),
        version_provenance=provenance,
        version_min=_text(getattr(result, "version_min", None)),
        version_max=_text(getattr(result, "version_max", None)),
        version_confidence=_text(getattr(result, "confidence", None)),
        api_versions_json=_api_versions_json(getattr(result, "api_versions", None)),
        probe_ms=_probe_ms(result, elapsed_ms),
        error=error,
    )


def default_prober(
    cluster: ClusterConfig,
    nodes: Sequence[NodeInfo],
    timeout_s: float,
    *,
    concurrency: int = DEFAULT_PROBE_CONCURRENCY,
    max_brokers: int = DEFAULT_MAX_BROKERS_PROBED,
) -> dict[int, ProbeOutcome]:
    """Probe the cluster's brokers (ApiVersions + KIP-885 DescribeCluster) within timeout_s from now.

    At most `concurrency` probes run at once, on the cluster's own threads; at most `max_brokers`
    brokers are probed (the rest get an outcome saying so). timeout_s is one absolute deadline
    for all of them: a probe that waited in the queue gets only the time left, one that has not
    started by the deadline is dropped, and the call returns by the deadline.
    """
    deadline = time.monotonic() + timeout_s
    security = probe_module.ProbeSecurity.from_cluster(cluster)
    resolver = cluster_resolver(cluster.name)
    out: dict[int, ProbeOutcome] = {}
    for node in nodes[max_brokers:]:
        out[node.broker_id] = ProbeOutcome(
            reachable=False, error=f"not probed: the cluster lists more than max_brokers_probed={max_brokers} brokers")
    nodes = nodes[:max_brokers]

    def one(node: NodeInfo) -> tuple[int, ProbeOutcome]:
        start = time.monotonic()
        left = deadline - start
        if left <= 0.05:
            return node.broker_id, ProbeOutcome(reachable=False, error="not probed: the poll deadline passed first")
        try:
            result = probe_module.probe_broker(node.host, node.port, security=security, timeout_s=left,
                                               resolver=resolver)
        except (OSError, ValueError, RuntimeError, TimeoutError) as exc:
            elapsed = (time.monotonic() - start) * 1000
            return node.broker_id, ProbeOutcome(reachable=False, probe_ms=elapsed, error=f"{type(exc).__name__}: {exc}")
        return node.broker_id, outcome_from_result(result, (time.monotonic() - start) * 1000)

    if len(nodes) == 1:
        out.update([one(nodes[0])])
        return out
    if not nodes:
        return out
    futures = {node.broker_id: _probe_pool(cluster.name, concurrency).submit(one, node) for node in nodes}
    for broker_id, future in futures.items():
        try:
            # One absolute end for all of them (a probe ends by the deadline on its own; the
            # 0.1 s covers thread scheduling), so 400 late futures cost no more than one.
            found_id, outcome = future.result(timeout=max(0.0, deadline + 0.1 - time.monotonic()))
            out[found_id] = outcome
        except FuturesTimeout:
            future.cancel()  # still queued: it will not run
            out[broker_id] = ProbeOutcome(reachable=False, error="not probed: the poll deadline passed first")
    return out
