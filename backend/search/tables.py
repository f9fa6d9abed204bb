"""The index's tables: their Arrow schemas, which columns are searched (and under which field name), and the kind a
hit of each table is.

Eight internal tables, six public kinds: `member` (a consumer group member's client id), `software` (client software
the brokers count, KIP-511) and `instance` (a KIP-1324 client instance, from the Spark job) are all kind `client`.
Every table has the columns `cluster`, `cluster_id`, `key` (unique per cluster for current rows), `state`
(current / deleted) and `at` (when a deleted row was deleted). Rows of `config` and `member` carry a `parent` (the
config's resource, the member's group): one operation removes all rows of a parent.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")
CURRENT = "current"
DELETED = "deleted"
KINDS: tuple[str, ...] = ("topic", "group", "client", "broker", "cluster", "config")

_COMMON = [("cluster", pa.string()), ("cluster_id", pa.string()), ("key", pa.string()), ("state", pa.string()),
           ("at", TS)]
DERIVED = ("key", "parent")
# Characters of a base64url topic id / a UUID-like instance id / a cluster id: a needle with any other character
# cannot match them, so those columns are skipped for it.
ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class Field:
    """One searched column: its name in the table, the field name a hit reports, the characters it can hold
    (lowercased; None: any), and whether its values are unique (ids: searched as they are; other columns repeat
    across clusters, brokers and instances, so their distinct values are searched once, `reader.Piece`)."""

    column: str
    name: str
    chars: frozenset[str] | None = None
    unique: bool = False


@dataclass(frozen=True)
class Table:
    """One internal table of the index.

    `key` and `parent` are not stored: they are made from the `natural` (and `parent_of`) columns when a file is read
    (rows.with_keys), so the files hold each name once.
    """

    name: str
    kind: str  # the public kind of its hits
    part: str  # "fleet" (written by the poller) or "clients" (written by the Spark job)
    schema: pa.Schema
    fields: tuple[Field, ...]
    natural: tuple[str, ...]  # the columns whose values, joined, are a row's key within its cluster
    parent_of: tuple[str, ...] = ()  # the columns whose values, joined, are its parent (config: the resource)
    by_cluster_id: bool = False  # rows know their cluster by id only (client configs are keyed by cluster id)

    @property
    def stored(self) -> pa.Schema:
        """The schema of its base files (without the derived key and parent)."""
        return pa.schema([f for f in self.schema if f.name not in DERIVED])


def _schema(*columns: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([*_COMMON, *columns])


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("topic", "topic", "fleet", _schema(("topic", pa.string()), ("topic_id", pa.string()), ("internal", pa.bool_())),
          (Field("topic", "name"), Field("topic_id", "topic_id", ID_CHARS, unique=True)), ("topic",)),
    Table("group", "group", "fleet", _schema(("group_id", pa.string()), ("group_type", pa.string())),
          (Field("group_id", "group_id"),), ("group_id",)),
    Table("member", "client", "fleet", _schema(("parent", pa.string()), ("group_id", pa.string()),
                                               ("client_id", pa.string())),
          (Field("client_id", "client_id"),), ("group_id", "client_id"), ("group_id",)),
    Table("software", "client", "fleet", _schema(("software", pa.string()), ("connections", pa.int64())),
          (Field("software", "software"),), ("software",)),
    Table("instance", "client", "clients", _schema(
        ("client_instance_id", pa.string()), ("client_id", pa.string()), ("principal", pa.string()),
        ("software", pa.string()), ("client_type", pa.string()), ("group_id", pa.string())),
          (Field("client_id", "client_id"), Field("client_instance_id", "client_instance_id", ID_CHARS, unique=True),
           Field("principal", "principal"), Field("software", "software")), ("client_instance_id",),
          by_cluster_id=True),
    Table("broker", "broker", "fleet", _schema(("broker_id", pa.string()), ("host", pa.string()), ("rack", pa.string()),
                                               ("software", pa.string())),
          (Field("broker_id", "broker_id"), Field("host", "host"), Field("rack", "rack"),
           Field("software", "software")), ("broker_id",)),
    Table("cluster", "cluster", "fleet", _schema(("tags", pa.string()),),
          (Field("cluster", "name"), Field("cluster_id", "cluster_id"), Field("tags", "tag")), ("cluster",)),
    Table("config", "config", "fleet", _schema(
        ("parent", pa.string()), ("resource_type", pa.string()), ("resource", pa.string()),
        ("config_name", pa.string()), ("value", pa.string()), ("source", pa.string())),
          (Field("config_name", "key"), Field("value", "value")), ("resource_type", "resource", "config_name"),
          ("resource_type", "resource")),
)}
PARTS: tuple[str, ...] = ("fleet", "clients")
KIND_ORDER = {kind: i for i, kind in enumerate(KINDS)}
TABLE_ORDER = {name: i for i, name in enumerate(TABLES)}


def tables_of(kinds: tuple[str, ...] | None = None, part: str | None = None) -> list[Table]:
    """The internal tables holding the given public kinds (all when None), of one part or both."""
    return [t for t in TABLES.values() if (kinds is None or t.kind in kinds) and (part is None or t.part == part)]


def empty(name: str) -> pa.Table:
    """An empty table of the index."""
    return TABLES[name].schema.empty_table()
