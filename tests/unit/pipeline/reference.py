"""The reference definitions the tests hold the job to (oracles), as first written.

Row-level Spark transforms over client_configs rows (latest snapshot per instance with
``dropDuplicates``, distributions, drift, count tables, ...) and the rule evaluation over a
``cfg`` map per instance (one scan per rule, or one projection), CC018 included (the client-too-old
index and the brokers' major versions). The job computes the same results another way: two Spark
passes (backend.pipeline.passes), heads picked on the driver (backend.pipeline.heads) and pandas
over the count tables (backend.pipeline.results). These definitions are simple enough to trust;
the tests compare the job's output with them.
"""

from __future__ import annotations

import re
from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from backend.pipeline.heads import INSTANCE_COLUMNS
from backend.pipeline.normalize import normalized_value_col
from backend.pipeline.results import (
    CLIENT_ID_COUNT_KEYS,
    GROUP_COUNT_KEYS,
    GROUP_IDENTITY_KEYS,
    VALUE_COUNT_KEYS,
    VERSION_COUNT_KEYS,
)
from backend.pipeline.rules import (
    _PLACEHOLDER,
    GENERATED_ID,
    GROUP_CONSISTENCY_KEYS,
    MIN_JAVA_FOR_KAFKA4,
    MIN_LIBRDKAFKA_FOR_KAFKA4,
    PER_INSTANCE_RULE_IDS,
    RULES,
    SHARED_CLIENT_ID_THRESHOLD,
    Rule,
    rule_by_id,
)
from backend.store.config_schemas import NUMERIC_CONFIG_TYPES

# Internal stand-ins so nulls can take part in equi-joins; never written out.
_NULL_TYPE = "\u0000none"
_NULL_VALUE = "\u0000null"



def latest_snapshots(
    configs: DataFrame, since: datetime | None = None, until: datetime | None = None
) -> DataFrame:
    """Keep only the rows of each client instance's latest snapshot (within [since, until)).

    Latest = greatest (received_at, snapshot_id); rows ingested twice are deduplicated.
    """
    rows = configs
    if since is not None:
        rows = rows.where(F.col("received_at") >= F.lit(since))
    if until is not None:
        rows = rows.where(F.col("received_at") < F.lit(until))
    chosen = rows.groupBy("client_instance_id").agg(
        F.max(F.struct("received_at", "snapshot_id")).alias("latest")
    ).select("client_instance_id", F.col("latest.snapshot_id").alias("snapshot_id"))
    return rows.join(chosen, ["client_instance_id", "snapshot_id"], "left_semi").dropDuplicates(
        ["client_instance_id", "snapshot_id", "key"]
    )


_DIST_COLUMNS = ("cluster_id", "client_type", "key", "value", "instance_count", "total_instances",
                 "share", "raw_values")


def normalized(rows: DataFrame) -> DataFrame:
    """``value`` normalised (backend.pipeline.normalize), the spelling kept as ``raw_value``."""
    if "raw_value" in rows.columns:
        return rows
    return rows.withColumn("raw_value", F.col("value")).withColumn("value", normalized_value_col())


def instances(latest: DataFrame) -> DataFrame:
    """One row per client instance with its identity columns."""
    return latest.select(*INSTANCE_COLUMNS).dropDuplicates(["client_instance_id"])


def distributions(latest: DataFrame) -> DataFrame:
    """Instances per (cluster, client type, key, value) and their share of that key's instances."""
    per_key = Window.partitionBy("cluster_id", "client_type", "key")
    return (
        normalized(latest).groupBy("cluster_id", "client_type", "key", "value")
        .agg(F.count(F.lit(1)).alias("instance_count"),
             F.array_sort(F.collect_set("raw_value")).alias("raw_values"))
        .withColumn("total_instances", F.sum("instance_count").over(per_key))
        .withColumn("share", F.col("instance_count") / F.col("total_instances"))
        .select(*_DIST_COLUMNS)
    )


def default_share(latest: DataFrame) -> DataFrame:
    """Per (cluster, client type, key): how many instances run the default vs an override."""
    return (
        latest.groupBy("cluster_id", "client_type", "key")
        .agg(
            F.count(F.lit(1)).alias("instances"),
            F.sum(F.when(F.col("is_default"), 1).otherwise(0)).cast("long").alias("default_count"),
        )
        .withColumn("overridden_count", F.col("instances") - F.col("default_count"))
        .withColumn("default_share", F.col("default_count") / F.col("instances"))
    )


