"""Read counters: how many lake files a reader opened and how many rows it read (for cost tests)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ReadStats:
    """Files opened and rows read inside a `read_stats()` block, per table or state file kind."""

    files_opened: int = 0
    rows_read: int = 0
    by_table: dict[str, list[int]] = field(default_factory=dict)

    def add(self, table: str, files: int, rows: int) -> None:
        """Count one read of `files` files holding `rows` rows."""
        self.files_opened += files
        self.rows_read += rows
        entry = self.by_table.setdefault(table, [0, 0])
        entry[0] += files
        entry[1] += rows


_CURRENT: contextvars.ContextVar[ReadStats | None] = contextvars.ContextVar("lake_read_stats", default=None)


@contextmanager
def read_stats() -> Iterator[ReadStats]:
    """Count every lake read made inside the block."""
    stats = ReadStats()
    token = _CURRENT.set(stats)
    try:
        yield stats
    finally:
        _CURRENT.reset(token)


def count_read(table: str, files: int, rows: int) -> None:
    """Record a read in the active ReadStats, if any."""
    stats = _CURRENT.get()
    if stats is not None:
        stats.add(table, files, rows)
