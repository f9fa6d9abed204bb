"""Policy results in the lake: state rows per cluster (results and non-passing subjects) and the status history.

The writer (`FleetWriter`) rewrites a cluster's `policy_results` and `policy_items` only when its
`StandardsSnapshot` is a new object (the engine hands over the same one while nothing changed), and appends to the
`policy_status` day table a row per (policy, cluster) whose status or counts changed, plus one baseline row of
every (policy, cluster) at the first write of each day, so the 30-day trend reads at most a row per day and pair
plus the changes, whatever the number of polls.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.store.schemas import POLICY_ITEMS, POLICY_RESULTS, SCHEMA_VERSION, schema_for
from backend.store.standards_model import PolicyItem, PolicyResult, StandardsSnapshot

COUNTS = ("checked", "passing", "violating", "unknown", "waived", "upcoming")


def state_tables(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                 snapshot: StandardsSnapshot) -> dict[str, pa.Table]:
    """The cluster's `policy_results` and `policy_items` state tables (built column by column)."""
    results = list(snapshot.results.values())
    n = len(results)
    cols: dict[str, list[Any]] = {
        "poll_id": [poll_id] * n, "polled_at": [polled_at] * n, "cluster_name": [cluster_name] * n,
        "cluster_id": [cluster_id] * n, "policy_id": [r.policy_id for r in results],
        "status": [r.status for r in results], "severity": [r.severity for r in results],
        **{c: [getattr(r, c) for r in results] for c in COUNTS}, "reason": [r.reason for r in results],
        "items_omitted": [r.items_omitted for r in results], "evaluated_at": [r.evaluated_at for r in results],
        "evidence_at": [r.evidence_at for r in results], "since": [r.since for r in results],
        "policy_digest": [r.policy_digest for r in results], "policy_set": [snapshot.policy_set] * n,
        "schema_version": [SCHEMA_VERSION] * n}
    owners = [r.policy_id for r in results for _i in r.items]
    items = [i for r in results for i in r.items]
    m = len(items)
    item_cols: dict[str, list[Any]] = {
        "poll_id": [poll_id] * m, "polled_at": [polled_at] * m, "cluster_name": [cluster_name] * m,
        "policy_id": owners, **{c: [getattr(i, c) for i in items] for c in (
            "kind", "name", "outcome", "seen", "wanted", "reason", "count", "since", "waiver")},
        "schema_version": [SCHEMA_VERSION] * m}
    return {"policy_results": pa.Table.from_pydict(cols, schema=schema_for(POLICY_RESULTS)),
            "policy_items": pa.Table.from_pydict(item_cols, schema=schema_for(POLICY_ITEMS))}


def _row(poll_id: str, polled_at: datetime, cluster: str, r: PolicyResult, baseline: bool) -> dict[str, Any]:
    return {"poll_id": poll_id, "polled_at": polled_at, "cluster_name": cluster, "policy_id": r.policy_id,
            "status": r.status, "severity": r.severity, **{c: getattr(r, c) for c in COUNTS}, "baseline": baseline,
            "schema_version": SCHEMA_VERSION}


def history_rows(poll_id: str, polled_at: datetime, cluster: str, previous: StandardsSnapshot | None,
                 current: StandardsSnapshot, *, baseline: bool) -> list[dict[str, Any]]:
    """`policy_status` rows: every pair when ``baseline``, else the pairs whose status or counts changed."""
    rows = []
    before = previous.results if previous is not None else {}
    for policy_id, r in current.results.items():
        old = before.get(policy_id)
        changed = old is None or (old.status, *(getattr(old, c) for c in COUNTS)) != (
            r.status, *(getattr(r, c) for c in COUNTS))
        if baseline or changed:
            rows.append(_row(poll_id, polled_at, cluster, r, baseline))
    return rows


def snapshots_from_tables(results: pa.Table, items: pa.Table) -> dict[str, StandardsSnapshot]:
    """The stored StandardsSnapshots per cluster (the engine's `since` baseline after a restart)."""
    by_pair: dict[tuple[str, str], list[PolicyItem]] = {}
    for row in items.to_pylist():
        by_pair.setdefault((row["cluster_name"], row["policy_id"]), []).append(PolicyItem(
            kind=row["kind"], name=row["name"], outcome=row["outcome"], seen=row["seen"], wanted=row["wanted"] or "",
            reason=row["reason"] or "", count=int(row["count"] or 1), since=row["since"], waiver=row["waiver"]))
    out: dict[str, StandardsSnapshot] = {}
    for row in results.to_pylist():
        name = row["cluster_name"]
        snapshot = out.setdefault(name, StandardsSnapshot(row["evaluated_at"], row["policy_set"] or ""))
        snapshot.results[row["policy_id"]] = PolicyResult(
            policy_id=row["policy_id"], cluster_name=name, status=row["status"], severity=row["severity"],
            **{c: int(row[c] or 0) for c in COUNTS}, reason=row["reason"] or "",
            items=tuple(by_pair.get((name, row["policy_id"]), ())), items_omitted=int(row["items_omitted"] or 0),
            evaluated_at=row["evaluated_at"], evidence_at=row["evidence_at"], since=row["since"],
            policy_digest=row["policy_digest"] or "")
    return out


def results_of(snapshots: Iterable[StandardsSnapshot]) -> list[PolicyResult]:
    """Every result of some clusters' snapshots."""
    return [r for s in snapshots for r in s.results.values()]
