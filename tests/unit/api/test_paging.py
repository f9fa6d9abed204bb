"""Cursor pagination: a stable order, pages that neither repeat nor skip, cursors bound to their filters."""

from __future__ import annotations

import pandas as pd
import pytest

from backend.api.paging import CursorError, Order, page_of, signature
from backend.api.ratelimit import RateLimiter, retry_after


def _all_pages(frame: pd.DataFrame, order: Order, limit: int, sig: str = "s") -> list[tuple[object, ...]]:
    seen, cursor = [], None
    while True:
        page = page_of(frame, order, limit=limit, cursor=cursor, sig=sig)
        seen += [tuple(r) for r in page.rows[list(order.columns)].itertuples(index=False)]
        assert page.total == len(frame)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_pages_cover_every_row_once_in_order() -> None:
    frame = pd.DataFrame({"cluster_name": ["b", "a", "a", "c", "b"] * 7, "topic": [f"t{i:02}" for i in range(35)]})
    rows = _all_pages(frame, Order(("cluster_name", "topic")), limit=4)
    assert rows == sorted(rows) and len(set(rows)) == 35


def test_descending_numbers_and_ties() -> None:
    frame = pd.DataFrame({"tvd": [0.5, 1.0, 0.5, None, 0.2], "key": ["a", "b", "c", "d", "e"]})
    rows = _all_pages(frame, Order(("tvd", "key"), (True,)), limit=2)
    assert [k for _, k in rows] == ["b", "a", "c", "e", "d"]


def test_a_row_removed_between_pages_does_not_shift_the_next_page() -> None:
    frame = pd.DataFrame({"cluster_name": ["a"] * 6, "topic": list("uvwxyz")})
    first = page_of(frame, Order(("cluster_name", "topic")), limit=3, cursor=None, sig="s")
    shrunk = frame[frame["topic"] != "u"]
    second = page_of(shrunk, Order(("cluster_name", "topic")), limit=3, cursor=first.next_cursor, sig="s")
    assert list(second.rows["topic"]) == ["x", "y", "z"]


def test_a_cursor_of_other_filters_or_not_ours_is_refused() -> None:
    frame = pd.DataFrame({"cluster_name": list("abcdef")})
    sig_a = signature("/api/v1/clusters", {"tag": "env=prod", "limit": 2})
    sig_b = signature("/api/v1/clusters", {"tag": "env=dev", "limit": 2})
    assert sig_a == signature("/api/v1/clusters", {"tag": "env=prod", "limit": 5, "cursor": "x"})
    cursor = page_of(frame, Order(("cluster_name",)), limit=2, cursor=None, sig=sig_a).next_cursor
    assert cursor
    with pytest.raises(CursorError, match="another query"):
        page_of(frame, Order(("cluster_name",)), limit=2, cursor=cursor, sig=sig_b)
    for bad in ("", "%%%", "e30", "eyJrIjpbe31dLCJzIjoicyJ9"):
        if bad:
            with pytest.raises(CursorError):
                page_of(frame, Order(("cluster_name",)), limit=2, cursor=bad, sig="s")


def test_rate_limit_per_principal_with_retry_after() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    assert [limiter.take("alice") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = limiter.take("alice")
    assert wait == pytest.approx(0.5) and retry_after(wait) == "1"
    assert limiter.take("bob") == 0.0  # another principal has its own bucket
    now[0] += 0.5
    assert limiter.take("alice") == 0.0
