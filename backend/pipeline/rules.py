"""Declarative catalog of client misconfiguration rules, evaluated in Spark.

Instance rules are SQL conditions over one client instance's latest config, written with
placeholders: ``{num:k}`` = the value of key k as a number, ``{str:k}`` = the lower-cased
string value, ``{has:k}`` = the key was reported. A rule whose keys are absent never fires
(an unreported value is unknown, not wrong). Fleet rules look across instances and are
evaluated by the function named in ``fleet``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from backend.pipeline import transforms as T

DOC = "https://kafka.apache.org/documentation/"
SHARED_CLIENT_ID_THRESHOLD = 10
# A consumer of the KIP-848 protocol takes its session timeout and heartbeat interval from the broker.
CLASSIC_GROUP = "coalesce({str:group.protocol}, 'classic') <> 'consumer'"
# Real Java clients 2.8-4.4 refuse to start (ConfigException) with what the rule describes: a running
# Java client never reports it, other clients' pushed configs and .properties files still can.
JAVA_REFUSES = "Java 2.8–4.4 refuse to start with it (ConfigException), so only other clients and files report it"
# KIP-896: Kafka 4.0 keeps only protocol versions of Kafka 2.1 and later (Java clients >= 2.1)
# and the versions librdkafka 1.8.2 (the client release KIP-896 analysed) uses.
MIN_JAVA_FOR_KAFKA4 = (2, 1, 0)
MIN_LIBRDKAFKA_FOR_KAFKA4 = (1, 8, 2)
GROUP_CONSISTENCY_KEYS = ("session.timeout.ms", "max.poll.interval.ms", "heartbeat.interval.ms",
                          "group.protocol", "partition.assignment.strategy")


@dataclass(frozen=True)
class Rule:
    """One misconfiguration rule."""

    id: str
    severity: str
    title: str
    rationale: str
    doc_url: str
    keys: tuple[str, ...]
    client_types: tuple[str, ...] = ()
    condition: str | None = None
    fleet: str | None = None
    # Which client versions can report it, checked against real Java clients 2.8-4.4 (tests/clients).
    versions: str = ""


RULES: tuple[Rule, ...] = (
    Rule("CC001", "critical", "Idempotent producer without acks=all",
         "Idempotence requires acks=all. The Java producer refuses to start when enable.idempotence=true "
         "is set with other acks, and since 3.0 turns its default idempotence off, logging "
         "enable.idempotence=false, when acks is not all; other clients may silently weaken or disable "
         "idempotence.",
         DOC + "#producerconfigs_enable.idempotence", ("enable.idempotence", "acks"),
         ("producer", "streams"),
         "{str:enable.idempotence} = 'true' AND {str:acks} NOT IN ('all', '-1')",
         versions=JAVA_REFUSES),
    Rule("CC002", "critical", "Idempotent producer with more than 5 in-flight requests",
         "Ordering and deduplication are only guaranteed with "
         "max.in.flight.requests.per.connection <= 5 when idempotence is on. The Java producer refuses "
         "to start with enable.idempotence=true and more; 3.x turns its default idempotence off instead "
         "(with a warning) and 4.x refuses that too.",
         DOC + "#producerconfigs_max.in.flight.requests.per.connection",
         ("enable.idempotence", "max.in.flight.requests.per.connection"), ("producer", "streams"),
         "{str:enable.idempotence} = 'true' AND {num:max.in.flight.requests.per.connection} > 5",
         versions=JAVA_REFUSES + " (2.8 logs its config first)"),
    Rule("CC003", "warning", "Producer retries disabled",
         "retries=0 turns every transient error (leader change, timeout) into a lost send; since 3.0 it "
         "also turns the Java producer's default idempotence off. Producers only: the `retries` a Streams "
         "app logs in its StreamsConfig block (2.8–3.9, default 0, deprecated by KIP-572) is not its "
         "producer's, which logs a block of its own.",
         DOC + "#producerconfigs_retries", ("retries",), ("producer",),
         "{num:retries} = 0", versions="all producers; Java 2.8–4.4 start with it"),
    Rule("CC004", "warning", "acks=0: fire and forget",
         "With acks=0 the producer never learns whether a record was written; records are lost "
         "silently on any broker problem.",
         DOC + "#producerconfigs_acks", ("acks",), ("producer", "streams"), "{str:acks} = '0'",
         versions="all clients; Java 2.8–4.4 start with it (and turn default idempotence off since 3.0)"),
    Rule("CC005", "warning", "delivery.timeout.ms shorter than linger.ms + request.timeout.ms",
         "delivery.timeout.ms must be at least linger.ms + request.timeout.ms, otherwise records "
         "expire before a single request can complete. The Java producer refuses to start when "
         "delivery.timeout.ms is set that low (after logging its config), and raises a default one to "
         "the sum.",
         DOC + "#producerconfigs_delivery.timeout.ms",
         ("delivery.timeout.ms", "linger.ms", "request.timeout.ms"), ("producer", "streams"),
         "{num:delivery.timeout.ms} < {num:linger.ms} + {num:request.timeout.ms}",
         versions="Java 2.8–4.4 log their config, then refuse to start (ConfigException): their logs show "
                  "it, a running Java client never pushes it"),
    Rule("CC006", "warning", "Batching disabled (batch.size=0)",
         "batch.size=0 sends every record in its own request, multiplying broker load.",
         DOC + "#producerconfigs_batch.size", ("batch.size",), ("producer", "streams"),
         "{num:batch.size} = 0", versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC007", "warning", "Retries without idempotence can reorder records",
         "With idempotence off, retries > 0 and more than one in-flight request, a retried "
         "batch can land after a later one. Every Java producer before 3.0 does this by default, and "
         "since 3.0 one with acks=1 does too: acks other than all silently turn idempotence off. With "
         "acks=0 nothing is retried.",
         DOC + "#producerconfigs_max.in.flight.requests.per.connection",
         ("enable.idempotence", "retries", "max.in.flight.requests.per.connection"),
         ("producer", "streams"),
         "{str:enable.idempotence} = 'false' AND {num:retries} > 0 "
         "AND {num:max.in.flight.requests.per.connection} > 1 AND coalesce({str:acks}, '') <> '0'",
         versions="all clients; Java 2.8 by default, 3.0–4.4 with acks=1 (or, in 3.x, more than 5 in flight)"),
    Rule("CC008", "warning", "buffer.memory smaller than batch.size",
         "A single batch cannot fit in the producer's buffer; send() blocks until max.block.ms.",
         DOC + "#producerconfigs_buffer.memory", ("buffer.memory", "batch.size"),
         ("producer", "streams"), "{num:buffer.memory} < {num:batch.size}",
         versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC009", "warning", "session.timeout.ms below 3 x heartbeat.interval.ms",
         "The heartbeat interval should be at most a third of the session timeout so a member "
         "survives a missed heartbeat. The Java consumer refuses to start when the heartbeat interval "
         "reaches the session timeout. Consumers of the KIP-848 protocol (group.protocol=consumer) "
         "take both from the broker: 3.7–3.9 ignore them, 4.x refuse them.",
         DOC + "#consumerconfigs_heartbeat.interval.ms",
         ("session.timeout.ms", "heartbeat.interval.ms"), ("consumer", "streams"),
         f"{{num:session.timeout.ms}} < 3 * {{num:heartbeat.interval.ms}} AND {CLASSIC_GROUP}",
         versions="classic-protocol consumers; Java 2.8–4.4 start with it below the session timeout (at or "
                  "above it they log their config, then refuse to start)"),
    Rule("CC010", "warning", "fetch.max.wait.ms not below request.timeout.ms",
         "A fetch may legitimately wait fetch.max.wait.ms; if that reaches request.timeout.ms "
         "idle fetches time out and reconnect.",
         DOC + "#consumerconfigs_fetch.max.wait.ms", ("fetch.max.wait.ms", "request.timeout.ms"),
         ("consumer", "share_consumer", "streams"),
         "{num:fetch.max.wait.ms} >= {num:request.timeout.ms}",
         versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC011", "info", "auto.offset.reset=none in a consumer group",
         "A group member without committed offsets throws NoOffsetForPartitionException instead of "
         "starting; fine when deliberate, surprising otherwise. A consumer outside any group that "
         "positions itself is fine: Kafka Streams gives its restore and global consumers "
         "auto.offset.reset=none and no group.id. Share consumers refuse the key (the group's "
         "share.auto.offset.reset decides).",
         DOC + "#consumerconfigs_auto.offset.reset", ("auto.offset.reset",),
         ("consumer", "streams"), "{str:auto.offset.reset} = 'none' AND {str:group.id} IS NOT NULL",
         versions="group consumers; Java 2.8–4.4 start with it"),
    Rule("CC012", "warning", "Extreme max.poll.records",
         "max.poll.records above 10000 risks exceeding max.poll.interval.ms while processing; "
         "1 makes every poll a round trip.",
         DOC + "#consumerconfigs_max.poll.records", ("max.poll.records",),
         ("consumer", "share_consumer", "streams"),
         "{num:max.poll.records} > 10000 OR {num:max.poll.records} = 1",
         versions="consumers and share consumers; Java 2.8–4.4 start with it"),
    Rule("CC013", "warning", "Extreme max.poll.interval.ms",
         "Below 10 s members are evicted during ordinary processing pauses; above 1 h a stuck "
         "consumer holds its partitions for too long.",
         DOC + "#consumerconfigs_max.poll.interval.ms", ("max.poll.interval.ms",),
         ("consumer", "share_consumer", "streams"),
         "{num:max.poll.interval.ms} < 10000 OR {num:max.poll.interval.ms} > 3600000",
         versions="consumers and share consumers; Java 2.8–4.4 start with it"),
    Rule("CC014", "warning", "session.timeout.ms outside the broker's default bounds",
         "Brokers reject JoinGroup when session.timeout.ms is outside group.min.session.timeout.ms "
         "(6 s) .. group.max.session.timeout.ms (30 min) by default. Consumers of the KIP-848 "
         "protocol (group.protocol=consumer) take their session timeout from the broker.",
         DOC + "#brokerconfigs_group.min.session.timeout.ms", ("session.timeout.ms",),
         ("consumer", "streams"),
         f"({{num:session.timeout.ms}} < 6000 OR {{num:session.timeout.ms}} > 1800000) AND {CLASSIC_GROUP}",
         versions="classic-protocol consumers; Java 2.8–4.4 start with it (the broker refuses the join)"),
    Rule("CC015", "info", "Missing or generated client.id",
         "Without a stable client.id, quotas, request logs and broker metrics cannot name the "
         "application.",
         DOC + "#producerconfigs_client.id", ("client.id",), (), fleet="missing_client_id",
         versions="all clients; Java producers and consumers log their generated id, admin clients an empty one"),
    Rule("CC016", "warning", f"One client.id shared by more than {SHARED_CLIENT_ID_THRESHOLD} "
         "instances",
         "Quotas and metrics are per client.id; many instances sharing one id share one quota "
         "and become indistinguishable.",
         DOC + "#design_quotas", ("client.id",), (), fleet="shared_client_id", versions="all clients"),
    Rule("CC017", "warning", "Members of one consumer group disagree on group settings",
         "Members of a group with different session/poll/heartbeat settings or assignors "
         "rebalance unpredictably; the group behaves like its weakest member.",
         DOC + "#consumerconfigs_session.timeout.ms", GROUP_CONSISTENCY_KEYS, (),
         fleet="group_disagreement", versions="consumers (classic and KIP-848 groups alike)"),
    Rule("CC018", "critical", "Client too old for the cluster's Kafka 4.x brokers",
         "Kafka 4.0 removed protocol versions older than Kafka 2.1 (KIP-896): Java clients "
         "below 2.1 and librdkafka below 1.8.2 get UNSUPPORTED_VERSION.",
         "https://cwiki.apache.org/confluence/display/KAFKA/KIP-896%3A+Remove+old+client+protocol+API+versions+in+Kafka+4.0",
         ("client_software_version",), (), fleet="client_too_old",
         versions="Java below 2.1, librdkafka below 1.8.2, on clusters of Kafka 4.x brokers"),
)

_PLACEHOLDER = re.compile(r"\{(num|str|has):([A-Za-z0-9_.\-]+)\}")


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


def rule_by_id(rule_id: str) -> Rule:
    """Look a rule up by id."""
    for rule in RULES:
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)


def _observed(keys: tuple[str, ...]) -> Column:
    return F.to_json(F.map_from_arrays(
        F.array(*[F.lit(k) for k in keys]), F.array(*[F.col("cfg")[k] for k in keys])))


ALERT_FIELDS = ("alert_id", "rule_id", "severity", "title", "cluster_id", "client_instance_id",
                "client_id", "group_id", "client_type", "keys", "observed_json", "explanation",
                "doc_url")


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


_GENERATED_ID = r"^(producer-[0-9]+|consumer-.*-?[0-9]+|adminclient-[0-9]+|rdkafka|)$"


def _missing_client_id(rule: Rule, configs: DataFrame, **_: DataFrame | None) -> DataFrame:
    effective = F.coalesce(F.col("client_id"), F.col("cfg")["client.id"], F.lit(""))
    matched = _with_ids(configs).where(effective.rlike(_GENERATED_ID))
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
    return shared_client_id_alerts(T.client_id_counts(configs))


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


def _version_number(version: Column) -> Column:
    """'2.0.1' -> 20001 (major*10000 + minor*100 + patch); null when unparsable."""
    parts = [F.regexp_extract(version, r"^v?(\d+)\.(\d+)(?:\.(\d+))?", i) for i in (1, 2, 3)]
    number = (parts[0].cast("int") * 10000 + parts[1].cast("int") * 100
              + F.coalesce(F.when(parts[2] != "", parts[2].cast("int")), F.lit(0)))
    return F.when(parts[0] != "", number)


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


def too_old_clients(configs: DataFrame) -> DataFrame:
    """Instances (of instance_configs()) whose client software predates what Kafka 4.x serves.

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
    return _with_ids(configs).where(too_old).select(*TOO_OLD_COLUMNS)


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


