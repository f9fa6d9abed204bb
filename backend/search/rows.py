"""Index rows from the lake's state tables (a cluster's topics, groups, members, configs, brokers, inventory; the Spark
job's heads), column by column.

Config values the broker marks sensitive, that were withheld, whose key is secret-shaped or whose value looks like a
credential are never indexed (the key still is, so "where is ssl.keystore.password set" finds the entry, not its value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backend.configs.sensitive import credential_shape, is_sensitive_key
from backend.search.tables import CURRENT, DELETED, TABLES, TS

SEP = "\x1f"  # between the parts of a key (a unit separator: never in a cluster name, rare in Kafka names)
TOMBSTONE_SEP = "\x1e"


def frame(name: str, columns: dict[str, Any], n: int) -> pa.Table:
    """An index table from columns (arrays or lists; missing columns are null, `state` defaults to current; `key` and
    `parent` are made from the natural columns)."""
    schema = TABLES[name].schema
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        if value is None:
            value = pa.array([CURRENT] * n, pa.string()) if f.name == "state" else pa.nulls(n, f.type)
        elif not isinstance(value, (pa.Array, pa.ChunkedArray)):
            value = pa.array(value, f.type)
        arrays.append(value.cast(f.type) if value.type != f.type else value)
    return with_keys(name, pa.Table.from_arrays(arrays, schema=schema))


def _joined(table: pa.Table, columns: tuple[str, ...]) -> pa.ChunkedArray | pa.Array:
    parts = [_str(table.column(c)) for c in columns]
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, SEP)


def with_keys(name: str, table: pa.Table) -> pa.Table:
    """The table in the index's full schema, its `key` (and `parent`) made from its natural columns: a current row's
    key is its name within its cluster, a deleted row's is that, the separator and when it was deleted (µs)."""
    spec = TABLES[name]
    key = _joined(table, spec.natural)
    if table.num_rows:
        deleted = pc.fill_null(pc.equal(table.column("state"), DELETED), False)
        if pc.any(deleted).as_py():
            at = pc.fill_null(table.column("at").cast(pa.int64()), 0).cast(pa.string())
            key = pc.if_else(deleted, pc.binary_join_element_wise(key, at, TOMBSTONE_SEP), key)
    made = {"key": key}
    if spec.parent_of:
        made["parent"] = _joined(table, spec.parent_of)
    arrays = [made[f.name] if f.name in made else table.column(f.name) for f in spec.schema]
    return pa.Table.from_arrays([a.cast(f.type) if a.type != f.type else a for a, f in zip(arrays, spec.schema,
                                                                                            strict=True)],
                                schema=spec.schema)


def _col(table: pa.Table, name: str) -> pa.ChunkedArray:
    return table.column(name)