def numeric_summary(latest: DataFrame) -> DataFrame:
    """min, p50, p90, max (exact, linear interpolation) of numeric keys per cluster/type/key."""
    numeric = normalized(latest).where(F.col("type").isin(*NUMERIC_CONFIG_TYPES)).withColumn(
        "number", F.expr("try_cast(value AS DOUBLE)")
    )
    return (
        numeric.groupBy("cluster_id", "client_type", "key")
        .agg(
            F.min("type").alias("type"),  # deterministic when a key's type differs
            F.count(F.lit(1)).alias("instances"),
            F.sum(F.when(F.col("number").isNull() & F.col("value").isNotNull(), 1).otherwise(0))
            .cast("long").alias("unparsable"),
            F.min("number").alias("min"),
            F.expr("percentile(number, array(0.5, 0.9))").alias("pct"),
            F.max("number").alias("max"),
        )
        .select("cluster_id", "client_type", "key", "type", "instances", "unparsable", "min",
                F.col("pct")[0].alias("p50"), F.col("pct")[1].alias("p90"), "max")
    )


def _nn_type(col: str = "client_type") -> Column:
    return F.coalesce(F.col(col), F.lit(_NULL_TYPE))


def _restore_type(col: str = "client_type") -> Column:
    return F.when(F.col(col) == _NULL_TYPE, F.lit(None).cast("string")).otherwise(F.col(col))


def dominant_values(dist: DataFrame) -> DataFrame:
    """Per (cluster, client type, key): the most common value (ties: smallest value)."""
    order = Window.partitionBy("cluster_id", "client_type", "key").orderBy(
        F.col("instance_count").desc(), F.col("value").asc_nulls_last()
    )
    ranked = dist.withColumn("rank", F.row_number().over(order))
    return ranked.where("rank = 1").select(
        "cluster_id", "client_type", "key",
        F.col("value").alias("dominant_value"), F.col("share").alias("dominant_share"),
    )


def drift_clusters(dist: DataFrame) -> DataFrame:
    """Total variation distance ½·Σ|p_a(v) − p_b(v)| of each key between every cluster pair."""
    d = dist.withColumn("client_type", _nn_type()).withColumn(
        "v", F.coalesce(F.col("value"), F.lit(_NULL_VALUE))
    )
    sides = d.select("client_type", "key", "cluster_id", "total_instances").distinct()
    a, b = sides.alias("a"), sides.alias("b")
    pairs = a.join(
        b,
        (F.col("a.client_type") == F.col("b.client_type"))
        & (F.col("a.key") == F.col("b.key"))
        & (F.col("a.cluster_id") < F.col("b.cluster_id")),
    ).select(
        F.col("a.client_type").alias("client_type"), F.col("a.key").alias("key"),
        F.col("a.cluster_id").alias("cluster_a"), F.col("b.cluster_id").alias("cluster_b"),
        F.col("a.total_instances").alias("instances_a"),
        F.col("b.total_instances").alias("instances_b"),
    )
    pair_cols = ["client_type", "key", "cluster_a", "cluster_b"]
    share_a = pairs.join(
        d.select("client_type", "key", F.col("cluster_id").alias("cluster_a"), "v",
                 F.col("share").alias("share_a")),
        ["client_type", "key", "cluster_a"],
    ).select(*pair_cols, "v", "share_a")
    share_b = pairs.join(
        d.select("client_type", "key", F.col("cluster_id").alias("cluster_b"), "v",
                 F.col("share").alias("share_b")),
        ["client_type", "key", "cluster_b"],
    ).select(*pair_cols, "v", "share_b")
    tvd = (
        share_a.join(share_b, [*pair_cols, "v"], "full_outer")
        .groupBy(*pair_cols)
        .agg((F.sum(F.abs(F.coalesce(F.col("share_a"), F.lit(0.0))
                          - F.coalesce(F.col("share_b"), F.lit(0.0)))) / 2).alias("tvd"))
    )
    dom = dominant_values(dist).withColumn("client_type", _nn_type())
    dom_a = dom.select("client_type", "key", F.col("cluster_id").alias("cluster_a"),
                       F.col("dominant_value").alias("dominant_value_a"))
    dom_b = dom.select("client_type", "key", F.col("cluster_id").alias("cluster_b"),
                       F.col("dominant_value").alias("dominant_value_b"))
    return (
        pairs.join(tvd, pair_cols)
        .join(dom_a, ["client_type", "key", "cluster_a"])
        .join(dom_b, ["client_type", "key", "cluster_b"])
        .withColumn("tvd", F.least(F.greatest(F.col("tvd"), F.lit(0.0)), F.lit(1.0)))
        .withColumn("client_type", _restore_type())
        .select(*pair_cols, "tvd", "instances_a", "instances_b", "dominant_value_a",
                "dominant_value_b")
    )


