"""Pure pandas views of the pipeline results: compare, client configs, drift and alerts."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations

import pandas as pd

from backend.configs import sensitive

SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
# Defence in depth: the lake holds no sensitive keys, but never show one if it slipped in (one policy).
is_sensitive_key = sensitive.is_sensitive_key


def drop_sensitive(frame: pd.DataFrame, column: str = "key") -> pd.DataFrame:
    """Remove rows whose key column names a sensitive config."""
    if frame.empty or column not in frame:
        return frame
    return frame[~frame[column].fillna("").map(is_sensitive_key)]


SAME_ID = "same cluster id"


def id_collisions(snapshots: pd.DataFrame, names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Cluster ids that two or more clusters report now (each name's newest id), with those names.

    KIP-78 ids should be unique; two configured clusters reporting one id are one cluster under two
    names or a copied ``meta.properties``. ``names`` limits the check to clusters still configured.
    """
    if snapshots.empty:
        return {}
    frame = snapshots[snapshots["cluster_id"].notna()]
    if "polled_at" in frame:
        frame = frame.sort_values("polled_at")
    newest = frame.groupby("cluster_name")["cluster_id"].last()
    if names is not None:
        newest = newest[newest.index.isin(set(names))]
    found: dict[str, list[str]] = {}
    for name, cid in newest.items():
        found.setdefault(str(cid), []).append(str(name))
    return {cid: sorted(ns) for cid, ns in found.items() if len(ns) > 1}


def id_to_name(snapshots: pd.DataFrame, names: Iterable[str] | None = None) -> dict[str, str]:
    """Map cluster id to cluster name from cluster snapshots (a down cluster has no id: older polls count).

    An id that several clusters report maps to 'a / b (same cluster id)': its client-config results
    cannot be attributed to one of them, so no single name is given silently.
    """
    frame = snapshots[snapshots["cluster_id"].notna()]
    if "polled_at" in frame:
        frame = frame.sort_values("polled_at")  # the newest name of an id wins
    mapping = dict(zip(frame["cluster_id"], frame["cluster_name"], strict=True))
    for cid, shared in id_collisions(snapshots, names).items():
        mapping[cid] = f"{' / '.join(shared)} ({SAME_ID})"
    return mapping


def name_clusters(frame: pd.DataFrame, names: dict[str, str], column: str = "cluster_id",
                  into: str = "cluster") -> pd.DataFrame:
    """Add a readable cluster column (name when known, else the id)."""
    out = frame.copy()
    out[into] = out[column].map(lambda cid: names.get(cid, cid)) if not out.empty else pd.Series(dtype="object")
    return out


def filter_results(frame: pd.DataFrame, *, clusters: list[str] | None = None,
                   client_types: list[str] | None = None, keys: list[str] | None = None) -> pd.DataFrame:
    """Keep rows of the chosen clusters (names), client types and keys; None or [] keeps all."""
    mask = pd.Series(True, index=frame.index)
    if clusters and "cluster" in frame:
        mask &= frame["cluster"].isin(clusters)
    if client_types and "client_type" in frame:
        mask &= frame["client_type"].isin(client_types)
    if keys and "key" in frame:
        mask &= frame["key"].isin(keys)
    return frame[mask]


def versions_side_by_side(version_matrix: pd.DataFrame, clusters: list[str]) -> pd.DataFrame:
    """Software versions (rows) × clusters (columns), holding broker counts."""
    frame = version_matrix[version_matrix["cluster"].isin(clusters)]
    if frame.empty:
        return pd.DataFrame(columns=["version", *clusters])
    table = frame.pivot_table(index="version", columns="cluster", values="brokers", aggfunc="sum", fill_value=0)
    return table.reindex(columns=clusters, fill_value=0).reset_index()


@dataclass(frozen=True)
class TopicOverlap:
    """Topic names shared between clusters, and names whose topic id differs."""

    table: pd.DataFrame
    shared: int
    same_name_different_id: int


