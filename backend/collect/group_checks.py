"""Consumer-group rules over the last read of a cluster's groups (`snapshot.groups`), as fleet alerts.

Pure functions of one cluster snapshot: a group's Burrow-style status (backend.collect.group_status) is one
incident per group and status; the others are one incident per group (or per cluster for the KIP-848
candidates). Clusters whose groups were never read raise nothing here. The rules run every poll on the last read
(reusing the last evaluation while the read and the topic list are the same objects), so a standing condition
stays one open incident between reads.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from backend.store.group_model import GroupSnapshot, GroupState
from backend.store.model import Alert, ClusterSnapshot

BURROW_URL = "https://github.com/linkedin/Burrow/wiki/Consumer-Lag-Evaluation-Rules"
KIP848_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-848%3A+The+Next+Generation+of+the+Consumer+Rebalance+Protocol"
KIP516_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-516%3A+Topic+Identifiers"
GROUPS_URL = "https://kafka.apache.org/documentation/#consumerconfigs_group.id"
OFFSETS_URL = "https://kafka.apache.org/documentation/#consumerconfigs_auto.offset.reset"
KIP1324_URL = "https://cwiki.apache.org/confluence/display/KAFKA/KIP-1324"
SAMPLE = 20
FACT_PROVENANCES = frozenset({"reported", "zookeeper"})
# Kafka's assignor classes and librdkafka's names -> the protocol name a classic group reports.
ASSIGNOR_NAMES = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.stickyassignor": "sticky",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
}


@dataclass(frozen=True)
class GroupRule:
    """One rule of the catalog."""

    id: str
    severity: str
    title: str
    doc_url: str
    when: str
    rationale: str


RULES: tuple[GroupRule, ...] = (
    GroupRule("group_lagging", "warning", "Consumer group falling behind", BURROW_URL,
              "the group's lag stayed above zero for 3 or more reads of its window and grew across them without "
              "ever falling (Burrow's WARN)",
              "The consumers commit, but the producers write faster than they read: the lag grows and records wait "
              "longer and longer. A fixed lag threshold would miss a small, steadily growing lag and cry wolf at a "
              "large, shrinking one."),
    GroupRule("group_stalled", "critical", "Consumer group stalled", BURROW_URL,
              "the group has members, and a partition's lag stayed above zero while its committed offset did not "
              "move over the whole window (Burrow's STALL)",
              "The consumers are in the group but make no progress on these partitions: a poison record, a hung "
              "thread, or a partition no member actually reads. The lag only grows until someone acts."),
    GroupRule("group_stopped", "critical", "Consumer group stopped committing", BURROW_URL,
              "the group has members and lag, and none of its committed offsets moved for group_stopped_after_s "
              "(default 1 hour; Burrow's STOP)",
              "The members still hold the partitions (static members, a long session timeout, or a process that "
              "heartbeats without consuming) but nothing is committed: no other consumer can take over."),
    GroupRule("group_empty_with_lag", "warning", "Consumer group empty with lag", GROUPS_URL,
              "the group has no members and its committed offsets are behind the end of the log",
              "Nobody consumes these records. After a deploy or a crash this is the window in which data waits; a "
              "group left empty for good keeps its offsets until offsets.retention.minutes and then restarts from "
              "auto.offset.reset, skipping or repeating data."),
    GroupRule("group_offset_ahead", "critical", "Committed offset past the end of the log", OFFSETS_URL,
              "a group's committed offset on a partition is past the end of that partition's log (kafka-consumer-groups.sh "
              "shows a negative LAG)",
              "The log the offset points into is gone: it was truncated (an unclean leader election, a replica that "
              "lost data) or the topic was deleted and recreated. The consumer resets by auto.offset.reset and "
              "skips or re-reads records; the lag it shows until then is meaningless, never zero."),
    GroupRule("group_mixed_members", "warning", "Members of one group are not alike", GROUPS_URL,
              "the members of a group use client ids of different families (digits and ids stripped: two "
              "applications sharing one group.id), different member protocols (classic and consumer in one KIP-848 "
              "group), different subscriptions, or, in their KIP-1324 configs, different assignors",
              "Two applications that share a group.id take partitions from each other, so each sees part of the "
              "data; members with different subscriptions or assignors make the assignment uneven or fail to "
              "rebalance (INCONSISTENT_GROUP_PROTOCOL)."),
    GroupRule("group_classic_on_4x", "info", "Classic groups on a Kafka 4.x cluster (KIP-848 candidates)", KIP848_URL,
              "a cluster whose brokers run Kafka 4.0 or later has consumer groups on the classic protocol",
              "Kafka 4.0 made the consumer rebalance protocol of KIP-848 generally available: rebalances no longer "
              "stop the whole group, and the broker assigns partitions. Java clients switch with "
              "group.protocol=consumer (librdkafka 2.10+ likewise); this lists the groups still to migrate."),
    GroupRule("group_offsets_on_missing_topic", "warning", "Group commits to a topic that is gone or recreated",
              KIP516_URL,
              "a group holds committed offsets for a topic that no longer exists, or for a topic recreated (new topic "
              "id, see topic_recreated) since those offsets were committed",
              "Offsets of a deleted topic are dead weight; offsets of a recreated topic point into the old log: the "
              "consumer resumes at an offset that may be past the new log's end (it then resets and skips or "
              "repeats data) or silently skips the new records below it."),
    GroupRule("group_config_mismatch", "warning", "Members' KIP-1324 configs disagree with their group",
              KIP1324_URL,
              "a member's pushed configuration (KIP-1324, same group.id) asks for another group protocol "
              "(group.protocol) than the group runs, lists assignors (partition.assignment.strategy) without the one "
              "the classic group uses, or names another server assignor (group.remote.assignor) than the KIP-848 "
              "group's",
              "The configuration the team believes it runs is not what the broker sees: a group.protocol=consumer "
              "rollout that did not take effect, or an assignor change that never reached the group."),
)
RULES_BY_ID = {r.id: r for r in RULES}
STATUS_RULES = {"lagging": "group_lagging", "stalled": "group_stalled", "stopped": "group_stopped",
                "empty_with_lag": "group_empty_with_lag", "offset_ahead": "group_offset_ahead"}

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"(?=[0-9a-f]*\d)[0-9a-f]{6,}")
_DIGITS = re.compile(r"\d+")


def client_family(client_id: str) -> str:
    """A client id with what differs per instance removed: UUIDs, long hex runs, digits ("consumer-g-3" -> "consumer-g-#")."""
    text = _UUID.sub("<id>", client_id.lower())
    text = _HEX.sub("<id>", text)
    return _DIGITS.sub("#", text)


def _alert(rule_id: str, snapshot: ClusterSnapshot, subject: str, evidence: dict[str, object], explanation: str) -> Alert:
    rule = RULES_BY_ID[rule_id]
    return Alert(rule=rule.id, severity=rule.severity, cluster_name=snapshot.cluster_name, subject=subject,
                 evidence=evidence, explanation=explanation, doc_url=rule.doc_url)


def subject(group_id: str) -> str:
    """The incident subject of a group."""
    return f"group {group_id}"


def status_alerts(snapshot: ClusterSnapshot, groups: GroupSnapshot) -> list[Alert]:
    """One alert per group whose status is lagging, stalled, stopped, empty with lag or offset ahead."""
    out = []
    texts = {"lagging": "the records waiting grew over the last {n} reads to {lag:,}",
             "stalled": "{parts} partition(s) kept their lag and their committed offsets over the whole window",
             "stopped": "nothing was committed for {age} s while {lag:,} records wait",
             "empty_with_lag": "it has no members while {lag:,} records wait",
             "offset_ahead": "{ahead} partition(s) have a committed offset past the end of the log"}
    for gid in sorted(groups.groups):
        g = groups.groups[gid]
        rule_id = STATUS_RULES.get(g.status)
        if rule_id is None:
            continue
        ev = g.evidence
        text = texts[g.status].format(n=len(ev.get("lag_over_window") or ()), lag=g.waiting or 0,
                                      parts=ev.get("stalled_partitions", 0), age=ev.get("no_commit_for_s", "?"),
                                      ahead=ev.get("partitions_ahead", 0))
        evidence = {"group_id": gid, "status": g.status, "lag": g.lag, "members": g.members, "state": g.state,
                    "group_type": g.group_type, **{k: v for k, v in ev.items() if k not in ("lag", "members")}}
        out.append(_alert(rule_id, snapshot, subject(gid), evidence,
                          f"Group {gid} ({g.group_type}, {g.state or 'state unknown'}) is {g.status.replace('_', ' ')}: "
                          f"{text}."))
    return out


def mixed_members(snapshot: ClusterSnapshot, groups: GroupSnapshot) -> list[Alert]:
    """Members of one group with client ids of different families, protocols, subscriptions or (KIP-1324) assignors."""
    out = []
    for gid in sorted(set(groups.members) | (set(groups.client_configs) & set(groups.groups))):
        members = groups.members.get(gid, ())
        reasons: dict[str, object] = {}
        if len(members) >= 2:
            families = Counter(client_family(m.client_id) for m in members)
            if len(families) > 1:
                reasons["client_id_families"] = dict(families.most_common(SAMPLE))
                reasons["client_ids"] = sorted({m.client_id for m in members})[:SAMPLE]
            types = Counter(m.member_type for m in members if m.member_type)
            if len(types) > 1:
                reasons["member_protocols"] = dict(types)
            subscriptions = Counter((*sorted(m.subscribed), *([f"regex {m.subscribed_regex}"] if m.subscribed_regex
                                                                else []))
                                    for m in members if m.subscribed or m.subscribed_regex)
            if len(subscriptions) > 1:
                reasons["subscriptions"] = {", ".join(s) or "(none)": n for s, n in subscriptions.most_common(5)}
        configs = groups.client_configs.get(gid, {})
        for key in ("partition.assignment.strategy", "group.remote.assignor"):
            values = configs.get(key, {})
            if len(values) > 1:
                reasons[f"configured {key}"] = dict(sorted(values.items()))
        if reasons:
            out.append(_alert("group_mixed_members", snapshot, subject(gid), {"group_id": gid, **reasons},
                              f"Members of group {gid} are not alike: {', '.join(k.replace('_', ' ') for k in reasons)}."))
    return out


def _major(version: str | None) -> int | None:
    try:
        return int(str(version).split(".")[0]) if version else None
    except ValueError:
        return None


def cluster_major(snapshot: ClusterSnapshot) -> int | None:
    """The lowest major version the cluster's reachable brokers run (reported facts, else the low end of a guess)."""
    majors = []
    for b in snapshot.brokers:
        if not b.reachable:
            continue
        version = b.software_version if b.version_provenance in FACT_PROVENANCES else b.version_min
        major = _major(version)
        if major is not None:
            majors.append(major)
    return min(majors) if majors else None


