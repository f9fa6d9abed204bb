"""The client inventory in the lake: state rows of an InventorySnapshot, its change rows, and back.

Each cluster has two state files (kinds `inventory` and `inventory_runs` of the state manifest): one row per
(broker, listener, client software, version) with its connections and one per (broker, request, version,
software) with its deprecated-request count, rewritten only when they changed; and one row describing the last
collection (rewritten at each collection). Changes go to the change log (entity `client`):
`inventory_first_seen` (one row for a cluster's first collection), `client_software_appeared` /
`client_software_gone` (a software version with connections on the cluster, or no longer), and
`deprecated_requests_started` / `deprecated_requests_stopped` (a removed protocol version's count began to
grow, or has not grown for the window).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.store.inventory_model import Baseline, DeprecatedUse, InventorySnapshot, SoftwareConnections
from backend.store.schemas import INVENTORY_RUNS, INVENTORY_STATE, SCHEMA_VERSION, schema_for

CONNECTIONS = "connections"
DEPRECATED = "deprecated"
MAX_LISTED = 50  # software versions listed in one inventory_first_seen row

Change = tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]  # kind, subject, before, after


def software_subject(name: str, version: str) -> str:
    """The change-log subject of one client software version: "apache-kafka-java 2.8.2"."""
    return f"{name} {version}"


def deprecated_subject(use: DeprecatedUse) -> str:
    """The change-log subject of one deprecated use: "Produce v2 by unknown unknown"."""
    return f"{use.request} v{use.version} by {use.software_name} {use.software_version}"


def _software_rows(snap: InventorySnapshot) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in snap.connections:
        if row.connections <= 0:
            continue
        entry = out.setdefault((row.software_name, row.software_version), {
            "software_name": row.software_name, "software_version": row.software_version, "connections": 0,
            "listeners": set(), "brokers": set()})
        entry["connections"] += row.connections
        entry["listeners"].add(row.listener)
        entry["brokers"].add(row.broker_id if row.broker_id is not None else row.endpoint)
    return out


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    return {**entry, "listeners": sorted(entry["listeners"]), "brokers": sorted(entry["brokers"], key=str)}


def _uses(snap: InventorySnapshot) -> dict[tuple[str, int, str, str], list[DeprecatedUse]]:
    out: dict[tuple[str, int, str, str], list[DeprecatedUse]] = {}
    for use in snap.in_use():
        out.setdefault((use.request, use.version, use.software_name, use.software_version), []).append(use)
    return out


def diff(prev: InventorySnapshot | None, new: InventorySnapshot, cluster_name: str) -> list[Change]:
    """The change rows from one stored inventory to the next."""
    now_software = _software_rows(new)
    if prev is None:
        listed = sorted(now_software.values(), key=lambda e: (-e["connections"], e["software_name"]))
        return [("inventory_first_seen", cluster_name, None, {
            "software_versions": len(now_software), "connections": sum(e["connections"] for e in listed),
            "software": [_shown(e) for e in listed[:MAX_LISTED]],
            "deprecated_in_use": [deprecated_subject(u) for u in new.in_use()][:MAX_LISTED],
            "status": new.status, "kip896": new.kip896})]
    out: list[Change] = []
    before_software = _software_rows(prev)
    for key in sorted(set(before_software) | set(now_software)):
        old, cur = before_software.get(key), now_software.get(key)
        if old is None and cur is not None:
            out.append(("client_software_appeared", software_subject(*key), None, _shown(cur)))
        elif cur is None and old is not None:
            out.append(("client_software_gone", software_subject(*key), _shown(old), None))
    before_uses, now_uses = _uses(prev), _uses(new)
    for use_key in sorted(set(before_uses) | set(now_uses)):
        old_u, cur_u = before_uses.get(use_key), now_uses.get(use_key)
        if bool(old_u) == bool(cur_u):
            continue
        use = (cur_u or old_u or [])[0]
        row = {"request": use.request, "version": use.version, "software_name": use.software_name,
               "software_version": use.software_version,
               "brokers": sorted({u.broker_id if u.broker_id is not None else u.endpoint for u in (cur_u or old_u or [])},
                                 key=str)}
        if cur_u:
            out.append(("deprecated_requests_started", deprecated_subject(use), None, row))
        else:
            out.append(("deprecated_requests_stopped", deprecated_subject(use), row, None))
    return out


def _stored_connection(row: SoftwareConnections) -> SoftwareConnections:
    """A connection row as stored: `last_seen_at` only when it is not implied (0 connections now)."""
    return replace(row, last_seen_at=None) if row.connections > 0 else row


def _stored_deprecated(row: DeprecatedUse, at: datetime) -> DeprecatedUse:
    """A deprecated row as stored: `last_seen_at` only when the series was not on this read's page (held)."""
    return replace(row, last_seen_at=None) if row.last_seen_at is None or row.last_seen_at >= at else row


