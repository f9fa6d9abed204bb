"""Consumer groups as the poller hands them to the lake writer and the checks: one GroupSnapshot per cluster.

A GroupSnapshot is the last read of a cluster's groups (a new object per read, never mutated after), so polls
between reads carry the same object and the writer and checks skip it by identity. Parts that did not change
between two reads (a group's members) keep the previous objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

GROUP_TYPES = ("classic", "consumer", "share", "streams", "unknown")
# Burrow-style statuses of a group (backend.collect.group_status); unknown: no committed offsets to judge;
# offset_ahead: a committed offset past the end of its partition's log (truncated, or the topic recreated).
STATUSES = ("ok", "lagging", "stalled", "stopped", "empty_with_lag", "offset_ahead", "unknown")
PROBLEM_STATUSES = ("lagging", "stalled", "stopped", "empty_with_lag", "offset_ahead")
# What a partition's `committed` offset is: a committed offset, or a share group's share-partition start offset.
COMMITTED, SHARE_START = "committed", "share_start"


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a group (strings as the client chose them, capped in length)."""

    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack: str | None = None
    member_type: str | None = None  # KIP-848 groups: classic or consumer member
    assignment: tuple[tuple[str, int], ...] = ()
    subscribed: tuple[str, ...] = ()
    subscribed_regex: str | None = None  # a KIP-848 member's subscription pattern


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition a group commits to or is assigned: committed and end offsets, lag, and since when."""

    topic: str
    partition: int
    committed: int | None  # None: assigned, nothing committed
    end: int | None  # None: the end offset could not be read
    member_id: str | None = None  # the member it is assigned to
    topic_id: str | None = None  # the topic's id when the committed offset last moved (or was first seen)
    last_moved_at: datetime | None = None  # when the committed offset last changed (first seen: that read)
    lag_since: datetime | None = None  # since when the lag has been above 0 without a break
    kind: str = COMMITTED  # COMMITTED, or SHARE_START: `committed` is a share group's start offset
    reported_lag: int | None = None  # SHARE_START: the lag the share coordinator computes (None: not told)
    log_start: int | None = None  # the log's start offset, read for an assigned partition without a commit

    @property
    def lag(self) -> int | None:
        """end - committed as kafka-consumer-groups.sh prints it (negative when the commit is past the end); a share
        group's lag as its coordinator computes it, as kafka-share-groups.sh prints it."""
        if self.kind == SHARE_START:
            return self.reported_lag
        if self.committed is None or self.end is None:
            return None
        return self.end - self.committed

    @property
    def uncommitted_records(self) -> int | None:
        """Records on an assigned partition the group has not committed on (None: committed, or not known)."""
        if self.committed is not None or self.end is None or self.log_start is None:
            return None
        return max(0, self.end - self.log_start)


@dataclass(slots=True)
class GroupState:
    """One group of one cluster as last read, with its judged status and its bounded window."""

    group_id: str
    group_type: str = "unknown"
    protocol_type: str = ""
    protocol: str = ""  # assignor
    state: str = ""
    coordinator_id: int | None = None
    members: int = 0
    topics: int = 0
    partitions: int = 0
    topic_names: tuple[str, ...] = ()  # the topics it commits to or is assigned (sorted)
    lag: int | None = None  # sum of the partitions' positive lags; None when no partition's lag is known (or >= 0)
    lag_partitions: int = 0  # partitions with lag > 0
    max_partition_lag: int | None = None
    status: str = "unknown"
    status_since: datetime | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    last_commit_at: datetime | None = None  # the latest time any committed offset of the group moved
    first_seen_at: datetime | None = None
    window_at: tuple[datetime, ...] = ()
    window_lag: tuple[int | None, ...] = ()  # records waiting at each read: lag plus uncommitted_records
    window_committed: tuple[int | None, ...] = ()  # sum of committed offsets at each read (progress)
    error: str | None = None  # what could not be read (the last known members/offsets are kept)
    # records on assigned partitions without a commit (log end - log start), beside the lag; None: none such
    uncommitted_records: int | None = None
    uncommitted_partitions: int = 0
    partitions_ahead: int = 0  # partitions whose committed offset is past the end of the log

    @property
    def waiting(self) -> int | None:
        """Records the group has yet to read: its lag plus the records on partitions it has not committed on."""
        if self.lag is None and self.uncommitted_records is None:
            return None
        return (self.lag or 0) + (self.uncommitted_records or 0)


@dataclass(slots=True)
class GroupSnapshot:
    """Every group of one cluster as last read (see the module docstring)."""

    collected_at: datetime
    groups: dict[str, GroupState] = field(default_factory=dict)
    members: dict[str, tuple[GroupMember, ...]] = field(default_factory=dict)
    offsets: dict[str, tuple[PartitionLag, ...]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    listed: int = 0
    skipped: int = 0
    brokers_answered: int = 0
    versions: dict[str, int] = field(default_factory=dict)  # api name -> version spoken
    requests: dict[str, int] = field(default_factory=dict)  # api name -> requests sent by this read
    duration_ms: float = 0.0
    # What the members' KIP-1324 configs say per group (key -> value -> instances), from results/group_configs when
    # the read ran; not stored in the group state (the pipeline's results hold it).
    client_configs: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
