"""The count tables and the run's statistics, as one tally summed by one aggregation.

Each entry row (backend.pipeline.instances.ENTRY_SCHEMA) and each head row becomes records
``(t, c1..c6, flag, w)``: ``t`` names the count table, ``c1..c6``/``flag`` hold its key columns as
text, ``w`` is +1 (or -1 for a replaced instance in a refresh). Statistics of the run ride along
as records whose ``t`` starts with STAT. ``tallies`` sums ``w`` per key in one hash aggregation;
the count tables hold one row per distinct combination, so they stay small.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from backend.pipeline.instances import IDS

# value is normalised; raw_value is the spelling reported (distributions lists the spellings).
VALUE_COUNT_KEYS = ("cluster_id", "client_type", "key", "value", "raw_value", "type", "is_default")
GROUP_COUNT_KEYS = ("cluster_id", "group_id", "key", "value")
VERSION_COUNT_KEYS = ("cluster_id", "client_type", "client_software_name", "client_software_version")
CLIENT_ID_COUNT_KEYS = ("cluster_id", "client_id", "client_type")
# Keys that differ between members of a healthy group, so they are not group drift.
GROUP_IDENTITY_KEYS = ("group.id", "client.id", "group.instance.id", "client.rack",
                       "transactional.id", "bootstrap.servers")

RECORD_TYPE = StructType([
    StructField("t", StringType()), *[StructField(f"c{i}", StringType()) for i in range(1, 7)],
    StructField("flag", BooleanType()), StructField("w", LongType()),
])
RECORD_COLUMNS = tuple(f.name for f in RECORD_TYPE.fields if f.name != "w")
STAT = "#"
# count table -> (its key columns, the record columns they are stored in)
COUNT_LAYOUT: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "value_counts": (VALUE_COUNT_KEYS, ("c1", "c2", "c3", "c4", "c5", "c6", "flag")),
    "group_counts": (GROUP_COUNT_KEYS, ("c1", "c2", "c3", "c4")),
    "version_counts": (VERSION_COUNT_KEYS, ("c1", "c2", "c3", "c4")),
    "client_id_counts": (CLIENT_ID_COUNT_KEYS, ("c1", "c2", "c3")),
}


def group_ids(entries: DataFrame) -> DataFrame:
    """(client_instance_id, group_id) of the instances whose entries name a group.id."""
    return entries.where((F.col("key") == "group.id") & F.col("value").isNotNull()).select(
        IDS, F.col("value").alias("group_id"))


def _record(t: str, *cols: Column, flag: Column | None = None, w: Column) -> Column:
    padded = [*cols, *[F.lit(None)] * (6 - len(cols))]
    return F.struct(F.lit(t).alias("t"), *[c.cast("string").alias(f"c{i}") for i, c in enumerate(padded, 1)],
                    (flag if flag is not None else F.lit(None)).cast("boolean").alias("flag"),
                    w.cast("long").alias("w"))


def _inline(frame: DataFrame, records: list[Column]) -> DataFrame:
    """One pass over frame: each row becomes its non-null records (RECORD_TYPE columns)."""
    return frame.select(F.inline(F.filter(F.array(*records), lambda r: r.isNotNull())))


def count_records(heads: DataFrame, entries: DataFrame, sign: int) -> DataFrame:
    """The count records of some instances: their head rows and entry rows, each weighing ``sign``."""
    w = F.lit(sign)
    cluster = F.col("cluster_id")
    member = F.col("group_id").isNotNull() & ~F.col("key").isin(*GROUP_IDENTITY_KEYS)
    with_group = entries.join(F.broadcast(group_ids(entries)), IDS, "left")
    by_entry = _inline(with_group, [
        _record("value_counts", cluster, F.col("client_type"), F.col("key"), F.col("value"),
                F.col("raw_value"), F.col("type"), flag=F.col("is_default"), w=w),
        F.when(member, _record("group_counts", cluster, F.col("group_id"), F.col("key"), F.col("value"), w=w)),
    ])
    client_id = F.col("client_id")
    by_head = _inline(heads, [
        _record("version_counts", cluster, F.col("client_type"), F.col("client_software_name"),
                F.col("client_software_version"), w=w),
        F.when(client_id.isNotNull() & (client_id != ""),
               _record("client_id_counts", cluster, client_id, F.col("client_type"), w=w)),
    ])
    return by_entry.unionByName(by_head)


def stat_records(frame: DataFrame, stats: dict[str, Column]) -> DataFrame:
    """One STAT record per row of frame and statistic (weights: the long columns of ``stats``)."""
    return _inline(frame, [_record(STAT + name, w=value) for name, value in stats.items()])


def tallies(records: DataFrame) -> DataFrame:
    """Sum record weights per (t, c1..c6, flag) into ``n``; combinations that reach 0 are dropped."""
    return records.groupBy(*RECORD_COLUMNS).agg(F.sum("w").cast("long").alias("n")).where(
        F.col("n") != 0)


def stored_records(counts: DataFrame) -> DataFrame:
    """A written tally, without its statistics, as records (to add a delta to)."""
    return counts.where(~F.col("t").startswith(STAT)).select(
        *RECORD_COLUMNS, F.col("n").cast("long").alias("w"))
