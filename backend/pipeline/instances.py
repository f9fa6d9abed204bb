"""The instance pass: client_configs rows -> one head row per client instance and its entries.

Hash aggregates only (docs/spark.md, "The instance pass"): every aggregation groups by keys and
keeps numbers, so Spark plans a code-generated HashAggregate with partial aggregation, never an
ObjectHashAggregate (which falls back to sorting) or a SortAggregate.

- ``instance_heads``: one row per snapshot from a group-by over the snapshot's identity (keys
  only, a row count), the latest ``received_at`` per instance from a numeric ``max``, and a tie
  on ``received_at`` settled by an anti-join on the few candidates (greatest ``snapshot_id``).
- ``head_entries``: that snapshot's rows (a semi-join on the small head table), exact duplicates
  (a file ingested twice) folded by a group-by on the whole entry, and a key reported with two
  different values settled on the small set of such keys (the smallest entry wins).

Heads and entries together are the incremental state: one head row per instance, with its
entries (one per key) beside it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from backend.pipeline.normalize import normalized_value_col

IDS = "client_instance_id"
INSTANCE_COLUMNS = (
    "client_instance_id", "snapshot_id", "received_at", "cluster_id", "broker_id", "client_id",
    "client_type", "client_software_name", "client_software_version", "principal",
    "client_address",
)
IDENTITY = INSTANCE_COLUMNS[3:]  # what a snapshot says about its instance, besides its head
# One row per client instance: its latest snapshot (head) and identity. rows_read /
# snapshots_read: what the run that wrote the row read of this instance.
HEAD_SCHEMA = StructType([
    StructField("client_instance_id", StringType()),
    StructField("snapshot_id", StringType()),
    StructField("received_at", TimestampType()),
    StructField("cluster_id", StringType()),
    StructField("broker_id", IntegerType()),
    StructField("client_id", StringType()),
    StructField("client_type", StringType()),
    StructField("client_software_name", StringType()),
    StructField("client_software_version", StringType()),
    StructField("principal", StringType()),
    StructField("client_address", StringType()),
    StructField("rows_read", LongType()),
    StructField("snapshots_read", LongType()),
])
HEAD_FIELDS = tuple(HEAD_SCHEMA.fieldNames())
assert HEAD_FIELDS[:len(INSTANCE_COLUMNS)] == INSTANCE_COLUMNS
# One row per (instance, key) of the head snapshot, with the head's cluster and client type, so
# the count tables come straight from these rows.
ENTRY_SCHEMA = StructType([
    StructField("client_instance_id", StringType()),
    StructField("snapshot_id", StringType()),
    StructField("cluster_id", StringType()),
    StructField("client_type", StringType()),
    StructField("key", StringType()),
    StructField("value", StringType()),  # normalised (backend.pipeline.normalize)
    StructField("raw_value", StringType()),  # as reported
    StructField("type", StringType()),
    StructField("is_default", BooleanType()),
])
ENTRY_FIELDS = tuple(ENTRY_SCHEMA.fieldNames())
# Of two different entries for one key in one snapshot, the smaller by these columns is kept.
_ENTRY_ORDER = ("value", "raw_value", "type", "is_default")
_TIE_ORDER = ("snapshot_id", *IDENTITY)  # of two heads at the same received_at, the greater wins


def _greater(new: str, old: str, columns: tuple[str, ...]) -> Column:
    """Row ``new`` orders after row ``old`` by ``columns`` (nulls first), as one struct comparison."""
    return F.struct(*[F.col(f"{new}.{c}") for c in columns]) > F.struct(*[F.col(f"{old}.{c}") for c in columns])


def _latest(candidates: DataFrame, per_instance: list[Column]) -> DataFrame:
    """The rows of ``candidates`` that are each instance's latest (received_at, snapshot_id, identity).

    ``per_instance`` aggregates (numbers) ride along on the same group-by. The anti-join's
    condition names both sides of the join with the maximum, so the optimizer cannot push it
    below the aggregation onto every row.
    """
    top = candidates.groupBy(IDS).agg(F.max("received_at").alias("_at"), *per_instance)
    at_top = candidates.join(top, IDS).where(F.col("received_at") == F.col("_at"))
    beaten = ((F.col(f"b.{IDS}") == F.col(f"a.{IDS}")) & (F.col("b.received_at") == F.col("a._at"))
              & _greater("b", "a", _TIE_ORDER))
    return at_top.alias("a").join(candidates.alias("b"), beaten, "left_anti").drop("_at")


def snapshot_rows(rows: DataFrame) -> DataFrame:
    """One row per snapshot (its instance, head columns and identity) with its row count ``_rows``.

    Small (one row per snapshot read): the job caches it, as instance_heads reads it three times.
    """
    return rows.groupBy(*INSTANCE_COLUMNS).agg(F.count(F.lit(1)).alias("_rows"))


def instance_heads(rows: DataFrame, snapshots: DataFrame | None = None) -> DataFrame:
    """One head row per client instance (HEAD_SCHEMA) from client_configs rows (or their snapshot_rows).

    Latest = greatest (received_at, snapshot_id); identity columns from that snapshot.
    """
    snapshots = snapshot_rows(rows) if snapshots is None else snapshots
    heads = _latest(snapshots, [F.sum("_rows").alias("rows_read"),
                                F.count_distinct("snapshot_id").alias("snapshots_read")])
    return heads.select(*INSTANCE_COLUMNS, F.col("rows_read").cast("long"),
                        F.col("snapshots_read").cast("long"))


def latest_heads(heads: DataFrame) -> DataFrame:
    """Of several head rows per instance (a base and its segments), the latest one."""
    return _latest(heads, []).select(*HEAD_FIELDS)


def head_entries(rows: DataFrame, heads: DataFrame, partitions: int) -> DataFrame:
    """The entries (ENTRY_SCHEMA) of each head's snapshot, one per key, values normalised.

    Rows and heads are shuffled once, by instance, into ``partitions``; every later step (the
    join on the heads, the group-by and joins on instance and key) runs inside them. Joins here
    are inner or outer joins, never semi/anti: Spark would push those below the shuffle.
    """
    # key is never null (it is a join key below): said once here, so every reader of the shuffle
    # filters alike and Spark shuffles the rows once for all of them
    narrow = rows.where(F.col("key").isNotNull()).select(
        IDS, "snapshot_id", "key", F.col("value").alias("raw_value"), "type", "is_default")
    head = heads.select(IDS, "snapshot_id", "cluster_id", "client_type").repartition(partitions, IDS)
    picked = narrow.repartition(partitions, IDS).join(head.hint("shuffle_hash"), [IDS, "snapshot_id"])
    return _one_per_key(picked, partitions).select(*ENTRY_FIELDS)


def _normalised(rows: DataFrame) -> DataFrame:
    return rows.withColumn("value", normalized_value_col("key", "raw_value"))


def _one_per_key(rows: DataFrame, partitions: int) -> DataFrame:
    """One entry per (instance, key). A group-by on (instance, key) finds the keys reported more
    than once (a file ingested twice; two values for one key, rare): the other rows pass as they
    are, and only those go through a distinct and, where two values remain, keep the smallest by
    _ENTRY_ORDER. That small set is shuffled once more (by key) so both sides of its self-join
    read it rather than recompute it."""
    keys = [IDS, "key"]
    # The group-by also hashes every column (unused): it then reads the very shuffle the rows are
    # joined from (Spark reuses an exchange only when its readers want the same columns), not a
    # second, narrower shuffle of all the rows.
    every = F.max(F.xxhash64(*rows.columns)).alias("_all")
    repeated = rows.groupBy(*keys).agg(F.count(F.lit(1)).alias("_n"), every).where(
        (F.col("_n") > 1) & F.col("_all").isNotNull()).select(*keys, F.lit(True).alias("_repeated"))
    once = rows.join(repeated.hint("shuffle_hash"), keys, "left").where(F.col("_repeated").isNull())
    twice = _normalised(rows.join(repeated.hint("shuffle_hash"), keys).drop("_repeated").distinct())
    twice = twice.repartition(partitions, "key")
    a, b = twice.alias("a"), twice.select(IDS, "key", *_ENTRY_ORDER).alias("b")
    beaten = ((F.col(f"a.{IDS}") == F.col(f"b.{IDS}")) & (F.col("a.key") == F.col("b.key"))
              & _greater("a", "b", _ENTRY_ORDER))
    smallest = a.join(b, beaten, "left").where(F.col(f"b.{IDS}").isNull()).select("a.*")
    return _normalised(once.drop("_repeated")).unionByName(smallest)


def later(new: str, old: str) -> Column:
    """Head struct ``new`` supersedes ``old`` (or there is no old): the order instance_heads picks by."""
    n, o = F.col(new), F.col(old)
    order = ("received_at", *_TIE_ORDER)
    return o.isNull() | (F.struct(*[n[c] for c in order]) > F.struct(*[o[c] for c in order]))
