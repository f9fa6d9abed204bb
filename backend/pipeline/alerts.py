"""Per-instance rules (PER_INSTANCE_RULE_IDS) over entry rows, with hash aggregates only.

1. One group-by per instance turns the entries of the keys the rules read into numbers: ``h``
   (the key was reported), ``n`` (its value as a number, for ``{num:k}``) and ``s`` (which of the
   literals a rule compares ``{str:k}`` with it equals, 0 for none of them). Every condition is
   compiled onto these columns, so the rules are evaluated on one row per instance.
2. The alerts that fired fetch the values they show (``observed_json``) and the group.id from
   the same entries with joins on (instance, key): strings never enter an aggregation buffer.

A ``{str:k}`` placeholder may only be compared with literals (``=``, ``<>``, ``IN``, ``NOT IN``,
after a ``coalesce`` with a literal too) or tested for null: then "equal to none of the
literals" is all a condition can tell, which the code 0 keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from backend.pipeline.instances import IDS
from backend.pipeline.rules import _GENERATED_ID, _PLACEHOLDER, PER_INSTANCE_RULE_IDS, Rule, rule_by_id

ALERT_FIELDS = ("alert_id", "rule_id", "severity", "title", "cluster_id", "client_instance_id",
                "client_id", "group_id", "client_type", "keys", "observed_json", "explanation",
                "doc_url")
_LITERAL = r"'([^'\\]*)'"
_TEXT = "\u00a7"  # stands in for a {str:k} placeholder while a condition is checked
# The contexts a {str:k} may appear in: compared with literals for equality, tested for null,
# or given a literal default by coalesce (which keeps it comparable the same way).
_DEFAULTED = re.compile(r"coalesce\(\s*" + _TEXT + r"\s*,\s*" + _LITERAL + r"\s*\)", re.IGNORECASE)
_ALLOWED = re.compile(
    _TEXT + r"\s*(?:(?:=|<>|!=)\s*" + _LITERAL + r"|(?:NOT\s+)?IN\s*\(\s*" + _LITERAL
    + r"(?:\s*,\s*" + _LITERAL + r")*\s*\)|IS\s+(?:NOT\s+)?NULL)", re.IGNORECASE)
_NONE_OF_THEM = "\\u0000"  # stands for a value equal to none of a key's literals (SQL escape of NUL)


@dataclass(frozen=True)
class _Plan:
    """What the rules read: every key, the ones read as numbers, and the literals per text key."""

    rules: tuple[Rule, ...]
    keys: tuple[str, ...]
    numeric: frozenset[str]
    literals: dict[str, tuple[str, ...]]

    def col(self, kind: str, key: str) -> str:
        return f"{kind}{self.keys.index(key)}"


def _plan(rules: tuple[Rule, ...]) -> _Plan:
    """The keys and literals the rules' conditions read; a {str:k} used otherwise is refused."""
    keys = {"client.id", "group.id"}
    numeric: set[str] = set()
    literals: dict[str, set[str]] = {}
    for rule in rules:
        keys |= set(rule.keys)
        condition = rule.condition or ""
        for kind, key in _PLACEHOLDER.findall(condition):
            keys.add(key)
            if kind == "num":
                numeric.add(key)
            elif kind == "str":  # every literal of the condition: more codes than needed is harmless
                literals.setdefault(key, set()).update(re.findall(_LITERAL, condition))
        masked = _DEFAULTED.sub(_TEXT, _PLACEHOLDER.sub(
            lambda m: _TEXT if m.group(1) == "str" else m.group(0), condition))
        if _TEXT in _ALLOWED.sub("", masked):
            raise ValueError(f"{rule.id}: {{str:k}} may only be compared with literals: {condition}")
    return _Plan(rules, tuple(sorted(keys)), frozenset(numeric),
                 {k: tuple(sorted(v)) for k, v in sorted(literals.items())})


PLAN = _plan(tuple(rule_by_id(i) for i in PER_INSTANCE_RULE_IDS))


def _features(plan: _Plan, entries: DataFrame) -> DataFrame:
    """One row per instance with the h/n/s columns of the keys it reported (and ``cid`` for CC015)."""
    key, value = F.col("key"), F.col("value")
    aggs = []
    for k in plan.keys:
        aggs.append(F.max(F.when(key == k, 1)).alias(plan.col("h", k)))
        if k in plan.numeric:
            aggs.append(F.max(F.when(key == k, F.expr("try_cast(value AS DOUBLE)"))).alias(plan.col("n", k)))
        if k in plan.literals:
            code = F.lit(0)
            for i, literal in reversed(list(enumerate(plan.literals[k], 1))):
                code = F.when(F.lower(value) == literal, i).otherwise(code)
            aggs.append(F.max(F.when((key == k) & value.isNotNull(), code)).alias(plan.col("s", k)))
    generated = value.rlike(_GENERATED_ID).cast("int")
    aggs.append(F.max(F.when((key == "client.id") & value.isNotNull(), generated)).alias("cid"))
    return entries.groupBy(IDS).agg(*aggs)


