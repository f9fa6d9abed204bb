"""Consumer groups for the pages, the exports and the report: pure pandas views, no Streamlit.

The frames come from backend.store.group_readers (through dashboard.data, filtered by the session's grants).
Group ids, client ids, hosts and member ids are client-chosen: these views keep them as data (the pages render
them in dataframes or through components.plain, CSV goes through csv_safe), and cut them for display only
(DISPLAY_CHARS), never in a key. A group is addressed by `group_key(cluster, group)` in links, so a hostile or
10 KB group id never becomes a URL.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from backend.views import fleet_views

STATUS_RANK = {"offset_ahead": 0, "stalled": 1, "stopped": 2, "empty_with_lag": 3, "lagging": 4, "unknown": 5, "ok": 6}
PROBLEMS = ("offset_ahead", "stalled", "stopped", "empty_with_lag", "lagging")
MISSING = "-"  # what kafka-consumer-groups.sh prints where there is no value
DISPLAY_CHARS = 120
TYPES = ("classic", "consumer", "share", "streams", "unknown")
LIST_COLUMNS = ["cluster", "group", "status", "type", "state", "protocol", "members", "topics", "partitions", "lag",
                "uncommitted", "status_since", "error", "key"]


def group_key(cluster: str, group: str) -> str:
    """A short, URL-safe key of one group (links carry it instead of the group id)."""
    return hashlib.sha1(f"{cluster}\x1f{group}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def display(text: object, limit: int = DISPLAY_CHARS) -> str:
    """A client-chosen string cut for display (keys and exports keep it whole)."""
    value = "" if text is None or (isinstance(text, float) and math.isnan(text)) else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """A column of a stored frame, or nulls when an older lake has none."""
    return frame[name] if name in frame else pd.Series([None] * len(frame), index=frame.index, dtype=object)


def worst_first(groups: pd.DataFrame) -> pd.DataFrame:
    """Groups ordered by status (offset ahead, stalled, stopped, empty with lag, lagging, unknown, ok), then the
    largest lag."""
    if groups.empty:
        return groups
    rank = groups["status"].map(STATUS_RANK).fillna(len(STATUS_RANK))
    lag = groups["lag"].fillna(-1)
    order = pd.DataFrame({"rank": rank, "lag": -lag, "cluster": groups["cluster_name"], "group": groups["group_id"]})
    return groups.loc[order.sort_values(["rank", "lag", "cluster", "group"]).index]


@dataclass(frozen=True)
class GroupPage:
    """One page of the filtered groups (only this page reaches the browser)."""

    rows: pd.DataFrame
    total: int
    page: int
    pages: int
    by_status: dict[str, int]


def filter_groups(groups: pd.DataFrame, *, clusters: list[str] | None = None, states: list[str] | None = None,
                  types: list[str] | None = None, statuses: list[str] | None = None, topic: str = "",
                  query: str = "") -> pd.DataFrame:
    """The groups that pass the filters (server-side, on the cached frame of every visible group)."""
    frame = groups
    if clusters:
        frame = frame[frame["cluster_name"].isin(clusters)]
    if states:
        frame = frame[frame["state"].isin(states)]
    if types:
        frame = frame[frame["group_type"].isin(types)]
    if statuses:
        frame = frame[frame["status"].isin(statuses)]
    if topic.strip():
        needle = topic.strip()
        # A boolean Series (a plain list of no rows would select no columns instead of no rows).
        frame = frame[pd.Series([needle in list(names) if names is not None else False for names in frame["topic_names"]],
                                index=frame.index, dtype=bool)]
    if query.strip():
        needle = query.strip().lower()
        frame = frame[frame["group_id"].str.lower().str.contains(needle, regex=False)]
    return frame


def group_page(groups: pd.DataFrame, *, page: int = 1, page_size: int = 50, **filters: object) -> GroupPage:
    """Filter (see filter_groups), order worst first, and cut one page."""
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    frame = filter_groups(groups, **filters)  # type: ignore[arg-type]
    total = len(frame)
    pages = max(1, math.ceil(total / page_size))
    page = min(max(1, page), pages)
    by_status = {s: int(n) for s, n in frame["status"].value_counts().items()} if total else {}
    chosen = worst_first(frame).iloc[(page - 1) * page_size: page * page_size]
    return GroupPage(rows=list_rows(chosen), total=total, page=page, pages=pages, by_status=by_status)


def list_rows(groups: pd.DataFrame) -> pd.DataFrame:
    """The list's columns for some groups (ids cut for display; `key` addresses the group)."""
    if groups.empty:
        return pd.DataFrame(columns=LIST_COLUMNS)
    return pd.DataFrame({
        "cluster": groups["cluster_name"].to_numpy(),
        "group": [display(g) for g in groups["group_id"]],
        "status": groups["status"].to_numpy(),
        "type": groups["group_type"].to_numpy(),
        "state": groups["state"].to_numpy(),
        "protocol": [display(p, 40) for p in groups["protocol"]],
        "members": groups["members"].to_numpy(),
        "topics": groups["topics"].to_numpy(),
        "partitions": groups["partitions"].to_numpy(),
        "lag": groups["lag"].astype("Int64").to_numpy(),
        "uncommitted": _column(groups, "uncommitted_records").astype("Int64").to_numpy(),
        "status_since": groups["status_since"].to_numpy(),
        "error": [display(e, 80) for e in groups["error"]],
        "key": [group_key(c, g) for c, g in zip(groups["cluster_name"], groups["group_id"], strict=True)],
    }, columns=LIST_COLUMNS).reset_index(drop=True)