def topic_overlap(topics: pd.DataFrame, clusters: list[str]) -> TopicOverlap:
    """Which topic names exist in which chosen clusters, and whether their ids match."""
    frame = topics[topics["cluster_name"].isin(clusters)]
    if frame.empty:
        return TopicOverlap(pd.DataFrame(columns=["topic", "clusters", "same_id", *clusters]), 0, 0)
    ids = frame.pivot_table(index="topic", columns="cluster_name", values="topic_id", aggfunc="first")
    ids = ids.reindex(columns=clusters)
    present = ids.notna().sum(axis=1)
    distinct = ids.nunique(axis=1)
    table = ids.fillna("—").reset_index()
    table.insert(1, "clusters", present.to_numpy())
    table.insert(2, "same_id", ((distinct == 1) & (present > 1)).to_numpy())
    table = table.sort_values(["clusters", "topic"], ascending=[False, True]).reset_index(drop=True)
    table.columns.name = None
    shared = int((present > 1).sum())
    return TopicOverlap(table, shared, int(((present > 1) & (distinct > 1)).sum()))


def drift_matrix(drift: pd.DataFrame, clusters: list[str] | None = None, top: int = 30) -> pd.DataFrame:
    """Keys (rows, most drifting first) × cluster pairs (columns) of TVD, from named drift_clusters."""
    frame = drift
    if clusters:
        frame = frame[frame["cluster_a_name"].isin(clusters) & frame["cluster_b_name"].isin(clusters)]
    if frame.empty:
        return pd.DataFrame(index=pd.Index([], dtype=object, name="key"))
    frame = frame.assign(
        pair=frame["cluster_a_name"] + " ↔ " + frame["cluster_b_name"],
        row=frame["key"] + frame["client_type"].map(lambda t: f" ({t})" if t else ""),
    )
    table = frame.pivot_table(index="row", columns="pair", values="tvd", aggfunc="max")
    order = table.max(axis=1).sort_values(ascending=False).index[:top]
    table = table.loc[order]
    table.index.name = "key"
    return table


IDENTITY_KEYS = frozenset({"client.id", "group.id", "group.instance.id", "transactional.id", "client.rack",
                           "bootstrap.servers", "application.id", "application.server"})
UNIQUE_RATIO = 0.9
UNIQUE_MIN_INSTANCES = 20


def identity_keys(drift_keys: pd.DataFrame, *, ratio: float = UNIQUE_RATIO,
                  min_instances: int = UNIQUE_MIN_INSTANCES) -> set[str]:
    """Identity/addressing keys plus keys nearly unique per instance (distinct/instances >= ratio) in any cluster."""
    found = set(IDENTITY_KEYS)
    if not drift_keys.empty:
        enough = drift_keys[drift_keys["instances"] >= min_instances]
        unique = enough[enough["distinct_values"] / enough["instances"] >= ratio]
        found |= set(unique["key"])
    return found


def drop_keys(frame: pd.DataFrame, keys: set[str], column: str = "key") -> pd.DataFrame:
    """Rows whose key is not in keys (drift rankings leave identity keys out by default)."""
    return frame if frame.empty else frame[~frame[column].isin(keys)]


def keys_by_drift(matrix: pd.DataFrame) -> list[str]:
    """Config keys of a drift matrix, most drifting first, without the client-type suffix."""
    if matrix.empty:
        return []
    return list(dict.fromkeys(matrix.index.str.replace(r" \(.*\)$", "", regex=True)))


def shares_side_by_side(distributions: pd.DataFrame, key: str, clusters: list[str], *,
                        with_spellings: bool = False) -> pd.DataFrame:
    """Values (rows) × clusters (columns) of one key, holding the share of client instances.

    With ``with_spellings`` a 'reported as' column lists the spellings normalised into each value.
    """
    frame = distributions[(distributions["key"] == key) & distributions["cluster"].isin(clusters)]
    if frame.empty:
        return pd.DataFrame(columns=["value", *clusters, *(["reported as"] if with_spellings else [])])
    counts = frame.pivot_table(index="value", columns="cluster", values="instance_count", aggfunc="sum", fill_value=0)
    shares = (counts / counts.sum()).reindex(columns=[c for c in clusters if c in counts.columns])
    shares.columns.name = None
    shares = shares.reset_index()
    if with_spellings:
        said = spellings(frame, key)
        shares["reported as"] = shares["value"].map(lambda v: said.get(str(v), ""))
    return shares


