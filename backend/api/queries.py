"""The read functions of the API and the MCP tools: a caller's ScopedLake in, typed models out.

Every function reads through backend.views.scoped.ScopedLake (the readers the pages use) and shapes with the pages'
own view functions (fleet_views, group_views, broker_config_views, incident_views, readiness), so a page and the API
never disagree. A cluster outside the caller's scope raises NotFound with the same words whether or not it exists.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import StringConstraints

from backend.api import models as m
from backend.views import broker_config_views, fleet_views, group_views, incident_views, readiness
from backend.views.scoped import ScopedLake


class NotFound(LookupError):
    """A cluster, topic or group the caller cannot see (or that does not exist: the caller cannot tell)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Invalid(ValueError):
    """A parameter the API cannot use (a bad tag selector, an unknown target release)."""


def value(x: Any) -> Any:
    """A frame cell as plain Python: NaN/NaT/NA -> None, numpy scalars -> Python, timestamps -> datetime."""
    if x is None:
        return None
    if isinstance(x, list | tuple | dict):
        return x
    if hasattr(x, "tolist") and not isinstance(x, pd.Timestamp) and bool(getattr(x, "ndim", False)):
        return x.tolist()
    try:
        if pd.isna(x):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(x, pd.Timestamp):
        return x.to_pydatetime()
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _int(x: Any) -> int | None:
    v = value(x)
    return None if v is None or isinstance(v, str) else int(v)


def _str(x: Any) -> str | None:
    v = value(x)
    return None if v is None else str(v)


def require_cluster(sl: ScopedLake, name: str) -> pd.Series:
    """The latest row of a visible cluster; NotFound otherwise (a hidden cluster does not exist for the caller)."""
    if not sl.seen.may_view(name):
        raise NotFound(f"cluster {name!r}")
    latest = sl.latest_clusters()
    rows = latest[latest["cluster_name"] == name]
    if rows.empty:
        raise NotFound(f"cluster {name!r}")
    return rows.iloc[0]


def among(frame: pd.DataFrame, column: str, values: Sequence[str]) -> pd.DataFrame:
    """The rows whose `column` is one of `values` (all rows when none are given): every list filter of the API."""
    return frame[frame[column].isin(list(values))] if values else frame


# ------------------------------------------------------------------ clusters


# A tag selector: a key (no '=' or '!'), then = or !=, then the value (anything, possibly empty).
SELECTOR = r"^[^=!]+(!=|=)[\s\S]*$"
_SELECTOR = re.compile(SELECTOR)
Selector = Annotated[str, StringConstraints(pattern=SELECTOR, max_length=300)]


def parse_selectors(selectors: Iterable[str]) -> list[tuple[str, str, bool]]:
    """Tag selectors `key=value` / `key!=value` -> (key, value, equal); raises Invalid for anything else."""
    out = []
    for text in selectors:
        found = _SELECTOR.match(text)
        if found is None or len(text) > 300:
            raise Invalid(f"tag selector {text[:60]!r}: write key=value or key!=value (e.g. env=prod)")
        key, _, value = text.partition(found.group(1))
        out.append((key.strip(), value.strip(), found.group(1) == "="))
    return out


def tags_of(row: pd.Series) -> dict[str, str]:
    """A cluster row's tags."""
    return {str(k): str(v) for k, v in fleet_views.parse_tags(_str(row.get("tags_json"))).items()}


def clusters_frame(sl: ScopedLake, *, tags: Sequence[str] = (), names: Sequence[str] = (),
                   statuses: Sequence[str] = ()) -> pd.DataFrame:
    """The visible clusters' latest rows that pass the filters (every selector must hold; names/statuses: any)."""
    frame = sl.latest_clusters()
    frame = among(frame, "cluster_name", names)
    frame = among(frame, "status", statuses)
    selectors = parse_selectors(tags)
    if selectors and not frame.empty:
        keep = []
        for _, row in frame.iterrows():
            mine = tags_of(row)
            keep.append(all((mine.get(k) == v) == equal for k, v, equal in selectors))
        frame = frame[pd.Series(keep, index=frame.index, dtype=bool)]
    return frame