def find_group(groups: pd.DataFrame, cluster: str, key: str) -> pd.Series | None:
    """The group of one cluster with this key, or None."""
    mine = groups[groups["cluster_name"] == cluster]
    for i, gid in zip(mine.index, mine["group_id"], strict=True):
        if group_key(cluster, gid) == key:
            return mine.loc[i]
    return None


def fleet_summary(groups: pd.DataFrame) -> pd.DataFrame:
    """Per cluster: groups, and groups in a problem status (lagging, stalled, stopped, empty with lag)."""
    if groups.empty:
        return pd.DataFrame(columns=["cluster", "groups", "lagging_groups"])
    problem = groups["status"].isin(PROBLEMS)
    out = pd.DataFrame({"cluster": groups["cluster_name"], "problem": problem.astype(int)})
    summary = out.groupby("cluster").agg(groups=("problem", "size"), lagging_groups=("problem", "sum"))
    return summary.reset_index()


def with_group_counts(table: pd.DataFrame, groups: pd.DataFrame) -> pd.DataFrame:
    """The Fleet table with `group_summary` ("lagging / all", "—" where never read) after its topic columns, and the
    `groups` and `lagging_groups` counts at the end."""
    summary = fleet_summary(groups)
    out = table.merge(summary, on="cluster", how="left")
    for col in ("groups", "lagging_groups"):
        out[col] = out[col].astype("Int64")
    out["group_summary"] = [f"{lag} / {n}" if pd.notna(n) else "—"
                            for lag, n in zip(out["lagging_groups"], out["groups"], strict=True)]
    order = list(table.columns)
    at = order.index("under_replicated") + 1 if "under_replicated" in order else len(order)
    return out[[*order[:at], "group_summary", *order[at:], "groups", "lagging_groups"]]


def status_counts(groups: pd.DataFrame) -> dict[str, int]:
    """Groups per status, worst first."""
    counts = groups["status"].value_counts() if not groups.empty else pd.Series(dtype=int)
    return {s: int(counts.get(s, 0)) for s in sorted(STATUS_RANK, key=STATUS_RANK.__getitem__) if counts.get(s, 0)}


def compare_groups(groups: pd.DataFrame, clusters: list[str]) -> pd.DataFrame:
    """Groups by type and state, one column per cluster (side by side)."""
    mine = groups[groups["cluster_name"].isin(clusters)]
    if mine.empty:
        return pd.DataFrame(columns=["type", "state", *clusters])
    table = mine.assign(state=mine["state"].replace("", "unknown")).pivot_table(
        index=["group_type", "state"], columns="cluster_name", values="group_id", aggfunc="count", fill_value=0)
    table = table.reindex(columns=clusters, fill_value=0).reset_index().rename(columns={"group_type": "type"})
    table["type"] = pd.Categorical(table["type"], categories=list(TYPES), ordered=True)
    return table.sort_values(["type", "state"]).astype({"type": str}).reset_index(drop=True)


def compare_statuses(groups: pd.DataFrame, clusters: list[str]) -> pd.DataFrame:
    """Groups by status, one column per cluster."""
    mine = groups[groups["cluster_name"].isin(clusters)]
    rows = []
    for status in sorted(STATUS_RANK, key=STATUS_RANK.__getitem__):
        counts = mine[mine["status"] == status]["cluster_name"].value_counts()
        rows.append({"status": status, **{c: int(counts.get(c, 0)) for c in clusters}})
    return pd.DataFrame(rows, columns=["status", *clusters])