OTHER_VALUES = "other"
NULL_VALUE = "(null)"


def top_values(distributions: pd.DataFrame, key: str, *, n: int = 8) -> pd.DataFrame:
    """One key's rows with all but its n most common values folded into one 'other (k values)' row per cluster.

    Rank is by instances over every cluster shown, so each cluster's bar uses the same colours. Folded rows
    carry ``folded=True``; a key with at most n + 1 values is returned whole (folding one value hides it).
    """
    frame = distributions[distributions["key"] == key]
    if frame.empty:
        return frame.assign(folded=pd.Series(dtype=bool))
    label = frame["value"].fillna(NULL_VALUE)
    totals = frame.groupby(label)["instance_count"].sum()
    order = sorted(totals.items(), key=lambda kv: (-kv[1], str(kv[0])))
    if len(order) <= n + 1:
        return frame.assign(folded=False)
    keep = {v for v, _ in order[:n]}
    kept = frame[label.isin(keep)].assign(folded=False)
    rest = frame[~label.isin(keep)]
    by = [c for c in ("cluster_id", "cluster", "client_type", "key") if c in rest.columns]
    other = (rest.groupby(by, dropna=False)["instance_count"].sum().reset_index()
             .assign(value=f"{OTHER_VALUES} ({len(order) - n} values)", folded=True))
    return pd.concat([kept, other], ignore_index=True)


def spellings(distributions: pd.DataFrame, key: str) -> dict[str, str]:
    """Normalised value -> the spellings clients reported for it, where they differ ('-1, all' for acks=all)."""
    frame = distributions[distributions["key"] == key]
    if frame.empty or "raw_values" not in frame.columns:
        return {}
    found: dict[str, set[str]] = {}
    for value, raws in zip(frame["value"].fillna(NULL_VALUE), frame["raw_values"], strict=True):
        if raws is not None and not (isinstance(raws, float) and pd.isna(raws)):
            found.setdefault(str(value), set()).update(str(r) for r in raws)
    return {v: ", ".join(sorted(r)) for v, r in found.items() if r != {v}}


def agreement(distributions: pd.DataFrame, *, keys: int = 40) -> pd.DataFrame:
    """Per (cluster, key): the dominant value, its share of instances and the instances, least agreed keys first.

    Client types are summed. The keys are ordered by their lowest dominant share in any cluster, and only
    the first ``keys`` are kept: the overview shows where clients disagree before any per-key chart.
    """
    columns = ["cluster", "key", "dominant_value", "dominant_share", "instances", "values"]
    if distributions.empty:
        return pd.DataFrame(columns=columns)
    frame = distributions.assign(value=distributions["value"].fillna(NULL_VALUE))
    counts = frame.groupby(["cluster", "key", "value"])["instance_count"].sum().reset_index()
    counts = counts.sort_values(["cluster", "key", "instance_count", "value"], ascending=[True, True, False, True])
    per = counts.groupby(["cluster", "key"])
    table = per.head(1).rename(columns={"value": "dominant_value"}).set_index(["cluster", "key"])
    table["instances"] = per["instance_count"].sum()
    table["values"] = per["value"].nunique()
    table["dominant_share"] = table["instance_count"] / table["instances"]
    table = table.reset_index()
    worst = table.groupby("key")["dominant_share"].min().sort_values(kind="stable")
    order = sorted(worst.items(), key=lambda kv: (kv[1], kv[0]))[:keys]
    rank = {k: i for i, (k, _) in enumerate(order)}
    table = table[table["key"].isin(rank)]
    table = table.assign(_rank=table["key"].map(rank)).sort_values(["_rank", "cluster"])
    return table[columns].reset_index(drop=True)


