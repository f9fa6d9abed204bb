"""Consumer groups of a cluster, read at their own interval (read-only), judged Burrow-style, kept for the lake.

The poll asks for them when `settings.group_interval_s` has passed for a cluster, alongside the per-broker probe
and within the poll's deadline (backend.kafka.groups does the reading through the project's codec). What a read
could not get keeps its last known values: a group whose coordinator did not answer keeps its members and
offsets (its row says why), a broker that did not answer keeps its groups. Every string a client chose (group id,
client id, host, member id, assignor) is kept as plain text, capped in length; pages, CSV, the report and
/metrics labels escape it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from backend.collect.group_status import evaluate
from backend.collect.probing import cluster_resolver
from backend.collect.schedule import ClusterSchedule
from backend.config import ClusterConfig, Settings
from backend.configs.sensitive import safe_error_text
from backend.kafka import groups as kg
from backend.kafka import protocol as P
from backend.kafka.admin import NodeInfo
from backend.kafka.probe import ProbeSecurity
from backend.store.group_model import COMMITTED, SHARE_START, GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.tables import read_table, table_files

# Kafka strings are at most 32,767 bytes: every group id fits (a group id is a key, never cut).
MAX_GROUP_ID_CHARS = 32_767
MAX_TEXT_CHARS = 1_024  # client id, host, member id, instance id, rack, assignor, topic names in a subscription
API_NAMES = {P.API_LIST_GROUPS: "ListGroups", P.API_DESCRIBE_GROUPS: "DescribeGroups",
             P.API_CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe", P.API_SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
             P.API_OFFSET_FETCH: "OffsetFetch", P.API_LIST_OFFSETS: "ListOffsets",
             P.API_FIND_COORDINATOR: "FindCoordinator", P.API_METADATA: "Metadata",
             P.API_DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets"}


log = logging.getLogger(__name__)
CLIENT_CONFIGS_EVERY_S = 60.0
GroupConfigs = dict[str, dict[str, dict[str, int]]]  # group id -> key -> value -> instances
# group id -> (the reader's members, what they became, the committed offsets read, the partitions built from them).
# The reader's memo hands back the same objects for an unchanged answer (members of an unchanged describe batch,
# offsets equal to the last read's), so what was built from them is looked up by identity, not rebuilt every read.
ReadReuse = dict[str, tuple[tuple[kg.Member, ...] | None, tuple[GroupMember, ...],
                            dict[tuple[str, int], int] | None, tuple[PartitionLag, ...]]]


class ClientGroupConfigs:
    """What the members' KIP-1324 configs say per group (results/group_configs of the pipeline), read again when the
    results changed, at most once a minute; a lake without results gives nothing."""

    def __init__(self, lake: str) -> None:
        """Read the results of this lake."""
        self.lake = lake
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._stamp: tuple[str, ...] = ()
        self._by_cluster: dict[str, GroupConfigs] = {}

    def _files(self) -> tuple[str, ...]:
        # A switched results table names a new file at each switch (legacy directories: their file names).
        return tuple(table_files(self.lake, "results/group_configs"))

    def for_cluster(self, cluster_id: str | None) -> GroupConfigs:
        """The configs of one cluster id's groups (empty when unknown)."""
        if not cluster_id:
            return {}
        with self._lock:
            if time.monotonic() - self._read_at >= CLIENT_CONFIGS_EVERY_S:
                self._read_at = time.monotonic()
                try:
                    stamp = self._files()
                    if stamp != self._stamp:
                        self._by_cluster = self._load()
                        self._stamp = stamp
                except Exception as exc:  # noqa: BLE001 - a missing or broken result only silences one rule
                    log.warning("group configs of %s not readable: %s", self.lake, exc)
            return self._by_cluster.get(cluster_id, {})

    def _load(self) -> dict[str, GroupConfigs]:
        table = read_table(self.lake, "results/group_configs")
        out: dict[str, GroupConfigs] = {}
        cols = [table.column(c).to_pylist() for c in ("cluster_id", "group_id", "key", "value", "instances")]
        for cluster_id, group_id, key, value, n in zip(*cols, strict=True):
            per_key = out.setdefault(cluster_id, {}).setdefault(group_id, {}).setdefault(key, {})
            per_key[str(value)] = per_key.get(str(value), 0) + int(n)
        return out