def drift_keys(dist: DataFrame, pairs: DataFrame) -> DataFrame:
    """Per (client type, key, cluster): dominant value, distinct values and the key's max TVD."""
    per_cluster = dist.groupBy("cluster_id", "client_type", "key").agg(
        F.first("total_instances").alias("instances"),
        F.count(F.lit(1)).alias("distinct_values"),
    )
    max_tvd = pairs.withColumn("client_type", _nn_type()).groupBy("client_type", "key").agg(
        F.max("tvd").alias("max_tvd"))
    # null-safe on client_type: an untyped client's keys are kept, as in drift_clusters
    return (
        per_cluster.withColumn("client_type", _nn_type())
        .join(dominant_values(dist).withColumn("client_type", _nn_type()),
              ["cluster_id", "client_type", "key"])
        .join(max_tvd, ["client_type", "key"], "left")
        .withColumn("max_tvd", F.coalesce(F.col("max_tvd"), F.lit(0.0)))
        .withColumn("client_type", _restore_type())
        .withColumn("distinct_share", F.col("distinct_values") / F.col("instances"))
        .select("client_type", "key", "cluster_id", "instances", "distinct_values",
                "dominant_value", "dominant_share", "max_tvd", "distinct_share")
    )


def group_drift(latest: DataFrame) -> DataFrame:
    """Keys on which members of one group.id (in one cluster) disagree, with value counts."""
    latest = normalized(latest)
    groups = latest.where((F.col("key") == "group.id") & F.col("value").isNotNull()).select(
        "client_instance_id", "cluster_id", F.col("value").alias("group_id"))
    members = latest.join(groups, ["client_instance_id", "cluster_id"]).where(
        ~F.col("key").isin(*GROUP_IDENTITY_KEYS))
    counts = members.groupBy("cluster_id", "group_id", "key", "value").agg(
        F.count(F.lit(1)).alias("n"))
    return group_drift_from_counts(counts)


def client_versions(latest: DataFrame) -> DataFrame:
    """Instances per (cluster, client type, software name, software version)."""
    return (
        instances(latest)
        .groupBy("cluster_id", "client_type", "client_software_name", "client_software_version")
        .agg(F.count(F.lit(1)).alias("instances"))
    )


def instance_configs(latest: DataFrame) -> DataFrame:
    """One row per instance with its identity columns and a map ``cfg`` of key -> value."""
    cfg = normalized(latest).groupBy("client_instance_id").agg(
        F.map_from_entries(F.collect_list(F.struct("key", "value"))).alias("cfg"))
    return instances(latest).join(cfg, "client_instance_id")


# --- Count tables: the incremental state of the results -------------------------------------
#
# Each count table holds, per combination of its key columns, the number ``n`` of latest client
# instances with it. Built from latest rows they count instances; built from delta rows (rows
# with a ``sign`` column: +1 for a superseding snapshot, -1 for the snapshot it replaces) they
# count the change, and merge_counts() adds the change in. Their size follows the number of
# distinct values, not the number of instances. Every results table but config_alerts is a
# function of them.


def _weighted_count(rows: DataFrame) -> Column:
    weight = F.col("sign") if "sign" in rows.columns else F.lit(1)
    return F.sum(weight).cast("long").alias("n")


def instance_rows(rows: DataFrame) -> DataFrame:
    """One row per (instance, snapshot) with the identity columns (and ``sign`` when present)."""
    extra = ["sign"] if "sign" in rows.columns else []
    return rows.select(*INSTANCE_COLUMNS, *extra).dropDuplicates(
        ["client_instance_id", "snapshot_id"])


