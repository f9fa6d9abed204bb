"""Fleet polls to lake rows and back: the poller's writer and its previous-state loader."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pandas as pd
import pyarrow as pa

from backend.collect.model import (
    Alert,
    BrokerSnapshot,
    ClusterSnapshot,
    FleetPoll,
    TopicSnapshot,
)
from backend.store import readers
from backend.store.lake import Lake
from backend.store.schemas import (
    BROKER_SNAPSHOTS,
    CLUSTER_SNAPSHOTS,
    FLEET_ALERTS,
    SCHEMA_VERSION,
    TOPIC_SNAPSHOTS,
    ZK_SNAPSHOTS,
    schema_for,
)

MISSING_BROKER_ERROR = "not registered with the cluster"


def alert_id(poll_id: str, alert: Alert) -> str:
    """Return a stable id for an alert within a poll."""
    key = f"{poll_id}\x1f{alert.rule}\x1f{alert.cluster_name}\x1f{alert.subject}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def _table(name: str, columns: dict[str, list[Any]], rows: int) -> pa.Table:
    schema = schema_for(name)
    columns["schema_version"] = [SCHEMA_VERSION] * rows
    return pa.Table.from_pydict({f.name: columns[f.name] for f in schema}, schema=schema)


def poll_tables(poll: FleetPoll) -> dict[str, pa.Table]:
    """Return the lake tables of one poll, columnar (fast for 100,000s of topics)."""
    at, pid = poll.polled_at, poll.poll_id
    clusters = poll.clusters
    cluster_cols: dict[str, list[Any]] = {f.name: [] for f in schema_for(CLUSTER_SNAPSHOTS)}
    for s in clusters:
        live = s.live_brokers
        values = {
            "poll_id": pid,
            "polled_at": at,
            "cluster_name": s.cluster_name,
            "tags_json": json.dumps(s.tags, sort_keys=True),
            "cluster_id": s.cluster_id,
            "zk_cluster_id": s.zk_cluster_id,
            "controller_id": s.controller_id,
            "status": s.status,
            "error": s.error,
            "broker_count": len(live) if s.has_data else None,
            "brokers_reachable": sum(1 for b in live if b.reachable) if s.has_data else None,
            "topic_count": len(s.topics) if s.has_data else None,
            "partition_count": s.partition_count if s.has_data else None,
            "under_replicated": s.under_replicated if s.has_data else None,
            "offline_partitions": s.offline_partitions if s.has_data else None,
            "duration_ms": round(s.duration_ms, 3),
        }
        for key, value in values.items():
            cluster_cols[key].append(value)

    broker_rows = [(s, b) for s in clusters for b in s.brokers]
    broker_cols: dict[str, list[Any]] = {
        "poll_id": [pid] * len(broker_rows),
        "polled_at": [at] * len(broker_rows),
        "cluster_name": [s.cluster_name for s, _ in broker_rows],
        "cluster_id": [s.cluster_id for s, _ in broker_rows],
    }
    for attr in (
        "broker_id", "host", "port", "rack", "is_controller", "reachable", "software_name",
        "software_version", "version_provenance", "version_min", "version_max",
        "version_confidence", "api_versions_json", "probe_ms", "error",
    ):  # fmt: skip
        broker_cols[attr] = [getattr(b, attr) for _, b in broker_rows]

    topic_count = sum(len(s.topics) for s in clusters)
    topic_cols: dict[str, list[Any]] = {
        "poll_id": [pid] * topic_count,
        "polled_at": [at] * topic_count,
        "cluster_name": [s.cluster_name for s in clusters for _ in s.topics],
        "cluster_id": [s.cluster_id for s in clusters for _ in s.topics],
    }
    for attr in (
        "topic", "topic_id", "zk_topic_id", "partitions", "replication_factor", "internal",
        "under_replicated", "offline_partitions",
    ):  # fmt: skip
        topic_cols[attr] = [getattr(t, attr) for s in clusters for t in s.topics]

    zk_rows = [(s.cluster_name, path, value) for s in clusters for path, value in s.zk_nodes]
    zk_cols: dict[str, list[Any]] = {
        "poll_id": [pid] * len(zk_rows),
        "polled_at": [at] * len(zk_rows),
        "cluster_name": [r[0] for r in zk_rows],
        "path": [r[1] for r in zk_rows],
        "value": [r[2] for r in zk_rows],
    }
    alerts = poll.alerts
    alert_cols: dict[str, list[Any]] = {
        "alert_id": [alert_id(pid, a) for a in alerts],
        "raised_at": [at] * len(alerts),
        "poll_id": [pid] * len(alerts),
        "rule": [a.rule for a in alerts],
        "severity": [a.severity for a in alerts],
        "cluster_name": [a.cluster_name for a in alerts],
        "subject": [a.subject for a in alerts],
        "evidence_json": [json.dumps(a.evidence, sort_keys=True, default=str) for a in alerts],
        "explanation": [a.explanation for a in alerts],
        "doc_url": [a.doc_url for a in alerts],
    }
    return {
        ZK_SNAPSHOTS: _table(ZK_SNAPSHOTS, zk_cols, len(zk_rows)),
        TOPIC_SNAPSHOTS: _table(TOPIC_SNAPSHOTS, topic_cols, topic_count),
        BROKER_SNAPSHOTS: _table(BROKER_SNAPSHOTS, broker_cols, len(broker_rows)),
        FLEET_ALERTS: _table(FLEET_ALERTS, alert_cols, len(alerts)),
        CLUSTER_SNAPSHOTS: _table(CLUSTER_SNAPSHOTS, cluster_cols, len(clusters)),
    }


def write_fleet_poll(lake: Lake, poll: FleetPoll) -> dict[str, str | None]:
    """Write one poll; cluster_snapshots goes last, so a reader that sees it sees the whole poll."""
    written: dict[str, str | None] = {}
    for table, data in poll_tables(poll).items():
        written[table] = lake.write(table, data, poll_id=poll.poll_id)
    return written


def _opt(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value


def _opt_int(value: Any) -> int | None:
    value = _opt(value)
    return int(value) if value is not None else None


def snapshots_from_state(state: readers.FleetState) -> dict[str, ClusterSnapshot]:
    """Rebuild ClusterSnapshots (for checks) from lake rows, e.g. after a process restart."""
    out: dict[str, ClusterSnapshot] = {}
    brokers_by = {k: g for k, g in state.brokers.groupby("cluster_name")} if not state.brokers.empty else {}
    topics_by = {k: g for k, g in state.topics.groupby("cluster_name")} if not state.topics.empty else {}
    for row in state.clusters.itertuples(index=False):
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
            duration_ms=float(_opt(row.duration_ms) or 0.0),
        )
    return out


def load_previous_state(lake: Lake | str) -> dict[str, ClusterSnapshot]:
    """Return per cluster the newest snapshot with data from the lake (checks' previous state)."""
    return snapshots_from_state(readers.latest_fleet_state(lake, with_data=True))
