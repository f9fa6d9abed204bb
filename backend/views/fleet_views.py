"""Pure pandas views of the snapshot tables: fleet rows, versions, topics, recent changes."""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from backend.kafka.versions import api_name
from backend.store.readers import NO_DATA_STATUSES

TAG_KEYS = ("env", "region", "team")
STATUS_ORDER = ("ok", "degraded", "down", "auth_failed", "misrouted")


def parse_tags(tags_json: str | None) -> dict[str, str]:
    """Decode a tags_json cell; bad or empty JSON gives {}."""
    if not tags_json:
        return {}
    try:
        tags = json.loads(tags_json)
    except (TypeError, ValueError):
        return {}
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}


def latest_clusters(clusters: pd.DataFrame) -> pd.DataFrame:
    """The latest snapshot row of each cluster, with one column per tag key."""
    if clusters.empty:
        out = clusters.copy()
        for key in TAG_KEYS:
            out[key] = pd.Series(dtype="object")
        return out
    latest = clusters.sort_values("polled_at").groupby("cluster_name").tail(1).copy()
    tags = latest["tags_json"].map(parse_tags)
    for key in TAG_KEYS:
        latest[key] = tags.map(lambda t, k=key: t.get(k, ""))
    return latest.sort_values("cluster_name").reset_index(drop=True)


def tag_options(latest: pd.DataFrame) -> dict[str, list[str]]:
    """Distinct non-empty values of each tag key, for the sidebar filters."""
    return {k: sorted(v for v in latest[k].dropna().unique() if v) for k in TAG_KEYS if k in latest}


def filter_by_tags(latest: pd.DataFrame, chosen: dict[str, list[str]]) -> pd.DataFrame:
    """Keep clusters whose tags match every non-empty selection."""
    mask = pd.Series(True, index=latest.index)
    for key, values in chosen.items():
        if values and key in latest:
            mask &= latest[key].isin(values)
    return latest[mask]


def version_label(row: pd.Series) -> str:
    """One broker's version with its provenance: '3.9.1', '3.9.2 (zookeeper)', '3.7–3.9 (guessed)'."""
    provenance = row.get("version_provenance") or "unknown"
    version = row.get("software_version")
    if provenance == "guessed":
        low, high = (_text(row.get("version_min")) or None), (_text(row.get("version_max")) or None)
        if low and not high:
            span = f"≥ {low}"  # the table ends before what this broker advertises
        else:
            span = f"{low}–{high}" if low and high and low != high else (low or high or "?")
        return f"{span} (guessed)"
    if provenance == "unknown" or not version:
        return "unknown"
    return version if provenance == "reported" else f"{version} ({provenance})"


# KIP-885 proposes that Apache Kafka brokers report the name "Kafka"; the fingerprint guesses say
# "Apache Kafka". One product shows under one name.
DISPLAY_NAMES = {"Kafka": "Apache Kafka", "kafka": "Apache Kafka", "Apache Kafka": "Apache Kafka"}


def software_label(row: pd.Series) -> str:
    """Software name and version of one broker, e.g. 'Apache Kafka 3.9.1'."""
    label = version_label(row)
    name = _text(row.get("software_name"))
    name = DISPLAY_NAMES.get(name, name)
    return f"{name} {label}" if name and label != "unknown" else label


def summarize_versions(brokers: pd.DataFrame) -> str:
    """'Apache Kafka 3.9.1 ×3', or 'mixed: a ×2, b ×1' for a cluster's brokers."""
    if brokers.empty:
        return "no brokers"
    counts = brokers.apply(software_label, axis=1).value_counts()
    parts = [f"{label} ×{n}" for label, n in sorted(counts.items())]
    return parts[0] if len(parts) == 1 else "mixed: " + ", ".join(parts)


def condensed_versions(brokers: pd.DataFrame) -> str:
    """Versions in a few characters: 'Apache Kafka 4.3.1 ×3', 'Apache Kafka 4.2.0 ×1, 4.3.1 ×2' (name said once)."""
    if brokers.empty:
        return "no brokers"
    pairs = pd.DataFrame({"name": [DISPLAY_NAMES.get(n, n) for n in brokers["software_name"].map(_text).fillna("")],
                          "version": brokers.apply(version_label, axis=1)})
    by_name: dict[str, list[tuple[str, int]]] = {}
    for (name, version), n in sorted(pairs.value_counts().items()):
        by_name.setdefault(str(name), []).append((str(version), int(n)))
    parts = []
    for name, versions in by_name.items():
        listed = ", ".join(f"{v} ×{n}" for v, n in sorted(versions, key=lambda vn: _version_sort_key(vn[0])))
        parts.append(f"{name} {listed}".strip())
    return "; ".join(parts)


