"""Explicit pyarrow schemas of the snapshot lake tables."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

_TS = pa.timestamp("us", tz="UTC")

CLUSTER_SNAPSHOTS = "cluster_snapshots"
BROKER_SNAPSHOTS = "broker_snapshots"
TOPIC_SNAPSHOTS = "topic_snapshots"
ZK_SNAPSHOTS = "zk_snapshots"
FLEET_ALERTS = "fleet_alerts"

SCHEMAS: dict[str, pa.Schema] = {
    CLUSTER_SNAPSHOTS: pa.schema(
        [
            ("poll_id", pa.string()),
            ("polled_at", _TS),
            ("cluster_name", pa.string()),
            ("tags_json", pa.string()),
            ("cluster_id", pa.string()),
            ("zk_cluster_id", pa.string()),
            ("controller_id", pa.int32()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("broker_count", pa.int32()),
            ("brokers_reachable", pa.int32()),
            ("topic_count", pa.int32()),
            ("partition_count", pa.int64()),
            ("under_replicated", pa.int64()),
            ("offline_partitions", pa.int64()),
            ("duration_ms", pa.float64()),
            ("schema_version", pa.int32()),
        ]
    ),
    BROKER_SNAPSHOTS: pa.schema(
        [
            ("poll_id", pa.string()),
            ("polled_at", _TS),
            ("cluster_name", pa.string()),
            ("cluster_id", pa.string()),
            ("broker_id", pa.int32()),
            ("host", pa.string()),
            ("port", pa.int32()),
            ("rack", pa.string()),
            ("is_controller", pa.bool_()),
            ("reachable", pa.bool_()),
            ("software_name", pa.string()),
            ("software_version", pa.string()),
            ("version_provenance", pa.string()),
            ("version_min", pa.string()),
            ("version_max", pa.string()),
            ("version_confidence", pa.string()),
            ("api_versions_json", pa.string()),
            ("probe_ms", pa.float64()),
            ("error", pa.string()),
            ("schema_version", pa.int32()),
        ]
    ),
    TOPIC_SNAPSHOTS: pa.schema(
        [
            ("poll_id", pa.string()),
            ("polled_at", _TS),
            ("cluster_name", pa.string()),
            ("cluster_id", pa.string()),
            ("topic", pa.string()),
            ("topic_id", pa.string()),
            ("zk_topic_id", pa.string()),
            ("partitions", pa.int32()),
            ("replication_factor", pa.int32()),
            ("internal", pa.bool_()),
            ("under_replicated", pa.int32()),
            ("offline_partitions", pa.int32()),
            ("schema_version", pa.int32()),
        ]
    ),
    ZK_SNAPSHOTS: pa.schema(
        [
            ("poll_id", pa.string()),
            ("polled_at", _TS),
            ("cluster_name", pa.string()),
            ("path", pa.string()),
            ("value", pa.string()),
            ("schema_version", pa.int32()),
        ]
    ),
    FLEET_ALERTS: pa.schema(
        [
            ("alert_id", pa.string()),
            ("raised_at", _TS),
            ("poll_id", pa.string()),
            ("rule", pa.string()),
            ("severity", pa.string()),
            ("cluster_name", pa.string()),
            ("subject", pa.string()),
            ("evidence_json", pa.string()),
            ("explanation", pa.string()),
            ("doc_url", pa.string()),
            ("schema_version", pa.int32()),
        ]
    ),
}

TABLES: tuple[str, ...] = tuple(SCHEMAS)


def schema_for(table: str) -> pa.Schema:
    """Return the pyarrow schema of a lake table, or raise KeyError for an unknown table."""
    try:
        return SCHEMAS[table]
    except KeyError:
        raise KeyError(f"unknown lake table {table!r}; known: {', '.join(TABLES)}") from None


def time_column(table: str) -> str:
    """Return the timestamp column of a table (raised_at for alerts, polled_at otherwise)."""
    return "raised_at" if table == FLEET_ALERTS else "polled_at"
