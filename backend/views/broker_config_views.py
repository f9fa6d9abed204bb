"""Broker configs and topic overrides as the pages and the report show them (pure pandas, no Streamlit).

Input frames are the stored config rows (backend.store.config_readers.latest_configs). Values a rule
withheld are shown as "(withheld: why)", never filled in; every value is plain text.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

DEFAULT_SOURCE = "DEFAULT_CONFIG"
SOURCE_LABELS = {
    "DYNAMIC_BROKER_CONFIG": "dynamic (broker)",
    "DYNAMIC_DEFAULT_BROKER_CONFIG": "dynamic (cluster default)",
    "STATIC_BROKER_CONFIG": "static (server.properties)",
    "DEFAULT_CONFIG": "default",
    "DYNAMIC_TOPIC_CONFIG": "topic override",
    "UNKNOWN": "unknown",
}
BROKER_COLUMNS = ["config", "value", "source", "brokers_disagree", "non_default", "read_only", "type"]
COMPARE_FIXED = ["config", "differs", "all_default"]
MAX_BROKER_COLUMNS = 12


def source_label(source: object) -> str:
    """A readable name of Kafka's ConfigSource."""
    return SOURCE_LABELS.get(str(source), str(source))


def shown_value(value: object, withheld: object) -> str:
    """The value as shown: withheld values say why, unset ones are an em dash."""
    if isinstance(withheld, str) and withheld:
        return f"(withheld: {withheld})"
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return str(value)


def _broker_rows(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[frame["resource_type"] == "broker"].copy()
    rows["shown"] = [shown_value(v, w) for v, w in zip(rows["value"], rows["withheld"], strict=True)]
    rows["broker"] = rows["resource"].astype(int)
    return rows


def _joined(values: Iterable[str]) -> str:
    return " · ".join(values)


def broker_config_table(frame: pd.DataFrame, cluster: str, *, include_defaults: bool = False) -> pd.DataFrame:
    """One row per broker config of a cluster: brokers that disagree first, then non-default ones, then the rest."""
    rows = _broker_rows(frame[frame["cluster_name"] == cluster])
    if rows.empty:
        return pd.DataFrame(columns=BROKER_COLUMNS)
    out = []
    for name, group in rows.groupby("config_name", sort=True):
        values = group.groupby("shown")["broker"].apply(sorted).to_dict()
        sources = group.groupby("source")["broker"].apply(sorted).to_dict()
        disagree = len(values) > 1
        value = next(iter(values)) if not disagree else _joined(
            f"{v} (broker {', '.join(map(str, ids))})" for v, ids in sorted(values.items()))
        source = source_label(next(iter(sources))) if len(sources) == 1 else _joined(
            f"{source_label(s)} (broker {', '.join(map(str, ids))})" for s, ids in sorted(sources.items()))
        out.append({"config": name, "value": value, "source": source, "brokers_disagree": disagree,
                    "non_default": bool((group["source"] != DEFAULT_SOURCE).any()),
                    "read_only": bool(group["read_only"].all()), "type": group["config_type"].iloc[0] or ""})
    table = pd.DataFrame(out, columns=BROKER_COLUMNS)
    if not include_defaults:
        table = table[table["non_default"] | table["brokers_disagree"]]
    table = table.sort_values(["brokers_disagree", "non_default", "config"], ascending=[False, False, True])
    return table.reset_index(drop=True)


def disagreements(frame: pd.DataFrame, cluster: str) -> pd.DataFrame:
    """The configs the brokers of a cluster disagree on: one column per broker (value [source])."""
    rows = _broker_rows(frame[frame["cluster_name"] == cluster])
    if rows.empty:
        return pd.DataFrame(columns=["config"])
    counts = rows.groupby("config_name")["shown"].nunique()
    split = rows[rows["config_name"].isin(counts[counts > 1].index)]
    if split.empty:
        return pd.DataFrame(columns=["config"])
    split = split.assign(cell=[f"{v} [{source_label(s)}]" for v, s in zip(split["shown"], split["source"], strict=True)])
    wide = split.pivot_table(index="config_name", columns="broker", values="cell", aggfunc="first")
    brokers = list(wide.columns)[:MAX_BROKER_COLUMNS]
    wide = wide[brokers]
    wide.columns = [f"broker {b}" for b in brokers]
    return wide.fillna("—").rename_axis("config").reset_index()


def topic_overrides(frame: pd.DataFrame, cluster: str) -> pd.DataFrame:
    """Every topic override (DYNAMIC_TOPIC_CONFIG) of a cluster, by topic then config."""
    rows = frame[(frame["cluster_name"] == cluster) & (frame["resource_type"] == "topic")]
    columns = ["topic", "config", "value", "type"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    out = pd.DataFrame({
        "topic": rows["resource"].to_numpy(), "config": rows["config_name"].to_numpy(),
        "value": [shown_value(v, w) for v, w in zip(rows["value"], rows["withheld"], strict=True)],
        "type": rows["config_type"].fillna("").to_numpy(),
    }, columns=columns)
    return out.sort_values(["topic", "config"]).reset_index(drop=True)


def _cluster_cells(rows: pd.DataFrame) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], bool]]:
    """Per (config, cluster) the value its brokers report (or "differs within the cluster: ...") and whether default."""
    cells: dict[tuple[str, str], str] = {}
    defaults: dict[tuple[str, str], bool] = {}
    for (name, cluster), group in rows.groupby(["config_name", "cluster_name"], sort=False):
        values = sorted(set(group["shown"]))
        cells[(name, cluster)] = values[0] if len(values) == 1 else "differs within the cluster: " + " | ".join(values)
        defaults[(name, cluster)] = bool((group["source"] == DEFAULT_SOURCE).all())
    return cells, defaults


def cluster_column(cluster: str) -> str:
    """The comparison's column of a cluster (a cluster named like a fixed column gets a suffix)."""
    return f"{cluster} (cluster)" if cluster in COMPARE_FIXED else cluster


def compare_broker_configs(frame: pd.DataFrame, clusters: list[str], *, include_defaults: bool = False) -> pd.DataFrame:
    """Broker configs side by side, one column per cluster; differences first; defaults hidden unless asked."""
    rows = _broker_rows(frame[frame["cluster_name"].isin(clusters)])
    columns = [*COMPARE_FIXED, *(cluster_column(c) for c in clusters)]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    cells, defaults = _cluster_cells(rows)
    out = []
    for name in sorted(set(rows["config_name"])):
        values = [cells.get((name, c), "—") for c in clusters]
        all_default = all(defaults.get((name, c), True) for c in clusters)
        if all_default and not include_defaults:
            continue
        differs = len(set(values)) > 1 or any(v.startswith("differs within") for v in values)
        out.append({"config": name, "differs": differs, "all_default": all_default,
                    **{cluster_column(c): v for c, v in zip(clusters, values, strict=True)}})
    table = pd.DataFrame(out, columns=columns)
    return table.sort_values(["differs", "config"], ascending=[False, True]).reset_index(drop=True)


def cluster_config_summary(runs: pd.DataFrame, cluster: str) -> tuple[str, str | None] | None:
    """When a cluster's configs were last read, and what could not be read (None: never read)."""
    mine = runs[runs["cluster_name"] == cluster]
    if mine.empty:
        return None
    row = mine.iloc[0]
    version = row["describe_configs_version"]
    text = (f"Read {pd.Timestamp(row['collected_at']):%Y-%m-%d %H:%M} UTC from {row['brokers']} brokers"
            + (f" (DescribeConfigs v{version})" if pd.notna(version) else ""))
    error = row["error"] if isinstance(row["error"], str) and row["error"] else None
    return text, error