def classic_on_4x(snapshot: ClusterSnapshot, groups: GroupSnapshot) -> list[Alert]:
    """Classic groups on a cluster whose brokers run Kafka 4.x: candidates for the KIP-848 consumer protocol."""
    major = cluster_major(snapshot)
    if major is None or major < 4:
        return []
    classic = sorted(g.group_id for g in groups.groups.values()
                     if g.group_type == "classic" and g.protocol_type in ("consumer", ""))
    if not classic:
        return []
    consumer = sum(1 for g in groups.groups.values() if g.group_type == "consumer")
    return [_alert("group_classic_on_4x", snapshot, "classic groups",
                   {"classic_groups": len(classic), "consumer_groups": consumer, "broker_major": major,
                    "sample": classic[:SAMPLE]},
                   f"{len(classic)} consumer group(s) still run the classic protocol on Kafka {major}.x brokers "
                   f"({consumer} already on the consumer protocol), e.g. {classic[0]}.")]


def offsets_on_missing_topic(snapshot: ClusterSnapshot, groups: GroupSnapshot) -> list[Alert]:
    """Committed offsets for a topic that no longer exists, or that was recreated since they were committed."""
    if not snapshot.topics:
        return []
    ids = {t.topic: t.topic_id for t in snapshot.topics}
    out = []
    for gid in sorted(groups.offsets):
        gone: set[str] = set()
        recreated: dict[str, dict[str, str | None]] = {}
        for p in groups.offsets[gid]:
            if p.committed is None:
                continue
            if p.topic not in ids:
                gone.add(p.topic)
            elif p.topic_id and ids[p.topic] and p.topic_id != ids[p.topic]:
                recreated[p.topic] = {"committed_against": p.topic_id, "topic_id_now": ids[p.topic]}
        if not gone and not recreated:
            continue
        parts = []
        if gone:
            parts.append(f"{len(gone)} deleted topic(s) ({', '.join(sorted(gone)[:3])})")
        if recreated:
            parts.append(f"{len(recreated)} recreated topic(s) ({', '.join(sorted(recreated)[:3])})")
        out.append(_alert("group_offsets_on_missing_topic", snapshot, subject(gid),
                          {"group_id": gid, "deleted_topics": sorted(gone)[:SAMPLE],
                           "recreated_topics": dict(sorted(recreated.items())[:SAMPLE])},
                          f"Group {gid} holds committed offsets for " + " and ".join(parts) + "."))
    return out