def short_error(error: object, limit: int = 80) -> str:
    """The first line of an error, cut at `limit` characters (the cluster page shows it whole)."""
    if error is None or (isinstance(error, float) and math.isnan(error)) or error is pd.NA:
        return ""
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def summarize_provenance(brokers: pd.DataFrame) -> str:
    """Provenances of a cluster's broker versions, e.g. 'reported ×2, guessed ×1'."""
    if brokers.empty:
        return ""
    counts = brokers["version_provenance"].fillna("unknown").value_counts()
    return ", ".join(f"{p} ×{n}" for p, n in sorted(counts.items()))


def age_text(polled_at: pd.Timestamp | datetime | None, now: datetime) -> str:
    """Human age of a poll time: '45 s', '12 min', '3 h', '2 d'."""
    if polled_at is None or pd.isna(polled_at):
        return "never"
    seconds = max(0.0, (now - pd.Timestamp(polled_at).to_pydatetime()).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{math.floor(seconds / size)} {unit}"
    return f"{int(seconds)} s"


def duration_text(seconds: float) -> str:
    """A duration as people say it: '6 s', '2 min', '1 min 30 s', '1 h 30 min', '3 d' (at most two units)."""
    left = max(0, round(float(seconds)))
    units = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
    for i, (unit, size) in enumerate(units):
        if left >= size or size == 1:
            whole, rest = divmod(left, size)
            text = f"{whole} {unit}"
            if i + 1 < len(units) and rest // units[i + 1][1]:
                text += f" {rest // units[i + 1][1]} {units[i + 1][0]}"
            return text
    return "0 s"


def controller_text(controller_id: float | int | None) -> str:
    """Controller broker id as text, or '—' when unknown."""
    return "—" if controller_id is None or pd.isna(controller_id) else str(int(controller_id))


def _count(value: object) -> int:
    """A count column's value as int; missing (None or NaN, e.g. a down cluster) is 0."""
    return 0 if value is None or pd.isna(value) else int(value)  # type: ignore[call-overload]


def _text(value: object) -> str:
    """A text column's value; missing (None or NaN) is ''."""
    return "" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def fleet_table(latest: pd.DataFrame, brokers: pd.DataFrame, now: datetime | None = None) -> pd.DataFrame:
    """One display row per cluster: status, ids, versions with provenance, topics, URPs, poll age."""
    now = now or datetime.now(UTC)
    columns = ["cluster", "env", "region", "team", "cluster_id", "status", "error", "controller",
               "brokers", "software", "versions", "provenance", "topics", "under_replicated", "last_poll", "problem"]
    rows = []
    for _, c in latest.iterrows():
        mine = brokers[brokers["cluster_name"] == c["cluster_name"]] if not brokers.empty else brokers
        rows.append({
            "cluster": c["cluster_name"], "env": c.get("env", ""), "region": c.get("region", ""),
            "team": c.get("team", ""), "cluster_id": _text(c["cluster_id"]),
            "status": c["status"], "error": _text(c["error"]), "problem": short_error(c["error"]),
            "controller": controller_text(c["controller_id"]),
            "brokers": "—" if pd.isna(c["broker_count"]) else f"{_count(c['brokers_reachable'])}/{_count(c['broker_count'])}",
            "software": summarize_versions(mine), "versions": condensed_versions(mine),
            "provenance": summarize_provenance(mine),
            "topics": _count(c["topic_count"]), "under_replicated": _count(c["under_replicated"]),
            "last_poll": age_text(c["polled_at"], now),
        })
    return pd.DataFrame(rows, columns=columns)


def cluster_problems(table: pd.DataFrame, limit: int = 200) -> list[tuple[str, str]]:
    """(cluster, first line of its error) for each Fleet row with an error, so the error is readable in full."""
    if table.empty:
        return []
    rows = table[table["error"].fillna("").astype(str).str.strip() != ""]
    return [(str(c), short_error(e, limit)) for c, e in zip(rows["cluster"], rows["error"], strict=True)]


@dataclass(frozen=True)
class FleetTiles:
    """Headline numbers of the fleet page."""

    clusters_by_status: dict[str, int]
    brokers: int
    brokers_reachable: int
    topics: int
    alerts_by_severity: dict[str, int]


def fleet_tiles(latest: pd.DataFrame, alerts: pd.DataFrame) -> FleetTiles:
    """Count clusters by status, brokers, topics and alerts by severity."""
    by_status = latest["status"].value_counts().to_dict() if not latest.empty else {}
    by_sev = alerts["severity"].value_counts().to_dict() if not alerts.empty else {}
    return FleetTiles(
        clusters_by_status={s: int(by_status.get(s, 0)) for s in STATUS_ORDER if by_status.get(s)},
        brokers=int(latest["broker_count"].fillna(0).sum()) if not latest.empty else 0,
        brokers_reachable=int(latest["brokers_reachable"].fillna(0).sum()) if not latest.empty else 0,
        topics=int(latest["topic_count"].fillna(0).sum()) if not latest.empty else 0,
        alerts_by_severity={s: int(by_sev.get(s, 0)) for s in ("critical", "warning", "info")},
    )


def version_matrix(brokers: pd.DataFrame) -> pd.DataFrame:
    """Brokers per (cluster, software version label) for the version matrix chart."""
    if brokers.empty:
        return pd.DataFrame(columns=["cluster", "version", "brokers"])
    frame = pd.DataFrame({"cluster": brokers["cluster_name"],
                          "version": brokers.apply(software_label, axis=1)})
    return frame.groupby(["cluster", "version"]).size().reset_index(name="brokers")


def version_table(matrix: pd.DataFrame) -> pd.DataFrame:
    """The version matrix as one row per version: brokers in total and the clusters running it ('a ×2, b ×1')."""
    columns = ["version", "brokers", "clusters"]
    if matrix.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for version, part in matrix.groupby("version"):
        part = part.sort_values(["brokers", "cluster"], ascending=[False, True])
        rows.append({"version": str(version), "brokers": int(part["brokers"].sum()),
                     "clusters": ", ".join(f"{c} ×{n}" for c, n in zip(part["cluster"], part["brokers"], strict=True))})
    rows.sort(key=lambda row: _version_sort_key(str(row["version"])))
    return pd.DataFrame(rows, columns=columns)


def _version_sort_key(label: str) -> tuple[object, ...]:
    """Order 'Apache Kafka 3.9.1' before 'Apache Kafka 4.3.1' (numeric parts compared as numbers)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", label))


def recent_upgrades(timeline: pd.DataFrame, *, limit: int = 200) -> pd.DataFrame:
    """Broker version changes, newest first, at most `limit` rows."""
    return timeline.sort_values("changed_at", ascending=False).head(limit).reset_index(drop=True)


def upgrade_timeline(broker_history: pd.DataFrame) -> pd.DataFrame:
    """Each change of a broker's version label between consecutive polls."""
    columns = ["changed_at", "cluster", "broker_id", "from_version", "to_version"]
    if broker_history.empty:
        return pd.DataFrame(columns=columns)
    frame = broker_history.sort_values("polled_at").copy()
    frame["label"] = frame.apply(software_label, axis=1)
    frame["previous"] = frame.groupby(["cluster_name", "broker_id"])["label"].shift()
    changed = frame[frame["previous"].notna() & (frame["previous"] != frame["label"])]
    return pd.DataFrame({
        "changed_at": changed["polled_at"], "cluster": changed["cluster_name"],
        "broker_id": changed["broker_id"], "from_version": changed["previous"],
        "to_version": changed["label"],
    }, columns=columns).reset_index(drop=True)


def has_no_data(status: object) -> bool:
    """Whether a poll with this status read nothing (the pages then show what was last seen)."""
    return str(status) in NO_DATA_STATUSES


def api_versions_table(brokers: pd.DataFrame) -> pd.DataFrame:
    """Each broker's ApiVersions answer as rows (broker, api key, api, min, max); unparsable text kept as text."""
    rows: list[dict[str, object]] = []
    for _, broker in brokers.sort_values("broker_id").iterrows():
        text = broker.get("api_versions_json") or ""
        try:
            table = json.loads(text) if text else {}
        except ValueError:
            table = None
        if not isinstance(table, dict):
            rows.append({"broker_id": int(broker["broker_id"]), "api_key": None, "api": "unparsable answer",
                         "min_version": None, "max_version": None, "raw": str(text)[:2000]})
            continue
        for key, entry in table.items():
            lo, hi = (entry if isinstance(entry, list) and len(entry) == 2 else (None, None))
            api_key = int(key) if str(key).isdigit() else None
            rows.append({"broker_id": int(broker["broker_id"]), "api_key": api_key,
                         "api": api_name(api_key) if api_key is not None else str(key)[:200],
                         "min_version": _int_or_none(lo), "max_version": _int_or_none(hi),
                         "raw": "" if lo is not None else str(entry)[:2000]})
    frame = pd.DataFrame(rows, columns=["broker_id", "api_key", "api", "min_version", "max_version", "raw"])
    for column in ("api_key", "min_version", "max_version"):
        frame[column] = frame[column].astype("Int64")
    return frame


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def broker_table(brokers: pd.DataFrame) -> pd.DataFrame:
    """Brokers of one cluster for display, controller first."""
    columns = ["broker_id", "address", "rack", "controller", "reachable", "software", "version",
               "provenance", "probe_ms", "error"]
    if brokers.empty:
        return pd.DataFrame(columns=columns)
    frame = brokers.sort_values(["is_controller", "broker_id"], ascending=[False, True])
    return pd.DataFrame({
        "broker_id": frame["broker_id"].astype(int),
        "address": frame["host"].astype(str) + ":" + frame["port"].astype(str),
        "rack": frame["rack"].fillna(""), "controller": frame["is_controller"].fillna(False).astype(bool),
        "reachable": frame["reachable"].fillna(False).astype(bool),
        "software": frame["software_name"].fillna(""),
        "version": frame.apply(version_label, axis=1),
        "provenance": frame["version_provenance"].fillna("unknown"),
        "probe_ms": frame["probe_ms"], "error": frame["error"].fillna(""),
    }, columns=columns).reset_index(drop=True)


@dataclass(frozen=True)
class TopicPage:
    """One page of a filtered topic list."""

    rows: pd.DataFrame
    total: int
    page: int
    pages: int


TOPIC_COLUMNS = ["topic", "topic_id", "partitions", "replication_factor", "internal", "under_replicated"]


def filter_topics(topics: pd.DataFrame, *, query: str = "", include_internal: bool = True,
                  only_under_replicated: bool = False, matching: Any = None) -> pd.DataFrame:
    """The topics whose name holds `query` or whose topic id starts with it (case-insensitive), without internal
    ones unless asked, only under-replicated ones if asked; `matching`: the query's mask over `topics`, when the
    caller already has it (the API's lower-cased names)."""
    frame = topics
    needle = query.strip().lower()
    if needle:
        if matching is None:
            matching = (frame["topic"].str.lower().str.contains(needle, regex=False)
                        | frame["topic_id"].fillna("").str.lower().str.startswith(needle))
        frame = frame[matching]
    if not include_internal:
        frame = frame[~frame["internal"].fillna(False).astype(bool)]
    if only_under_replicated:
        frame = frame[frame["under_replicated"].fillna(0) > 0]
    return frame


def topic_page(topics: pd.DataFrame, *, query: str = "", include_internal: bool = True,
               only_under_replicated: bool = False, page: int = 1, page_size: int = 50) -> TopicPage:
    """Filter topics server-side and return only the requested page."""
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    frame = filter_topics(topics, query=query, include_internal=include_internal,
                          only_under_replicated=only_under_replicated)
    total = len(frame)
    pages = max(1, math.ceil(total / page_size))
    page = min(max(1, page), pages)
    chosen = frame.sort_values("topic").iloc[(page - 1) * page_size: page * page_size]
    return TopicPage(rows=chosen[TOPIC_COLUMNS].reset_index(drop=True), total=total, page=page, pages=pages)


def recent_changes(topic_history: pd.DataFrame, broker_history: pd.DataFrame,
                   cluster_history: pd.DataFrame, cluster: str) -> pd.DataFrame:
    """Topic creations, deletions and recreations, upgrades and controller moves of one cluster."""
    columns = ["at", "change", "subject", "before", "after"]
    rows: list[dict[str, object]] = []
    polls = cluster_history[cluster_history["cluster_name"] == cluster].sort_values("polled_at")
    poll_times = list(zip(polls["poll_id"], polls["polled_at"], strict=True))
    topics = topic_history[topic_history["cluster_name"] == cluster]
    by_poll = {pid: dict(zip(g["topic"], g["topic_id"], strict=True)) for pid, g in topics.groupby("poll_id")}
    down = set(polls.loc[polls["status"].isin(["down", "auth_failed", "misrouted"]), "poll_id"])
    usable = [(pid, at) for pid, at in poll_times if pid not in down]
    for (prev_id, _), (cur_id, at) in itertools.pairwise(usable):
        before, after = by_poll.get(prev_id, {}), by_poll.get(cur_id, {})
        for name in sorted(after.keys() - before.keys()):
            rows.append({"at": at, "change": "topic created", "subject": name, "before": "", "after": after[name]})
        for name in sorted(before.keys() - after.keys()):
            rows.append({"at": at, "change": "topic deleted", "subject": name, "before": before[name], "after": ""})
        for name in sorted(before.keys() & after.keys()):
            if before[name] and after[name] and before[name] != after[name]:
                rows.append({"at": at, "change": "topic recreated", "subject": name,
                             "before": before[name], "after": after[name]})
    for _, up in upgrade_timeline(broker_history[broker_history["cluster_name"] == cluster]).iterrows():
        rows.append({"at": up["changed_at"], "change": "broker upgraded", "subject": f"broker {up['broker_id']}",
                     "before": up["from_version"], "after": up["to_version"]})
    ctrl = polls[polls["controller_id"].notna()]
    for (_, a), (_, b) in itertools.pairwise(ctrl.iterrows()):
        if a["controller_id"] != b["controller_id"]:
            rows.append({"at": b["polled_at"], "change": "controller moved", "subject": "controller",
                         "before": str(int(a["controller_id"])), "after": str(int(b["controller_id"]))})
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values("at", ascending=False).reset_index(drop=True) if rows else frame


CHANGE_LABELS = {
    "topic_created": "topic created",
    "topic_deleted": "topic deleted",
    "topic_recreated": "topic recreated",
    "topic_partitions_changed": "partitions changed",
    "topic_rf_changed": "replication factor changed",
    "broker_version_changed": "broker upgraded",
    "broker_appeared": "broker appeared",
    "broker_gone": "broker gone",
    "broker_address_changed": "broker moved",
    "controller_changed": "controller moved",
    "cluster_id_changed": "cluster id changed",
    "zk_cluster_id_changed": "ZooKeeper cluster id changed",
    "config_set": "config set",
    "config_changed": "config changed",
    "config_removed": "config removed",
    "broker_configs_first_seen": "broker configs first read",
    "broker_configs_gone": "broker configs gone",
    # consumer groups (members joining and leaving are on the group's own page)
    "group_created": "group created",
    "group_deleted": "group deleted",
    "group_state_changed": "group state changed",
    "group_protocol_changed": "group protocol changed",
    "group_assignor_changed": "group assignor changed",
}
_GROUP_FIELD = {"group_state_changed": "state", "group_protocol_changed": "group_type",
                "group_assignor_changed": "protocol", "member_joined": "client_id", "member_left": "client_id"}
_CHANGE_FIELD = {"topic": "topic_id", "topic_partitions_changed": "partitions", "topic_rf_changed": "replication_factor",
                 "broker_address_changed": "host", "controller_changed": "controller_id", "cluster_id_changed":
                 "cluster_id", "zk_cluster_id_changed": "zk_cluster_id"}


def _side(text: object, kind: str, entity: str) -> str:
    if not isinstance(text, str) or not text:
        return ""
    row = json.loads(text)
    if entity == "config":
        if "name" not in row:
            return f"{row.get('configs', '')} configs" if "configs" in row else ""
        shown = f"(withheld: {row['withheld']})" if row.get("withheld") else str(row.get("value"))
        return f"{shown} [{row.get('source')}]"
    if entity == "group":
        if kind in _GROUP_FIELD:
            return str(row.get(_GROUP_FIELD[kind], ""))
        return ", ".join(str(row[k]) for k in ("group_type", "state") if row.get(k)) or f"{row.get('members', '')} members"
    if entity == "broker" and kind == "broker_version_changed":
        return software_label(pd.Series(row))
    field = _CHANGE_FIELD.get(kind) or _CHANGE_FIELD.get(entity, "")
    value = row.get(field) if field else None
    return "" if value is None else str(value)


def recent_changes_from_log(changes: pd.DataFrame, cluster: str, limit: int = 200) -> pd.DataFrame:
    """The recent_changes frame (at, change, subject, before, after) from the lake's change log."""
    columns = ["at", "change", "subject", "before", "after"]
    mine = changes[(changes["cluster_name"] == cluster) & changes["kind"].isin(CHANGE_LABELS)] if not changes.empty else changes
    if mine.empty:
        return pd.DataFrame(columns=columns)
    mine = mine.sort_values("seen_at", ascending=False).head(limit)
    subject = [f"broker {s}" if e == "broker" else ("controller" if k == "controller_changed" else s)
               for s, e, k in zip(mine["subject"], mine["entity"], mine["kind"], strict=True)]
    return pd.DataFrame({
        "at": mine["seen_at"].to_numpy(), "change": mine["kind"].map(CHANGE_LABELS).to_numpy(), "subject": subject,
        "before": [_side(t, k, e) for t, k, e in zip(mine["before_json"], mine["kind"], mine["entity"], strict=True)],
        "after": [_side(t, k, e) for t, k, e in zip(mine["after_json"], mine["kind"], mine["entity"], strict=True)],
    }, columns=columns).reset_index(drop=True)