def cap(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """A client-chosen string cut to `limit` characters (with a marker), None kept."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _member(m: kg.Member) -> GroupMember:
    return GroupMember(member_id=cap(m.member_id) or "", client_id=cap(m.client_id) or "",
                       client_host=cap(m.client_host) or "", instance_id=cap(m.instance_id), rack=cap(m.rack),
                       member_type=m.member_type, assignment=m.assignment,
                       subscribed=tuple(cap(t) or "" for t in m.subscribed[:1000]),
                       subscribed_regex=cap(m.subscribed_regex))


class GroupCollector(ClusterSchedule[GroupSnapshot]):
    """When each cluster's groups are due, and the last read of them (merged: unanswered parts kept)."""

    def __init__(self) -> None:
        """Start with nothing read: every cluster is due at its first poll."""
        super().__init__()
        self._memos: dict[str, kg.GroupsMemo] = {}
        self._reuse: dict[str, ReadReuse] = {}
        self.stats = {"reads": 0, "answers_decoded": 0, "answers_reused": 0}
        self.client_configs: ClientGroupConfigs | None = None  # set by run_poller for its lake

    def due(self, cluster_name: str, settings: Settings, now: float | None = None) -> bool:
        """Whether the cluster's groups should be read in this poll."""
        return self._is_due(cluster_name, settings.group_interval_s, now)

    def forget(self) -> None:
        """Drop every schedule, stored reading and memo."""
        super().forget()
        with self._lock:
            self._memos.clear()
            self._reuse.clear()

    def collect(self, cluster: ClusterConfig, settings: Settings, brokers: Sequence[NodeInfo],
                deadline: float, *, cluster_id: str | None = None, now: datetime | None = None) -> GroupSnapshot:
        """Read the cluster's groups now, merge with the last read, judge each group; remember and return it."""
        started = time.monotonic()
        with self._lock:
            previous = self._last.get(cluster.name)
            memo = self._memos.setdefault(cluster.name, kg.GroupsMemo())
            reuse = self._reuse.setdefault(cluster.name, {})
            self._next_due[cluster.name] = started + settings.group_interval_s
        read = kg.read_cluster_groups(
            [(b.broker_id, b.host, b.port) for b in brokers], security=ProbeSecurity.from_cluster(cluster),
            timeout_s=settings.request_timeout_s, deadline=deadline, max_groups=settings.max_groups_per_cluster,
            concurrency=settings.probe_concurrency, resolver=cluster_resolver(cluster.name), memo=memo)
        snapshot = build_snapshot(read, previous, settings, now or datetime.now(UTC), reuse)
        if self.client_configs is not None:
            configs = self.client_configs.for_cluster(cluster_id)
            snapshot.client_configs = {g: c for g, c in configs.items() if g in snapshot.groups}
        snapshot.duration_ms = (time.monotonic() - started) * 1000
        with self._lock:
            self._last[cluster.name] = snapshot
            self.stats["reads"] += 1
            self.stats["answers_decoded"] += read.decoded
            self.stats["answers_reused"] += read.reused
        return snapshot


def _coordinator_failed(read: kg.GroupsRead, coordinator: int | None) -> bool:
    return coordinator is not None and f"broker {coordinator}" in read.errors


def build_snapshot(read: kg.GroupsRead, previous: GroupSnapshot | None, settings: Settings,
                   now: datetime, reuse: ReadReuse | None = None) -> GroupSnapshot:
    """One cluster's GroupSnapshot from a read and the last one (pure: the clock is passed in).

    reuse: what the collector's last read built from the reader's objects (refreshed in place to this read's).
    """
    last_built = reuse if reuse is not None else {}
    fresh: ReadReuse = {}
    before = previous or GroupSnapshot(collected_at=now)
    out = GroupSnapshot(collected_at=now, listed=read.listed, skipped=len(read.skipped),
                        brokers_answered=read.brokers_answered,
                        versions={API_NAMES.get(k, str(k)): v for k, v in sorted(read.versions.items())},
                        requests={API_NAMES.get(k, str(k)): n for k, n in sorted(read.requests.items())})
    # error texts carry what brokers said (and group ids): secrets redacted, cut, valid UTF-8
    out.errors = {where: safe_error_text(why, 2_000) for where, why in read.errors.items()}
    if read.skipped:
        out.errors["groups"] = (f"{len(read.skipped)} of {read.listed} groups not read: the cluster lists more than "
                                f"max_groups_per_cluster={settings.max_groups_per_cluster}")
    if read.missing_topics:
        out.errors["topics"] = f"{len(read.missing_topics)} topics with committed offsets no longer exist"
    listed_ids = set(read.groups) | set(read.skipped)
    members_changed = False
    for gid, group in read.groups.items():
        if len(gid) > MAX_GROUP_ID_CHARS:
            out.errors.setdefault("group ids", "group ids over 32,767 characters were left out")
            continue
        old = before.groups.get(gid)
        old_members = before.members.get(gid, ())
        seen = last_built.get(gid)
        if group.described:
            if seen is not None and seen[0] is group.members:
                members = seen[1]
            else:
                members = tuple(_member(m) for m in group.members)
            if members == old_members:
                members = old_members
        else:
            members = old_members
        if members is not old_members:
            members_changed = True
        if members:
            out.members[gid] = members
        committed = read.committed.get(gid)
        old_parts = before.offsets.get(gid, ())
        share = group.group_type == "share"
        # the same offsets dict and members as the read these partitions were built from: only the ends can differ
        # (a share group's lag moves without either, and an uncommitted partition's log start may move)
        idle = (not share and seen is not None and committed is not None and committed is seen[2] and old_parts
                and old_parts is seen[3] and members is old_members and _ends_unchanged(old_parts, read))
        share_lags = None
        if share:  # not read this time: the last known lags (as the last known start offsets are kept)
            share_lags = read.share_lags.get(gid) if gid in read.share_lags else {
                (p.topic, p.partition): p.reported_lag for p in old_parts if p.reported_lag is not None}
        parts = old_parts if idle else _partitions(committed, members, read, old_parts, now, share_lags)
        if parts:
            out.offsets[gid] = parts
        out.groups[gid] = _judge(gid, group, old, members, parts, old_parts, settings, now, bool(idle))
        fresh[gid] = (group.members if group.described else None, members, committed, parts)
    for gid, old in before.groups.items():
        if gid in out.groups:
            continue
        keep = gid in listed_ids or _coordinator_failed(read, old.coordinator_id)
        if not keep:
            continue  # deleted (or expired): the writer logs group_deleted
        why = ("not read: over max_groups_per_cluster" if gid in read.skipped
               else f"coordinator {old.coordinator_id} did not answer (last known state kept)")
        out.groups[gid] = replace(old, error=why)
        if gid in before.members:
            out.members[gid] = before.members[gid]
        if gid in before.offsets:
            out.offsets[gid] = before.offsets[gid]
    for gid in read.skipped:
        if gid not in out.groups and len(gid) <= MAX_GROUP_ID_CHARS:
            out.groups[gid] = GroupState(group_id=gid, first_seen_at=now,
                                         error="not read: over max_groups_per_cluster")
    if reuse is not None:
        reuse.clear()
        reuse.update(fresh)
    if not members_changed and set(out.members) == set(before.members) and previous is not None:
        out.members = before.members  # unchanged membership: the same object, compared by identity
    return out


def _ends_unchanged(parts: tuple[PartitionLag, ...], read: kg.GroupsRead) -> bool:
    """Whether every partition's end offset reads as before (and every one knows its topic id)."""
    ends, missing = read.end_offsets, read.missing_topics
    for p in parts:
        if p.topic_id is None or p.topic in missing or ends.get((p.topic, p.partition), p.end) != p.end:
            return False
        if p.committed is None:  # assigned without a commit: its log start is read again
            return False
    return True


def _partitions(committed: dict[tuple[str, int], int] | None, members: tuple[GroupMember, ...],
                read: kg.GroupsRead, old: tuple[PartitionLag, ...], now: datetime,
                share_lags: dict[tuple[str, int], int] | None = None) -> tuple[PartitionLag, ...]:
    """A group's partitions; `share_lags` given: a share group's (committed offsets are its start offsets, and each
    partition's lag is the one its coordinator computed, None where it told none)."""
    assigned = {tp: m.member_id for m in members for tp in m.assignment}
    by_key = {(p.topic, p.partition): p for p in old}
    if committed is None:  # not fetched this time: the last known commits
        committed = {k: p.committed for k, p in by_key.items() if p.committed is not None}
    keys = sorted(committed.keys() | assigned.keys()) if assigned else sorted(committed)
    ends, missing, topic_ids, starts = read.end_offsets, read.missing_topics, read.topic_ids, read.start_offsets
    kind = SHARE_START if share_lags is not None else COMMITTED
    out = []
    same = len(keys) == len(old)
    for key in keys:
        offset = committed.get(key)
        prior = by_key.get(key)
        member = assigned.get(key)
        reported = share_lags.get(key) if share_lags is not None and offset is not None else None
        log_start = (starts.get(key, prior.log_start if prior is not None else None)
                     if offset is None and kind == COMMITTED else None)
        if prior is None:
            end = ends.get(key)
            moved = True
        else:
            end = ends.get(key, None if key[0] in missing else prior.end)
            moved = prior.committed != offset
            if (not moved and prior.end == end and prior.member_id == member and prior.topic_id is not None
                    and prior.kind == kind and prior.reported_lag == reported and prior.log_start == log_start):
                out.append(prior)  # an idle partition: the same object (nothing to recompute, compared by identity)
                continue
        same = False
        part = PartitionLag(
            topic=key[0], partition=key[1], committed=offset, end=end, member_id=member,
            topic_id=topic_ids.get(key[0]) if moved or prior is None or prior.topic_id is None else prior.topic_id,
            last_moved_at=now if moved or prior is None else prior.last_moved_at, kind=kind, reported_lag=reported,
            log_start=log_start)
        lag = part.lag
        if lag is not None and lag > 0:
            part = replace(part, lag_since=prior.lag_since if prior is not None and prior.lag_since is not None
                           else now)
        out.append(part)
    if same and all(a is b for a, b in zip(out, old, strict=True)):
        return old  # an idle group: its partitions tuple unchanged
    return tuple(out)


def _judge(gid: str, group: kg.Group, old: GroupState | None, members: tuple[GroupMember, ...],
           parts: tuple[PartitionLag, ...], old_parts: tuple[PartitionLag, ...], settings: Settings,
           now: datetime, idle: bool = False) -> GroupState:
    if idle and old is not None and old.window_committed:  # the partitions the old state was judged on
        return _judged(gid, group, old, members, parts, settings, now, old.lag, old.lag_partitions,
                       old.max_partition_lag, old.last_commit_at, old.window_committed[-1], old.topic_names,
                       old.uncommitted_records, old.uncommitted_partitions, old.partitions_ahead)
    lag: int | None = None
    positive = 0
    max_positive: int | None = None
    last_commit_at: datetime | None = None
    committed_sum: int | None = 0 if parts else None
    uncommitted: int | None = None
    uncommitted_parts = ahead = 0
    for p in parts:  # one pass: lag, partitions behind, the last commit, the committed sum
        committed = p.committed
        if committed is None:
            waiting = p.uncommitted_records
            uncommitted_parts += 1
            if waiting is not None:
                uncommitted = (uncommitted or 0) + waiting
            continue
        committed_sum += committed  # type: ignore[operator]
        moved_at = p.last_moved_at
        if moved_at is not None and (last_commit_at is None or moved_at > last_commit_at):
            last_commit_at = moved_at
        behind = p.lag
        if behind is None:
            continue
        if behind < 0:  # past the end of the log: no lag to count (the status says offset_ahead)
            ahead += 1
        elif behind > 0:
            lag = (lag or 0) + behind
            positive += 1
            if max_positive is None or behind > max_positive:
                max_positive = behind
        elif lag is None:
            lag = 0
    if old is not None and parts and parts is old_parts:
        topic_names = old.topic_names  # an idle group: the same partitions, the same topics
    else:
        topic_names = tuple(sorted({p.topic for p in parts}))
    return _judged(gid, group, old, members, parts, settings, now, lag, positive, max_positive, last_commit_at,
                   committed_sum, topic_names, uncommitted, uncommitted_parts, ahead)


def _judged(gid: str, group: kg.Group, old: GroupState | None, members: tuple[GroupMember, ...],
            parts: tuple[PartitionLag, ...], settings: Settings, now: datetime, lag: int | None, positive: int,
            max_positive: int | None, last_commit_at: datetime | None, committed_sum: int | None,
            topic_names: tuple[str, ...], uncommitted: int | None = None, uncommitted_parts: int = 0,
            ahead: int = 0) -> GroupState:
    size = settings.group_window
    waiting = None if lag is None and uncommitted is None else (lag or 0) + (uncommitted or 0)
    window_at = ((*old.window_at, now) if old else (now,))[-size:]
    window_lag = ((*old.window_lag, waiting) if old else (waiting,))[-size:]
    window_committed = ((*old.window_committed, committed_sum) if old else (committed_sum,))[-size:]
    verdict = evaluate(now=now, members=len(members), described=group.described, lag=lag, partitions=parts,
                       window_at=window_at, window_lag=window_lag, window_size=size,
                       stopped_after_s=settings.group_stopped_after_s, last_commit_at=last_commit_at,
                       uncommitted=uncommitted)
    since = old.status_since if old is not None and old.status == verdict.status and old.status_since else now
    return GroupState(
        group_id=gid, group_type=group.group_type, protocol_type=cap(group.protocol_type) or "",
        protocol=(cap(group.protocol) or "") if group.described or old is None else old.protocol,
        state=cap(group.state) or (old.state if old is not None else ""), coordinator_id=group.coordinator,
        members=len(members), topics=len(topic_names), partitions=len(parts),
        topic_names=topic_names, lag=lag,
        lag_partitions=positive, max_partition_lag=max_positive,
        status=verdict.status, status_since=since, evidence=verdict.evidence, last_commit_at=last_commit_at,
        first_seen_at=old.first_seen_at if old is not None and old.first_seen_at else now,
        window_at=window_at, window_lag=window_lag, window_committed=window_committed,
        error=safe_error_text(group.error, 2_000), uncommitted_records=uncommitted,
        uncommitted_partitions=uncommitted_parts, partitions_ahead=ahead)