def cluster_model(sl: ScopedLake, row: pd.Series) -> m.Cluster:
    """One cluster row as the API shows it (versions and mode from its brokers)."""
    name = str(row["cluster_name"])
    brokers = sl.latest_brokers(None, True)
    mine = brokers[brokers["cluster_name"] == name]
    mode = readiness.cluster_mode(row.get("zk_cluster_id"), mine)
    return m.Cluster(
        name=name, cluster_id=_str(row.get("cluster_id")), zk_cluster_id=_str(row.get("zk_cluster_id")),
        status=str(row.get("status") or "unknown"), mode=mode,  # type: ignore[arg-type]
        tags=tags_of(row), broker_count=_int(row.get("broker_count")),
        brokers_reachable=_int(row.get("brokers_reachable")), controller_id=_int(row.get("controller_id")),
        topic_count=_int(row.get("topic_count")), partition_count=_int(row.get("partition_count")),
        under_replicated=_int(row.get("under_replicated")), offline_partitions=_int(row.get("offline_partitions")),
        versions=fleet_views.summarize_versions(mine) if not mine.empty else "",
        error=_str(row.get("error")) or None, polled_at=value(row.get("polled_at")))


def brokers(sl: ScopedLake, cluster: str) -> list[m.Broker]:
    """The brokers of a visible cluster (its latest poll with data), controller first."""
    require_cluster(sl, cluster)
    frame = sl.latest_brokers(cluster, True)
    frame = frame.sort_values(["is_controller", "broker_id"], ascending=[False, True])
    return [m.Broker(
        cluster=cluster, broker_id=int(r["broker_id"]), host=_str(r.get("host")), port=_int(r.get("port")),
        rack=_str(r.get("rack")), is_controller=bool(value(r.get("is_controller")) or False),
        reachable=bool(value(r.get("reachable")) or False), software_name=_str(r.get("software_name")),
        software_version=_str(r.get("software_version")),
        version_provenance=_str(r.get("version_provenance")) or "unknown",
        version_min=_str(r.get("version_min")), version_max=_str(r.get("version_max")),
        version_label=fleet_views.version_label(r), error=_str(r.get("error")) or None,
    ) for _, r in frame.iterrows()]


# ------------------------------------------------------------------ topics


@dataclass(frozen=True)
class TopicNames:
    """A topic frame's names and topic ids, lower-cased once (Arrow strings): a search is then one substring scan in
    C instead of lower-casing every name again."""

    frame: pd.DataFrame
    names: pa.Array
    ids: pa.Array

    def matching(self, needle: str) -> np.ndarray:
        """Rows whose lower-cased name holds `needle` or whose lower-cased topic id starts with it."""
        found = pc.or_(pc.match_substring(self.names, needle), pc.starts_with(self.ids, needle))
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)


def topic_names(sl: ScopedLake, cluster: str | None = None) -> TopicNames | None:
    """The lower-cased names and ids of `sl.all_topics()` (or of one cluster's `sl.latest_topics`), once per
    generation; None when a name cannot be an Arrow string (the plain path then searches)."""
    def build() -> TopicNames | None:
        frame = sl.all_topics() if cluster is None else sl.latest_topics(cluster)
        try:
            names = pa.array([str(t).lower() if t is not None else "" for t in frame["topic"]], type=pa.string())
            ids = pa.array([str(t).lower() if isinstance(t, str) else "" for t in frame["topic_id"]], type=pa.string())
        except (pa.ArrowException, UnicodeError):
            return None
        return TopicNames(frame, names, ids)

    return sl.once(("topic-names", cluster), build)


def filter_topics(frame: pd.DataFrame, search: str = "", include_internal: bool = True,
                  only_under_replicated: bool = False, *, names: TopicNames | None = None) -> pd.DataFrame:
    """Topics whose name holds `search` or whose topic id starts with it (the Cluster page's search); `names`: the
    frame's lower-cased names, when they were made for this very frame."""
    needle = search.strip().lower()
    matching = names.matching(needle) if needle and names is not None and names.frame is frame else None
    return fleet_views.filter_topics(frame, query=search, include_internal=include_internal,
                                     only_under_replicated=only_under_replicated, matching=matching)


