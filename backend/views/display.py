"""Frames on their way to a table on screen: every text cell and column name with hidden characters made visible."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from backend.plain_text import has_hidden, visible


def _cell(value: object) -> object:
    if isinstance(value, str):
        return visible(value) if has_hidden(value) else value
    if isinstance(value, list | tuple | np.ndarray):
        return [_cell(v) for v in value]
    return value


def _needs(value: object) -> bool:
    if isinstance(value, str):
        return has_hidden(value)
    if isinstance(value, list | tuple | np.ndarray):
        return any(_needs(v) for v in value)
    return False


def visible_columns(frame: pd.DataFrame) -> dict[Hashable, str]:
    """Column names that `visible` changes: {old name: shown name}."""
    return {c: visible(c) for c in frame.columns if isinstance(c, str) and has_hidden(c)}


def visible_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with bidi overrides, controls, zero-width and other hidden characters shown in every text cell (and
    column name): the same frame object when there are none, else a copy. Numbers and times are left alone."""
    changed: dict[int, pd.Series] = {}
    for i in range(frame.shape[1]):
        column = frame.iloc[:, i]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_datetime64_any_dtype(column):
            continue
        values: Any = column.astype(object) if isinstance(column.dtype, pd.CategoricalDtype) else column
        if any(_needs(v) for v in values):
            changed[i] = values.map(_cell)
    renamed = visible_columns(frame)
    if not changed and not renamed:
        return frame
    out = frame.copy()
    for i, series in changed.items():
        out.isetitem(i, series)
    return out.rename(columns=renamed) if renamed else out
