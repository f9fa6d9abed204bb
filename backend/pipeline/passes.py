"""The two Spark passes of a run, each ending in one collect to the driver (docs/spark.md, "The plan").

1. ``snapshot_table``: one row per (snapshot, file) of the files read, with its row count and the
   group.id / client.id values it reported; a hash aggregate whose partial aggregation leaves about
   one row per snapshot before its shuffle. The driver picks each instance's latest snapshot from it
   (backend.pipeline.heads).
2. ``instance_pass``: the rows of the snapshots the driver wants (a broadcast join with its table:
   instance, snapshot, snapshot number, class, weight) shuffled once by snapshot number. In those
   partitions one sort puts each snapshot's rows in key order, and
   - one entry per (snapshot, key) (the smallest spelling when a key is reported twice) is counted by
     (class, key, spelling, type, is_default) with the snapshot's weight: +1, or -1 for the snapshot a
     refresh replaces. The class stands for the snapshot's (cluster, client type, group.id);
   - the per-instance rules: one aggregation per snapshot of the rows of the keys they read (their
     normalised values as columns), every condition compiled onto those columns, and the alerts that
     fire with the values they show;
   - the watched keys (the keys the client-config policies name): each snapshot's entry of each, as the counts
     take it, for the instances' table the standards name violators from. A snapshot of weight 0 is an
     unchanged instance read again only for the keys a policy file named since (``fill``): only the rows of
     those keys are kept after the join, and it adds nothing to the counts or the rules.
   All of it comes back in one collect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from backend.pipeline.heads import CAPTURED, IDS, INSTANCE_COLUMNS
from backend.pipeline.normalize import normalized_value_col
from backend.pipeline.rules import _PLACEHOLDER, PER_INSTANCE_RULE_IDS, rule_by_id
from backend.store.config_schemas import spark_schema

# The rules written as conditions; CC015 (client.id) is evaluated on the driver from the heads.
RULES = tuple(r for r in map(rule_by_id, PER_INSTANCE_RULE_IDS) if r.condition is not None)
RULE_KEYS = tuple(sorted({k for r in RULES for k in (*r.keys, *(m[1] for m in _PLACEHOLDER.findall(r.condition or "")))}))
ENTRY = ("raw_value", "type", "is_default")  # of two entries for one key, the smaller by these is kept


def read_rows(spark: SparkSession, paths: list[str]) -> DataFrame:
    """client_configs rows of the given Spark paths, with the table's declared schema."""
    return spark.read.schema(spark_schema("client_configs")).parquet(*paths)


def snapshot_table(rows: DataFrame) -> pa.Table:
    """Per (snapshot, its identity, file) and captured value: the row count ``n`` (pass 1, one collect)."""
    captured = F.col("key").isin(*CAPTURED)
    return rows.groupBy(*INSTANCE_COLUMNS, F.col("_metadata.file_path").alias("file"),
                        F.when(captured, F.col("key")).alias("pk"),
                        F.when(captured, F.col("value")).alias("pv")).agg(
        F.count(F.lit(1)).alias("n")).toArrow()


def _condition(condition: str) -> str:
    """A rule condition as Spark SQL over the per-snapshot columns (k<i> = struct of the normalised value)."""

    def expand(match: re.Match[str]) -> str:
        kind, key = match.groups()
        col = f"k{RULE_KEYS.index(key)}"
        return {"num": f"try_cast({col}.v AS DOUBLE)", "str": f"lower({col}.v)", "has": f"({col} IS NOT NULL)"}[kind]

    return _PLACEHOLDER.sub(expand, condition)


def _fired() -> Column:
    """The (rule_id, observed_json) of every rule an instance breaks (client types are checked on the driver)."""
    fired = []
    for rule in RULES:
        present = " AND ".join(f"(k{RULE_KEYS.index(k)} IS NOT NULL)" for k in rule.keys)
        observed = F.to_json(F.create_map(*[c for k in rule.keys
                                            for c in (F.lit(k), F.col(f"k{RULE_KEYS.index(k)}.v"))]))
        fired.append(F.when(F.expr(f"({present}) AND ({_condition(rule.condition or '')})"),
                            F.struct(F.lit(rule.id).alias("rule_id"), observed.alias("observed_json"))))
    return F.filter(F.array(*fired), lambda alert: alert.isNotNull())


def instance_pass(rows: DataFrame, wanted: DataFrame, partitions: int, watched: Sequence[str] = (),
                  fill: Sequence[str] = ()) -> pa.Table:
    """Counts by (cls, key, raw_value, type, is_default) -> ``n``; alerts (sid, rule_id, observed_json); and, with
    ``watched`` keys, each snapshot's entry of them (sid, key, raw_value, ``watched`` true) for weights >= 0.

    ``wanted``: (client_instance_id, snapshot_id, sid, cls, w), one row per snapshot, made on the driver
    (sid numbers the snapshots). ``fill``: the watched keys the snapshots of weight 0 are read for.
    """
    return instance_frame(rows, wanted, partitions, watched, fill).toArrow()


def instance_frame(rows: DataFrame, wanted: DataFrame, partitions: int, watched: Sequence[str] = (),
                   fill: Sequence[str] = ()) -> DataFrame:
    """The instance pass as one DataFrame (its plan is in docs/spark.md); see instance_pass."""
    # After the join a snapshot is its number: the shuffle carries four numbers and the entry, and the sort
    # leads with an int.
    joined = rows.select(IDS, "snapshot_id", "key", F.col("value").alias("raw_value"), "type", "is_default").join(
        F.broadcast(wanted), [IDS, "snapshot_id"])
    if fill:  # an unchanged instance read again: only the keys to fill
        joined = joined.where((F.col("w") != 0) | F.col("key").isin(*fill))
    latest = joined.select("sid", "cls", "w", "key", *ENTRY).repartition(partitions, "sid")
    order = ["sid", "key", *ENTRY]
    entries = latest.sortWithinPartitions(*order).groupBy("sid", "key").agg(
        F.first(F.struct(*ENTRY, "cls", "w")).alias("e")).select("sid", "key", "e.*")
    counted = entries.where(F.col("w") != 0) if fill else entries
    counts = counted.groupBy("cls", "key", *ENTRY).agg(F.sum("w").alias("n"))
    # The rules read the changed snapshots' rows of the keys they name. The weight and class are kept as
    # columns (and filtered after the aggregation) so both branches broadcast the very same table.
    read = latest.where(F.col("key").isin(*RULE_KEYS)).sortWithinPartitions(*order).select(
        "sid", "key", "w", "cls", F.struct(normalized_value_col("key", "raw_value").alias("v")).alias("e"))
    values = read.groupBy("sid").agg(F.min("w").alias("_w"), F.min("cls").alias("_c"), *[
        F.first(F.when(F.col("key") == key, F.col("e")), ignorenulls=True).alias(f"k{i}")
        for i, key in enumerate(RULE_KEYS)]).where((F.col("_w") > 0) & F.col("_c").isNotNull())
    alerts = values.select("sid", F.explode(_fired()).alias("a")).select("sid", "a.rule_id", "a.observed_json")
    out = counts.unionByName(alerts, allowMissingColumns=True)
    if watched:
        seen = entries.where(F.col("key").isin(*watched) & (F.col("w") >= 0)).select(
            "sid", "key", "raw_value", F.lit(True).alias("watched"))
        out = out.unionByName(seen, allowMissingColumns=True)
    return out
