"""What the per-cluster collectors share: when each cluster is due next, and its last reading."""

from __future__ import annotations

import threading
import time
from typing import Generic, TypeVar

Reading = TypeVar("Reading")


class ClusterSchedule(Generic[Reading]):
    """Per cluster: when it is due next and the last reading (seeded from the lake after a restart)."""

    def __init__(self) -> None:
        """Start with nothing read: every cluster is due at its first poll."""
        self._lock = threading.Lock()
        self._next_due: dict[str, float] = {}
        self._last: dict[str, Reading] = {}

    def seed(self, stored: dict[str, Reading]) -> None:
        """The stored readings (after a restart): the baseline of the next reading and of the checks."""
        with self._lock:
            for name, snap in stored.items():
                self._last.setdefault(name, snap)

    def last(self, cluster_name: str) -> Reading | None:
        """The reading last taken (or seeded) for a cluster."""
        with self._lock:
            return self._last.get(cluster_name)

    def forget(self) -> None:
        """Drop every schedule and stored reading."""
        with self._lock:
            self._next_due.clear()
            self._last.clear()

    def _is_due(self, cluster_name: str, interval_s: float, now: float | None) -> bool:
        if interval_s <= 0:
            return False
        with self._lock:
            return (now if now is not None else time.monotonic()) >= self._next_due.get(cluster_name, 0.0)
