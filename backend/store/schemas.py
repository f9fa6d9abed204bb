"""Explicit pyarrow schemas of the lake: day tables, state tables, and the layout versions."""

from __future__ import annotations

import pyarrow as pa

from backend.store.group_schemas import GROUP_SCHEMAS, GROUP_STATE_TABLES

# Version 1: every poll wrote every cluster, broker, topic, ZooKeeper row and alert.
# Version 2: status rows per poll, current state rewritten on change, change log, incidents.
SCHEMA_VERSION = 2
LAYOUT_VERSION = 2

_TS = pa.timestamp("us", tz="UTC")

CLUSTER_SNAPSHOTS = "cluster_snapshots"
BROKER_SNAPSHOTS = "broker_snapshots"
TOPIC_SNAPSHOTS = "topic_snapshots"
ZK_SNAPSHOTS = "zk_snapshots"
FLEET_ALERTS = "fleet_alerts"
CHANGES = "changes"
INCIDENTS = "incidents"

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

SCHEMAS[CHANGES] = pa.schema(
    [
        ("change_id", pa.string()),
        ("poll_id", pa.string()),
        ("seen_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("entity", pa.string()),  # cluster / broker / topic / zk
        ("kind", pa.string()),
        ("subject", pa.string()),  # topic name, broker id, ZooKeeper path, or the cluster name
        ("before_json", pa.string()),  # the whole state row before (null when it appeared)
        ("after_json", pa.string()),  # the whole state row after (null when it went away)
        ("schema_version", pa.int32()),
    ]
)
SCHEMAS[INCIDENTS] = pa.schema(
    [
        ("incident_id", pa.string()),
        ("rule", pa.string()),
        ("severity", pa.string()),
        ("cluster_name", pa.string()),
        ("subject", pa.string()),
        ("status", pa.string()),  # open / resolved
        ("one_off", pa.bool_()),  # an event: opened and resolved by the same poll
        ("opened_at", _TS),
        ("opened_poll_id", pa.string()),
        ("last_seen_at", _TS),
        ("last_poll_id", pa.string()),
        ("resolved_at", _TS),
        ("resolved_poll_id", pa.string()),
        ("polls_seen", pa.int64()),
        ("evidence_json", pa.string()),  # at opening
        ("latest_evidence_json", pa.string()),
        ("explanation", pa.string()),
        ("doc_url", pa.string()),
        ("schema_version", pa.int32()),
    ]
)

# Broker configs and topic overrides (DescribeConfigs): one state file per cluster, no day table.
CONFIG_STATE = "config_state"
CONFIG_RUNS = "config_runs"
SCHEMAS[CONFIG_STATE] = pa.schema(
    [
        ("poll_id", pa.string()),  # the poll that last rewrote this cluster's configs
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("resource_type", pa.string()),  # broker / topic
        ("resource", pa.string()),  # broker id or topic name
        ("config_name", pa.string()),
        ("value", pa.string()),  # null when unset, or withheld
        ("source", pa.string()),  # Kafka's ConfigSource name, e.g. STATIC_BROKER_CONFIG
        ("read_only", pa.bool_()),
        ("is_sensitive", pa.bool_()),  # the broker marks the config sensitive
        ("config_type", pa.string()),
        ("withheld", pa.string()),  # why the value is not stored: sensitive / password_type / key_rule / ...
        ("schema_version", pa.int32()),
    ]
)
SCHEMAS[CONFIG_RUNS] = pa.schema(
    [
        ("poll_id", pa.string()),
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("collected_at", _TS),
        ("describe_configs_version", pa.int32()),
        ("brokers", pa.int32()),  # brokers whose configs are held
        ("topics_with_overrides", pa.int32()),
        ("error", pa.string()),  # what this collection could not read (the last known values are kept)
        ("duration_ms", pa.float64()),
        ("schema_version", pa.int32()),
    ]
)

# Consumer groups (backend/store/group_schemas.py): state files per cluster, no day table.
SCHEMAS.update(GROUP_SCHEMAS)
# The client inventory (brokers' JMX metrics, KIP-511/KIP-896): state files per cluster, no day table.
INVENTORY_STATE = "inventory_state"
INVENTORY_RUNS = "inventory_runs"
SCHEMAS[INVENTORY_STATE] = pa.schema(
    [
        ("poll_id", pa.string()),  # the poll that last rewrote this cluster's inventory
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("kind", pa.string()),  # connections (KIP-511) / deprecated (KIP-896)
        ("broker_id", pa.int32()),
        ("endpoint", pa.string()),
        ("listener", pa.string()),  # connections only
        ("software_name", pa.string()),  # as the client sent it ("unknown": clients before 2.4 send none)
        ("software_version", pa.string()),
        ("connections", pa.int64()),  # connections only
        ("request", pa.string()),  # deprecated only: the request name, e.g. Produce
        ("version", pa.int32()),  # deprecated only: the removed protocol version
        ("count", pa.float64()),  # deprecated only: the broker's cumulative count
        ("rate_per_s", pa.float64()),
        ("first_seen_at", _TS),
        ("last_increase_at", _TS),
        ("schema_version", pa.int32()),
        # when a row was last seen on its page (connections: above zero), written only when that was before this
        # cluster's last read (the row is held evidence); null: seen at the last read (or, 0 connections, never)
        ("last_seen_at", _TS),
        ("role", pa.string()),  # connections only: client / broker (the brokers' own connections); null: client
    ]
)
SCHEMAS[INVENTORY_RUNS] = pa.schema(
    [
        ("poll_id", pa.string()),
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("collected_at", _TS),
        ("source", pa.string()),  # metrics_url / prometheus
        ("source_label", pa.string()),
        ("status", pa.string()),  # ok / partial / no_kip511 / error
        ("kip896", pa.string()),  # reported / none / not_exported / unavailable
        ("dialect", pa.string()),  # jmx-default / strimzi / confluent / custom
        ("message", pa.string()),
        ("endpoints_json", pa.string()),  # endpoint -> error (null: read)
        ("window_s", pa.float64()),
        ("duration_ms", pa.float64()),
        ("schema_version", pa.int32()),
        # endpoint -> {started, read_at, kip896}: the last good read of each broker's page, the baseline of the next
        ("baselines_json", pa.string()),
    ]
)

# Standards (backend/standards): each policy's result per cluster with its non-passing subjects nested (one state
# file per cluster, rewritten when it changed), and the status history (a day table: a row per change, and a baseline
# of every (policy, cluster) at the first write of each day) the 30-day trend is read from.
POLICY_RESULTS = "policy_results"
POLICY_STATUS = "policy_status"
POLICY_ITEM = pa.struct([
    ("kind", pa.string()),  # cluster / broker / topic / group / clients / instance
    ("name", pa.string()),
    ("outcome", pa.string()),  # violation / unknown / waived / upcoming
    ("seen", pa.string()),
    ("wanted", pa.string()),
    ("reason", pa.string()),
    ("count", pa.int64()),
    ("since", _TS),
    ("waiver", pa.string()),
])
# A client instance behind a client finding (`finding`: the finding's name in `items`), who to chase.
POLICY_INSTANCE = pa.struct([
    ("finding", pa.string()),
    ("instance_id", pa.string()),
    ("client_type", pa.string()),
    ("client_id", pa.string()),
    ("group_id", pa.string()),
    ("software_name", pa.string()),
    ("software_version", pa.string()),
    ("principal", pa.string()),
    ("client_address", pa.string()),
    ("last_seen", _TS),
])
_POLICY_COUNTS = [("checked", pa.int64()), ("passing", pa.int64()), ("violating", pa.int64()),
                  ("unknown", pa.int64()), ("waived", pa.int64()), ("upcoming", pa.int64())]
SCHEMAS[POLICY_RESULTS] = pa.schema(
    [
        ("poll_id", pa.string()),
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("cluster_id", pa.string()),
        ("policy_id", pa.string()),
        ("status", pa.string()),  # pass / violation / unknown / waived / upcoming
        ("severity", pa.string()),
        *_POLICY_COUNTS,
        ("reason", pa.string()),
        ("items_omitted", pa.int64()),
        ("evaluated_at", _TS),
        ("evidence_at", _TS),
        ("since", _TS),  # since when the status has held
        ("policy_digest", pa.string()),
        ("policy_set", pa.string()),  # the policy file's digest
        ("items", pa.list_(POLICY_ITEM)),  # the subjects that did not pass (at most 500)
        ("schema_version", pa.int32()),
        # the client instances behind the client findings (at most 1,000 per row; null in files written before them)
        ("instances", pa.list_(POLICY_INSTANCE)),
    ]
)
SCHEMAS[POLICY_STATUS] = pa.schema(
    [
        ("poll_id", pa.string()),
        ("polled_at", _TS),
        ("cluster_name", pa.string()),
        ("policy_id", pa.string()),
        ("status", pa.string()),
        ("severity", pa.string()),
        *_POLICY_COUNTS,
        ("baseline", pa.bool_()),  # the day's first row of this (policy, cluster), written whether it changed or not
        ("schema_version", pa.int32()),
    ]
)

# The audit log (backend/audit): who did and read what, through which door, and what was refused. A day table of
# its own: written by the service's audit compactor (never by the poller), with its own retention.
AUDIT = "audit"
SCHEMAS[AUDIT] = pa.schema(
    [
        ("record_id", pa.string()),
        ("at", _TS),
        ("kind", pa.string()),  # login / logout / view / operate / export / api / mcp / refusal
        ("door", pa.string()),  # ui / api / mcp
        ("action", pa.string()),  # page, endpoint ("GET /api/v1/clusters"), tool, job or export name
        ("subject", pa.string()),  # who: the user (ID token) or the token's subject / client
        ("groups_json", pa.string()),  # the groups the grants saw (JSON list)
        ("client_address", pa.string()),
        ("user_agent", pa.string()),
        ("clusters_json", pa.string()),  # clusters touched (JSON list)
        ("params_json", pa.string()),  # parameters, secrets removed (JSON object)
        ("outcome", pa.string()),  # ok / unauthenticated / forbidden / not_found / rate_limited / invalid / error
        ("status", pa.int32()),  # HTTP status where there is one
        ("duration_ms", pa.float64()),
        ("detail", pa.string()),
        ("schema_version", pa.int32()),
    ]
)

TABLES: tuple[str, ...] = tuple(SCHEMAS)
# Written by schema version 1 only; read by the migration and removed by retention.
LEGACY_TABLES: tuple[str, ...] = (BROKER_SNAPSHOTS, TOPIC_SNAPSHOTS, ZK_SNAPSHOTS, FLEET_ALERTS)
# Append-only day tables of version 2, compacted in the background.
DAY_TABLES: tuple[str, ...] = (CLUSTER_SNAPSHOTS, CHANGES, INCIDENTS, POLICY_STATUS)
# Day tables with a writer and retention of their own (the fleet's retention_days and the poller leave them alone).
OWN_RETENTION_TABLES: tuple[str, ...] = (AUDIT,)
# The current state of each cluster (one file per cluster per kind), with the v1 snapshot columns.
STATE_TABLES: dict[str, str] = {
    "clusters": CLUSTER_SNAPSHOTS,
    "brokers": BROKER_SNAPSHOTS,
    "topics": TOPIC_SNAPSHOTS,
    "zk_nodes": ZK_SNAPSHOTS,
    "configs": CONFIG_STATE,
    "config_runs": CONFIG_RUNS,
    **GROUP_STATE_TABLES,
    "inventory": INVENTORY_STATE,
    "inventory_runs": INVENTORY_RUNS,
    "policy_results": POLICY_RESULTS,
}
# The kinds a daily checkpoint holds (the base `fleet_state_at` replays the change log onto).
CHECKPOINT_KINDS: tuple[str, ...] = ("clusters", "brokers", "topics", "zk_nodes")


def schema_for(table: str) -> pa.Schema:
    """Return the pyarrow schema of a lake table, or raise KeyError for an unknown table."""
    try:
        return SCHEMAS[table]
    except KeyError:
        raise KeyError(f"unknown lake table {table!r}; known: {', '.join(TABLES)}") from None


def time_column(table: str) -> str:
    """Return the timestamp column of a table (raised_at for alerts, polled_at otherwise)."""
    return {FLEET_ALERTS: "raised_at", CHANGES: "seen_at", INCIDENTS: "opened_at"}.get(table, "polled_at")
