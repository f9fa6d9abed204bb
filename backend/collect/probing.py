"""Adapter from backend.kafka.probe results to broker snapshot fields (reachability, version truth)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from backend.config import ClusterConfig
from backend.kafka.admin import NodeInfo

MAX_PROBE_THREADS = 64  # shared by every cluster's probes; each probe ends by its own deadline
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _probe_pool() -> ThreadPoolExecutor:
    """One long-lived pool: starting threads for every poll cost more CPU than the probes themselves."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=MAX_PROBE_THREADS, thread_name_prefix="probe")
        return _POOL


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


def default_prober(cluster: ClusterConfig, nodes: Sequence[NodeInfo], timeout_s: float) -> dict[int, ProbeOutcome]:
    """Probe every broker concurrently with backend.kafka.probe (ApiVersions + KIP-885 DescribeCluster)."""
    from backend.kafka import probe as probe_module

    security = probe_module.ProbeSecurity.from_cluster(cluster)

    def one(node: NodeInfo) -> tuple[int, ProbeOutcome]:
        start = time.monotonic()
        try:
            result = probe_module.probe_broker(node.host, node.port, security=security, timeout_s=timeout_s)
        except (OSError, ValueError, RuntimeError, TimeoutError) as exc:
            elapsed = (time.monotonic() - start) * 1000
            return node.broker_id, ProbeOutcome(reachable=False, probe_ms=elapsed, error=f"{type(exc).__name__}: {exc}")
        return node.broker_id, outcome_from_result(result, (time.monotonic() - start) * 1000)

    if not nodes:
        return {}
    if len(nodes) == 1:
        return dict([one(nodes[0])])
    futures = [_probe_pool().submit(one, node) for node in nodes[1:]]
    first = one(nodes[0])  # this thread probes one broker itself
    return dict([first, *(f.result() for f in futures)])