def topic_model(r: pd.Series) -> m.Topic:
    """A topic row."""
    return m.Topic(cluster=str(r["cluster_name"]), name=str(r["topic"]), topic_id=_str(r.get("topic_id")),
                   partitions=_int(r.get("partitions")), replication_factor=_int(r.get("replication_factor")),
                   internal=bool(value(r.get("internal")) or False), under_replicated=_int(r.get("under_replicated")),
                   offline_partitions=_int(r.get("offline_partitions")))


def topic_detail(sl: ScopedLake, cluster: str, topic: str) -> m.TopicDetail:
    """One topic with its overrides and its recreations."""
    require_cluster(sl, cluster)
    topics = sl.latest_topics(cluster)
    rows = topics[topics["topic"] == topic]
    if rows.empty:
        raise NotFound(f"topic {topic!r} of cluster {cluster!r}")
    configs = sl.broker_configs([cluster])
    mine = configs[(configs["resource_type"] == "topic") & (configs["resource"] == topic)] if not configs.empty \
        else configs
    overrides = [m.ConfigValue(name=str(c["config_name"]), value=_str(c.get("value")), source=_str(c.get("source")),
                               withheld=_str(c.get("withheld"))) for _, c in mine.sort_values("config_name").iterrows()]
    changes = sl.topic_id_changes(cluster)
    changes = changes[changes["topic"] == topic] if not changes.empty and "topic" in changes else changes.iloc[0:0]
    recreated = [m.TopicIdChange(old_topic_id=_str(c.get("old_topic_id")), new_topic_id=_str(c.get("new_topic_id")),
                                 seen_at=value(c.get("new_first_seen"))) for _, c in changes.iterrows()]
    return m.TopicDetail(**topic_model(rows.iloc[0]).model_dump(), overrides=overrides, recreated=recreated)


# ------------------------------------------------------------------ configs


def broker_configs(sl: ScopedLake, cluster: str, include_defaults: bool = False) -> list[m.BrokerConfig]:
    """A visible cluster's broker configs (disagreements and non-defaults; every config with include_defaults)."""
    require_cluster(sl, cluster)
    table = broker_config_views.broker_config_table(sl.broker_configs([cluster]), cluster,
                                                    include_defaults=include_defaults)
    return [m.BrokerConfig(cluster=cluster, config=str(r["config"]), value=str(r["value"]), source=str(r["source"]),
                           non_default=bool(r["non_default"]), brokers_disagree=bool(r["brokers_disagree"]),
                           read_only=bool(r["read_only"])) for _, r in table.iterrows()]


def compare_configs(sl: ScopedLake, clusters: Sequence[str], include_defaults: bool = False) -> list[m.ConfigComparison]:
    """Broker configs side by side over visible clusters (differences first)."""
    for name in clusters:
        require_cluster(sl, name)
    chosen = list(dict.fromkeys(clusters))
    table = broker_config_views.compare_broker_configs(sl.broker_configs(chosen), chosen,
                                                       include_defaults=include_defaults)
    return [m.ConfigComparison(config=str(r["config"]), differs=bool(r["differs"]),
                               values={c: str(r[broker_config_views.cluster_column(c)]) for c in chosen})
            for _, r in table.iterrows()]


# ------------------------------------------------------------------ consumer groups


def _evidence(text: Any) -> dict[str, object]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def group_model(r: pd.Series) -> m.Group:
    """A group row."""
    return m.Group(
        cluster=str(r["cluster_name"]), group_id=str(r["group_id"]), group_type=str(r.get("group_type") or "unknown"),
        protocol_type=_str(r.get("protocol_type")), protocol=_str(r.get("protocol")), state=_str(r.get("state")),
        members=_int(r.get("members")), topics=_int(r.get("topics")), partitions=_int(r.get("partitions")),
        lag=_int(r.get("lag")), max_partition_lag=_int(r.get("max_partition_lag")),
        uncommitted_records=_int(r.get("uncommitted_records")), partitions_ahead=_int(r.get("partitions_ahead")),
        status=str(r.get("status") or "unknown"), status_since=value(r.get("status_since")),
        evidence=_evidence(r.get("evidence_json")), error=_str(r.get("error")) or None)


