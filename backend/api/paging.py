"""Cursor pagination over a frame in a stable order: the cursor holds the last row's sort key, not an offset.

A page is the rows after the cursor's key in the endpoint's order (natural keys: cluster, topic, group id, time),
so rows added or removed between two requests neither repeat nor skip the rest. The cursor also carries a digest of
the query's filters: reusing it with other filters is refused (400), not silently wrong.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


class CursorError(ValueError):
    """A cursor that is not one of ours, or belongs to other filters."""


@dataclass(frozen=True)
class Order:
    """Sort columns and, for each, whether it is descending (ties broken by the later columns)."""

    columns: tuple[str, ...]
    descending: tuple[bool, ...] = ()

    def desc(self, i: int) -> bool:
        """Whether column i sorts descending."""
        return self.descending[i] if i < len(self.descending) else False


def signature(path: str, params: Mapping[str, Any]) -> str:
    """A digest of an endpoint and its filters (everything but cursor and limit)."""
    kept = sorted((k, str(v)) for k, v in params.items() if k not in ("cursor", "limit"))
    return hashlib.sha256(json.dumps([path, kept]).encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, pd.Timestamp | datetime):
        return pd.Timestamp(value).isoformat()
    if hasattr(value, "item"):
        return value.item()
    return value


def encode_cursor(key: Sequence[Any], sig: str) -> str:
    """An opaque cursor for the row with this sort key."""
    raw = json.dumps({"k": [_plain(v) for v in key], "s": sig}, separators=(",", ":"), default=str)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, sig: str, width: int) -> list[Any]:
    """The sort key a cursor holds; raises CursorError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise CursorError("the cursor is not one this API handed out") from None
    if not isinstance(value, dict) or not isinstance(value.get("k"), list) or len(value["k"]) != width:
        raise CursorError("the cursor is not one this API handed out")
    if value.get("s") != sig:
        raise CursorError("the cursor belongs to another query: keep the filters of the page that gave it")
    if any(not isinstance(v, str | int | float | bool) for v in value["k"]):
        raise CursorError("the cursor is not one this API handed out")
    return list(value["k"])


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    series = frame[name]
    if pd.api.types.is_datetime64_any_dtype(series):
        return series.map(lambda t: "" if pd.isna(t) else pd.Timestamp(t).isoformat())
    if pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series):
        return series.astype("float64").fillna(float("-inf"))
    return series.astype(object).where(series.notna(), "").astype(str)


@dataclass(frozen=True)
class FramePage:
    """The rows of one page, the total, and the cursor of the next page (None: last page)."""

    rows: pd.DataFrame
    total: int
    next_cursor: str | None


def page_of(frame: pd.DataFrame, order: Order, *, limit: int, cursor: str | None, sig: str) -> FramePage:
    """Sort the frame in `order`, skip to after the cursor's key, cut `limit` rows."""
    keys = pd.DataFrame({f"_k{i}": _column(frame, c) for i, c in enumerate(order.columns)}, index=frame.index)
    ascending = [not order.desc(i) for i in range(len(order.columns))]
    keys = keys.sort_values(list(keys.columns), ascending=ascending, kind="stable")
    total = len(keys)
    if cursor:
        after = decode_cursor(cursor, sig, len(order.columns))
        mask = pd.Series(False, index=keys.index)
        equal = pd.Series(True, index=keys.index)
        for i, value in enumerate(after):
            column = keys[f"_k{i}"]
            if isinstance(value, str) and pd.api.types.is_float_dtype(column):
                value = float("-inf") if value == "" else value
            try:
                beyond = column < value if order.desc(i) else column > value
                same = column == value
            except TypeError:
                raise CursorError("the cursor is not one this API handed out") from None
            mask |= equal & beyond
            equal &= same
        keys = keys[mask]
    chosen = keys.iloc[:limit]
    rows = frame.loc[chosen.index]
    more = len(keys) > limit
    next_cursor = None
    if more and not chosen.empty:
        last = chosen.iloc[-1]
        next_cursor = encode_cursor([last[f"_k{i}"] for i in range(len(order.columns))], sig)
    return FramePage(rows, total, next_cursor)
