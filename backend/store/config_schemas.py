"""Explicit schemas (pyarrow and Spark) of the client-config tables and every results table.

The lake layout (see docs/ARCHITECTURE.md, section "Client configs and results"):

- ``lake/client_configs/date=YYYY-MM-DD/<uuid>.parquet``  one row per (snapshot, key), written by ingest
- ``lake/quarantine/date=YYYY-MM-DD/<uuid>.parquet``       one row per rejected record, written by ingest
- ``lake/results/<name>/part-*.parquet``                  written by the Spark job (ingest_stats: by ingest)

This module imports pyspark lazily so ingest (pyarrow only) never needs a JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

SCHEMA_VERSION = 1

CLIENT_TYPES = ("producer", "consumer", "share_consumer", "admin", "streams")
CONFIG_TYPES = ("BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")
NUMERIC_CONFIG_TYPES = ("INT", "SHORT", "LONG", "DOUBLE")
SEVERITIES = ("critical", "warning", "info")

_TS = pa.timestamp("us", tz="UTC")

# Columns as (name, arrow type, nullable). Spark schemas are derived from these lists so the
# two views can never disagree.
_COLUMNS: dict[str, list[tuple[str, pa.DataType, bool]]] = {
    # Ingested KIP-1324 snapshots, exploded to one row per config key (secrets already removed).
    # client_type_inferred is true when the record had no client_type and ingest inferred it.
    "client_configs": [
        ("snapshot_id", pa.string(), False),
        ("received_at", _TS, False),
        ("cluster_id", pa.string(), False),
        ("broker_id", pa.int32(), False),
        ("client_instance_id", pa.string(), False),
        ("client_id", pa.string(), True),
        ("client_type", pa.string(), True),
        ("client_type_inferred", pa.bool_(), False),
        ("client_software_name", pa.string(), True),
        ("client_software_version", pa.string(), True),
        ("principal", pa.string(), True),
        ("client_address", pa.string(), True),
        ("key", pa.string(), False),
        ("value", pa.string(), True),
        ("type", pa.string(), False),
        ("is_default", pa.bool_(), False),
        ("source", pa.string(), False),
        ("source_position", pa.string(), False),
        ("ingested_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Records ingest refused, with the reason and where they came from. raw_excerpt is at most
    # 512 characters and has every sensitive value replaced by "[REDACTED]".
    "quarantine": [
        ("quarantined_at", _TS, False),
        ("source", pa.string(), False),
        ("position", pa.string(), False),
        ("reason", pa.string(), False),
        ("detail", pa.string(), True),
        ("raw_excerpt", pa.string(), True),
        ("schema_version", pa.int32(), False),
    ],
    # Share of latest client instances per (cluster, client type, key, value).
    # total_instances = instances of that cluster/type that reported the key.
    "distributions": [
        ("cluster_id", pa.string(), False),
        ("client_type", pa.string(), True),
        ("key", pa.string(), False),
        ("value", pa.string(), True),
        ("instance_count", pa.int64(), False),
        ("total_instances", pa.int64(), False),
        ("share", pa.float64(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
        # The spellings reported for this (normalised) value, sorted; see docs/normalisation.md.
        ("raw_values", pa.list_(pa.string()), True),
    ],
    # Default vs overridden per (cluster, client type, key).
    "default_share": [
        ("cluster_id", pa.string(), False),
        ("client_type", pa.string(), True),
        ("key", pa.string(), False),
        ("instances", pa.int64(), False),
        ("default_count", pa.int64(), False),
        ("overridden_count", pa.int64(), False),
        ("default_share", pa.float64(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Numeric keys (INT/SHORT/LONG/DOUBLE): exact percentiles (linear interpolation).
    # unparsable counts values of a numeric type that did not parse as a number.
    "numeric_summary": [
        ("cluster_id", pa.string(), False),
        ("client_type", pa.string(), True),
        ("key", pa.string(), False),
        ("type", pa.string(), False),
        ("instances", pa.int64(), False),
        ("unparsable", pa.int64(), False),
        ("min", pa.float64(), True),
        ("p50", pa.float64(), True),
        ("p90", pa.float64(), True),
        ("max", pa.float64(), True),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Total variation distance between two clusters' value distributions of one key
    # (0 = identical, 1 = disjoint). cluster_a < cluster_b.
    "drift_clusters": [
        ("client_type", pa.string(), True),
        ("key", pa.string(), False),
        ("cluster_a", pa.string(), False),
        ("cluster_b", pa.string(), False),
        ("tvd", pa.float64(), False),
        ("instances_a", pa.int64(), False),
        ("instances_b", pa.int64(), False),
        ("dominant_value_a", pa.string(), True),
        ("dominant_value_b", pa.string(), True),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Per (client type, key, cluster): the dominant value and how far the key drifts overall
    # (max_tvd = largest TVD of this key between any two clusters; 0 with a single cluster).
    "drift_keys": [
        ("client_type", pa.string(), True),
        ("key", pa.string(), False),
        ("cluster_id", pa.string(), False),
        ("instances", pa.int64(), False),
        ("distinct_values", pa.int64(), False),
        ("dominant_value", pa.string(), True),
        ("dominant_share", pa.float64(), False),
        ("max_tvd", pa.float64(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
        # distinct_values / instances: near 1 marks an identity key (client.id, ...), not drift.
        ("distinct_share", pa.float64(), True),
    ],
    # Members of one group.id (within one cluster) that disagree on a key.
    # value_counts_json: {"<value>": <members>, ...}; null values appear as the key "null".
    "group_drift": [
        ("cluster_id", pa.string(), False),
        ("group_id", pa.string(), False),
        ("key", pa.string(), False),
        ("members", pa.int64(), False),
        ("distinct_values", pa.int64(), False),
        ("value_counts_json", pa.string(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # What the members of each consumer group configure for the keys that shape the group (issue 29: the group
    # page's "members' client configs" and the config-vs-group fleet rule): instances per value.
    "group_configs": [
        ("cluster_id", pa.string(), False),
        ("group_id", pa.string(), False),
        ("key", pa.string(), False),
        ("value", pa.string(), True),
        ("instances", pa.int64(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Client software per cluster (from the latest snapshot of each instance).
    "client_versions": [
        ("cluster_id", pa.string(), False),
        ("client_type", pa.string(), True),
        ("client_software_name", pa.string(), True),
        ("client_software_version", pa.string(), True),
        ("instances", pa.int64(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # One row per client instance (its latest snapshot): who it is, and the normalised values of the keys the
    # client-config policies name (the "watched" keys: the policy file's client_config keys; a key the instance does
    # not report is absent from `configs`, one it reports without a value has a null value). The file's metadata
    # `fleetview.watched_keys` (a JSON list) says which keys `configs` covers. Standards name the instances behind a
    # client finding from it (docs/standards.md).
    "client_instances": [
        ("cluster_id", pa.string(), False),
        ("client_instance_id", pa.string(), False),
        ("client_type", pa.string(), True),
        ("client_id", pa.string(), True),  # as the snapshot names it, else its client.id config
        ("group_id", pa.string(), True),
        ("client_software_name", pa.string(), True),
        ("client_software_version", pa.string(), True),
        ("principal", pa.string(), True),
        ("client_address", pa.string(), True),
        ("broker_id", pa.int32(), True),
        ("snapshot_id", pa.string(), True),
        ("last_seen", _TS, True),  # received_at of its latest snapshot
        ("configs", pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())])), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Misconfiguration alerts from backend.pipeline.rules. keys: comma-separated config keys;
    # observed_json: {"key": "value", ...} (only non-sensitive keys exist in the lake).
    "config_alerts": [
        ("alert_id", pa.string(), False),
        ("rule_id", pa.string(), False),
        ("severity", pa.string(), False),
        ("title", pa.string(), False),
        ("cluster_id", pa.string(), False),
        ("client_instance_id", pa.string(), True),
        ("client_id", pa.string(), True),
        ("group_id", pa.string(), True),
        ("client_type", pa.string(), True),
        ("keys", pa.string(), False),
        ("observed_json", pa.string(), False),
        ("explanation", pa.string(), False),
        ("doc_url", pa.string(), False),
        ("computed_at", _TS, False),
        ("schema_version", pa.int32(), False),
    ],
    # Ingest counters, long format, one row per (run, metric, detail); rewritten after every
    # ingest run. metric: records_read | records_written | quarantined | sensitive_dropped |
    # untyped | unparsed_lines. detail: the quarantine reason or the dropped key name (never a value), else "".
    "ingest_stats": [
        ("run_id", pa.string(), False),
        ("ran_at", _TS, False),
        ("source", pa.string(), False),
        ("location", pa.string(), False),
        ("metric", pa.string(), False),
        ("detail", pa.string(), False),
        ("count", pa.int64(), False),
        ("schema_version", pa.int32(), False),
    ],
}

RESULT_TABLES = (
    "distributions",
    "default_share",
    "numeric_summary",
    "drift_clusters",
    "drift_keys",
    "group_drift",
    "group_configs",
    "client_versions",
    "config_alerts",
    "ingest_stats",
    "client_instances",
)
LAKE_TABLES = ("client_configs", "quarantine")
# The metadata key of results/client_instances naming the keys its `configs` column covers (a JSON list).
WATCHED_KEYS_META = b"fleetview.watched_keys"

QUARANTINE_REASONS = (
    "malformed_json",
    "wrong_type",
    "missing_field",
    "too_large",
    "invalid_value",
)
INGEST_METRICS = ("records_read", "records_written", "quarantined", "sensitive_dropped", "untyped", "unparsed_lines")


def table_names() -> tuple[str, ...]:
    """All table names this module defines."""
    return tuple(_COLUMNS)


def arrow_schema(name: str) -> pa.Schema:
    """The pyarrow schema of table ``name`` (client_configs, quarantine or a results table)."""
    try:
        cols = _COLUMNS[name]
    except KeyError:
        raise ValueError(f"unknown table {name!r}; known: {', '.join(_COLUMNS)}") from None
    return pa.schema([pa.field(col, typ, nullable=nullable) for col, typ, nullable in cols])


def empty_table(name: str) -> pa.Table:
    """An empty pyarrow table with the schema of ``name``."""
    return arrow_schema(name).empty_table()


def _spark_type(typ: pa.DataType) -> DataType:
    from pyspark.sql import types as T

    if pa.types.is_string(typ):
        return T.StringType()
    if pa.types.is_timestamp(typ):
        return T.TimestampType()
    if pa.types.is_int32(typ):
        return T.IntegerType()
    if pa.types.is_int64(typ):
        return T.LongType()
    if pa.types.is_float64(typ):
        return T.DoubleType()
    if pa.types.is_boolean(typ):
        return T.BooleanType()
    if pa.types.is_list(typ):
        return T.ArrayType(_spark_type(typ.value_type), containsNull=True)
    if pa.types.is_struct(typ):
        return T.StructType([T.StructField(f.name, _spark_type(f.type), nullable=f.nullable) for f in typ])
    raise TypeError(f"no Spark mapping for {typ}")


def spark_schema(name: str) -> StructType:
    """The Spark StructType of table ``name`` (same columns, order and nullability as arrow)."""
    from pyspark.sql import types as T

    schema = arrow_schema(name)
    return T.StructType(
        [T.StructField(f.name, _spark_type(f.type), nullable=f.nullable) for f in schema]
    )
