"""A group's status as Burrow judges it: from a sliding window of reads, never from a fixed lag threshold.

Burrow (github.com/linkedin/Burrow, its evaluator) keeps a window of commits per partition. The product sees
committed offsets once per read, so its window is the last `group_window` reads of the group (the records waiting
and the sum of committed offsets at each), and each partition carries since when its committed offset has not moved
and since when its lag has been above zero. The records waiting are the lag plus the records on partitions the group
is assigned but has committed nothing on (kafka-consumer-groups.sh shows their lag as "-"). First match wins:

- offset_ahead: a committed offset past the end of its partition's log (the tool's negative LAG): the log was
  truncated or the topic recreated, and the consumer will reset by auto.offset.reset; never ok;
- unknown: nothing committed with a known end (and no uncommitted partition with records);
- ok: nothing waiting;
- empty_with_lag: the group has no members and lag above zero: nobody consumes what waits;
- stopped: members, lag, and no committed offset of the group moved for `group_stopped_after_s` (Burrow's STOP:
  the consumers stopped committing);
- stalled: members, and a partition whose lag stayed above zero and whose committed offset did not move over the
  whole window (Burrow's STALL: the consumer is there but makes no progress on it);
- lagging: the lag stayed above zero for at least LAGGING_MIN_READS reads and grew across them without ever
  falling (Burrow's WARN: the consumers fall behind);
- ok otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from backend.store.group_model import PartitionLag

LAGGING_MIN_READS = 3
SAMPLE = 10


@dataclass(frozen=True)
class Verdict:
    """A status and the evidence it was judged on."""

    status: str
    evidence: dict[str, Any]


def _lag_tail(window_lag: Sequence[int | None]) -> list[int]:
    """The reads at the end of the window whose lag was above zero, without a break."""
    tail: list[int] = []
    for value in reversed(window_lag):
        if value is None or value <= 0:
            break
        tail.append(value)
    return tail[::-1]


def evaluate(*, now: datetime, members: int, described: bool, lag: int | None, partitions: Sequence[PartitionLag],
             window_at: Sequence[datetime], window_lag: Sequence[int | None], window_size: int,
             stopped_after_s: float, last_commit_at: datetime | None, uncommitted: int | None = None) -> Verdict:
    """Judge one group (see the module docstring); the window (of records waiting) includes this read.

    `lag`: the positive partition lags summed (None: none known); `uncommitted`: the records on assigned partitions
    without a commit (None: none such, or not known).
    """
    ahead = [p for p in partitions if p.lag is not None and p.lag < 0]
    if ahead:
        return Verdict("offset_ahead", {
            "partitions_ahead": len(ahead), "lag": lag, "members": members,
            "sample": {f"{p.topic}[{p.partition}]": {"committed": p.committed, "end": p.end, "lag": p.lag}
                       for p in sorted(ahead, key=lambda p: (p.lag or 0))[:SAMPLE]},
            "why": "a committed offset past the end of the log: the log was truncated (an unclean leader election, a "
                   "replica that lost data) or the topic deleted and recreated; the consumer resets by "
                   "auto.offset.reset and skips or re-reads records"})
    extra = {"uncommitted_records": uncommitted} if uncommitted else {}
    if lag is None and uncommitted is None:
        return Verdict("unknown", {"reason": "no committed offset with a known end offset"})
    waiting = (lag or 0) + (uncommitted or 0)
    if waiting <= 0:
        return Verdict("ok", {"lag": lag, **extra})
    lagging_parts = [p for p in partitions if (p.lag or 0) > 0]
    waiting_parts = [p for p in partitions if (p.uncommitted_records or 0) > 0]
    sample: dict[str, object] = {f"{p.topic}[{p.partition}]": p.lag
                                 for p in sorted(lagging_parts, key=lambda p: -(p.lag or 0))[:SAMPLE]}
    sample.update({f"{p.topic}[{p.partition}]": {"committed": None, "uncommitted_records": p.uncommitted_records}
                   for p in waiting_parts[:max(0, SAMPLE - len(sample))]})
    if described and members == 0:
        return Verdict("empty_with_lag", {"lag": lag, **extra, "members": 0, "partitions_with_lag": len(lagging_parts),
                                          "sample": sample})
    if last_commit_at is not None and (now - last_commit_at).total_seconds() >= stopped_after_s:
        return Verdict("stopped", {"lag": lag, **extra, "members": members,
                                   "last_commit_at": last_commit_at.isoformat(),
                                   "no_commit_for_s": round((now - last_commit_at).total_seconds()),
                                   "stopped_after_s": stopped_after_s, "sample": sample})
    if len(window_at) >= window_size:
        start = window_at[0]
        stalled = [p for p in lagging_parts
                   if p.last_moved_at is not None and p.last_moved_at <= start
                   and p.lag_since is not None and p.lag_since <= start]
        # assigned since before the window, records waiting, and still nothing committed on it
        stalled += [p for p in waiting_parts if p.last_moved_at is not None and p.last_moved_at <= start]
        if stalled:
            return Verdict("stalled", {
                "lag": lag, **extra, "members": members, "window_reads": len(window_at),
                "window_start": start.isoformat(), "stalled_partitions": len(stalled),
                "sample": {f"{p.topic}[{p.partition}]": {"committed": p.committed,
                                                         "lag": p.lag if p.committed is not None
                                                         else p.uncommitted_records}
                           for p in stalled[:SAMPLE]}})
    tail = _lag_tail(window_lag)[-window_size:]
    if len(tail) >= LAGGING_MIN_READS and all(b >= a for a, b in zip(tail, tail[1:], strict=False)) \
            and tail[-1] > tail[0]:
        return Verdict("lagging", {"lag": lag, **extra, "members": members, "lag_over_window": tail,
                                   "sample": sample})
    return Verdict("ok", {"lag": lag, **extra, "members": members})
