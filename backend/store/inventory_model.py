"""The client inventory of one cluster as last read from its brokers' JMX metrics (KIP-511 and KIP-896)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Collection status of a cluster: what the product could read, in one word (the message says it in a sentence).
INVENTORY_STATUSES = ("ok", "partial", "no_kip511", "error")
# KIP-896 status: reported (series present), none (the fleet file says the rules export them, and there are none),
# not_exported (no series: no client used a removed version since the brokers started, or the rules drop them; the
# page cannot tell which), unavailable (nothing could be read).
KIP896_STATUSES = ("reported", "none", "not_exported", "unavailable")
# Whose connections a KIP-511 row counts: clients, the brokers' own (controller and inter-broker connections), or
# either (no software name, on an inter-broker listener clients share: the brokers' replica fetchers send no name).
ROLES = ("client", "broker", "either")


@dataclass(frozen=True, slots=True)
class SoftwareConnections:
    """Connections of one client software version on one listener of one broker (KIP-511)."""

    broker_id: int | None
    endpoint: str
    listener: str
    software_name: str
    software_version: str
    connections: int
    # the last read that saw connections above zero: a client seen within the window is kept (with 0 connections)
    # until the window ends, even when its series went away (a broker restart, rules that changed)
    last_seen_at: datetime | None = None
    role: str = "client"  # ROLES: the brokers' own controller / inter-broker connections are "broker"; "either": see ROLES

    def seen_within(self, at: datetime, window_s: float) -> bool:
        """Whether connections were seen within the window before `at`."""
        return self.connections > 0 or (self.last_seen_at is not None
                                         and self.last_seen_at >= at - timedelta(seconds=window_s))


@dataclass(frozen=True, slots=True)
class DeprecatedUse:
    """One removed protocol version used by one client software version on one broker (KIP-896).

    `count` is the broker's cumulative count. `last_increase_at` is the read that last saw it grow between two reads
    of the same broker process (or, for a count first met on a page, when the broker process started, if that is
    known: the use happened since): the use is current while that is within the window. A count met for the first
    time that the product did not see grow is undetermined until the product has watched it for a whole window.
    `last_seen_at` is the last read whose page held the series: an earlier time than the snapshot's means the series
    went away (the broker restarted, or the rules changed) and the row is kept as evidence until the window ends.
    """

    broker_id: int | None
    endpoint: str
    request: str
    version: int
    software_name: str
    software_version: str
    count: float
    first_seen_at: datetime
    last_increase_at: datetime | None
    rate_per_s: float | None = None
    last_seen_at: datetime | None = None

    def in_use(self, at: datetime, window_s: float) -> bool:
        """Whether the count grew within the window before `at`."""
        return self.last_increase_at is not None and self.last_increase_at >= at - timedelta(seconds=window_s)

    def undetermined(self, at: datetime, window_s: float) -> bool:
        """A count met on a page that the product has not watched for a whole window: when it was used is unknown."""
        if self.count <= 0 or self.in_use(at, window_s):
            return False
        never_grew = self.last_increase_at is None or self.last_increase_at < self.first_seen_at
        return never_grew and self.first_seen_at >= at - timedelta(seconds=window_s)

    def held(self, at: datetime, window_s: float) -> bool:
        """Whether the row still says something at `at` (in use, or undetermined)."""
        return self.in_use(at, window_s) or self.undetermined(at, window_s)


@dataclass(frozen=True, slots=True)
class Baseline:
    """One endpoint's last good read: the broker process it showed, when, and whether its page held KIP-896 series."""

    started: float | None  # the broker process start (unix seconds; process_start_time_seconds), None: not shown
    read_at: datetime
    kip896: bool  # the page held KIP-896 series (or the fleet file says the rules export them): a series new since
    # this read is a meter the broker created since, i.e. new use

    def same_process(self, started: float | None) -> bool | None:
        """Whether a page showing `started` comes from the same broker process (None: cannot tell)."""
        if self.started is None or started is None:
            return None
        return abs(self.started - started) < 1.0


@dataclass(slots=True)
class InventorySnapshot:
    """A cluster's client inventory as last read (a new object per collection, never mutated after)."""

    collected_at: datetime
    source: str  # metrics_url / prometheus
    source_label: str  # the URL template or the Prometheus URL and matchers (no secret)
    status: str
    kip896: str
    window_s: float
    dialect: str | None = None
    message: str | None = None  # the per-cluster status in a sentence, e.g. "no KIP-511 series at ...: add rule ..."
    endpoints: dict[str, str | None] = field(default_factory=dict)  # endpoint -> error (None: read)
    # endpoint -> its last good read (the baseline this read's counts are compared with); none yet: missing here
    baselines: dict[str, Baseline] = field(default_factory=dict)
    connections: tuple[SoftwareConnections, ...] = ()
    deprecated: tuple[DeprecatedUse, ...] = ()
    duration_ms: float = 0.0

    def software(self) -> dict[tuple[str, str], int]:
        """Connections per (software name, version) over every broker and listener (present ones only)."""
        out: dict[tuple[str, str], int] = {}
        for row in self.connections:
            if row.connections > 0:
                key = (row.software_name, row.software_version)
                out[key] = out.get(key, 0) + row.connections
        return out

    def in_use(self) -> list[DeprecatedUse]:
        """The deprecated requests still in use at collection time (count grew within the window)."""
        return [d for d in self.deprecated if d.in_use(self.collected_at, self.window_s)]

    def undetermined(self) -> list[DeprecatedUse]:
        """The deprecated requests counted before the product watched them, not yet watched for a whole window."""
        return [d for d in self.deprecated if d.undetermined(self.collected_at, self.window_s)]
