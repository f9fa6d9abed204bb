"""The results tables and every alert, on the driver, from the state's three small tables.

The count tables hold one row per distinct combination (cluster, type, key, value, ...), not one per
instance, so distributions, shares, exact percentiles, drift and the fleet rules CC016 and CC017 are
computed here with pandas; the heads give the per-instance counts and the rules CC015 and CC018. Each
function is the pandas form of the row-level Spark transform of the same name the tests keep as the
reference definition (tests/unit/pipeline/reference.py); the tests hold them equal.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from backend.pipeline import rules as R
from backend.pipeline.heads import IDS
from backend.pipeline.normalize import normalize_value
from backend.store.config_schemas import NUMERIC_CONFIG_TYPES, SCHEMA_VERSION, WATCHED_KEYS_META, arrow_schema

# value is normalised; raw_value is the spelling reported (distributions lists the spellings).
VALUE_COUNT_KEYS = ("cluster_id", "client_type", "key", "value", "raw_value", "type", "is_default")
GROUP_COUNT_KEYS = ("cluster_id", "group_id", "key", "value")
VERSION_COUNT_KEYS = ("cluster_id", "client_type", "client_software_name", "client_software_version")
CLIENT_ID_COUNT_KEYS = ("cluster_id", "client_id", "client_type")
# Keys that differ between members of a healthy group, so they are not group drift.
GROUP_IDENTITY_KEYS = ("group.id", "client.id", "group.instance.id", "client.rack",
                       "transactional.id", "bootstrap.servers")
ALERT_FIELDS = ("alert_id", "rule_id", "severity", "title", "cluster_id", "client_instance_id",
                "client_id", "group_id", "client_type", "keys", "observed_json", "explanation",
                "doc_url")

_KEY = ["cluster_id", "client_type", "key"]
class _Missing:
    """Stands in for a null client type / value in group-bys and joins.

    Not a string: pandas hashes object columns of strings as C strings, so a text marker such as
    "\x00none" would be grouped with "" (it was, before issue 31).
    """

    def __repr__(self) -> str:
        return "<null>"


_NA = _Missing()


def _fill(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    out = frame.copy()
    for column in columns:
        out[column] = out[column].astype(object).where(out[column].notna(), _NA)
    return out


def _unfill(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    for column in columns:
        frame[column] = frame[column].astype(object).where(frame[column] != _NA, None)
    return frame


def distributions(values: pd.DataFrame) -> pd.DataFrame:
    """distributions_from_counts(): instances per (cluster, type, key, value), share, raw spellings."""
    v = _fill(values, ["client_type", "value"])
    grouped = v.groupby([*_KEY, "value"], sort=False)
    out = grouped["n"].sum().rename("instance_count").reset_index()
    raws = grouped["raw_value"].agg(lambda s: sorted({x for x in s if x is not None and x == x}))
    out["raw_values"] = raws.to_numpy()
    out["total_instances"] = out.groupby(_KEY, sort=False)["instance_count"].transform("sum")
    out["share"] = out["instance_count"] / out["total_instances"]
    return _unfill(out, ["client_type", "value"])


def default_share(values: pd.DataFrame) -> pd.DataFrame:
    """default_share_from_counts(): default vs overridden instances per (cluster, type, key)."""
    v = _fill(values, ["client_type"])
    v["default_n"] = v["n"].where(v["is_default"].astype(object).eq(True), 0)
    out = v.groupby(_KEY, sort=False).agg(instances=("n", "sum"), default_count=("default_n", "sum"))
    out = out.reset_index()
    out["overridden_count"] = out["instances"] - out["default_count"]
    out["default_share"] = out["default_count"] / out["instances"]
    return _unfill(out, ["client_type"])


def _weighted_percentile(numbers: np.ndarray, weights: np.ndarray, p: float) -> float | None:
    """Spark's percentile(number, p, frequency): linear interpolation over the expanded values."""
    if len(numbers) == 0:
        return None
    order = np.argsort(numbers, kind="stable")
    numbers, weights = numbers[order], weights[order]
    cumulative = np.cumsum(weights)
    position = (cumulative[-1] - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    low_value = numbers[np.searchsorted(cumulative, lower + 1)]
    high_value = numbers[np.searchsorted(cumulative, higher + 1)]
    if higher == lower or low_value == high_value:
        return float(low_value)
    return float((higher - position) * low_value + (position - lower) * high_value)


def numeric_summary(values: pd.DataFrame) -> pd.DataFrame:
    """numeric_summary_from_counts(): min, p50, p90, max (exact), unparsable, per numeric key."""
    v = _fill(values[values["type"].isin(NUMERIC_CONFIG_TYPES)], ["client_type"])
    v["number"] = [_spark_double(x) for x in v["value"]]
    rows = []
    for key, group in v.groupby(_KEY, sort=False):
        parsed = group[group["number"].notna()]
        numbers = parsed["number"].to_numpy(dtype=float)
        weights = parsed["n"].to_numpy(dtype=np.int64)
        rows.append((*key, group["type"].min(), int(group["n"].sum()),
                     int(group.loc[group["number"].isna() & group["value"].notna(), "n"].sum()),
                     float(numbers.min()) if len(numbers) else None,
                     _weighted_percentile(numbers, weights, 0.5),
                     _weighted_percentile(numbers, weights, 0.9),
                     float(numbers.max()) if len(numbers) else None))
    out = pd.DataFrame(rows, columns=[*_KEY, "type", "instances", "unparsable", "min", "p50", "p90", "max"])
    return _unfill(out, ["client_type"])


def _spark_double(text: object) -> float | None:
    """Spark's try_cast(text AS DOUBLE): trimmed, Java's number syntax (a d/f suffix allowed), inf/nan."""
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s or "_" in s:
        return None
    if s[-1] in "dDfF" and s.lower().rstrip("df") not in ("inf", "infinity", "nan", "+inf", "-inf"):
        s = s[:-1]
    try:
        return float(s)
    except ValueError:
        return None


def _dominant(dist: pd.DataFrame) -> pd.DataFrame:
    """Per (cluster, type, key): the most common value (ties: smallest value, nulls last)."""
    d = dist.assign(_null=dist["value"].isna(), _v=dist["value"].fillna(""))
    d = d.sort_values(["instance_count", "_null", "_v"], ascending=[False, True, True], kind="stable")
    first = d.groupby(_KEY, sort=False, dropna=False).head(1)
    return first[[*_KEY, "value", "share"]].rename(
        columns={"value": "dominant_value", "share": "dominant_share"})


def drift_clusters(dist: pd.DataFrame) -> pd.DataFrame:
    """drift_clusters(): total variation distance of each key between every cluster pair."""
    columns = ["client_type", "key", "cluster_a", "cluster_b", "tvd", "instances_a", "instances_b",
               "dominant_value_a", "dominant_value_b"]
    d = _fill(dist, ["client_type", "value"])
    sides = d[["client_type", "key", "cluster_id", "total_instances"]].drop_duplicates()
    pairs = sides.merge(sides, on=["client_type", "key"], suffixes=("_a", "_b"))
    pairs = pairs[pairs["cluster_id_a"] < pairs["cluster_id_b"]].rename(columns={
        "cluster_id_a": "cluster_a", "cluster_id_b": "cluster_b",
        "total_instances_a": "instances_a", "total_instances_b": "instances_b"})
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    shares = d[["client_type", "key", "cluster_id", "value", "share"]]
    keys = ["client_type", "key", "cluster_a", "cluster_b"]
    a = pairs[keys].merge(shares.rename(columns={"cluster_id": "cluster_a", "share": "share_a"}),
                          on=["client_type", "key", "cluster_a"])
    b = pairs[keys].merge(shares.rename(columns={"cluster_id": "cluster_b", "share": "share_b"}),
                          on=["client_type", "key", "cluster_b"])
    both = a.merge(b, on=[*keys, "value"], how="outer")
    both["diff"] = (both["share_a"].fillna(0.0) - both["share_b"].fillna(0.0)).abs()
    tvd = (both.groupby(keys, sort=False)["diff"].sum() / 2).clip(0.0, 1.0).rename("tvd").reset_index()
    dom = _fill(_dominant(dist), ["client_type"])[["client_type", "key", "cluster_id", "dominant_value"]]
    out = pairs.merge(tvd, on=keys)
    out = out.merge(dom.rename(columns={"cluster_id": "cluster_a", "dominant_value": "dominant_value_a"}),
                    on=["client_type", "key", "cluster_a"])
    out = out.merge(dom.rename(columns={"cluster_id": "cluster_b", "dominant_value": "dominant_value_b"}),
                    on=["client_type", "key", "cluster_b"])
    return _unfill(out[columns].copy(), ["client_type"])


def drift_keys(dist: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """drift_keys(): per (type, key, cluster) dominant value, distinct values and the key's max TVD."""
    d = _fill(dist, ["client_type"])
    per = d.groupby(_KEY, sort=False).agg(instances=("total_instances", "first"),
                                          distinct_values=("instance_count", "size")).reset_index()
    out = per.merge(_fill(_dominant(dist), ["client_type"]), on=_KEY)
    if len(pairs):
        max_tvd = _fill(pairs, ["client_type"]).groupby(["client_type", "key"], sort=False)["tvd"].max()
        out = out.merge(max_tvd.rename("max_tvd").reset_index(), on=["client_type", "key"], how="left")
    else:
        out["max_tvd"] = np.nan
    out["max_tvd"] = out["max_tvd"].fillna(0.0)
    out["distinct_share"] = out["distinct_values"] / out["instances"]
    return _unfill(out, ["client_type"])


def _value_counts_json(group: pd.DataFrame) -> str:
    entries = sorted(("null" if v is None or v != v else str(v), int(n))
                     for v, n in zip(group["value"], group["n"], strict=True))
    return json.dumps(dict(entries), ensure_ascii=False, separators=(",", ":"))


def group_drift(groups: pd.DataFrame) -> pd.DataFrame:
    """group_drift_from_counts(): keys on which members of one group disagree, with value counts."""
    columns = ["cluster_id", "group_id", "key", "members", "distinct_values", "value_counts_json"]
    rows = []
    for (cluster, group_id, key), group in groups.groupby(["cluster_id", "group_id", "key"], sort=False):
        if len(group) > 1:
            rows.append((cluster, group_id, key, int(group["n"].sum()), len(group), _value_counts_json(group)))
    return pd.DataFrame(rows, columns=columns)


# The client configs that shape a consumer group: what the group page shows of its members' configs, and what the
# fleet rule group_config_mismatch compares with the group the broker describes.
GROUP_CONFIG_KEYS = ("group.protocol", "partition.assignment.strategy", "group.remote.assignor", "session.timeout.ms",
                     "heartbeat.interval.ms", "max.poll.interval.ms", "max.poll.records", "auto.offset.reset",
                     "enable.auto.commit", "isolation.level")


def group_configs(groups: pd.DataFrame) -> pd.DataFrame:
    """Per group and GROUP_CONFIG_KEYS key, the members (instances) reporting each value."""
    picked = groups[groups["key"].isin(GROUP_CONFIG_KEYS)]
    return picked[["cluster_id", "group_id", "key", "value", "n"]].rename(columns={"n": "instances"}).reset_index(
        drop=True)


def client_versions(versions: pd.DataFrame) -> pd.DataFrame:
    """client_versions_from_counts()."""
    return versions[[*VERSION_COUNT_KEYS, "n"]].rename(columns={"n": "instances"})


def _alert_id(rule_id: str, cluster: str, instance: str | None, group: str | None,
              client_id: str | None, keys: str) -> str:
    parts = [rule_id, cluster, instance or "", group or "", client_id or "", keys]
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:20]


def _alert(rule: R.Rule, *, cluster: str, instance: str | None = None, client_id: str | None = None,
           group_id: str | None = None, client_type: str | None = None, keys: str | None = None,
           observed: dict[str, str | None], explanation: str) -> dict[str, str | None]:
    keys = keys if keys is not None else ",".join(rule.keys)
    return {
        "alert_id": _alert_id(rule.id, cluster, instance, group_id, client_id, keys),
        "rule_id": rule.id, "severity": rule.severity, "title": rule.title, "cluster_id": cluster,
        "client_instance_id": instance, "client_id": client_id, "group_id": group_id,
        "client_type": client_type, "keys": keys,
        "observed_json": json.dumps(observed, ensure_ascii=False, separators=(",", ":")),
        "explanation": explanation, "doc_url": rule.doc_url,
    }


def shared_client_id_alerts(client_ids: pd.DataFrame) -> list[dict[str, str | None]]:
    """CC016 from client_id_counts: one alert per (cluster, client.id) over the threshold."""
    rule = R.rule_by_id("CC016")
    alerts = []
    for (cluster, client_id), group in client_ids.groupby(["cluster_id", "client_id"], sort=False):
        n = int(group["n"].sum())
        if n > R.SHARED_CLIENT_ID_THRESHOLD:
            types = [t for t in group["client_type"] if t is not None and t == t]
            alerts.append(_alert(rule, cluster=cluster, client_id=client_id,
                                 client_type=min(types) if types else None,
                                 observed={"client.id": client_id, "instances": str(n)},
                                 explanation=f"{rule.rationale} Instances sharing it: {n}."))
    return alerts


def group_disagreement_alerts(drift: pd.DataFrame) -> list[dict[str, str | None]]:
    """CC017 from group_drift: one alert per group and disagreeing group setting."""
    rule = R.rule_by_id("CC017")
    return [
        _alert(rule, cluster=row.cluster_id, group_id=row.group_id, client_type="consumer", keys=row.key,
               observed={row.key: row.value_counts_json},
               explanation=f"{rule.rationale} Members by value: {row.value_counts_json}.")
        for row in drift.itertuples(index=False) if row.key in R.GROUP_CONSISTENCY_KEYS
    ]


def _sum(frame: pd.DataFrame, keys: Iterable[str], weight: str | None = "n") -> pd.DataFrame:
    grouped = frame.groupby(list(keys), dropna=False, sort=False)
    out = (grouped[weight].sum() if weight else grouped.size()).rename("n").reset_index()
    return out.astype({"n": "int64"})


def count_frames(counts: pa.Table, heads: pa.Table) -> dict[str, pd.DataFrame]:
    """The four count tables: values and group members from the state's counts, versions and client ids
    from the heads."""
    frame = counts.to_pandas()
    pairs = frame[["key", "raw_value"]].drop_duplicates()
    pairs["value"] = [normalize_value(k, r) for k, r in zip(pairs["key"], pairs["raw_value"], strict=True)]
    frame = frame.merge(pairs, on=["key", "raw_value"], how="left")
    members = frame[frame["group_id"].notna() & ~frame["key"].isin(GROUP_IDENTITY_KEYS)]
    instances = heads.select(list({*VERSION_COUNT_KEYS, *CLIENT_ID_COUNT_KEYS})).to_pandas()
    named = instances[instances["client_id"].notna() & (instances["client_id"] != "")]
    return {"value_counts": _sum(frame, VALUE_COUNT_KEYS), "group_counts": _sum(members, GROUP_COUNT_KEYS),
            "version_counts": _sum(instances, VERSION_COUNT_KEYS, None),
            "client_id_counts": _sum(named, CLIENT_ID_COUNT_KEYS, None)}


def _json(observed: dict[str, str | None]) -> str:
    return json.dumps(observed, ensure_ascii=False, separators=(",", ":"))


def instance_alerts(fired: pa.Table, heads: pd.DataFrame, brokers: dict[str, tuple[int, str]]) -> pd.DataFrame:
    """The per-instance alerts: the rules the instance pass found broken (kept where the rule applies to
    the client type), CC015 and CC018 from the heads; ALERT_FIELDS columns."""
    ids = heads[[IDS, "cluster_id", "client_id", "client_type", "group_id"]]
    found = fired.to_pandas().merge(ids, on=IDS)
    rules = {r.id: r for r in R.RULES}
    scope = [not rules[rid].client_types or ctype in rules[rid].client_types
             for rid, ctype in zip(found["rule_id"], found["client_type"], strict=True)]
    found = found[scope].assign(keys=[",".join(rules[r].keys) for r in found["rule_id"][scope]],
                                explanation=[rules[r].rationale for r in found["rule_id"][scope]])
    missing = R.rule_by_id("CC015")
    effective = heads["client_id"].fillna(heads["cfg_client_id"]).fillna("")
    unnamed = heads[effective.str.contains(R.GENERATED_ID, regex=True)]
    found = pd.concat([found, unnamed[list(ids.columns)].assign(
        rule_id=missing.id, keys="client.id", explanation=missing.rationale,
        observed_json=[_json({"client.id": v}) for v in unnamed["cfg_client_id"].astype(object).where(
            unnamed["cfg_client_id"].notna(), None)])])
    old = R.rule_by_id("CC018")
    candidates = heads[heads["cluster_id"].isin([c for c, (major, _) in brokers.items() if major >= 4])]
    software = list(zip(candidates["client_software_name"].astype(object).where(candidates["client_software_name"].notna(),
                                                                                 None),
                        candidates["client_software_version"].astype(object).where(
                            candidates["client_software_version"].notna(), None), candidates["cluster_id"], strict=True))
    aged = {pair: R.too_old(*pair) for pair in {(n, v) for n, v, _ in software}}
    old_ones = [aged[(n, v)] for n, v, _ in software]
    found = pd.concat([found, candidates.loc[np.array(old_ones, dtype=bool), list(ids.columns)].assign(
        rule_id=old.id, keys=",".join(old.keys),
        observed_json=[_json({"client_software_name": n, "client_software_version": v, "broker_version": brokers[c][1]})
                       for (n, v, c), aged_one in zip(software, old_ones, strict=True) if aged_one],
        explanation=[f"{old.rationale} Brokers run {brokers[c][1]}."
                     for (_, _, c), aged_one in zip(software, old_ones, strict=True) if aged_one])])
    found = found.astype(object).where(found.notna(), None)
    found["severity"] = [rules[r].severity for r in found["rule_id"]]
    found["title"] = [rules[r].title for r in found["rule_id"]]
    found["doc_url"] = [rules[r].doc_url for r in found["rule_id"]]
    found["alert_id"] = [_alert_id(*a) for a in zip(found["rule_id"], found["cluster_id"], found[IDS], found["group_id"],
                                                    found["client_id"], found["keys"], strict=True)]
    return found[list(ALERT_FIELDS)].reset_index(drop=True)


def to_arrow(frame: pd.DataFrame, name: str, computed_at: datetime) -> pa.Table:
    """A results frame with computed_at and schema_version, in the table's declared schema."""
    schema = arrow_schema(name)
    out = frame.copy()
    out["computed_at"] = pd.Timestamp(computed_at)
    out["schema_version"] = SCHEMA_VERSION
    out = out.astype(object).where(out.notna(), None)
    return pa.Table.from_pandas(out[schema.names], schema=schema, preserve_index=False)


def results_tables(counts: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Every results table but config_alerts, from the count tables."""
    dist = distributions(counts["value_counts"])
    pairs = drift_clusters(dist)
    return {
        "distributions": dist,
        "default_share": default_share(counts["value_counts"]),
        "numeric_summary": numeric_summary(counts["value_counts"]),
        "drift_clusters": pairs,
        "drift_keys": drift_keys(dist, pairs),
        "group_drift": group_drift(counts["group_counts"]),
        "group_configs": group_configs(counts["group_counts"]),
        "client_versions": client_versions(counts["version_counts"]),
    }


def normalized_values(sids: pa.Array, keys: pa.Array, raw: pa.Array, ids: pa.Array) -> pa.Table:
    """The watched entries the instance pass returned (sid, key, spelling) as (instance, key, normalised value):
    normalised once per distinct (key, spelling), as the counts are."""
    frame = pd.DataFrame({"key": keys.to_pandas(), "raw": raw.to_pandas()})
    pairs = frame.drop_duplicates()
    pairs = pairs.assign(value=[normalize_value(k, r if isinstance(r, str) else None)
                                for k, r in zip(pairs["key"], pairs["raw"], strict=True)])
    merged = frame.merge(pairs, on=["key", "raw"], how="left")
    value = merged["value"].astype(object).where(merged["value"].notna(), None)
    return pa.table({IDS: pc.take(ids, sids), "key": keys, "value": pa.array(value.tolist(), pa.string())})


def client_instances(heads: pa.Table, values: pa.Table, watched: Sequence[str], computed_at: datetime) -> pa.Table:
    """results/client_instances: one row per instance (its head), its watched values sorted by key, and the keys
    they cover in the file's metadata (so a key absent from ``configs`` is one the instance does not report)."""
    schema = arrow_schema("client_instances")
    heads = heads.sort_by([("cluster_id", "ascending"), (IDS, "ascending")])
    n = heads.num_rows
    keep = values.filter(pc.is_in(values["key"], value_set=pa.array(sorted(watched), pa.string())))
    row = pc.index_in(keep[IDS], value_set=heads[IDS].combine_chunks())
    keep, row = keep.filter(pc.is_valid(row)), row.filter(pc.is_valid(row))
    order = pc.sort_indices(pa.table({"r": row, "k": keep["key"]}), sort_keys=[("r", "ascending"), ("k", "ascending")])
    keep, rows = keep.take(order), row.take(order).to_numpy(zero_copy_only=False)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int32) if n else \
        np.zeros(1, np.int32)
    entry = schema.field("configs").type.value_type
    structs = pa.StructArray.from_arrays([keep["key"].combine_chunks().cast(pa.string()),
                                          keep["value"].combine_chunks().cast(pa.string())], fields=list(entry))
    client_id = pc.coalesce(heads["client_id"], heads["cfg_client_id"])
    columns = {
        "cluster_id": heads["cluster_id"], IDS: heads[IDS], "client_type": heads["client_type"], "client_id": client_id,
        "group_id": heads["group_id"], "client_software_name": heads["client_software_name"],
        "client_software_version": heads["client_software_version"], "principal": heads["principal"],
        "client_address": heads["client_address"], "broker_id": heads["broker_id"],
        "snapshot_id": heads["snapshot_id"], "last_seen": heads["received_at"],
        "configs": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs),
        "computed_at": pa.array([computed_at] * n, schema.field("computed_at").type),
        "schema_version": pa.array([SCHEMA_VERSION] * n, pa.int32()),
    }
    table = pa.table({f.name: columns[f.name] for f in schema}).cast(schema)
    return table.replace_schema_metadata({WATCHED_KEYS_META: json.dumps(sorted(watched)).encode("utf-8")})