def value_counts(rows: DataFrame) -> DataFrame:
    """n per (cluster, client type, key, value, config type, is_default)."""
    rows = normalized(rows)
    return rows.groupBy(*VALUE_COUNT_KEYS).agg(_weighted_count(rows))


def group_counts(rows: DataFrame) -> DataFrame:
    """n members per (cluster, group.id, key, value), group identity keys left out."""
    extra = ["sign"] if "sign" in rows.columns else []
    rows = normalized(rows)
    groups = rows.where((F.col("key") == "group.id") & F.col("value").isNotNull()).select(
        "client_instance_id", "snapshot_id", "cluster_id", F.col("value").alias("group_id"))
    members = rows.select("client_instance_id", "snapshot_id", "cluster_id", "key", "value",
                          *extra).join(groups, ["client_instance_id", "snapshot_id", "cluster_id"])
    members = members.where(~F.col("key").isin(*GROUP_IDENTITY_KEYS))
    return members.groupBy(*GROUP_COUNT_KEYS).agg(_weighted_count(members))


def version_counts(rows: DataFrame) -> DataFrame:
    """n instances per (cluster, client type, software name, software version)."""
    inst = instance_rows(rows)
    return inst.groupBy(*VERSION_COUNT_KEYS).agg(_weighted_count(inst))


def client_id_counts(rows: DataFrame) -> DataFrame:
    """n instances per (cluster, client_id, client type), empty and null client ids left out."""
    inst = instance_rows(rows).where(F.col("client_id").isNotNull() & (F.col("client_id") != ""))
    return inst.groupBy(*CLIENT_ID_COUNT_KEYS).agg(_weighted_count(inst))


