"""CSV that a spreadsheet opens as data: cells that would start a formula are neutralised (OWASP CSV injection)."""

from __future__ import annotations

import pandas as pd

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: object) -> object:
    """A text cell starting with = + - @ tab or CR gets a leading single quote; numbers and other cells unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def safe_csv(frame: pd.DataFrame) -> str:
    """The frame as CSV text with every text cell (and column name) neutralised."""
    safe = frame.copy()
    for column in safe.columns:
        if safe[column].dtype == object or pd.api.types.is_string_dtype(safe[column]):
            safe[column] = safe[column].map(neutralise)
    safe.columns = [neutralise(str(c)) for c in safe.columns]
    return safe.to_csv(index=False)