def migration_table(groups: pd.DataFrame, brokers: pd.DataFrame, clusters: list[str]) -> pd.DataFrame:
    """KIP-848 at a glance: per cluster, consumer groups on the classic protocol against the consumer protocol,
    with the brokers' versions (the consumer protocol is generally available from Kafka 4.0)."""
    columns = ["cluster", "broker versions", "classic", "consumer", "share", "streams", "assign-only",
               "on consumer protocol", "to migrate"]
    rows = []
    for cluster in clusters:
        mine = groups[groups["cluster_name"] == cluster]
        # assign-only groups (protocol type "": consumers that assign() partitions and only commit offsets) use no
        # rebalance protocol, so there is nothing to migrate
        classic = int(((mine["group_type"] == "classic") & (mine["protocol_type"] == "consumer")).sum())
        assign_only = int(((mine["group_type"] == "classic") & (mine["protocol_type"].fillna("") == "")).sum())
        consumer = int((mine["group_type"] == "consumer").sum())
        share = int((mine["group_type"] == "share").sum())
        streams = int((mine["group_type"] == "streams").sum())
        b = brokers[brokers["cluster_name"] == cluster] if not brokers.empty else brokers
        versions = fleet_views.summarize_versions(b) if not b.empty else "unknown"
        on_new = f"{consumer / (classic + consumer):.0%}" if classic + consumer else "—"
        rows.append({"cluster": cluster, "broker versions": versions, "classic": classic, "consumer": consumer,
                     "share": share, "streams": streams, "assign-only": assign_only, "on consumer protocol": on_new,
                     "to migrate": classic})
    return pd.DataFrame(rows, columns=columns)


def members_table(members: pd.DataFrame, cluster: str, group: str) -> pd.DataFrame:
    """One group's members: client id, host, member id, instance id, protocol, assigned partitions, subscription."""
    mine = members[(members["cluster_name"] == cluster) & (members["group_id"] == group)]
    columns = ["client_id", "host", "member_id", "instance_id", "member_type", "partitions", "assignment", "subscribed"]
    if mine.empty:
        return pd.DataFrame(columns=columns)
    assignment = []
    for text in mine["assignment_json"]:
        parsed = json.loads(text) if isinstance(text, str) and text else {}
        assignment.append("; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in sorted(parsed.items())))
    subscribed = []
    for text, regex in zip(mine["subscribed_json"], _column(mine, "subscribed_regex"), strict=True):
        topics = json.loads(text) if isinstance(text, str) and text else []
        parts = [", ".join(map(str, topics))] if topics else []
        parts += [f"regex {regex}"] if isinstance(regex, str) and regex else []
        subscribed.append("; ".join(parts))
    return pd.DataFrame({
        "client_id": mine["client_id"].to_numpy(), "host": mine["client_host"].to_numpy(),
        "member_id": mine["member_id"].to_numpy(), "instance_id": mine["instance_id"].to_numpy(),
        "member_type": mine["member_type"].to_numpy(), "partitions": mine["assigned_partitions"].to_numpy(),
        "assignment": assignment, "subscribed": subscribed},
        columns=columns).sort_values(["client_id", "member_id"]).reset_index(drop=True)


def partitions_table(offsets: pd.DataFrame, members: pd.DataFrame, cluster: str, group: str) -> pd.DataFrame:
    """One group's partitions as kafka-consumer-groups.sh --describe lists them, largest lag first (a share group's
    committed_offset is its start offset, as kafka-share-groups.sh shows it); `uncommitted_records`: the records on a
    partition assigned without a commit."""
    columns = ["topic", "partition", "committed_offset", "end_offset", "lag", "uncommitted_records", "client_id",
               "host", "member_id", "last_moved_at"]
    mine = offsets[(offsets["cluster_name"] == cluster) & (offsets["group_id"] == group)]
    if mine.empty:
        return pd.DataFrame(columns=columns)
    ms = members[(members["cluster_name"] == cluster) & (members["group_id"] == group)]
    by_member = {m: (c, h) for m, c, h in zip(ms["member_id"], ms["client_id"], ms["client_host"], strict=True)}
    out = pd.DataFrame({
        "topic": mine["topic"].to_numpy(), "partition": mine["partition"].to_numpy(),
        "committed_offset": mine["committed_offset"].astype("Int64").to_numpy(),
        "end_offset": mine["end_offset"].astype("Int64").to_numpy(), "lag": mine["lag"].astype("Int64").to_numpy(),
        "uncommitted_records": pd.array([max(0, int(e) - int(s)) if pd.isna(c) and pd.notna(e) and pd.notna(s)
                                         else None for c, e, s in zip(mine["committed_offset"], mine["end_offset"],
                                                                      _column(mine, "log_start_offset"), strict=True)],
                                        dtype="Int64"),
        "client_id": [by_member.get(m, ("", ""))[0] if m else "" for m in mine["member_id"]],
        "host": [by_member.get(m, ("", ""))[1] if m else "" for m in mine["member_id"]],
        "member_id": mine["member_id"].fillna("").to_numpy(), "last_moved_at": mine["last_moved_at"].to_numpy()},
        columns=columns)
    order = out["lag"].fillna(-1).astype("int64")
    return out.assign(_o=-order).sort_values(["_o", "topic", "partition"]).drop(columns="_o").reset_index(drop=True)


def topic_lag(partitions: pd.DataFrame) -> pd.DataFrame:
    """A group's lag per topic (partitions whose lag is known and not negative; <NA> where none is), with the records
    on its uncommitted partitions beside it."""
    if partitions.empty:
        return pd.DataFrame(columns=["topic", "partitions", "lag", "uncommitted_records"])
    known = partitions["lag"].where(partitions["lag"].fillna(-1) >= 0)
    uncommitted = partitions["uncommitted_records"] if "uncommitted_records" in partitions else known * 0
    out = (partitions.assign(lag=known, uncommitted_records=uncommitted).groupby("topic")
           .agg(partitions=("partition", "size"), lag=("lag", lambda s: s.sum(min_count=1)),
                uncommitted_records=("uncommitted_records", lambda s: s.sum(min_count=1))).reset_index())
    out["lag"] = out["lag"].astype("Int64")
    out["uncommitted_records"] = out["uncommitted_records"].astype("Int64")
    return out.sort_values("lag", ascending=False, na_position="last").reset_index(drop=True)


def as_the_tool_shows(frame: pd.DataFrame, *, share: bool = False) -> pd.DataFrame:
    """A detail table for the page: every missing value as "-" (as kafka-consumer-groups.sh prints it, never "None"),
    numbers as text; a share group's committed offset named start_offset (kafka-share-groups.sh's START-OFFSET)."""
    def cell(value: object) -> object:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) or value == "":
            return MISSING
        if isinstance(value, bool | pd.Timestamp | datetime):
            return value
        if isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer()):
            return str(int(value))
        return str(value) if isinstance(value, numbers.Number) else value
    out = frame.astype(object).map(cell) if not frame.empty else frame.copy()
    return out.rename(columns={"committed_offset": "start_offset"}) if share else out


