"""Which librdkafka helper process runs each cluster's client, and which clusters may not use librdkafka for now.

librdkafka can abort() its process on a malformed answer (2.16.1: `rd_malloc: Assertion 'p' failed` on a negative
array length), so every librdkafka client of the poller runs in a helper process (backend.kafka.admin_helpers). All
clusters share one helper until one dies. The clusters whose calls were in flight then are *evidence*: one of them
(probably) made it die (a helper that died with no call in flight implicates no one). They move to at most `slots` isolated helpers, each evidence set spread over its own helpers,
so the next death narrows the set (group testing: log_slots(n) deaths for n suspects). A cluster whose helper ran
only its own client and died is convicted: librdkafka is off for it for `bench_s` (doubling per conviction, at most
`bench_max_s`), and its poll goes on with the project's own codec. When the pause ends (or the poller sees every
broker of the cluster answer sanely again: `release`), the cluster is on probation on a helper of its own; a
suspect that made no helper die for `hold_s` goes back to the shared helper.

Pure bookkeeping, no processes: the clock is passed in, so tests drive it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

SHARED = "shared"


def isolated_lane(slot: int) -> str:
    """The name of isolated helper number `slot` (0-based)."""
    return f"isolated-{slot + 1}"


@dataclass(frozen=True)
class _Evidence:
    members: frozenset[str]
    at: float


@dataclass(frozen=True)
class Pause:
    """librdkafka is off for a cluster until `until` (monotonic); `reason` is the status row's text."""

    until: float
    reason: str


class Isolation:
    """Lanes (the shared helper or an isolated one) for suspects, and pauses for convicted clusters."""

    def __init__(self, *, slots: int = 3, hold_s: float = 3600.0, bench_s: float = 900.0,
                 bench_max_s: float = 4 * 3600.0, clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], float] = time.time) -> None:
        """Bookkeeping for at most `slots` isolated helpers."""
        if slots < 1:
            raise ValueError("at least one isolated helper is needed to find a culprit")
        self.slots = slots
        self.hold_s = hold_s
        self.bench_s = bench_s
        self.bench_max_s = bench_max_s
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._evidence: list[_Evidence] = []
        self._placement: dict[str, int] = {}
        self._paused: dict[str, Pause] = {}
        self._convictions: dict[str, int] = {}

    # ------------------------------------------------------------------ queries

    def lane(self, name: str) -> str | None:
        """The helper lane for a cluster's next call; None while librdkafka is off for it."""
        with self._lock:
            self._expire()
            if name in self._paused:
                return None
            slot = self._placement.get(name)
            return SHARED if slot is None else isolated_lane(slot)

    def pause_reason(self, name: str) -> str | None:
        """Why librdkafka is off for a cluster now, else None."""
        with self._lock:
            self._expire()
            pause = self._paused.get(name)
            return pause.reason if pause is not None else None

    def lanes(self) -> dict[str, str]:
        """Every cluster not on the shared helper: its isolated lane, or "paused"."""
        with self._lock:
            self._expire()
            out = {name: isolated_lane(slot) for name, slot in self._placement.items()}
            out.update({name: "paused" for name in self._paused})
            return dict(sorted(out.items()))

    def convictions(self, name: str) -> int:
        """How often a cluster's own helper died (since its configuration last changed)."""
        with self._lock:
            return self._convictions.get(name, 0)

    # ------------------------------------------------------------------ events

    def died(self, lane: str, hosted: Iterable[str], in_flight: Iterable[str], how: str) -> list[str]:
        """A helper died: move the suspects, convict a cluster whose own helper it was; return the convicted."""
        hosted_set, in_flight_set = set(hosted), set(in_flight)
        with self._lock:
            self._expire()
            # Only calls in flight are evidence: a helper that died idle (killed from outside, say) implicates no one.
            implicated = in_flight_set - set(self._paused)
            if not implicated:
                return []
            if lane != SHARED and len(implicated) == 1 and hosted_set <= implicated:
                (name,) = implicated
                self._convict(name, how)
                self._place()
                return [name]
            evidence = frozenset(implicated)
            # A narrower set replaces the sets it lies in: the culprit is among the fewer clusters.
            self._evidence = [e for e in self._evidence if not e.members >= evidence]
            self._evidence.append(_Evidence(evidence, self._clock()))
            self._place()
            return []

    def release(self, name: str) -> bool:
        """End a cluster's pause now (its brokers answer sanely again): it goes on probation on its own helper."""
        with self._lock:
            if self._paused.pop(name, None) is None:
                return False
            self._evidence.append(_Evidence(frozenset([name]), self._clock()))
            self._place()
            return True

    def forget(self, name: str) -> None:
        """A cluster's configuration changed: it starts afresh (shared helper, no pause, no convictions)."""
        with self._lock:
            self._paused.pop(name, None)
            self._convictions.pop(name, None)
            kept = []
            for e in self._evidence:
                members = e.members - {name}
                if members:
                    kept.append(_Evidence(members, e.at))
            self._evidence = kept
            self._place()

    # ------------------------------------------------------------------ internals (lock held)

    def _convict(self, name: str, how: str) -> None:
        count = self._convictions.get(name, 0) + 1
        self._convictions[name] = count
        seconds = min(self.bench_max_s, self.bench_s * 2 ** (count - 1))
        until_wall = datetime.fromtimestamp(self._wall() + seconds, UTC)
        reason = (f"librdkafka is off for this cluster for {_duration(seconds)} (until {until_wall:%H:%M} UTC): "
                  f"the helper process that ran only this cluster's librdkafka client died ({how}), so a broker "
                  "likely sends answers librdkafka cannot parse; the poll goes on with the built-in Metadata and "
                  "probe")
        self._paused[name] = Pause(self._clock() + seconds, reason)
        # The sets this cluster was in are explained by it.
        self._evidence = [e for e in self._evidence if name not in e.members]

    def _expire(self) -> None:
        now = self._clock()
        changed = False
        for name, pause in list(self._paused.items()):
            if pause.until <= now:
                del self._paused[name]
                self._evidence.append(_Evidence(frozenset([name]), now))  # probation on a helper of its own
                changed = True
        kept = [e for e in self._evidence if now - e.at < self.hold_s]
        if len(kept) != len(self._evidence) or changed:
            self._evidence = kept
            self._place()

    def _place(self) -> None:
        """Spread each evidence set over its own isolated helpers, the most specific sets first."""
        sets = sorted(self._evidence, key=lambda e: (len(e.members), -e.at, sorted(e.members)))
        placement: dict[str, int] = {}
        if not sets:
            self._placement = placement
            return
        if len(sets) <= self.slots:
            counts = [1] * len(sets)
            for _ in range(self.slots - len(sets)):
                # The next helper goes to the set with the most members per helper (never more helpers than members).
                best = max(range(len(sets)), key=lambda i: (len(sets[i].members) / counts[i], -i))
                if len(sets[best].members) <= counts[best]:
                    break
                counts[best] += 1
            slots_of, start = [], 0
            for count in counts:
                slots_of.append(list(range(start, start + count)))
                start += count
        else:
            slots_of = [[i % self.slots] for i in range(len(sets))]
        for evidence, slots in zip(sets, slots_of, strict=True):
            unplaced = sorted(m for m in evidence.members if m not in placement)
            for j, member in enumerate(unplaced):
                placement[member] = slots[j % len(slots)]
        self._placement = placement


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
