"""Policy results on /metrics: per policy and cluster, from the poll's own evaluation (never a lake scan).

- `kafka_fleet_policy_status{cluster,policy,severity,status}` 1: the pair's status (one series per pair);
- `kafka_fleet_policy_findings{cluster,policy,outcome}`: subjects (topics, brokers, groups, client instances) that
  violate, are unknown, waived or upcoming (pairs with findings only);
- `kafka_fleet_policy_passing_ratio{policy}` / `kafka_fleet_cluster_policies_passing_ratio{cluster}`: the share of
  pairs passing (pass, waived, upcoming), per policy over its clusters and per cluster over its policies;
- `kafka_fleet_policy_file_refused` 1 while the policy file on disk is refused (the last good one is in use);
- `kafka_fleet_policy_series_dropped`: pairs left out beyond `MAX_PAIRS` (worst kept first).

Label values go through the endpoint's `label_value` (hidden characters shown, cut at 128 characters).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from backend.plain_text import visible
from backend.store.model import FleetPoll
from backend.store.standards_model import STATUS_ORDER, PolicyResult

PREFIX = "kafka_fleet"
MAX_PAIRS = 20_000
MAX_LABEL_CHARS = 128
PASSING = ("pass", "waived", "upcoming")


def _label(value: object) -> str:
    text = visible(value)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def standards_families(poll: FleetPoll, file_state: Mapping[str, Any] | None = None, *,
                       max_pairs: int = MAX_PAIRS, label: Callable[[object], str] | None = None) -> list[Metric]:
    """The policy families of one poll (see the module docstring); ``label``: the endpoint's label function
    (`backend.collect.metrics.label_value`, which FleetMetrics passes)."""
    _label_of = label or _label
    status = GaugeMetricFamily(f"{PREFIX}_policy_status", "1 for the status of each policy on each cluster (pass, "
                               "violation, unknown, waived, upcoming).", labels=["cluster", "policy", "severity",
                                                                                  "status"])
    findings = GaugeMetricFamily(f"{PREFIX}_policy_findings", "Subjects (topics, brokers, groups, client instances) "
                                 "of a policy on a cluster by outcome.", labels=["cluster", "policy", "outcome"])
    by_policy = GaugeMetricFamily(f"{PREFIX}_policy_passing_ratio", "Share of the clusters a policy applies to that "
                                  "pass it (pass, waived or upcoming).", labels=["policy"])
    by_cluster = GaugeMetricFamily(f"{PREFIX}_cluster_policies_passing_ratio", "Share of the policies applying to a "
                                   "cluster that it passes.", labels=["cluster"])
    refused = GaugeMetricFamily(f"{PREFIX}_policy_file_refused", "1 while the policy file on disk is refused (the "
                                "last good one stays in use).")
    dropped = GaugeMetricFamily(f"{PREFIX}_policy_series_dropped", "Policy/cluster pairs left out of "
                                f"{PREFIX}_policy_status beyond the limit (the worst are kept).")
    results: list[PolicyResult] = [r for s in poll.clusters if s.standards is not None
                                   for r in s.standards.results.values()]
    results.sort(key=lambda r: (STATUS_ORDER.get(r.status, 9), r.cluster_name, r.policy_id))
    kept = results[:max_pairs]
    for r in kept:
        cluster, policy = _label_of(r.cluster_name), _label_of(r.policy_id)
        status.add_metric([cluster, policy, r.severity, r.status], 1.0)
        for outcome in ("violating", "unknown", "waived", "upcoming"):
            count = getattr(r, outcome)
            if count:
                findings.add_metric([cluster, policy, "violation" if outcome == "violating" else outcome],
                                    float(count))
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    cluster_totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        ok = int(r.status in PASSING)
        totals[r.policy_id][0] += ok
        totals[r.policy_id][1] += 1
        cluster_totals[r.cluster_name][0] += ok
        cluster_totals[r.cluster_name][1] += 1
    for policy, (ok, total) in sorted(totals.items()):
        by_policy.add_metric([_label_of(policy)], ok / total)
    for cluster, (ok, total) in sorted(cluster_totals.items()):
        by_cluster.add_metric([_label_of(cluster)], ok / total)
    if file_state:
        refused.add_metric([], 1.0 if file_state.get("error") and (
            file_state.get("using") == "last_good" or (file_state.get("error_at") or "") > (
                file_state.get("loaded_at") or "")) else 0.0)
    dropped.add_metric([], float(len(results) - len(kept)))
    return [status, findings, by_policy, by_cluster, refused, dropped]