def _client_too_old(rule: Rule, configs: DataFrame, *, brokers: DataFrame | None = None,
                    **_: DataFrame | None) -> DataFrame:
    return client_too_old_alerts(too_old_clients(configs), brokers)


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


# Rules whose alerts depend only on one instance's own latest snapshot (and name it): on a
# refresh they are evaluated for the changed instances only. CC018 is per instance too but also
# depends on the brokers, so it is recomputed from the too_old_clients index on every run.
PER_INSTANCE_RULE_IDS = tuple(r.id for r in RULES if r.condition is not None) + ("CC015",)


def instance_alerts(configs: DataFrame) -> DataFrame:
    """Alerts of the PER_INSTANCE_RULE_IDS rules over instance_configs() (one union per rule)."""
    return evaluate_rules(configs, group_drift=None,
                          rules=tuple(rule_by_id(i) for i in PER_INSTANCE_RULE_IDS))


def _instance_match(rule: Rule) -> Column:
    """When one instance (a row with cfg and identity columns) breaks a per-instance rule."""
    if rule.condition is None:  # CC015, the one per-instance rule not written as a condition
        effective = F.coalesce(F.col("client_id"), F.col("cfg")["client.id"], F.lit(""))
        return effective.rlike(_GENERATED_ID)
    present = " AND ".join(f"map_contains_key(cfg, '{k}')" for k in rule.keys)
    match = F.expr(f"({present}) AND ({compile_condition(rule.condition)})")
    if rule.client_types:
        match = F.col("client_type").isin(*rule.client_types) & match
    return match


def instance_alerts_projection(configs: DataFrame) -> DataFrame:
    """instance_alerts() in one projection: every per-instance rule is one column of one select.

    The same rows as instance_alerts(); no union of one scan per rule.
    """
    candidates = []
    for rule_id in PER_INSTANCE_RULE_IDS:
        rule = rule_by_id(rule_id)
        alert = F.struct(*_alert_columns(rule, _observed(rule.keys), F.lit(rule.rationale),
                                         F.lit(",".join(rule.keys))))
        candidates.append(F.when(_instance_match(rule), alert))
    fired = F.filter(F.array(*candidates), lambda a: a.isNotNull())
    return _with_ids(configs).select(F.explode(fired).alias("a")).select(
        *[F.col(f"a.{name}").alias(name) for name in ALERT_FIELDS])


def fleet_alerts(client_ids: DataFrame, group_drift: DataFrame, too_old: DataFrame,
                 brokers: DataFrame | None) -> DataFrame:
    """CC016, CC017 and CC018 from client_id_counts(), group_drift and too_old_clients()."""
    return (shared_client_id_alerts(client_ids)
            .unionByName(group_disagreement_alerts(group_drift))
            .unionByName(client_too_old_alerts(too_old, brokers)))
