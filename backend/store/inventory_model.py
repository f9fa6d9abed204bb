"""The client inventory of one cluster as last read from its brokers' JMX metrics (KIP-511 and KIP-896)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Collection status of a cluster: what the product could read, in one word (the message says it in a sentence).
INVENTORY_STATUSES = ("ok", "partial", "no_kip511", "error")
# KIP-896 status: reported (series present), none (the rules export them and there are none), not_exported
# (no series, and the rules may drop them), unavailable (nothing could be read).
KIP896_STATUSES = ("reported", "none", "not_exported", "unavailable")


@dataclass(frozen=True, slots=True)
class SoftwareConnections:
    """Connections of one client software version on one listener of one broker (KIP-511)."""

    broker_id: int | None
    endpoint: str
    listener: str
    software_name: str
    software_version: str
    connections: int


@dataclass(frozen=True, slots=True)
class DeprecatedUse:
    """One removed protocol version used by one client software version on one broker (KIP-896).

    `count` is the broker's cumulative count; `last_increase_at` the collection that last saw it grow (or
    first saw it above zero): the use is current while that is within the window.
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

    def in_use(self, at: datetime, window_s: float) -> bool:
        """Whether the count grew within the window before `at`."""
        return self.last_increase_at is not None and self.last_increase_at >= at - timedelta(seconds=window_s)


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