def groups_frame(sl: ScopedLake, *, clusters: Sequence[str] = (), statuses: Sequence[str] = (),
                 types: Sequence[str] = (), states: Sequence[str] = (), topic: str = "", search: str = "",
                 tags: Sequence[str] = ()) -> pd.DataFrame:
    """The visible groups that pass the Consumer groups page's filters (and tag selectors on their clusters)."""
    frame = sl.groups()
    if tags:
        frame = frame[frame["cluster_name"].isin(set(clusters_frame(sl, tags=tags)["cluster_name"]))]
    return group_views.filter_groups(frame, clusters=list(clusters) or None, states=list(states) or None,
                                     types=list(types) or None, statuses=list(statuses) or None, topic=topic,
                                     query=search)


def group_detail(sl: ScopedLake, cluster: str, group: str) -> m.GroupDetail:
    """One group: status and evidence, members, lag per topic and per partition."""
    require_cluster(sl, cluster)
    groups = sl.groups()
    rows = groups[(groups["cluster_name"] == cluster) & (groups["group_id"] == group)]
    if rows.empty:
        raise NotFound(f"group {group!r} of cluster {cluster!r}")
    members = sl.group_members([cluster])
    partitions = group_views.partitions_table(sl.group_offsets([cluster]), members, cluster, group)
    return m.GroupDetail(
        **group_model(rows.iloc[0]).model_dump(),
        members_detail=[m.Member(client_id=_str(r["client_id"]), host=_str(r["host"]), member_id=_str(r["member_id"]),
                                 instance_id=_str(r["instance_id"]), member_type=_str(r["member_type"]),
                                 partitions=_int(r["partitions"]), assignment=str(r["assignment"]),
                                 subscribed=str(r["subscribed"]))
                        for _, r in group_views.members_table(members, cluster, group).iterrows()],
        lag_by_topic=[m.TopicLag(topic=str(r["topic"]), partitions=int(r["partitions"]), lag=_int(r["lag"]),
                                 uncommitted_records=_int(r["uncommitted_records"]))
                      for _, r in group_views.topic_lag(partitions).iterrows()],
        lag_by_partition=[m.PartitionLag(topic=str(r["topic"]), partition=int(r["partition"]),
                                         committed_offset=_int(r["committed_offset"]), end_offset=_int(r["end_offset"]),
                                         lag=_int(r["lag"]), uncommitted_records=_int(r["uncommitted_records"]),
                                         client_id=_str(r["client_id"]) or None,
                                         host=_str(r["host"]) or None, member_id=_str(r["member_id"]) or None)
                          for _, r in partitions.iterrows()])


# ------------------------------------------------------------------ clients and client configs


def client_software(sl: ScopedLake, clusters: Sequence[str] = ()) -> pd.DataFrame:
    """Client software and versions connected to each visible cluster (the Clients page's table)."""
    from backend.views import inventory_views

    rows, _ = sl.client_inventory()
    table = inventory_views.software_by_cluster(rows)
    return among(table, "cluster_name", clusters)


def software_model(r: pd.Series) -> m.ClientSoftware:
    """A client software row."""
    return m.ClientSoftware(cluster=str(r["cluster_name"]), software_name=_str(r["software_name"]),
                            software_version=_str(r["software_version"]), connections=int(r["connections"]),
                            brokers=str(r["brokers"]), floor=str(r["floor"]))


def distributions(sl: ScopedLake, *, clusters: Sequence[str] = (), key: str = "",
                  client_type: str = "") -> pd.DataFrame:
    """Client-config value distributions of the visible clusters (results/distributions, sensitive keys dropped)."""
    frame = sl.result("distributions")
    frame = among(frame, "cluster", clusters)
    if key:
        frame = frame[frame["key"] == key]
    if client_type:
        frame = frame[frame["client_type"] == client_type]
    return frame