def _str(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return values.cast(pa.string())


def topic_rows(topics: pa.Table) -> pa.Table:
    """Current topic rows from `topics` state rows (topic_snapshots columns)."""
    return frame("topic", {"cluster": _col(topics, "cluster_name"), "cluster_id": _col(topics, "cluster_id"),
                           "topic": _col(topics, "topic"),
                           "topic_id": _col(topics, "topic_id"), "internal": _col(topics, "internal")}, topics.num_rows)


def group_rows(groups: pa.Table) -> pa.Table:
    """Current group rows from `groups` state rows."""
    return frame("group", {"cluster": _col(groups, "cluster_name"), "cluster_id": _col(groups, "cluster_id"),
                           "group_id": _col(groups, "group_id"),
                           "group_type": _col(groups, "group_type")}, groups.num_rows)


def member_rows(members: pa.Table) -> pa.Table:
    """One row per (group, client id) of `group_members` state rows (members sharing a client id are one row)."""
    members = members.filter(pc.is_valid(members.column("client_id")))
    pairs = members.group_by(["cluster_name", "group_id", "client_id"], use_threads=False).aggregate(
        [("cluster_id", "max")])
    return frame("member", {
        "cluster": pairs.column("cluster_name"), "cluster_id": pairs.column("cluster_id_max"),
        "group_id": _str(pairs.column("group_id")), "client_id": _str(pairs.column("client_id"))}, pairs.num_rows)


def software_rows(inventory: pa.Table) -> pa.Table:
    """One row per client software (name and version) the brokers count connections of, per cluster."""
    rows = inventory.filter(pc.and_(pc.equal(inventory.column("kind"), "connections"),
                                    pc.greater(pc.fill_null(inventory.column("connections"), 0), 0)))
    names = pc.fill_null(rows.column("software_name"), "unknown")
    versions = pc.fill_null(rows.column("software_version"), "unknown")
    software = pc.binary_join_element_wise(names, versions, " ")
    grouped = pa.table({"cluster": rows.column("cluster_name"), "cluster_id": rows.column("cluster_id"),
                        "software": software, "connections": rows.column("connections")}).group_by(
        ["cluster", "software"], use_threads=False).aggregate([("cluster_id", "max"), ("connections", "sum")])
    return frame("software", {"cluster": grouped.column("cluster"), "cluster_id": grouped.column("cluster_id_max"),
                              "software": grouped.column("software"),
                              "connections": grouped.column("connections_sum")}, grouped.num_rows)


def broker_label(name: object, version: object, low: object = None, high: object = None) -> str | None:
    """The software a broker runs, as one searchable text ("Apache Kafka 4.3.1", "3.7.0–3.9.1 (guessed)")."""
    if version:
        return f"{name} {version}" if name else str(version)
    if low:
        return f"{str(name) + ' ' if name else ''}{low}–{high or '…'} (guessed)"
    return str(name) if name else None


def broker_row(cluster: str, cluster_id: str | None, broker_id: object, facts: dict[str, Any]) -> dict[str, Any]:
    """One broker row from its state facts (host, port, rack, software name/version/range)."""
    host, port = facts.get("host"), facts.get("port")
    return {"cluster": cluster, "cluster_id": cluster_id, "broker_id": str(broker_id),
            "host": f"{host}:{port}" if host and port is not None else host,
            "rack": facts.get("rack"),
            "software": broker_label(facts.get("software_name"), facts.get("software_version"),
                                     facts.get("version_min"), facts.get("version_max"))}


def broker_rows(brokers: pa.Table) -> pa.Table:
    """Current broker rows from `brokers` state rows."""
    rows = [broker_row(r["cluster_name"], r["cluster_id"], r["broker_id"], r) for r in brokers.to_pylist()]
    return rows_table("broker", rows)


def tags_text(tags_json: object) -> str | None:
    """A cluster's tags as searchable text: "env=prod, region=eu"."""
    try:
        tags = json.loads(tags_json) if isinstance(tags_json, str) and tags_json else {}
    except ValueError:
        return None
    if not isinstance(tags, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in sorted(tags.items())) or None


def cluster_rows(clusters: pa.Table) -> pa.Table:
    """One row per cluster (its name, id and tags) from `clusters` state rows."""
    rows = [{"cluster": r["cluster_name"], "cluster_id": r["cluster_id"], "tags": tags_text(r["tags_json"])}
            for r in clusters.to_pylist()]
    return rows_table("cluster", rows)


def safe_values(names: pa.ChunkedArray | pa.Array, values: pa.ChunkedArray | pa.Array,
                 withheld: pa.ChunkedArray | pa.Array | None, sensitive: pa.ChunkedArray | pa.Array | None) -> pa.Array:
    """Config values with every value that must not be indexed set to null."""
    names = pa.array(names.to_pylist(), pa.string()) if isinstance(names, pa.ChunkedArray) else names
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    distinct_names = pc.unique(names).to_pylist()
    secret_names = pa.array([n for n in distinct_names if n is None or is_sensitive_key(n)], pa.string())
    drop = pc.fill_null(pc.is_in(names, value_set=secret_names), False)
    if withheld is not None:
        drop = pc.or_(drop, pc.is_valid(withheld))
    if sensitive is not None:
        drop = pc.or_(drop, pc.fill_null(sensitive, False))
    encoded = pc.dictionary_encode(values)
    shaped = np.array([v is not None and credential_shape(v) is not None for v in encoded.dictionary.to_pylist()],
                      dtype=bool)
    if shaped.any():
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        valid = np.asarray(pc.is_valid(encoded.indices))
        hit = np.zeros(len(values), dtype=bool)
        hit[valid] = shaped[indices[valid].astype(np.int64)]
        drop = pc.or_(drop, pa.array(hit))
    return pc.if_else(drop, pa.nulls(len(values), pa.string()), values)


def config_rows(configs: pa.Table, current_topics: pa.Table | None = None) -> pa.Table:
    """One row per broker config and topic override of `configs` state rows (values that must not be indexed are null).

    ``current_topics``: `topics` state rows; overrides of other topics (deleted since the configs were read) are left
    out, as the poller's index removes them when the topic goes.
    """
    if current_topics is not None and configs.num_rows:
        existing = pc.binary_join_element_wise(_str(current_topics.column("cluster_name")),
                                               _str(current_topics.column("topic")), SEP)
        theirs = pc.binary_join_element_wise(_str(configs.column("cluster_name")), _str(configs.column("resource")), SEP)
        is_topic = pc.equal(configs.column("resource_type"), "topic")
        gone = pc.and_(is_topic, pc.invert(pc.is_in(theirs, value_set=existing.combine_chunks()
                                                     if isinstance(existing, pa.ChunkedArray) else existing)))
        configs = configs.filter(pc.invert(pc.fill_null(gone, False)))
    name = configs.column("config_name")
    value = safe_values(name, configs.column("value"), configs.column("withheld"), configs.column("is_sensitive"))
    return frame("config", {"cluster": configs.column("cluster_name"), "cluster_id": configs.column("cluster_id"),
                            "resource_type": configs.column("resource_type"), "resource": configs.column("resource"),
                            "config_name": name, "value": value, "source": configs.column("source")}, configs.num_rows)


def config_row(cluster: str, cluster_id: str | None, entry: dict[str, Any]) -> dict[str, Any]:
    """One config row from a change row's entry ({resource_type, resource, name, value, source, withheld})."""
    rtype, resource, name = str(entry.get("resource_type")), str(entry.get("resource")), str(entry.get("name"))
    value = entry.get("value")
    if entry.get("withheld") or is_sensitive_key(name) or (value is not None and credential_shape(value) is not None):
        value = None
    return {"cluster": cluster, "cluster_id": cluster_id, "resource_type": rtype, "resource": resource,
            "config_name": name, "value": value, "source": entry.get("source")}


def instance_rows(heads: pa.Table) -> pa.Table:
    """One row per client instance of the Spark job's heads (its latest KIP-1324 snapshot)."""
    name = pc.fill_null(heads.column("client_software_name"), "")
    version = pc.fill_null(heads.column("client_software_version"), "")
    software = pc.utf8_trim_whitespace(pc.binary_join_element_wise(name, version, " "))
    software = pc.if_else(pc.equal(software, ""), pa.nulls(heads.num_rows, pa.string()), software)
    client_id = pc.coalesce(heads.column("client_id"), heads.column("cfg_client_id"))
    return frame("instance", {
        "cluster": pa.array([""] * heads.num_rows, pa.string()), "cluster_id": heads.column("cluster_id"),
        "client_instance_id": heads.column("client_instance_id"),
        "client_id": client_id, "principal": heads.column("principal"), "software": software,
        "client_type": heads.column("client_type"), "group_id": heads.column("group_id")}, heads.num_rows)


def rows_table(name: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An index table from row dicts (missing columns null, state current unless given; key and parent made)."""
    schema = TABLES[name].schema
    columns = {f.name: [r.get(f.name, CURRENT if f.name == "state" else None) for r in rows] for f in schema}
    return with_keys(name, pa.Table.from_pydict(columns, schema=schema))


def tombstone(row: dict[str, Any], at: Any) -> dict[str, Any]:
    """A deleted row: the entity as it was, kept findable (ranked after current ones) until retention drops it."""
    return {**row, "state": DELETED, "at": at}


__all__ = ["SEP", "TS", "broker_row", "broker_rows", "cluster_rows", "config_row", "config_rows", "frame",
           "group_rows", "instance_rows", "member_rows", "rows_table", "software_rows", "tags_text", "tombstone",
           "safe_values", "topic_rows", "with_keys"]
