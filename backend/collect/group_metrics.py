"""Consumer-group metric families for /metrics: lag is a time series, so it lives in Prometheus, not in the lake.

Per cluster: groups by type and state, groups by status, the total lag, and for the worst groups (problem statuses
first, then the largest lag; at most `group_metrics_max_groups`) their own lag, records on uncommitted partitions,
members and status series, and for at most `group_metrics_max_topics` (group, topic) pairs of those groups their lag
by topic. A lag that is not known (no committed offset with a known end, a share group whose coordinator told none,
a commit past the end of the log) has no series: never a 0. What is left out
is counted (`..._series_dropped`), so the cardinality stays bounded whatever the clients do. Group ids and topic
names are client-chosen: each label value is cut (with a hash, so two long ids never share a series) and
prometheus_client escapes it in the exposition format.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from backend.plain_text import visible
from backend.store.group_model import STATUSES
from backend.store.model import FleetPoll

PREFIX = "kafka_fleet"
MAX_LABEL_CHARS = 128
_RANK = {status: i for i, status in enumerate(("offset_ahead", "stalled", "stopped", "empty_with_lag", "lagging"))}


def group_label(value: object) -> str:
    """A label value: hidden characters made visible (backend.plain_text.visible, as every label of the endpoint), as
    is up to MAX_LABEL_CHARS, else a prefix, an ellipsis and 12 hex digits of the SHA-1 of the whole value."""
    raw = "" if value is None else str(value)
    text = visible(raw)
    if len(text) <= MAX_LABEL_CHARS:
        return text
    digest = hashlib.sha1(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[: MAX_LABEL_CHARS - 13]}…{digest}"


def group_families(poll: FleetPoll, *, max_groups: int = 500, max_topics: int = 2_000) -> Iterable[Metric]:
    """The group families of the latest poll (clusters whose groups were never read have none)."""

    def gauge(name: str, doc: str, labels: tuple[str, ...]) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=list(labels))

    by_type_state = gauge("groups", "Consumer groups by type (classic, consumer, share, streams) and state.",
                          ("cluster", "type", "state"))
    by_status = gauge("groups_by_status", "Consumer groups by Burrow-style status.", ("cluster", "status"))
    total = gauge("cluster_group_lag_records", "Records behind, summed over every group of the cluster.",
                  ("cluster",))
    lag = gauge("group_lag_records", "A group's lag (records behind the end of the log, positive partition lags "
                "summed), for the cluster's worst groups.", ("cluster", "group"))
    topic_lag = gauge("group_topic_lag_records", "A group's lag on one topic, for the worst groups' topics.",
                      ("cluster", "group", "topic"))
    uncommitted = gauge("group_uncommitted_records", "Records on partitions a group is assigned but has committed "
                        "nothing on (log end - log start), beside its lag, for the cluster's worst groups.",
                        ("cluster", "group"))
    members = gauge("group_members", "Members of a group, for the cluster's worst groups.", ("cluster", "group"))
    status = gauge("group_status", "1 for the group's status, for the cluster's worst groups.",
                   ("cluster", "group", "status"))
    dropped = gauge("group_series_dropped", "Groups and (group, topic) pairs left without their own series by "
                    "the cardinality limits.", ("cluster", "kind"))
    read_at = gauge("group_last_read_timestamp_seconds", "Unix time of the last read of the cluster's groups.",
                    ("cluster",))
    duration = gauge("group_read_duration_seconds", "How long the last read of the cluster's groups took.",
                     ("cluster",))
    for s in sorted(poll.clusters, key=lambda c: c.cluster_name):
        snap = s.groups
        if snap is None:
            continue
        name = group_label(s.cluster_name)
        read_at.add_metric([name], snap.collected_at.timestamp())
        duration.add_metric([name], snap.duration_ms / 1000.0)
        counts = Counter((g.group_type, g.state or "unknown") for g in snap.groups.values())
        for (group_type, state), n in sorted(counts.items()):
            by_type_state.add_metric([name, group_label(group_type), group_label(state)], n)
        statuses = Counter(g.status for g in snap.groups.values())
        for known in STATUSES:
            by_status.add_metric([name, known], statuses.get(known, 0))
        lags = [g.lag for g in snap.groups.values() if g.lag is not None]
        if lags:
            total.add_metric([name], sum(lags))
        ranked = sorted(snap.groups.values(),
                        key=lambda g: (_RANK.get(g.status, len(_RANK)), -(g.waiting or 0), g.group_id))
        shown = ranked[:max_groups]
        pairs = 0
        pairs_dropped = 0
        for g in shown:
            label = group_label(g.group_id)
            if g.lag is not None:
                lag.add_metric([name, label], float(g.lag))
            if g.uncommitted_records is not None:
                uncommitted.add_metric([name, label], float(g.uncommitted_records))
            members.add_metric([name, label], g.members)
            status.add_metric([name, label, g.status], 1.0)
            per_topic: dict[str, int] = {}
            for p in snap.offsets.get(g.group_id, ()):
                if p.lag is not None and p.lag >= 0:  # a commit past the end has no lag to add
                    per_topic[p.topic] = per_topic.get(p.topic, 0) + p.lag
            for topic in sorted(per_topic):
                if pairs >= max_topics:
                    pairs_dropped += 1
                    continue
                topic_lag.add_metric([name, label, group_label(topic)], float(per_topic[topic]))
                pairs += 1
        dropped.add_metric([name, "group"], len(ranked) - len(shown))
        dropped.add_metric([name, "group_topic"], pairs_dropped)
    return [by_type_state, by_status, total, lag, topic_lag, uncommitted, members, status, dropped, read_at, duration]

