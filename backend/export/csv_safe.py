"""CSV that a spreadsheet opens as data: no cell can start a formula, however the reader splits rows (OWASP CSV
injection).

Every text cell (and column name) first has its hidden characters made visible (`backend.plain_text.visible`):
CR, LF, vertical tab, form feed, NEL, the Unicode line and paragraph separators and the other controls become
their visible forms (␍, ␊, <U+2028>...), so no line break is left inside a cell. A spreadsheet that ends a row
at a CR (even inside quotes) therefore sees exactly the rows a CSV reader sees, and no row can begin inside a
cell. Then a cell starting with = + - @ (or, before that, a tab or CR) gets a leading single quote. Numbers stay
numbers. Cells holding the separator or a quote are quoted by the writer.
"""

from __future__ import annotations

import numbers
from datetime import date, datetime

import pandas as pd

from backend.plain_text import visible

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# What a reader may take for the end of a row: CRLF, CR, LF, VT, FF, FS, GS, RS, NEL, LS, PS.
LINE_BREAKS = ("\r", "\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def neutralise(value: object) -> object:
    """A text cell with hidden characters (line breaks first) made visible, and a leading single quote if it would
    start a formula (= + - @); numbers, times and empty cells unchanged, any other object guarded as its text."""
    if isinstance(value, str):
        text = visible(value)
        return "'" + text if text.startswith(FORMULA_PREFIXES) else text
    if value is None or value is pd.NA or isinstance(value, numbers.Number | datetime | date):
        return value  # numbers stay numbers (a negative number is no formula); NaT is a datetime
    return neutralise(str(value))  # lists, dicts, durations, bytes...: as the text the writer would put there


def _typed(series: pd.Series) -> bool:
    """Columns the writer prints as numbers or times: left as they are."""
    return pd.api.types.is_numeric_dtype(series) or pd.api.types.is_datetime64_any_dtype(series)


def safe_csv(frame: pd.DataFrame) -> str:
    """The frame as CSV text with every text cell (and column name) neutralised; rows end with LF only."""
    safe = frame.copy()
    for i in range(safe.shape[1]):
        column = safe.iloc[:, i]
        if not _typed(column):
            safe.isetitem(i, column.astype(object).map(neutralise))
    safe.columns = [neutralise(str(c)) for c in safe.columns]
    return safe.to_csv(index=False, lineterminator="\n")