def _assignor_names(value: str) -> set[str]:
    names = set()
    for part in re.split(r"[,\s]+", value.strip().lower()):
        if part:
            names.add(ASSIGNOR_NAMES.get(part, part.rsplit(".", 1)[-1]))
    return names


def _mismatches(g: GroupState, configs: dict[str, dict[str, int]]) -> dict[str, object]:
    found: dict[str, object] = {}
    protocols = configs.get("group.protocol", {})
    if g.group_type in ("classic", "consumer"):
        other = {v: n for v, n in protocols.items() if v and v.strip().lower() != g.group_type}
        if other:
            found["group.protocol"] = {"group_runs": g.group_type, "members_configure": other}
    if g.group_type == "classic" and g.protocol and g.protocol_type == "consumer":
        strategies = configs.get("partition.assignment.strategy", {})
        missing = {v: n for v, n in strategies.items() if v and g.protocol.lower() not in _assignor_names(v)}
        if missing:
            found["partition.assignment.strategy"] = {"group_uses": g.protocol, "members_configure": missing}
    if g.group_type == "consumer" and g.protocol:
        remote = configs.get("group.remote.assignor", {})
        other = {v: n for v, n in remote.items() if v and v.strip().lower() != g.protocol.lower()}
        if other:
            found["group.remote.assignor"] = {"group_uses": g.protocol, "members_configure": other}
    return found


