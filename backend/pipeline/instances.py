"""The one pass over wide client_configs rows: one row per client instance, and one tally of them.

``instance_rows`` groups the rows by client instance once (the job's only shuffle of wide rows)
and keeps, per instance, its latest snapshot: identity columns, head ``(received_at,
snapshot_id)`` and ``entries``, the deduplicated ``(key, value, raw_value, type, is_default)`` of
that snapshot with ``value`` normalised. This row is also the incremental state (one per
instance). ``tallies`` turns rows of ``plus``/``minus`` instance structs into every count table
and the run's statistics in one aggregation. The row-level transforms in ``transforms.py`` stay
the reference definitions the tests compare against.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from backend.pipeline.normalize import normalized_value_col
from backend.pipeline.transforms import (
    CLIENT_ID_COUNT_KEYS,
    GROUP_COUNT_KEYS,
    GROUP_IDENTITY_KEYS,
    INSTANCE_COLUMNS,
    VALUE_COUNT_KEYS,
    VERSION_COUNT_KEYS,
)

ENTRY_TYPE = StructType([
    StructField("key", StringType()),
    StructField("value", StringType()),  # normalised (backend.pipeline.normalize)
    StructField("raw_value", StringType()),  # as reported
    StructField("type", StringType()),
    StructField("is_default", BooleanType()),
])
# One row per client instance: the state a refresh updates and every per-instance result reads.
# rows_read / snapshots_read: what the run that wrote the row read of this instance.
INSTANCE_SCHEMA = StructType([
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
    StructField("entries", ArrayType(ENTRY_TYPE)),
    StructField("rows_read", LongType()),
    StructField("snapshots_read", LongType()),
])
INSTANCE_FIELDS = tuple(INSTANCE_SCHEMA.fieldNames())
assert INSTANCE_FIELDS[:len(INSTANCE_COLUMNS)] == INSTANCE_COLUMNS

# A tally record: which count table (t), up to six key columns as text, one boolean, a weight.
# Statistics of the run ride along as records whose t starts with STAT.
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
_HEAD = ("received_at", "snapshot_id")


def instance_rows(rows: DataFrame) -> DataFrame:
    """One row per client instance (INSTANCE_SCHEMA) from client_configs rows, in one shuffle.

    Latest = greatest (received_at, snapshot_id); a key reported twice in that snapshot (a file
    ingested twice) counts once.
    """
    narrow = rows.select(
        *INSTANCE_COLUMNS, "key", F.col("value").alias("raw_value"),
        normalized_value_col().alias("value"), "type", "is_default")
    head = F.struct(*_HEAD)
    identity = [c for c in INSTANCE_COLUMNS if c != "client_instance_id"]
    grouped = narrow.groupBy("client_instance_id").agg(
        F.max_by(F.struct(*identity), head).alias("id"),
        F.collect_list(F.struct(*_HEAD, "key", "value", "raw_value", "type", "is_default"))
        .alias("all"),
    )
    latest = F.filter("all", lambda r: (r["received_at"] == F.col("id.received_at"))
                      & (r["snapshot_id"] == F.col("id.snapshot_id")))
    # Sorted by key (then value...) and without exact duplicates (a file ingested twice); the
    # sorted array is materialised once, so the per-key pass below reads it, not re-sorts it.
    entries = F.array_sort(F.array_distinct(F.transform(latest, lambda r: F.struct(
        *[r[f.name].alias(f.name) for f in ENTRY_TYPE.fields]))))
    return grouped.select(
        "client_instance_id", *[F.col(f"id.{c}").alias(c) for c in identity],
        F.aggregate(entries, F.array().cast(ArrayType(ENTRY_TYPE)), _keep_first_of_key).alias("entries"),
        F.size("all").cast("long").alias("rows_read"),
        F.size(F.array_distinct(F.transform("all", lambda r: r["snapshot_id"]))).cast("long")
        .alias("snapshots_read"),
    )


def _keep_first_of_key(kept: Column, entry: Column) -> Column:
    """Fold step over entries sorted by key: append an entry unless its key was just kept."""
    last = F.get(kept, F.size(kept) - 1)
    return F.when((F.size(kept) > 0) & (last["key"] == entry["key"]), kept).otherwise(
        F.concat(kept, F.array(entry)))


def latest_instances(state_rows: DataFrame) -> DataFrame:
    """Of several state rows per instance (a base and its segments), the latest one."""
    head = F.struct(*_HEAD)
    others = [c for c in INSTANCE_FIELDS if c != "client_instance_id"]
    return state_rows.groupBy("client_instance_id").agg(
        F.max_by(F.struct(*others), head).alias("s")).select("client_instance_id", "s.*")


def later(new: str, old: str) -> Column:
    """Instance struct ``new`` supersedes ``old``: a later (received_at, snapshot_id), or no old."""
    n, o = F.col(new), F.col(old)
    return o.isNull() | (n["received_at"] > o["received_at"]) | (
        (n["received_at"] == o["received_at"]) & (n["snapshot_id"] > o["snapshot_id"]))


def with_cfg(instances: DataFrame) -> DataFrame:
    """Instance rows with ``cfg``, the map key -> normalised value the rules read."""
    return instances.withColumn("cfg", F.map_from_entries(F.transform(
        "entries", lambda e: F.struct(e["key"].alias("key"), e["value"].alias("value")))))


def _text(col: Column | None) -> Column:
    return F.lit(None).cast("string") if col is None else col.cast("string")


def _record(t: str, *cols: Column | None, flag: Column | None = None, w: Column) -> Column:
    padded = [*cols, *[None] * (6 - len(cols))]
    return F.struct(F.lit(t).alias("t"), *[_text(c).alias(f"c{i}") for i, c in enumerate(padded, 1)],
                    (flag if flag is not None else F.lit(None)).cast("boolean").alias("flag"),
                    w.cast("long").alias("w"))


def _empty() -> Column:
    return F.array().cast(ArrayType(RECORD_TYPE))


def _records(side: Column, sign: int) -> Column:
    """The count records of one instance struct (weight sign), empty when it is null."""
    w = F.lit(sign)
    cluster, ctype = side["cluster_id"], side["client_type"]
    values = F.transform(side["entries"], lambda e: _record(
        "value_counts", cluster, ctype, e["key"], e["value"], e["raw_value"], e["type"],
        flag=e["is_default"], w=w))
    group_id = F.get(F.filter(side["entries"], lambda e: (e["key"] == "group.id")
                              & e["value"].isNotNull()), 0)["value"]
    members = F.transform(
        F.filter(side["entries"], lambda e: ~e["key"].isin(*GROUP_IDENTITY_KEYS)),
        lambda e: _record("group_counts", cluster, group_id, e["key"], e["value"], w=w))
    version = F.array(_record("version_counts", cluster, ctype, side["client_software_name"],
                              side["client_software_version"], w=w))
    client_id = side["client_id"]
    client_ids = F.array(_record("client_id_counts", cluster, client_id, ctype, w=w))
    return F.when(side.isNull(), _empty()).otherwise(F.concat(
        values,
        F.coalesce(F.when(group_id.isNotNull(), members), _empty()),
        version,
        F.coalesce(F.when(client_id.isNotNull() & (client_id != ""), client_ids), _empty()),
    ))


def tally_records(frame: DataFrame) -> DataFrame:
    """Records (RECORD_TYPE columns) of a frame with ``plus`` and ``minus`` instance structs
    (either may be null) and a ``stats`` struct of longs (one STAT record per field)."""
    stat_names = frame.schema["stats"].dataType.names  # type: ignore[attr-defined]
    stats = F.array(*[_record(STAT + name, w=F.col("stats")[name]) for name in stat_names])
    records = F.concat(_records(F.col("plus"), 1), _records(F.col("minus"), -1), stats)
    return frame.select(F.explode(records).alias("r")).select("r.*")


def tallies(records: DataFrame) -> DataFrame:
    """Sum record weights per (t, c1..c6, flag) into ``n``; combinations that reach 0 are dropped."""
    return records.groupBy(*RECORD_COLUMNS).agg(F.sum("w").cast("long").alias("n")).where(
        F.col("n") != 0)


def stored_records(counts: DataFrame) -> DataFrame:
    """A written tally, without its statistics, as records (to add a delta to)."""
    return counts.where(~F.col("t").startswith(STAT)).select(
        *RECORD_COLUMNS, F.col("n").cast("long").alias("w"))


def count_table(counts: DataFrame, name: str) -> DataFrame:
    """One count table (its key columns and ``n``) out of a tally."""
    keys, columns = COUNT_LAYOUT[name]
    picked = counts.where(F.col("t") == name).select(
        *[F.col(c).alias(k) for k, c in zip(keys, columns, strict=True)], "n")
    if "is_default" in keys:
        picked = picked.withColumn("is_default", F.col("is_default").cast("boolean"))
    return picked