def merge_counts(counts: DataFrame, delta: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """Add a delta count table into a count table; combinations that reach 0 are dropped."""
    both = counts.select(*keys, "n").unionByName(delta.select(*keys, "n"))
    return both.groupBy(*keys).agg(F.sum("n").cast("long").alias("n")).where(F.col("n") != 0)


def distributions_from_counts(values: DataFrame) -> DataFrame:
    """distributions() computed from value_counts()."""
    per_key = Window.partitionBy("cluster_id", "client_type", "key")
    return (
        values.groupBy("cluster_id", "client_type", "key", "value")
        .agg(F.sum("n").cast("long").alias("instance_count"),
             F.array_sort(F.collect_set("raw_value")).alias("raw_values"))
        .withColumn("total_instances", F.sum("instance_count").over(per_key))
        .withColumn("share", F.col("instance_count") / F.col("total_instances"))
        .select(*_DIST_COLUMNS)
    )


def default_share_from_counts(values: DataFrame) -> DataFrame:
    """default_share() computed from value_counts()."""
    return (
        values.groupBy("cluster_id", "client_type", "key")
        .agg(
            F.sum("n").cast("long").alias("instances"),
            F.sum(F.when(F.col("is_default"), F.col("n")).otherwise(0)).cast("long")
            .alias("default_count"),
        )
        .withColumn("overridden_count", F.col("instances") - F.col("default_count"))
        .withColumn("default_share", F.col("default_count") / F.col("instances"))
    )


def numeric_summary_from_counts(values: DataFrame) -> DataFrame:
    """numeric_summary() from value_counts(): the same exact percentiles, weighted by n."""
    numeric = values.where(F.col("type").isin(*NUMERIC_CONFIG_TYPES)).withColumn(
        "number", F.expr("try_cast(value AS DOUBLE)")
    )
    return (
        numeric.groupBy("cluster_id", "client_type", "key")
        .agg(
            F.min("type").alias("type"),
            F.sum("n").cast("long").alias("instances"),
            F.sum(F.when(F.col("number").isNull() & F.col("value").isNotNull(), F.col("n"))
                  .otherwise(0)).cast("long").alias("unparsable"),
            F.min("number").alias("min"),
            # Spark's percentile with a frequency column: the same linear interpolation as over
            # n repeated rows.
            F.expr("percentile(number, array(0.5, 0.9), n)").alias("pct"),
            F.max("number").alias("max"),
        )
        .select("cluster_id", "client_type", "key", "type", "instances", "unparsable", "min",
                F.col("pct")[0].alias("p50"), F.col("pct")[1].alias("p90"), "max")
    )


def group_drift_from_counts(groups: DataFrame) -> DataFrame:
    """group_drift() computed from group_counts()."""
    return (
        groups.groupBy("cluster_id", "group_id", "key")
        .agg(
            F.sum("n").cast("long").alias("members"),
            F.count(F.lit(1)).alias("distinct_values"),
            F.to_json(F.map_from_entries(F.array_sort(F.collect_list(
                F.struct(F.coalesce(F.col("value"), F.lit("null")).alias("k"), F.col("n"))
            )))).alias("value_counts_json"),
        )
        .where(F.col("distinct_values") > 1)
    )


def client_versions_from_counts(versions: DataFrame) -> DataFrame:
    """client_versions() computed from version_counts()."""
    return versions.select(*VERSION_COUNT_KEYS, F.col("n").alias("instances"))


def superseding(new_heads: DataFrame, old_heads: DataFrame) -> DataFrame:
    """Instances whose new (received_at, snapshot_id) is later than the state's, or not in it.

    Both inputs: client_instance_id, received_at, snapshot_id (one row per instance). Output:
    client_instance_id and ``updated`` (true when the instance had a snapshot in the state).
    """
    old = old_heads.select("client_instance_id", F.col("received_at").alias("old_at"),
                           F.col("snapshot_id").alias("old_snapshot"))
    later = (F.col("received_at") > F.col("old_at")) | (
        (F.col("received_at") == F.col("old_at")) & (F.col("snapshot_id") > F.col("old_snapshot")))
    return (
        new_heads.join(old, "client_instance_id", "left")
        .where(F.col("old_snapshot").isNull() | later)
        .select("client_instance_id", F.col("old_snapshot").isNotNull().alias("updated"))
    )


# --- Rules: one scan per rule over instance_configs() ------------------------------------

def _alert_columns(rule: Rule, observed: Column, explanation: Column, alert_keys: Column) -> list[Column]:
    """The config_alerts columns (before computed_at/schema_version) of one rule's match."""
    return [
        F.substring(F.sha2(F.concat_ws("|", F.lit(rule.id), F.col("cluster_id"),
                                       F.coalesce(F.col("client_instance_id"), F.lit("")),
                                       F.coalesce(F.col("group_id"), F.lit("")),
                                       F.coalesce(F.col("client_id"), F.lit("")),
                                       alert_keys), 256), 1, 20).alias("alert_id"),
        F.lit(rule.id).alias("rule_id"),
        F.lit(rule.severity).alias("severity"),
        F.lit(rule.title).alias("title"),
        F.col("cluster_id").alias("cluster_id"),
        F.col("client_instance_id").alias("client_instance_id"),
        F.col("client_id").alias("client_id"),
        F.col("group_id").alias("group_id"),
        F.col("client_type").alias("client_type"),
        alert_keys.alias("keys"),
        observed.alias("observed_json"),
        explanation.alias("explanation"),
        F.lit(rule.doc_url).alias("doc_url"),
    ]


def _alert_frame(rule: Rule, df: DataFrame, observed: Column, explanation: Column) -> DataFrame:
    """Shape matches rows into the config_alerts columns (before computed_at/schema_version)."""
    keys = F.col("alert_keys") if "alert_keys" in df.columns else F.lit(",".join(rule.keys))
    return df.select(*_alert_columns(rule, observed, explanation, keys))


def _version_number(version: Column) -> Column:
    """'2.0.1' -> 20001 (major*10000 + minor*100 + patch); null when unparsable."""
    parts = [F.regexp_extract(version, r"^v?(\d+)\.(\d+)(?:\.(\d+))?", i) for i in (1, 2, 3)]
    number = (parts[0].cast("int") * 10000 + parts[1].cast("int") * 100
              + F.coalesce(F.when(parts[2] != "", parts[2].cast("int")), F.lit(0)))
    return F.when(parts[0] != "", number)


BROKER_COLUMNS = ("cluster_id string, polled_at timestamp, software_version string, version_min string, "
                  "version_provenance string")


def broker_major_versions(broker_snapshots: DataFrame) -> DataFrame:
    """Per cluster_id: the highest broker major version seen in its latest poll."""
    version = F.when(F.col("version_provenance").isin("reported", "zookeeper"),
                     F.col("software_version")).when(
        F.col("version_provenance") == "guessed", F.col("version_min"))
    latest_poll = broker_snapshots.groupBy("cluster_id").agg(F.max("polled_at").alias("polled_at"))
    return (
        broker_snapshots.join(latest_poll, ["cluster_id", "polled_at"])
        .withColumn("major", F.regexp_extract(version, r"^(\d+)\.", 1))
        .where(F.col("major") != "")
        .groupBy("cluster_id")
        .agg(F.max(F.col("major").cast("int")).alias("broker_major"),
             F.max(version).alias("broker_version"))
    )


TOO_OLD_COLUMNS = ("client_instance_id", "cluster_id", "client_id", "client_type",
                   "client_software_name", "client_software_version", "group_id")


def too_old_clients(heads: DataFrame) -> DataFrame:
    """Instances (head rows with ``group_id``) whose client software predates what Kafka 4.x serves.

    Does not depend on the brokers, so the job can keep it as a small per-instance index and
    join it with the latest broker versions on every run (CC018).
    """
    name = F.lower(F.coalesce(F.col("client_software_name"), F.lit("")))
    version = F.coalesce(F.col("client_software_version"), F.lit(""))
    rd_version = F.regexp_extract(version, r"rdkafka[-_ ]?v?(\d+\.\d+(?:\.\d+)?)", 1)
    java_min = MIN_JAVA_FOR_KAFKA4[0] * 10000 + MIN_JAVA_FOR_KAFKA4[1] * 100 + MIN_JAVA_FOR_KAFKA4[2]
    rd_min = (MIN_LIBRDKAFKA_FOR_KAFKA4[0] * 10000 + MIN_LIBRDKAFKA_FOR_KAFKA4[1] * 100
              + MIN_LIBRDKAFKA_FOR_KAFKA4[2])
    is_java = name.contains("java")
    is_rd = name.contains("rdkafka") | (rd_version != "")
    rd_number = _version_number(F.when(rd_version != "", rd_version).otherwise(version))
    too_old = (is_java & (_version_number(version) < java_min)) | (
        ~is_java & is_rd & (rd_number < rd_min))
    return heads.where(too_old).select(*TOO_OLD_COLUMNS)


def client_too_old_alerts(too_old: DataFrame, brokers: DataFrame | None) -> DataFrame:
    """CC018: too_old_clients() rows on clusters whose brokers run Kafka 4 or later."""
    rule = rule_by_id("CC018")
    if brokers is None:
        return _alert_frame(rule, too_old.limit(0), F.lit("{}"), F.lit(""))
    matched = too_old.join(brokers, "cluster_id").where(F.col("broker_major") >= 4)
    observed = F.to_json(F.create_map(
        F.lit("client_software_name"), F.col("client_software_name"),
        F.lit("client_software_version"), F.col("client_software_version"),
        F.lit("broker_version"), F.col("broker_version")))
    explanation = F.concat(F.lit(f"{rule.rationale} Brokers run "), F.col("broker_version"),
                           F.lit("."))
    return _alert_frame(rule, matched, observed, explanation)



def compile_condition(condition: str) -> str:
    """Expand the rule placeholders into Spark SQL over the ``cfg`` map column."""

    def expand(match: re.Match[str]) -> str:
        kind, key = match.groups()
        if kind == "num":
            return f"try_cast(cfg['{key}'] AS DOUBLE)"
        if kind == "str":
            return f"lower(cfg['{key}'])"
        return f"map_contains_key(cfg, '{key}')"

    return _PLACEHOLDER.sub(expand, condition)


def _observed(keys: tuple[str, ...]) -> Column:
    return F.to_json(F.map_from_arrays(
        F.array(*[F.lit(k) for k in keys]), F.array(*[F.col("cfg")[k] for k in keys])))


def _with_ids(df: DataFrame) -> DataFrame:
    return df.withColumn("group_id", F.col("cfg")["group.id"])


def evaluate_instance_rule(rule: Rule, configs: DataFrame) -> DataFrame:
    """Alerts of one instance rule over instance_configs()."""
    assert rule.condition is not None
    scope = configs
    if rule.client_types:
        scope = scope.where(F.col("client_type").isin(*rule.client_types))
    present = " AND ".join(f"map_contains_key(cfg, '{k}')" for k in rule.keys)
    matched = _with_ids(scope).where(F.expr(f"({present}) AND ({compile_condition(rule.condition)})"))
    return _alert_frame(rule, matched, _observed(rule.keys), F.lit(rule.rationale))



def _missing_client_id(rule: Rule, configs: DataFrame, **_: DataFrame | None) -> DataFrame:
    effective = F.coalesce(F.col("client_id"), F.col("cfg")["client.id"], F.lit(""))
    matched = _with_ids(configs).where(effective.rlike(GENERATED_ID))
    return _alert_frame(rule, matched, _observed(("client.id",)), F.lit(rule.rationale))


def shared_client_id_alerts(client_ids: DataFrame) -> DataFrame:
    """CC016 from client_id_counts(): one alert per (cluster, client.id) over the threshold."""
    rule = rule_by_id("CC016")
    shared = (
        client_ids.groupBy("cluster_id", "client_id")
        # min, not first: the same answer whatever order the instances come in
        .agg(F.sum("n").cast("long").alias("n"), F.min("client_type").alias("client_type"))
        .where(F.col("n") > SHARED_CLIENT_ID_THRESHOLD)
        .withColumn("client_instance_id", F.lit(None).cast("string"))
        .withColumn("group_id", F.lit(None).cast("string"))
    )
    observed = F.to_json(F.create_map(F.lit("client.id"), F.col("client_id"),
                                      F.lit("instances"), F.col("n").cast("string")))
    explanation = F.concat(F.lit(f"{rule.rationale} Instances sharing it: "),
                           F.col("n").cast("string"), F.lit("."))
    return _alert_frame(rule, shared, observed, explanation)


def _shared_client_id(rule: Rule, configs: DataFrame, **_: DataFrame | None) -> DataFrame:
    return shared_client_id_alerts(client_id_counts(configs))


def _group_disagreement(rule: Rule, configs: DataFrame, *, group_drift: DataFrame | None = None,
                        **_: DataFrame | None) -> DataFrame:
    if group_drift is None:
        raise ValueError("group_disagreement needs the group_drift frame")
    return group_disagreement_alerts(group_drift)


def group_disagreement_alerts(group_drift: DataFrame) -> DataFrame:
    """CC017 from the group_drift table: one alert per group and disagreeing group setting."""
    rule = rule_by_id("CC017")
    rows = (
        group_drift.where(F.col("key").isin(*GROUP_CONSISTENCY_KEYS))
        .withColumn("client_instance_id", F.lit(None).cast("string"))
        .withColumn("client_id", F.lit(None).cast("string"))
        .withColumn("client_type", F.lit("consumer"))
        .withColumn("alert_keys", F.col("key"))
    )
    explanation = F.concat(F.lit(f"{rule.rationale} Members by value: "),
                           F.col("value_counts_json"), F.lit("."))
    observed = F.to_json(F.create_map(F.col("key"), F.col("value_counts_json")))
    return _alert_frame(rule, rows, observed, explanation)



def _client_too_old(rule: Rule, configs: DataFrame, *, brokers: DataFrame | None = None,
                    **_: DataFrame | None) -> DataFrame:
    return client_too_old_alerts(too_old_clients(_with_ids(configs)), brokers)


_FLEET = {
    "missing_client_id": _missing_client_id,
    "shared_client_id": _shared_client_id,
    "group_disagreement": _group_disagreement,
    "client_too_old": _client_too_old,
}


def evaluate_rules(
    configs: DataFrame,
    *,
    group_drift: DataFrame | None,
    brokers: DataFrame | None = None,
    rules: tuple[Rule, ...] = RULES,
) -> DataFrame:
    """All alerts of ``rules`` over instance_configs(); ``brokers`` from broker_major_versions."""
    frames = []
    for rule in rules:
        if rule.condition is not None:
            frames.append(evaluate_instance_rule(rule, configs))
        else:
            assert rule.fleet is not None
            frames.append(_FLEET[rule.fleet](rule, configs, group_drift=group_drift,
                                             brokers=brokers))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def instance_alerts(configs: DataFrame) -> DataFrame:
    """Alerts of the PER_INSTANCE_RULE_IDS rules over instance_configs() (one union per rule)."""
    return evaluate_rules(configs, group_drift=None,
                          rules=tuple(rule_by_id(i) for i in PER_INSTANCE_RULE_IDS))
