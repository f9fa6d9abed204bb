"""Policy results in the lake: state rows per cluster (results and non-passing subjects) and the status history.

The writer (`FleetWriter`) rewrites a cluster's `policy_results` (findings nested) only when its
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
import pyarrow.compute as pc

from backend.store.schemas import POLICY_RESULTS, SCHEMA_VERSION, schema_for
from backend.store.standards_model import ClientInstance, PolicyItem, PolicyResult, StandardsSnapshot

COUNTS = ("checked", "passing", "violating", "unknown", "waived", "upcoming")


ITEM_FIELDS = ("kind", "name", "outcome", "seen", "wanted", "reason", "count", "since", "waiver")
# The stored fields of a ClientInstance (`finding` names its item), in POLICY_INSTANCE's order.
INSTANCE_FIELDS = ("instance_id", "client_type", "client_id", "group_id", "software_name", "software_version",
                   "principal", "client_address", "last_seen")


def _instances_column(results: list[PolicyResult], item_type: pa.DataType) -> pa.Array:
    """Per result, the instances behind its client findings, each with the name of its finding."""
    rows = [[(i.name, c) for i in r.items for c in i.instances] for r in results]
    offsets = [0]
    for found in rows:
        offsets.append(offsets[-1] + len(found))
    flat = [pair for found in rows for pair in found]
    fields = [pa.array([name for name, _c in flat], item_type.field("finding").type)]
    fields += [pa.array([getattr(c, f) for _n, c in flat], item_type.field(f).type) for f in INSTANCE_FIELDS]
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.StructArray.from_arrays(fields,
                                                                                               fields=list(item_type)))


def state_tables(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                 snapshot: StandardsSnapshot) -> dict[str, pa.Table]:
    """The cluster's `policy_results` state table: a row per policy, its findings nested (one file per cluster)."""
    results = list(snapshot.results.values())
    n = len(results)
    items = [i for r in results for i in r.items]
    offsets = [0]
    for r in results:
        offsets.append(offsets[-1] + len(r.items))
    schema = schema_for(POLICY_RESULTS)
    item_type = schema.field("items").type.value_type
    flat = pa.StructArray.from_arrays([pa.array([getattr(i, f) for i in items], item_type.field(f).type)
                                       for f in ITEM_FIELDS], fields=list(item_type))
    cols: dict[str, Any] = {
        "poll_id": [poll_id] * n, "polled_at": [polled_at] * n, "cluster_name": [cluster_name] * n,
        "cluster_id": [cluster_id] * n, "policy_id": [r.policy_id for r in results],
        "status": [r.status for r in results], "severity": [r.severity for r in results],
        **{c: [getattr(r, c) for r in results] for c in COUNTS}, "reason": [r.reason for r in results],
        "items_omitted": [r.items_omitted for r in results], "evaluated_at": [r.evaluated_at for r in results],
        "evidence_at": [r.evidence_at for r in results], "since": [r.since for r in results],
        "policy_digest": [r.policy_digest for r in results], "policy_set": [snapshot.policy_set] * n,
        "items": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat),
        "schema_version": [SCHEMA_VERSION] * n,
        "instances": _instances_column(results, schema.field("instances").type.value_type)}
    arrays = [cols[f.name] if isinstance(cols[f.name], pa.Array) else pa.array(cols[f.name], f.type) for f in schema]
    return {"policy_results": pa.Table.from_arrays(arrays, schema=schema)}


def items_table(results: pa.Table) -> pa.Table:
    """The nested findings of `policy_results` rows as a flat table (cluster_name, policy_id, then ITEM_FIELDS)."""
    if results.num_rows == 0:
        return pa.table({"cluster_name": pa.array([], pa.string()), "policy_id": pa.array([], pa.string()),
                         **{f.name: pa.array([], f.type) for f in schema_for(POLICY_RESULTS).field(
                             "items").type.value_type}})
    lists = results.column("items").combine_chunks()
    parents = pc.list_parent_indices(lists)
    flat = pc.list_flatten(lists)
    out = {"cluster_name": pc.take(results.column("cluster_name"), parents),
           "policy_id": pc.take(results.column("policy_id"), parents)}
    out.update({f: flat.field(f) for f in ITEM_FIELDS})
    return pa.table(out)


def instances_table(results: pa.Table) -> pa.Table:
    """The client instances nested in `policy_results` rows as a flat table (cluster_name, policy_id, finding, then
    INSTANCE_FIELDS); rows written before instances were kept have none."""
    item_type = schema_for(POLICY_RESULTS).field("instances").type.value_type
    if results.num_rows == 0 or "instances" not in results.column_names:
        return pa.table({"cluster_name": pa.array([], pa.string()), "policy_id": pa.array([], pa.string()),
                         **{f.name: pa.array([], f.type) for f in item_type}})
    lists = results.column("instances").combine_chunks()
    parents = pc.list_parent_indices(lists)
    flat = pc.list_flatten(lists)
    out = {"cluster_name": pc.take(results.column("cluster_name"), parents),
           "policy_id": pc.take(results.column("policy_id"), parents)}
    out.update({f.name: flat.field(f.name) for f in item_type})
    return pa.table(out)


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


def snapshots_from_tables(results: pa.Table) -> dict[str, StandardsSnapshot]:
    """The stored StandardsSnapshots per cluster (the engine's `since` baseline after a restart)."""
    named: dict[tuple[str, str, str], list[ClientInstance]] = {}
    for row in instances_table(results).to_pylist():
        named.setdefault((row["cluster_name"], row["policy_id"], row["finding"]), []).append(
            ClientInstance(**{f: row[f] for f in INSTANCE_FIELDS}))
    by_pair: dict[tuple[str, str], list[PolicyItem]] = {}
    for row in items_table(results).to_pylist():
        by_pair.setdefault((row["cluster_name"], row["policy_id"]), []).append(PolicyItem(
            kind=row["kind"], name=row["name"], outcome=row["outcome"], seen=row["seen"], wanted=row["wanted"] or "",
            reason=row["reason"] or "", count=int(row["count"] or 1), since=row["since"], waiver=row["waiver"],
            instances=tuple(named.get((row["cluster_name"], row["policy_id"], row["name"]), ()))))
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
