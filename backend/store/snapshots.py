"""Poll snapshots rebuilt from the lake's state rows (the checks' previous state after a restart, the v1 replay)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from backend.store import config_state, group_state, inventory_state, readers, state
from backend.store.lake import Lake
from backend.store.model import MISSING_BROKER_ERROR, BrokerSnapshot, ClusterSnapshot, TopicSnapshot


def _opt(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value


def _opt_int(value: Any) -> int | None:
    value = _opt(value)
    return int(value) if value is not None else None


def snapshots_from_state(fleet: readers.FleetState) -> dict[str, ClusterSnapshot]:
    """Rebuild ClusterSnapshots (for checks) from lake rows, e.g. after a process restart."""
    out: dict[str, ClusterSnapshot] = {}
    brokers_by = {k: g for k, g in fleet.brokers.groupby("cluster_name")} if not fleet.brokers.empty else {}
    topics_by = {k: g for k, g in fleet.topics.groupby("cluster_name")} if not fleet.topics.empty else {}
    zk_by = {k: g for k, g in fleet.zk_nodes.groupby("cluster_name")} if not fleet.zk_nodes.empty else {}
    for row in fleet.clusters.itertuples(index=False):
        name = row.cluster_name
        brokers = []
        missing = []
        frame = brokers_by.get(name)
        for b in frame.itertuples(index=False) if frame is not None else ():
            snapshot = BrokerSnapshot(
                broker_id=int(b.broker_id),
                host=_opt(b.host),
                port=_opt_int(b.port),
                rack=_opt(b.rack),
                is_controller=bool(_opt(b.is_controller)),
                reachable=bool(_opt(b.reachable)),
                software_name=_opt(b.software_name),
                software_version=_opt(b.software_version),
                version_provenance=_opt(b.version_provenance) or "unknown",
                version_min=_opt(b.version_min),
                version_max=_opt(b.version_max),
                version_confidence=_opt(b.version_confidence),
                api_versions_json=_opt(getattr(b, "api_versions_json", None)),
                probe_ms=_opt(getattr(b, "probe_ms", None)),
                error=_opt(b.error),
            )
            if snapshot.error and snapshot.error.startswith(MISSING_BROKER_ERROR):
                missing.append(snapshot.broker_id)
            brokers.append(snapshot)
        topics = []
        tframe = topics_by.get(name)
        if tframe is not None:
            cols = [tframe[c].tolist() for c in (
                "topic", "topic_id", "zk_topic_id", "partitions", "replication_factor", "internal",
                "under_replicated", "offline_partitions",
            )]  # fmt: skip
            for topic, tid, zid, parts, rf, internal, urp, offline in zip(*cols, strict=True):
                topics.append(
                    TopicSnapshot(
                        topic=topic,
                        topic_id=_opt(tid),
                        zk_topic_id=_opt(zid),
                        partitions=_opt_int(parts) or 0,
                        replication_factor=_opt_int(rf) or 0,
                        internal=bool(_opt(internal)),
                        under_replicated=_opt_int(urp) or 0,
                        offline_partitions=_opt_int(offline) or 0,
                    )
                )
        tags = json.loads(row.tags_json) if _opt(row.tags_json) else {}
        zframe = zk_by.get(name)
        zk_nodes = list(zip(zframe["path"].tolist(), zframe["value"].tolist(), strict=True)) if zframe is not None else []
        out[name] = ClusterSnapshot(
            cluster_name=name,
            status=row.status,
            polled_at=row.polled_at.to_pydatetime(),
            poll_id=row.poll_id,
            tags=tags,
            error=_opt(row.error),
            cluster_id=_opt(row.cluster_id),
            zk_cluster_id=_opt(row.zk_cluster_id),
            controller_id=_opt_int(row.controller_id),
            brokers=brokers,
            topics=topics,
            missing_broker_ids=missing,
            zk_nodes=zk_nodes,
            duration_ms=float(_opt(row.duration_ms) or 0.0),
        )
    return out


def load_previous_state(lake: Lake | str) -> dict[str, ClusterSnapshot]:
    """Return per cluster the newest snapshot with data from the lake (checks' previous state)."""
    return snapshots_from_state(readers.latest_fleet_state(lake, with_data=True))


def current_snapshots(lake: Lake | str, clusters: list[str] | None = None) -> dict[str, ClusterSnapshot]:
    """Every cluster's newest status with its last known state, configs, groups and client inventory attached (what
    a policy reads); a cluster whose newest poll had no data keeps that status (its data is the last known)."""
    lk = lake if isinstance(lake, Lake) else Lake(lake)
    out = snapshots_from_state(readers.latest_fleet_state(lk, with_data=True))
    if clusters is not None:
        out = {name: s for name, s in out.items() if name in set(clusters)}
    manifest = state.read_manifest(lk)
    if not manifest or not out:
        return out
    names = sorted(out)
    entries = manifest.get("clusters", {})

    def has(kind: str) -> bool:
        return any(entries.get(n, {}).get(kind) for n in names)

    if has("config_runs"):
        configs = config_state.snapshots_from_tables(state.read_clusters_state(lk, "configs", names),
                                                     state.read_clusters_state(lk, "config_runs", names))
        for name, config in configs.items():
            if name in out:
                out[name].configs = config
    if has("group_runs"):
        groups = group_state.snapshots_from_tables(*(state.read_clusters_state(lk, kind, names) for kind in (
            "groups", "group_members", "group_offsets", "group_runs")))
        for name, read in groups.items():
            if name in out:
                out[name].groups = read
    if has("inventory_runs"):
        inventory = inventory_state.snapshots_from_tables(state.read_clusters_state(lk, "inventory", names),
                                                          state.read_clusters_state(lk, "inventory_runs", names))
        for name, found in inventory.items():
            if name in out:
                out[name].inventory = found
    return out