def distribution_model(r: pd.Series) -> m.Distribution:
    """A distribution row."""
    return m.Distribution(cluster=str(r["cluster"]), cluster_id=str(r["cluster_id"]),
                          client_type=str(r["client_type"]), key=str(r["key"]), value=_str(r["value"]),
                          instance_count=int(r["instance_count"]), total_instances=int(r["total_instances"]),
                          share=float(r["share"]))


def drift(sl: ScopedLake, *, key: str = "", client_type: str = "") -> pd.DataFrame:
    """Drift between pairs of visible clusters (both sides visible), largest first."""
    frame = sl.result("drift_clusters")
    if key:
        frame = frame[frame["key"] == key]
    if client_type:
        frame = frame[frame["client_type"] == client_type]
    return frame


def drift_model(r: pd.Series) -> m.Drift:
    """A drift row."""
    return m.Drift(client_type=str(r["client_type"]), key=str(r["key"]), cluster_a=str(r["cluster_a_name"]),
                   cluster_b=str(r["cluster_b_name"]), tvd=float(r["tvd"]))


# ------------------------------------------------------------------ incidents


def incidents(sl: ScopedLake, *, state: str = "open", clusters: Sequence[str] = (), since: datetime | None = None,
              severities: Sequence[str] = (), rules: Sequence[str] = ()) -> pd.DataFrame:
    """The Alerts page's board: open incidents and client-config alerts, and resolved ones since `since`."""
    board = incident_views.alert_board(sl.all_alerts())
    if state != "all":
        board = board[board["state"] == state]
    board = among(board, "cluster", clusters)
    board = among(board, "severity", severities)
    board = among(board, "rule", rules)
    if since is not None:
        stamp = pd.Timestamp(since)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        board = board[(board["state"] == "open") | (pd.to_datetime(board["resolved"], utc=True) >= stamp)]
    return board


def incident_model(r: pd.Series) -> m.Incident:
    """A board row."""
    return m.Incident(state=str(r["state"]), severity=str(r["severity"]), source=str(r["source"]),
                      rule=str(r["rule"]), title=str(r["title"] or ""), cluster=_str(r["cluster"]),
                      subject=str(r["subject"] or ""), since=value(r["since"]), last_seen=value(r["last_seen"]),
                      resolved=value(r["resolved"]), evidence=str(r["evidence"] or ""), doc_url=_str(r["doc_url"]))


# ------------------------------------------------------------------ readiness


def readiness_for(sl: ScopedLake, target: str | None, clusters: Sequence[str] = ()) -> list[m.ClusterReadiness]:
    """The verdict, checklist and instances to chase of each visible cluster (or those named) for a target."""
    chosen = target or readiness.default_target()
    if chosen not in readiness.known_targets():
        raise Invalid(f"unknown target release {chosen[:20]!r}; known: {', '.join(readiness.known_targets())}")
    for name in clusters:
        require_cluster(sl, name)
    report = sl.readiness(chosen)
    verdicts = report.verdicts
    verdicts = among(verdicts, "cluster_name", clusters)
    out = []
    for _, v in verdicts.sort_values("cluster_name").iterrows():
        name = str(v["cluster_name"])
        items = report.items[report.items["cluster_name"] == name]
        inst = report.instances[report.instances["cluster_name"] == name] if not report.instances.empty \
            else report.instances
        out.append(m.ClusterReadiness(
            cluster=name, target=chosen, verdict=str(v["verdict"]),  # type: ignore[arg-type]
            reasons=str(v["reasons"] or ""),
            checklist=[m.ReadinessItem(item=str(i["item"]), status=str(i["status"]),  # type: ignore[arg-type]
                                       detail=str(i["detail"] or "")) for _, i in items.iterrows()],
            instances=[m.ReadinessInstance.model_validate(
                {**{k: _str(i.get(k)) for k in m.ReadinessInstance.model_fields}, "item": str(i.get("item") or "")})
                for _, i in inst.iterrows()]))
    return out