def same_content(a: InventorySnapshot, b: InventorySnapshot) -> bool:
    """Whether two inventories hold the same rows as stored (then the state file need not be rewritten): a row seen
    at each read differs only by that read's time, which the runs row says."""
    return ([_stored_connection(r) for r in a.connections] == [_stored_connection(r) for r in b.connections]
            and [_stored_deprecated(d, a.collected_at) for d in a.deprecated]
            == [_stored_deprecated(d, b.collected_at) for d in b.deprecated])


def state_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                snap: InventorySnapshot) -> pa.Table:
    """The `inventory` state rows of one cluster."""
    rows: list[dict[str, Any]] = []
    base = {"poll_id": poll_id, "polled_at": polled_at, "cluster_name": cluster_name, "cluster_id": cluster_id,
            "schema_version": SCHEMA_VERSION}
    for c in map(_stored_connection, snap.connections):
        rows.append({**base, "kind": CONNECTIONS, "broker_id": c.broker_id, "endpoint": c.endpoint,
                     "listener": c.listener, "software_name": c.software_name, "software_version": c.software_version,
                     "connections": c.connections, "last_seen_at": c.last_seen_at, "role": c.role})
    for d in (_stored_deprecated(d, snap.collected_at) for d in snap.deprecated):
        rows.append({**base, "kind": DEPRECATED, "broker_id": d.broker_id, "endpoint": d.endpoint,
                     "software_name": d.software_name, "software_version": d.software_version, "request": d.request,
                     "version": d.version, "count": d.count, "rate_per_s": d.rate_per_s,
                     "first_seen_at": d.first_seen_at, "last_increase_at": d.last_increase_at,
                     "last_seen_at": d.last_seen_at})
    return pa.Table.from_pylist(rows, schema=schema_for(INVENTORY_STATE))


def runs_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
               snap: InventorySnapshot) -> pa.Table:
    """The `inventory_runs` row of one cluster: when its inventory was read, from where, with what status."""
    row = {"poll_id": poll_id, "polled_at": polled_at, "cluster_name": cluster_name, "cluster_id": cluster_id,
           "collected_at": snap.collected_at, "source": snap.source, "source_label": snap.source_label,
           "status": snap.status, "kip896": snap.kip896, "dialect": snap.dialect, "message": snap.message,
           "endpoints_json": json.dumps(snap.endpoints, sort_keys=True), "window_s": snap.window_s,
           "duration_ms": round(snap.duration_ms, 3), "schema_version": SCHEMA_VERSION,
           "baselines_json": json.dumps({e: {"started": b.started, "read_at": b.read_at.isoformat(), "kip896": b.kip896}
                                         for e, b in snap.baselines.items()}, sort_keys=True)}
    return pa.Table.from_pylist([row], schema=schema_for(INVENTORY_RUNS))


def _baselines(text: str | None) -> dict[str, Baseline]:
    """The stored baselines of one run row (an older lake has none: every endpoint starts without one)."""
    try:
        raw = json.loads(text or "{}")
        return {str(e): Baseline(None if b.get("started") is None else float(b["started"]),
                                 datetime.fromisoformat(b["read_at"]), bool(b.get("kip896")))
                for e, b in raw.items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def snapshots_from_tables(rows: pa.Table, runs: pa.Table) -> dict[str, InventorySnapshot]:
    """Per cluster, the stored inventory rebuilt from its state rows (the collector's baseline after a restart)."""
    out: dict[str, InventorySnapshot] = {}
    for run in runs.to_pylist():
        try:
            endpoints = json.loads(run["endpoints_json"] or "{}")
        except ValueError:
            endpoints = {}
        out[run["cluster_name"]] = InventorySnapshot(
            collected_at=run["collected_at"], source=run["source"] or "", source_label=run["source_label"] or "",
            status=run["status"] or "error", kip896=run["kip896"] or "unavailable", window_s=run["window_s"] or 3600.0,
            dialect=run["dialect"], message=run["message"], endpoints=endpoints, duration_ms=run["duration_ms"] or 0.0,
            baselines=_baselines(run.get("baselines_json")))
    connections: dict[str, list[SoftwareConnections]] = {}
    deprecated: dict[str, list[DeprecatedUse]] = {}
    for r in rows.to_pylist():
        if r["cluster_name"] not in out:
            continue  # rows without a run row are not a committed collection
        at = out[r["cluster_name"]].collected_at
        if r["kind"] == CONNECTIONS:
            n = int(r["connections"] or 0)
            connections.setdefault(r["cluster_name"], []).append(SoftwareConnections(
                r["broker_id"], r["endpoint"] or "", r["listener"] or "", r["software_name"] or "",
                r["software_version"] or "", n, at if n > 0 else r.get("last_seen_at"), r.get("role") or "client"))
        else:
            deprecated.setdefault(r["cluster_name"], []).append(DeprecatedUse(
                r["broker_id"], r["endpoint"] or "", r["request"] or "", int(r["version"] or 0),
                r["software_name"] or "", r["software_version"] or "", float(r["count"] or 0.0),
                r["first_seen_at"], r["last_increase_at"], r["rate_per_s"], r.get("last_seen_at") or at))
    for name, snap in out.items():
        snap.connections = tuple(connections.get(name, ()))
        snap.deprecated = tuple(deprecated.get(name, ()))
    return out