def window_frame(group: pd.Series) -> pd.DataFrame:
    """The group's bounded window: each read's time and lag (the trend its status is judged on)."""
    at = list(group["window_at"]) if group["window_at"] is not None else []
    lag = list(group["window_lag"]) if group["window_lag"] is not None else []
    return pd.DataFrame({"read_at": pd.to_datetime(at, utc=True), "lag": pd.array(lag, dtype="Int64")})


def evidence_lines(group: pd.Series) -> list[str]:
    """The evidence of the group's status as `key = value` lines."""
    text = group.get("evidence_json")
    if not isinstance(text, str) or not text:
        return []
    parsed = json.loads(text)
    return [f"{k} = {json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in parsed.items()]


def group_changes(changes: pd.DataFrame, cluster: str, group: str, limit: int = 200) -> pd.DataFrame:
    """The change-log rows of one group (created, state, protocol, members joining and leaving), newest first."""
    columns = ["at", "change", "subject", "before", "after"]
    if changes.empty:
        return pd.DataFrame(columns=columns)
    mine = changes[(changes["cluster_name"] == cluster) & (changes["entity"] == "group")]
    mine = mine[(mine["subject"] == group) | mine["subject"].str.startswith(f"{group}: ")]
    if mine.empty:
        return pd.DataFrame(columns=columns)
    mine = mine.sort_values("seen_at", ascending=False).head(limit)

    def side(text: object, kind: str) -> str:
        if not isinstance(text, str) or not text:
            return ""
        row = json.loads(text)
        if kind.startswith("member"):
            return display(f"{row.get('client_id', '')} @ {row.get('client_host', '')}", 80) if "client_id" in row \
                else f"{row.get('members', '')} members"
        return ", ".join(f"{k}={row[k]}" for k in ("group_type", "state", "protocol", "members") if k in row)

    return pd.DataFrame({"at": mine["seen_at"].to_numpy(), "change": mine["kind"].str.replace("_", " ").to_numpy(),
                         "subject": [display(s, 80) for s in mine["subject"]],
                         "before": [side(t, k) for t, k in zip(mine["before_json"], mine["kind"], strict=True)],
                         "after": [side(t, k) for t, k in zip(mine["after_json"], mine["kind"], strict=True)]},
                        columns=columns).reset_index(drop=True)


def group_incidents(board: pd.DataFrame, cluster: str, group: str) -> pd.DataFrame:
    """The incident-board rows (backend.views.incident_views.alert_board) of one group."""
    if board.empty:
        return board
    return board[(board["cluster"] == cluster) & (board["subject"] == f"group {group}")].reset_index(drop=True)


def member_configs(group_configs: pd.DataFrame, group_drift: pd.DataFrame, group: str) -> tuple[pd.DataFrame,
                                                                                                  pd.DataFrame]:
    """The members' KIP-1324 configs of a group (results/group_configs: instances per value of the keys that shape
    a group) and the keys its members disagree on (results/group_drift, the Spark job's)."""
    configs = group_configs[group_configs["group_id"] == group] if not group_configs.empty else group_configs
    drift = group_drift[group_drift["group_id"] == group] if not group_drift.empty else group_drift
    configs = configs[[c for c in ("key", "value", "instances") if c in configs]].sort_values(["key", "value"])
    drift = drift[[c for c in ("key", "members", "distinct_values", "value_counts_json") if c in drift]]
    return configs.reset_index(drop=True), drift.reset_index(drop=True)


def export_frame(groups: pd.DataFrame, offsets: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """Groups and their lag for CSV: one row per group and partition (a group without partitions: one row)."""
    columns = ["cluster", "group_id", "group_type", "state", "status", "protocol", "members", "group_lag",
               "uncommitted_records", "topic", "partition", "offset_kind", "committed_offset", "end_offset", "lag",
               "member_id", "group_instance_id", "client_id", "host", "collected_at"]
    if groups.empty:
        return pd.DataFrame(columns=columns)
    key = ["cluster_name", "group_id"]
    part_cols = [*key, "topic", "partition", "offset_kind", "committed_offset", "end_offset", "lag", "member_id"]
    parts = offsets.assign(offset_kind=_column(offsets, "offset_kind"))[part_cols] if not offsets.empty \
        else pd.DataFrame(columns=part_cols)
    who = members[[*key, "member_id", "instance_id", "client_id", "client_host"]] if not members.empty else \
        pd.DataFrame(columns=[*key, "member_id", "instance_id", "client_id", "client_host"])
    head = groups.assign(uncommitted_records=_column(groups, "uncommitted_records"))
    merged = head[[*key, "group_type", "state", "status", "protocol", "members", "lag", "uncommitted_records",
                   "collected_at"]].rename(columns={"lag": "group_lag"}).merge(parts, on=key, how="left").merge(
        who, on=[*key, "member_id"], how="left")
    merged = merged.rename(columns={"cluster_name": "cluster", "client_host": "host",
                                    "instance_id": "group_instance_id"})
    merged["offset_kind"] = merged["offset_kind"].where(merged["topic"].isna(), merged["offset_kind"].fillna("committed"))
    for col in ("group_lag", "uncommitted_records", "partition", "committed_offset", "end_offset", "lag"):
        merged[col] = merged[col].astype("Int64")
    return merged[columns].sort_values(["cluster", "group_id", "topic", "partition"]).reset_index(drop=True)


def report_summary(groups: pd.DataFrame, clusters: list[str]) -> pd.DataFrame:
    """The drift report's groups section: per cluster, groups by type and status, total lag, worst group."""
    rows = []
    for cluster in clusters:
        mine = groups[groups["cluster_name"] == cluster]
        worst = worst_first(mine).head(1)
        rows.append({
            "cluster": cluster, "groups": len(mine),
            **{t: int((mine["group_type"] == t).sum()) for t in ("classic", "consumer", "share", "streams")},
            **{s: int((mine["status"] == s).sum()) for s in PROBLEMS},
            "total_lag": int(mine["lag"].fillna(0).sum()),  # groups whose lag is known
            "worst_group": display(worst["group_id"].iloc[0], 60) if not worst.empty else "",
        })
    return pd.DataFrame(rows)


def last_read_text(runs: pd.DataFrame, cluster: str, now: datetime) -> str | None:
    """When the cluster's groups were last read and what that read saw (None: never read)."""
    mine = runs[runs["cluster_name"] == cluster]
    if mine.empty:
        return None
    row = mine.iloc[0]
    text = (f"Groups read {fleet_views.age_text(row['collected_at'], now)} ago: {int(row['groups_read']):,} of "
            f"{int(row['groups_listed']):,} listed, {int(row['brokers_answered'])} brokers answered, "
            f"{row['duration_ms']:.0f} ms")
    return text + (f"; {int(row['groups_skipped']):,} not read (over max_groups_per_cluster)"
                   if row["groups_skipped"] else "")