def compile_on_features(plan: _Plan, condition: str) -> str:
    """A rule condition as Spark SQL over the feature columns of _features."""

    def expand(match: re.Match[str]) -> str:
        kind, key = match.groups()
        if kind == "num":
            return plan.col("n", key)
        if kind == "has":
            return f"({plan.col('h', key)} IS NOT NULL)"
        cases = " ".join(f"WHEN {i} THEN '{lit}'" for i, lit in enumerate(plan.literals[key], 1))
        return f"(CASE {plan.col('s', key)} {cases} WHEN 0 THEN '{_NONE_OF_THEM}' END)"

    return _PLACEHOLDER.sub(expand, condition)


def _match(plan: _Plan, rule: Rule) -> Column:
    """When an instance (its head columns and features) breaks ``rule``."""
    if rule.condition is None:  # CC015: client.id absent, empty or generated by the client
        return F.coalesce(F.col("client_id").rlike(_GENERATED_ID), F.col("cid") == 1,
                          F.lit("").rlike(_GENERATED_ID))
    present = " AND ".join(f"({plan.col('h', k)} IS NOT NULL)" for k in rule.keys)
    match = F.expr(f"({present}) AND ({compile_on_features(plan, rule.condition)})")
    if rule.client_types:
        match = F.col("client_type").isin(*rule.client_types) & match
    return match


def _rule_table(plan: _Plan, spark: object) -> DataFrame:
    """The constant columns of each rule's alerts, one row per rule (broadcast to the alerts)."""
    rows = [(r.id, r.severity, r.title, ",".join(r.keys), r.rationale, r.doc_url, list(r.keys))
            for r in plan.rules]
    return spark.createDataFrame(  # type: ignore[attr-defined]
        rows, "rule_id string, severity string, title string, keys string, explanation string, "
              "doc_url string, key_list array<string>")


def instance_alerts(heads: DataFrame, entries: DataFrame, partitions: int, plan: _Plan = PLAN) -> DataFrame:
    """The per-instance rules' alerts (ALERT_FIELDS) of the instances in ``heads``.

    ``entries``: their entry rows (ENTRY_SCHEMA), shuffled once by instance into ``partitions``
    for both the features and the value lookups.
    """
    read = entries.where(F.col("key").isin(*plan.keys)).select(IDS, "key", "value").repartition(
        partitions, IDS)
    base = heads.select(IDS, "cluster_id", "client_id", "client_type").join(
        _features(plan, read).hint("shuffle_hash"), IDS, "left")
    fired = base.select(IDS, "cluster_id", "client_id", "client_type", F.explode(F.filter(
        F.array(*[F.when(_match(plan, r), F.lit(r.id)) for r in plan.rules]),
        lambda r: r.isNotNull())).alias("rule_id"))
    fired = fired.join(F.broadcast(_rule_table(plan, heads.sparkSession)), "rule_id")
    # The values an alert shows: group.id (every alert names it) and the rule's keys, each an
    # outer join with the entries on (instance, key); the joins share the shuffle above.
    most = max(len(r.keys) for r in plan.rules)
    wanted = {0: F.lit("group.id"), **{p: F.try_element_at("key_list", F.lit(p)) for p in range(1, most + 1)}}
    # The alerts are the hashed (build) side and the entries stream past them: few alerts per
    # partition, never all of a partition's entries, are held in memory.
    out = fired
    for pos, key in wanted.items():
        o, r = f"o{pos}", f"r{pos}"
        columns = out.columns
        on = (F.col(f"{o}.{IDS}") == F.col(f"{r}.{IDS}")) & (key == F.col(f"{r}.key"))
        out = read.alias(r).join(out.alias(o).hint("shuffle_hash"), on, "right").select(
            *[F.col(f"{o}.{c}") for c in columns], F.col(f"{r}.value").alias(f"_v{pos}"))
    observed = F.to_json(F.map_from_arrays(
        F.col("key_list"), F.slice(F.array(*[F.col(f"_v{p}") for p in range(1, most + 1)]), 1,
                                   F.size("key_list"))))
    out = out.withColumn("group_id", F.col("_v0")).withColumn("observed_json", observed)
    alert_id = F.substring(F.sha2(F.concat_ws(
        "|", F.col("rule_id"), F.col("cluster_id"), F.coalesce(F.col(IDS), F.lit("")),
        F.coalesce(F.col("group_id"), F.lit("")), F.coalesce(F.col("client_id"), F.lit("")),
        F.col("keys")), 256), 1, 20)
    return out.withColumn("alert_id", alert_id).select(*ALERT_FIELDS)