def name_drift(drift: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """Add cluster_a_name / cluster_b_name to drift_clusters rows."""
    out = drift.copy()
    out["cluster_a_name"] = out["cluster_a"].map(lambda c: names.get(c, c))
    out["cluster_b_name"] = out["cluster_b"].map(lambda c: names.get(c, c))
    return out


def pairs(clusters: list[str]) -> list[tuple[str, str]]:
    """All unordered pairs of the chosen clusters."""
    return list(combinations(sorted(clusters), 2))


def categorical_keys(distributions: pd.DataFrame, numeric: pd.DataFrame) -> list[str]:
    """Keys that have a value distribution but no numeric summary."""
    numeric_keys = set(numeric["key"]) if not numeric.empty else set()
    return sorted(set(distributions["key"]) - numeric_keys)


@dataclass(frozen=True)
class IngestCounts:
    """Latest ingest counters shown on the client-config page."""

    records_read: int
    records_written: int
    quarantined: int
    sensitive_dropped: int
    dropped_keys: list[str]


def ingest_counts(stats: pd.DataFrame, *, since_start: bool = False) -> IngestCounts:
    """Sum the counters of the latest ingest run per source/location, or of every run when since_start."""
    if stats.empty:
        return IngestCounts(0, 0, 0, 0, [])
    if since_start:
        frame = stats
    else:
        latest = stats.sort_values("ran_at").groupby(["source", "location"])["run_id"].last()
        frame = stats[stats["run_id"].isin(set(latest))]
    total = frame.groupby("metric")["count"].sum()
    dropped = sorted(frame.loc[(frame["metric"] == "sensitive_dropped") & (frame["detail"] != ""), "detail"].unique())
    return IngestCounts(
        records_read=int(total.get("records_read", 0)), records_written=int(total.get("records_written", 0)),
        quarantined=int(total.get("quarantined", 0)), sensitive_dropped=int(total.get("sensitive_dropped", 0)),
        dropped_keys=list(dropped),
    )


ALERT_COLUMNS = ["raised_at", "severity", "source", "rule", "title", "cluster", "subject", "evidence",
                 "rationale", "doc_url", "poll_id", "status", "last_seen_at", "resolved_at", "latest_evidence"]


def _subject(row: pd.Series) -> str:
    for column, label in (("client_id", "client"), ("group_id", "group")):
        value = row.get(column)
        if isinstance(value, str) and value:
            return f"{label} {value}"
    return str(row.get("client_instance_id") or "")


def unified_alerts(fleet: pd.DataFrame, config: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """Fleet alerts and misconfiguration alerts in one table, most severe and newest first."""
    parts = []
    if not fleet.empty:
        parts.append(pd.DataFrame({
            "raised_at": fleet["raised_at"], "severity": fleet["severity"], "source": "fleet",
            "rule": fleet["rule"], "title": "", "cluster": fleet["cluster_name"],
            "subject": fleet["subject"].fillna(""),
            "evidence": fleet["evidence_json"].fillna(""), "rationale": fleet["explanation"].fillna(""),
            "doc_url": fleet["doc_url"], "poll_id": fleet["poll_id"],
            # Incidents (lake v2): open/resolved and when last seen; a v1 lake has per-poll alerts.
            "status": fleet["status"] if "status" in fleet else None,
            "last_seen_at": pd.to_datetime(fleet["last_seen_at"], utc=True) if "last_seen_at" in fleet else pd.NaT,
            "resolved_at": pd.to_datetime(fleet["resolved_at"], utc=True) if "resolved_at" in fleet else pd.NaT,
            "latest_evidence": (fleet["latest_evidence_json"].fillna(fleet["evidence_json"]).fillna("")
                                if "latest_evidence_json" in fleet else fleet["evidence_json"].fillna("")),
        }))
    if not config.empty:
        parts.append(pd.DataFrame({
            "raised_at": config["computed_at"], "severity": config["severity"], "source": "client config",
            "rule": config["rule_id"], "title": config["title"].fillna(""),
            "cluster": config["cluster_id"].map(lambda c: names.get(c, c)),
            "subject": config.apply(_subject, axis=1),
            "evidence": config["observed_json"].map(_redact_observed),
            "rationale": config["title"].fillna("") + ": " + config["explanation"].fillna(""),
            "doc_url": config["doc_url"], "poll_id": None, "status": "open",
            "last_seen_at": pd.to_datetime(config["computed_at"], utc=True), "resolved_at": pd.NaT,
            "latest_evidence": config["observed_json"].map(_redact_observed),
        }))
    if not parts:
        return pd.DataFrame(columns=ALERT_COLUMNS)
    frame = pd.concat(parts, ignore_index=True)
    # The poller writes UTC-aware times, Spark may write naive UTC ones: compare them as UTC.
    frame["raised_at"] = pd.to_datetime(frame["raised_at"], utc=True)
    frame["_rank"] = frame["severity"].map(SEVERITY_RANK).fillna(9)
    frame = frame.sort_values(["_rank", "raised_at"], ascending=[True, False]).drop(columns="_rank")
    return frame[ALERT_COLUMNS].reset_index(drop=True)


def _redact_observed(text: str | None) -> str:
    try:
        observed = json.loads(text or "{}")
    except ValueError:
        return ""
    if not isinstance(observed, dict):
        return ""
    return json.dumps({k: (sensitive.REDACTED if is_sensitive_key(k) or sensitive.credential_shape(v) else v)
                       for k, v in observed.items()})


# Fleet rules that report a change between two polls (an event) rather than a standing condition:
# the next poll does not repeat them, so the current view keeps them for EVENT_WINDOW.
EVENT_RULES = frozenset({"topic_recreated", "topic_created", "topic_deleted", "broker_upgraded",
                         "controller_changed", "broker_missing"})
EVENT_WINDOW = pd.Timedelta(hours=24)


def current_alerts(alerts: pd.DataFrame, latest_polls: dict[str, str], now: pd.Timestamp | None = None) -> pd.DataFrame:
    """Open fleet incidents (v1 lake: alerts of each cluster's latest poll), fleet events of the last 24 h, config alerts."""
    fleet = alerts["source"] == "fleet"
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    recent_event = alerts["rule"].isin(EVENT_RULES) & (pd.to_datetime(alerts["raised_at"], utc=True) >= now - EVENT_WINDOW)
    latest = alerts["cluster"].map(latest_polls)
    if "status" in alerts and alerts.loc[fleet, "status"].notna().any():
        # Incidents: the open ones, plus events (one-off incidents) of each cluster's latest poll.
        standing = (alerts["status"] == "open") & ~alerts["rule"].isin(EVENT_RULES)
        return alerts[~fleet | standing | (alerts["poll_id"] == latest) | recent_event]
    return alerts[~fleet | (alerts["poll_id"] == latest) | recent_event]


def filter_alerts(alerts: pd.DataFrame, *, severities: list[str] | None = None, clusters: list[str] | None = None,
                  sources: list[str] | None = None, text: str = "") -> pd.DataFrame:
    """Keep alerts matching the chosen severities, clusters, sources and free text."""
    mask = pd.Series(True, index=alerts.index)
    if severities:
        mask &= alerts["severity"].isin(severities)
    if clusters:
        mask &= alerts["cluster"].isin(clusters)
    if sources:
        mask &= alerts["source"].isin(sources)
    if text:
        needle = text.lower()
        mask &= (alerts["rule"].str.lower().str.contains(needle, regex=False)
                 | alerts["subject"].str.lower().str.contains(needle, regex=False))
    return alerts[mask]


def alerts_over_time(alerts: pd.DataFrame, freq: str = "h") -> pd.DataFrame:
    """Alert counts per time bucket and severity."""
    if alerts.empty:
        return pd.DataFrame(columns=["bucket", "severity", "alerts"])
    bucket = pd.to_datetime(alerts["raised_at"], utc=True).dt.floor(freq)
    frame = alerts.assign(bucket=bucket).groupby(["bucket", "severity"]).size().reset_index(name="alerts")
    return frame
