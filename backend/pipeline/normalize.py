"""Value normalisation before counting: spellings a client treats as equal count as one value.

The rules are data (RULES); ``normalize_value`` is the pure-Python form (tests, views) and
``normalized_value_col`` the equivalent Spark Column the instance pass uses. The raw
spelling is kept next to the normalised value (``raw_value``) and listed per value in
``distributions.raw_values``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass(frozen=True)
class NormalisationRule:
    """One rule: which keys it covers, what it does, and why the client treats them as equal."""

    name: str
    keys: str
    effect: str
    why: str


RULES: tuple[NormalisationRule, ...] = (
    NormalisationRule(
        "acks", "acks", "-1 and any case of all -> all",
        "The Java producer documents acks=-1 as equivalent to all and prints -1 in its log; "
        "librdkafka reads all as -1.",
    ),
    NormalisationRule(
        "boolean_case", "any key", "true/false in any case (and surrounding blanks) -> lower case",
        "Java's ConfigDef and librdkafka parse booleans case-insensitively.",
    ),
    NormalisationRule(
        "list", "any key whose value holds a comma or is wrapped in [ ]",
        "[a, b] -> a,b; blanks around commas removed; [] -> empty",
        "Java logs print LIST values as [a, b]; librdkafka and .properties use a,b; both clients "
        "trim list items.",
    ),
)

_BOOLEANS = ("true", "false")
_BRACKETS = re.compile(r"^\[(.*)\]$", re.DOTALL)
_COMMA = re.compile(r"\s*,\s*")


def normalize_value(key: str | None, value: str | None) -> str | None:
    """The normalised spelling of ``value`` for ``key`` (None stays None)."""
    if value is None:
        return None
    stripped = value.strip()
    lowered = stripped.lower()
    if key == "acks" and lowered in ("-1", "all"):
        return "all"
    if lowered in _BOOLEANS:
        return lowered
    if _BRACKETS.match(stripped) or "," in value:
        return _COMMA.sub(",", _BRACKETS.sub(r"\1", stripped).strip())
    return value


def normalized_value_col(key: str = "key", value: str = "value") -> Column:
    """normalize_value as a Spark Column expression over columns ``key`` and ``value``."""
    from pyspark.sql import functions as F

    v = F.col(value)
    stripped = F.trim(v)
    lowered = F.lower(stripped)
    is_list = stripped.rlike(r"^\[[\s\S]*\]$") | v.contains(",")
    unbracketed = F.trim(F.regexp_replace(stripped, r"^\[([\s\S]*)\]$", "$1"))
    return (
        F.when(v.isNull(), F.lit(None).cast("string"))
        .when((F.col(key) == "acks") & lowered.isin("-1", "all"), F.lit("all"))
        .when(lowered.isin(*_BOOLEANS), lowered)
        .when(is_list, F.regexp_replace(unbracketed, r"\s*,\s*", ","))
        .otherwise(v)
    )


def normalized_value_sql(key: str = "key", value: str = "value") -> str:
    """normalize_value as a DuckDB SQL expression (the benchmark's peer uses it)."""
    s = f"trim({value})"
    low = f"lower({s})"
    return (
        f"CASE WHEN {value} IS NULL THEN NULL "
        f"WHEN {key} = 'acks' AND {low} IN ('-1', 'all') THEN 'all' "
        f"WHEN {low} IN ('true', 'false') THEN {low} "
        f"WHEN regexp_matches({s}, '^\\[.*\\]$', 's') OR contains({value}, ',') THEN "
        f"regexp_replace(trim(regexp_replace({s}, '^\\[(.*)\\]$', '\\1', 's')), "
        f"'\\s*,\\s*', ',', 'g') "
        f"ELSE {value} END"
    )


def markdown() -> str:
    """The rules as a Markdown table (docs/normalisation.md)."""
    lines = ["| rule | keys | effect | why |", "|---|---|---|---|"]
    lines += [f"| {r.name} | {r.keys} | {r.effect} | {r.why} |" for r in RULES]
    return "\n".join(lines)
