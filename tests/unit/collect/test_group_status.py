"""The Burrow-style evaluator: each status from a window of reads, first match wins, on any date."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.collect.group_status import LAGGING_MIN_READS, evaluate
from backend.store.group_model import PartitionLag

NOW = datetime.now(UTC)
STEP = timedelta(seconds=60)


def _window(n: int) -> tuple[datetime, ...]:
    return tuple(NOW - STEP * (n - 1 - i) for i in range(n))


def _part(committed: int | None, end: int | None, *, moved_ago: int = 0, lag_for: int | None = None) -> PartitionLag:
    since = None if lag_for is None else NOW - STEP * lag_for
    return PartitionLag("orders", 0, committed, end, last_moved_at=NOW - STEP * moved_ago, lag_since=since)


def _judge(**kw: object) -> str:
    base: dict[str, object] = dict(now=NOW, members=2, described=True, lag=10, partitions=(), window_at=_window(5),
                                   window_lag=(10,) * 5, window_size=5, stopped_after_s=3600.0, last_commit_at=NOW)
    base.update(kw)
    return evaluate(**base).status  # type: ignore[arg-type]


def test_no_lag_is_ok_and_no_commit_is_unknown() -> None:
    assert _judge(lag=0) == "ok"
    assert _judge(lag=None) == "unknown"


def test_an_empty_group_with_lag_is_empty_with_lag_before_anything_else() -> None:
    assert _judge(members=0, last_commit_at=NOW - timedelta(days=2)) == "empty_with_lag"
    # a group that was not described (members unknown) is not called empty
    assert _judge(members=0, described=False, window_lag=(10, 5, 10, 5, 10)) == "ok"


def test_no_commit_for_longer_than_the_threshold_is_stopped() -> None:
    assert _judge(last_commit_at=NOW - timedelta(seconds=3600)) == "stopped"
    assert _judge(last_commit_at=NOW - timedelta(seconds=3599), window_lag=(10, 5, 10, 5, 10)) == "ok"


def test_a_partition_with_lag_that_did_not_move_over_the_whole_window_is_stalled() -> None:
    stuck = _part(100, 150, moved_ago=6, lag_for=6)
    assert _judge(partitions=(stuck,), window_lag=(50,) * 5) == "stalled"
    # not yet a full window: not judged stalled (lagging or ok from the trend)
    assert _judge(partitions=(stuck,), window_at=_window(4), window_lag=(50,) * 4) == "ok"
    # its commit moved inside the window: not stalled
    moving = _part(100, 150, moved_ago=2, lag_for=6)
    assert _judge(partitions=(moving,), window_lag=(50,) * 5) == "ok"
    # the lag appeared inside the window (the log grew after a quiet time): not stalled
    fresh = _part(100, 150, moved_ago=6, lag_for=1)
    assert _judge(partitions=(fresh,), window_lag=(0, 0, 0, 0, 50)) == "ok"


def test_lag_growing_without_falling_for_enough_reads_is_lagging() -> None:
    assert _judge(window_lag=(0, 0, 5, 9, 20)) == "lagging"
    assert _judge(window_lag=(0, 0, 0, 9, 20)) == "ok"  # only 2 reads with lag: not enough
    assert LAGGING_MIN_READS == 3
    assert _judge(window_lag=(0, 30, 20, 25, 28)) == "ok"  # it fell once inside the tail
    assert _judge(window_lag=(9, 9, 9, 9, 9)) == "ok"  # flat lag: not growing
    assert _judge(window_lag=(3, 4, 4, 5, 6)) == "lagging"  # equal steps allowed, growth overall


def test_stalled_wins_over_lagging_and_the_evidence_names_the_partitions() -> None:
    stuck = _part(100, 160, moved_ago=6, lag_for=6)
    verdict = evaluate(now=NOW, members=1, described=True, lag=60, partitions=(stuck,), window_at=_window(5),
                       window_lag=(10, 20, 30, 40, 60), window_size=5, stopped_after_s=3600.0, last_commit_at=NOW)
    assert verdict.status == "stalled"
    assert verdict.evidence["stalled_partitions"] == 1
    assert verdict.evidence["sample"] == {"orders[0]": {"committed": 100, "lag": 60}}
