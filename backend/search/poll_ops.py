"""One poll's write turned into index operations, column by column.

A FleetWriter write hands over its change rows (before/after as JSON) and the state tables it rewrote per cluster.
Topics, groups, group members and configs change by the thousand in a large fleet, so their change rows are parsed
and turned into operations with Arrow (one JSON parse per column, no Python loop per change); the rare ones (a
cluster's tags or id, brokers, a broker's configs appearing or going) one by one. A cluster seen for the first time,
or whose configs or groups are read for the first time, takes its rows from the table the write produced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from backend.search import rows as R
from backend.search.ops import CLEAR, DELETE, DELETE_PARENT, OP, UPSERT, ops_schema
from backend.search.tables import DELETED, TABLES, TS

CHANGE_COLUMNS = ("cluster_name", "cluster_id", "entity", "kind", "subject", "seen_at", "before_json", "after_json")
TOPIC_FACTS = pa.schema([("topic_id", pa.string()), ("internal", pa.bool_())])
GROUP_FACTS = pa.schema([("group_id", pa.string()), ("group_type", pa.string())])
CONFIG_FACTS = pa.schema([("resource_type", pa.string()), ("resource", pa.string()), ("name", pa.string()),
                          ("value", pa.string()), ("source", pa.string()), ("withheld", pa.string())])
FIRST_SEEN = {"topic": "cluster_first_seen", "config": "configs_first_seen", "group": "groups_first_seen"}


class Ops:
    """The operations of one update: per table, op tables in the order they apply (clear, parent, delete, upsert)."""

    def __init__(self) -> None:
        self.parts: dict[str, dict[str, list[pa.Table]]] = {}

    def add(self, name: str, op: str, table: pa.Table | None) -> None:
        """Add rows (in the table's schema; key and parent made from natural columns) under an operation."""
        if table is not None and table.num_rows:
            self.parts.setdefault(name, {}).setdefault(op, []).append(table)

    def rows(self, name: str, op: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add rows given as dicts of columns."""
        if rows:
            self.add(name, op, R.rows_table(name, rows))

    def tables(self) -> dict[str, pa.Table]:
        """One op table per changed table (the delta a poll writes)."""
        out = {}
        for name, by_op in self.parts.items():
            pieces = []
            for op in (CLEAR, DELETE_PARENT, DELETE, UPSERT):
                for table in by_op.get(op, []):
                    pieces.append(table.append_column(OP, pa.array([op] * table.num_rows, pa.string())))
            out[name] = pa.concat_tables(pieces).cast(ops_schema(name))
        return out


def _frame(name: str, columns: Mapping[str, Any], n: int) -> pa.Table:
    return R.frame(name, dict(columns), n)


def _changes(changes: pa.Table | Sequence[Mapping[str, Any]]) -> pa.Table:
    if isinstance(changes, pa.Table):
        return changes.select(list(CHANGE_COLUMNS))
    columns = {c: [row.get(c) for row in changes] for c in CHANGE_COLUMNS}
    types = {"seen_at": TS}
    return pa.table({c: pa.array(v, types.get(c, pa.string())) for c, v in columns.items()})


def _parse(texts: pa.ChunkedArray | pa.Array, schema: pa.Schema) -> pa.Table:
    """The JSON objects of a column (null, or not an object: every field null) as a table of the schema's fields.

    The column's values, each followed by a line break, are one newline-delimited JSON text for Arrow's reader: no
    Python per value."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    if not len(texts):
        return schema.empty_table()
    objects = pc.if_else(pc.fill_null(pc.starts_with(texts, "{"), False), texts, "{}")
    lines = pc.binary_join_element_wise(objects, "", "\n")  # "value\n"
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    first, last = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    try:
        options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        table = pajson.read_json(pa.BufferReader(lines.buffers()[2].slice(first, last - first)), parse_options=options)
        if table.num_rows == len(texts):
            return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
        pass
    rows = []  # a value Arrow's JSON reader does not take (Python's does): one by one
    for text in objects.to_pylist():
        try:
            value = json.loads(text)
        except ValueError:
            value = {}
        rows.append({f.name: value.get(f.name) if isinstance(value, dict) else None for f in schema})
    return pa.Table.from_pylist(rows, schema=schema)


def _where(table: pa.Table, mask: Any) -> pa.Table:
    return table.filter(pc.fill_null(mask, False))


def _not_in(column: pa.ChunkedArray, values: set[str]) -> Any:
    return pc.invert(pc.is_in(column, value_set=pa.array(sorted(values), pa.string())))


def poll_ops(changes: pa.Table | Sequence[Mapping[str, Any]] | None,
             tables: Mapping[str, Mapping[str, pa.Table]]) -> dict[str, pa.Table]:
    """One delta per index table from one poll's write: its change rows (a `changes` table, or row dicts) and the
    state tables it rewrote per cluster."""
    ops = Ops()
    frame = _changes(changes if changes is not None else [])
    marked = _where(frame, pc.is_in(frame.column("kind"), value_set=pa.array(sorted(FIRST_SEEN.values()))))
    firsts = set(zip(marked.column("cluster_name").to_pylist(), marked.column("kind").to_pylist(), strict=True))
    bulk = {what: {cl for cl, kind in firsts if kind == first} for what, first in FIRST_SEEN.items()}
    for cluster, kinds in sorted(tables.items()):
        if cluster in bulk["topic"] and "topics" in kinds:
            ops.add("topic", CLEAR, _frame("topic", {"cluster": [cluster]}, 1))
            ops.add("topic", UPSERT, R.topic_rows(kinds["topics"]))
        if cluster in bulk["config"] and "configs" in kinds:
            ops.add("config", CLEAR, _frame("config", {"cluster": [cluster]}, 1))
            ops.add("config", UPSERT, R.config_rows(kinds["configs"]))
        if cluster in bulk["group"] and "groups" in kinds:
            ops.add("group", CLEAR, _frame("group", {"cluster": [cluster]}, 1))
            ops.add("group", UPSERT, R.group_rows(kinds["groups"]))
            if "group_members" in kinds:
                ops.add("member", CLEAR, _frame("member", {"cluster": [cluster]}, 1))
                ops.add("member", UPSERT, R.member_rows(kinds["group_members"]))
        if "inventory" in kinds:
            ops.add("software", CLEAR, _frame("software", {"cluster": [cluster]}, 1))
            ops.add("software", UPSERT, R.software_rows(kinds["inventory"]))
    entity = frame.column("entity")
    _topic_ops(ops, _where(frame, pc.and_(pc.equal(entity, "topic"), _not_in(frame.column("cluster_name"),
                                                                                 bulk["topic"]))))
    _config_ops(ops, _where(frame, pc.and_(pc.equal(entity, "config"), _not_in(frame.column("cluster_name"),
                                                                                   bulk["config"]))), tables)
    _group_ops(ops, _where(frame, pc.and_(pc.equal(entity, "group"), _not_in(frame.column("cluster_name"),
                                                                                 bulk["group"]))), tables)
    _few_ops(ops, _where(frame, pc.is_in(entity, value_set=pa.array(["cluster", "broker"]))).to_pylist(), tables)
    return ops.tables()


def _topic_ops(ops: Ops, changes: pa.Table) -> None:
    if not changes.num_rows:
        return
    after, before = _parse(changes.column("after_json"), TOPIC_FACTS), _parse(changes.column("before_json"), TOPIC_FACTS)
    has_after = pc.is_valid(changes.column("after_json"))
    common = {"cluster": changes.column("cluster_name"), "cluster_id": changes.column("cluster_id"),
              "topic": changes.column("subject")}
    rows = _frame("topic", {**common, "topic_id": after.column("topic_id"), "internal": after.column("internal")},
                  changes.num_rows)
    ops.add("topic", UPSERT, _where(rows, has_after))
    gone = _where(rows, pc.invert(has_after))
    ops.add("topic", DELETE, gone)
    ops.add("config", DELETE_PARENT, _frame("config", {"cluster": gone.column("cluster"), "resource_type": pa.array(
        ["topic"] * gone.num_rows, pa.string()), "resource": gone.column("topic")}, gone.num_rows))
    was = pc.and_(pc.is_valid(changes.column("before_json")),
                  pc.or_(pc.invert(has_after), pc.equal(changes.column("kind"), "topic_recreated")))
    deleted = _frame("topic", {**common, "topic_id": before.column("topic_id"), "internal": before.column("internal"),
                               "state": pa.array([DELETED] * changes.num_rows, pa.string()),
                               "at": changes.column("seen_at")}, changes.num_rows)
    ops.add("topic", UPSERT, _where(deleted, was))


def _config_ops(ops: Ops, changes: pa.Table, tables: Mapping[str, Mapping[str, pa.Table]]) -> None:
    if not changes.num_rows:
        return
    kind = changes.column("kind")
    edits = _where(changes, pc.is_in(kind, value_set=pa.array(["config_set", "config_changed", "config_removed"])))
    if edits.num_rows:
        removed = pc.equal(edits.column("kind"), "config_removed")
        facts = _parse(pc.if_else(removed, edits.column("before_json"), edits.column("after_json")), CONFIG_FACTS)
        names = facts.column("name")
        value = R.safe_values(names, facts.column("value"), facts.column("withheld"), None)
        rows = _frame("config", {"cluster": edits.column("cluster_name"), "cluster_id": edits.column("cluster_id"),
                                 "resource_type": facts.column("resource_type"), "resource": facts.column("resource"),
                                 "config_name": names, "value": value, "source": facts.column("source")}, edits.num_rows)
        ops.add("config", DELETE, _where(rows, removed))
        ops.add("config", UPSERT, _where(rows, pc.invert(removed)))
    for change in _where(changes, pc.is_in(kind, value_set=pa.array(["broker_configs_first_seen",
                                                                     "broker_configs_gone"]))).to_pylist():
        cluster, broker = str(change["cluster_name"]), str(change["subject"]).split(" ", 1)[-1]
        configs = tables.get(cluster, {}).get("configs")
        if change["kind"] == "broker_configs_gone":
            ops.rows("config", DELETE_PARENT, [{"cluster": cluster, "resource_type": "broker", "resource": broker}])
        elif configs is not None:
            mine = _where(configs, pc.and_(pc.equal(configs.column("resource_type"), "broker"),
                                           pc.equal(configs.column("resource"), broker)))
            ops.add("config", UPSERT, R.config_rows(mine))


def _group_ops(ops: Ops, changes: pa.Table, tables: Mapping[str, Mapping[str, pa.Table]]) -> None:
    if not changes.num_rows:
        return
    kind = changes.column("kind")
    after, before = _parse(changes.column("after_json"), GROUP_FACTS), _parse(changes.column("before_json"), GROUP_FACTS)
    common = {"cluster": changes.column("cluster_name"), "cluster_id": changes.column("cluster_id")}
    upsert = pc.and_(pc.is_in(kind, value_set=pa.array(["group_created", "group_protocol_changed"])),
                     pc.is_valid(changes.column("after_json")))
    rows = _frame("group", {**common, "group_id": pc.coalesce(after.column("group_id"), changes.column("subject")),
                            "group_type": after.column("group_type")}, changes.num_rows)
    ops.add("group", UPSERT, _where(rows, upsert))
    gone = pc.equal(kind, "group_deleted")
    named = _frame("group", {**common, "group_id": changes.column("subject")}, changes.num_rows)
    ops.add("group", DELETE, _where(named, gone))
    ops.add("member", DELETE_PARENT, _frame("member", {"cluster": _where(named, gone).column("cluster"),
                                                       "group_id": _where(named, gone).column("group_id")},
                                            int(pc.sum(gone).as_py() or 0)))
    deleted = _frame("group", {**common, "group_id": pc.coalesce(before.column("group_id"), changes.column("subject")),
                               "group_type": before.column("group_type"),
                               "state": pa.array([DELETED] * changes.num_rows, pa.string()),
                               "at": changes.column("seen_at")}, changes.num_rows)
    ops.add("group", UPSERT, _where(deleted, pc.and_(gone, pc.is_valid(changes.column("before_json")))))
    # Groups whose members changed (or that appeared): their (group, client id) pairs again, from the members table.
    member_facts = _parse(pc.coalesce(changes.column("after_json"), changes.column("before_json")), GROUP_FACTS)
    group_of = pc.if_else(pc.is_in(kind, value_set=pa.array(["member_joined", "member_left"])),
                          member_facts.column("group_id"), changes.column("subject"))
    moved = _where(pa.table({"cluster": changes.column("cluster_name"), "group_id": group_of}),
                   pc.is_in(kind, value_set=pa.array(["member_joined", "member_left", "members_changed", "group_created",
                                                      "group_protocol_changed"])))
    pairs = {(c, g) for c, g in zip(moved.column("cluster").to_pylist(), moved.column("group_id").to_pylist(),
                                    strict=True) if g is not None}
    by_cluster: dict[str, list[str]] = {}
    for cluster, group in sorted(pairs):
        if "group_members" in tables.get(cluster, {}):
            by_cluster.setdefault(cluster, []).append(group)
    if not by_cluster:
        return
    ops.rows("member", DELETE_PARENT, [{"cluster": c, "group_id": g} for c, groups in by_cluster.items() for g in groups])
    chosen = [_where(tables[c]["group_members"], pc.is_in(tables[c]["group_members"].column("group_id"),
                                                         value_set=pa.array(groups, pa.string())))
              for c, groups in by_cluster.items()]
    ops.add("member", UPSERT, R.member_rows(pa.concat_tables(chosen)))


def _few_ops(ops: Ops, changes: Sequence[Mapping[str, Any]], tables: Mapping[str, Mapping[str, pa.Table]]) -> None:
    """Cluster and broker changes: a handful per poll, one by one."""
    renamed = {str(c["cluster_name"]) for c in changes if c["entity"] == "cluster"
               and c["kind"] in ("cluster_first_seen", "cluster_id_changed", "tags_changed")}
    for cluster in sorted(renamed):
        if "clusters" in tables.get(cluster, {}):
            ops.add("cluster", UPSERT, R.cluster_rows(tables[cluster]["clusters"]))
    for change in changes:
        if change["entity"] != "broker":
            continue
        cluster, subject = str(change["cluster_name"]), str(change["subject"])
        after = json.loads(change["after_json"]) if isinstance(change.get("after_json"), str) else None
        if isinstance(after, dict):
            ops.rows("broker", UPSERT, [R.broker_row(cluster, change.get("cluster_id"), subject, after)])
        else:
            ops.rows("broker", DELETE, [{"cluster": cluster, "broker_id": subject}])


__all__ = ["Ops", "TABLES", "poll_ops"]