def config_mismatch(snapshot: ClusterSnapshot, groups: GroupSnapshot) -> list[Alert]:
    """Members whose KIP-1324 configs ask for another protocol or assignor than their group runs."""
    out = []
    for gid in sorted(groups.client_configs):
        g = groups.groups.get(gid)
        if g is None:
            continue
        found = _mismatches(g, groups.client_configs[gid])
        if found:
            out.append(_alert("group_config_mismatch", snapshot, subject(gid), {"group_id": gid, **found},
                              f"Members of group {gid} configure {', '.join(found)} differently from what the group "
                              "runs."))
    return out


CHECKS: tuple[Callable[[ClusterSnapshot, GroupSnapshot], list[Alert]], ...] = (
    status_alerts, mixed_members, classic_on_4x, offsets_on_missing_topic, config_mismatch,
)

# Per cluster: the inputs of the last evaluation (kept alive, compared by identity) and its alerts.
_MEMO: dict[str, tuple[tuple[object, ...], list[Alert]]] = {}
_MEMO_LOCK = threading.Lock()


def group_alerts(snapshot: ClusterSnapshot) -> list[Alert]:
    """Every group rule over one cluster; nothing when its groups have not been read."""
    groups = snapshot.groups
    if groups is None:
        return []
    refs = (groups, snapshot.topics)
    versions = cluster_major(snapshot)
    with _MEMO_LOCK:
        cached = _MEMO.get(snapshot.cluster_name)
    if cached is not None and all(a is b for a, b in zip(cached[0][:2], refs, strict=True)) and cached[0][2] == versions:
        return list(cached[1])
    alerts = [alert for check in CHECKS for alert in check(snapshot, groups)]
    with _MEMO_LOCK:
        _MEMO[snapshot.cluster_name] = ((*refs, versions), alerts)
    return list(alerts)
