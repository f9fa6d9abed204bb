"""Keeping the index in step with the lake as the data arrives.

`FleetIndexer` is the poller's: after each write of a poll (backend.store.fleet_writer.FleetWriter) it turns what the
write changed (its change rows, and the state tables it rewrote) into one delta per index table. `ClientIndexer` is
the Spark job's: after each committed run, the client instances whose latest snapshot changed. Each checks that the
index reflects the lake state the update starts from (the state generation); when it does not (a crash between the
two commits, another writer, an index that is missing or of another format) it rebuilds its part from the lake.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.search import build
from backend.search import rows as R
from backend.search.ops import ops_table
from backend.search.poll_ops import poll_ops
from backend.search.store import PartStore
from backend.store.commit import CommitConflict
from backend.store.lake import Lake
from backend.store.location import LakeLocation, parse_lake

log = logging.getLogger(__name__)
FLUSH_INTERVAL_S = 60.0


@dataclass
class IndexUpdate:
    """What one update did to the index."""

    rebuilt: bool = False
    reason: str = ""
    rows: dict[str, int] = field(default_factory=dict)  # delta rows written per table
    compacted: dict[str, int] = field(default_factory=dict)  # buckets rewritten per table
    duration_s: float = 0.0


class FleetIndexer:
    """The poller's side of the index: the fleet part, kept in step with each write of a poll."""

    def __init__(self, lake: Lake | str, *, retention_days: int = build.DEFAULT_RETENTION_DAYS,
                 flush_interval_s: float = FLUSH_INTERVAL_S) -> None:
        """Open the lake's index; rebuild it from the lake when it is missing, of another format or behind."""
        self.lake = lake if isinstance(lake, Lake) else Lake(lake)
        self.store = PartStore(self.lake.where, "fleet")
        self.retention_days = retention_days
        self.flush_interval_s = flush_interval_s
        self._flushed_at = time.monotonic()
        self._dirty = False
        self.last = IndexUpdate()
        self.store.load()
        generation = build.fleet_generation(self.lake)
        if self.store.manifest is None:
            self.last = self.rebuild("no index in the lake yet")
        elif self.store.source_generation != generation:
            self.last = self.rebuild(f"index at lake generation {self.store.source_generation}, lake at {generation}")

    def rebuild(self, reason: str, now: datetime | None = None) -> IndexUpdate:
        """Build the whole fleet part from the lake's current state."""
        started = time.monotonic()
        tables, generation = build.fleet_tables(self.lake, now=now, retention_days=self.retention_days)
        self.store.replace(tables, source_generation=generation, retention_days=self.retention_days, now=now)
        self._dirty = False
        log.info("search index of %s rebuilt (%s): %s rows", self.lake.location, reason,
                 sum(t.num_rows for t in tables.values()))
        return IndexUpdate(rebuilt=True, reason=reason, rows={k: v.num_rows for k, v in tables.items()},
                           duration_s=time.monotonic() - started)

    def apply(self, base_generation: int | None, generation: int | None, changes: Sequence[Mapping[str, Any]],
              tables: Mapping[str, Mapping[str, pa.Table]], *, now: datetime | None = None) -> IndexUpdate:
        """Fold one poll's write into the index (`base_generation`: the state generation the write started from)."""
        started = time.monotonic()
        if self.store.manifest is None or self.store.moved():
            # Another writer (a `poll --once` job beside the service) moved the index on: go on from what it wrote
            # when it reflects the state this write started from, else rebuild below.
            self.store.load()
        if self.store.manifest is None or self.store.source_generation != base_generation:
            result = self.rebuild(f"index at lake generation {self.store.source_generation}, the write started from "
                                  f"{base_generation}", now)
            self.last = result
            return result
        deltas = poll_ops(changes, tables)
        due = time.monotonic() - self._flushed_at >= self.flush_interval_s
        written = self.store.append(deltas, source_generation=generation, now=now, commit=due)
        if written or due:
            self._flushed_at = time.monotonic()
            self._dirty = False
        elif generation != base_generation:
            self._dirty = True  # the manifest on disk names an older generation until the next flush
        result = IndexUpdate(rows=written)
        if self.store.compaction_due():
            result.compacted = self.store.compact(now=now)
        result.duration_s = time.monotonic() - started
        self.last = result
        return result

    def apply_write(self, result: Any, *, now: datetime | None = None) -> IndexUpdate | None:
        """Fold a FleetWriter.write result; never raises (a failed update is logged, and the next one rebuilds)."""
        try:
            return self.apply(result.base_generation, result.generation, result.change_rows, result.tables, now=now)
        except Exception as exc:  # noqa: BLE001 - the index must never stop the poller; the next update rebuilds it
            log.error("updating the search index of %s failed (it is rebuilt at the next poll): %s",
                      self.lake.location, exc)
            self.store.manifest = None
            return None

    def close(self) -> None:
        """Commit the generation the index reflects (a stop without this only costs a rebuild at the next start)."""
        if self._dirty and self.store.manifest is not None:
            try:
                self.store.append({}, source_generation=self.store.source_generation, commit=True)
            except (OSError, CommitConflict) as exc:
                log.error("committing the search index of %s failed: %s", self.lake.location, exc)
            self._dirty = False


def open_fleet_indexer(lake: Lake | str, *, retention_days: int = build.DEFAULT_RETENTION_DAYS) -> FleetIndexer | None:
    """The poller's indexer of a lake (built from the lake when missing or behind); None, logged, when it fails."""
    try:
        return FleetIndexer(lake, retention_days=retention_days)
    except Exception as exc:  # noqa: BLE001 - polling goes on without the index; readers build it in memory
        log.error("opening the search index of %s failed: %s", getattr(lake, "location", lake), exc)
        return None


def heads_ops(changed: pa.Table) -> dict[str, pa.Table]:
    """The clients part's delta from the instances whose latest snapshot a run changed (an updated instance keeps its
    key: its new row replaces the old one)."""
    rows = R.instance_rows(changed)
    return {"instance": ops_table("instance", upserts=rows)}


class ClientIndexer:
    """The Spark job's side of the index: the clients part (KIP-1324 client instances)."""

    def __init__(self, lake: str | LakeLocation) -> None:
        """Open the clients part of a lake's index."""
        self.where = lake if isinstance(lake, LakeLocation) else parse_lake(lake)
        self.store = PartStore(self.where, "clients")
        self.store.load()

    def apply_run(self, previous_generation: int | None, generation: int, changed: pa.Table, heads: pa.Table, *,
                  full: bool) -> IndexUpdate:
        """Fold one committed run: its changed heads, or all heads after a full run or when the index is behind."""
        started = time.monotonic()
        if full or self.store.manifest is None or self.store.source_generation != previous_generation:
            reason = "full run" if full else "index missing or behind the job's state"
            self.store.replace({"instance": R.instance_rows(heads)}, source_generation=generation,
                               retention_days=build.DEFAULT_RETENTION_DAYS)
            return IndexUpdate(rebuilt=True, reason=reason, rows={"instance": heads.num_rows},
                               duration_s=time.monotonic() - started)
        written = self.store.append(heads_ops(changed), source_generation=generation, commit=True)
        result = IndexUpdate(rows=written)
        if self.store.compaction_due():
            result.compacted = self.store.compact()
        result.duration_s = time.monotonic() - started
        return result



def index_pipeline_run(lake: str | LakeLocation, previous_generation: int | None, generation: int, changed: pa.Table,
                       heads: pa.Table, *, full: bool, say: Any = None) -> IndexUpdate | None:
    """Fold one committed run of the Spark job into the index; never raises (the next run rebuilds what failed)."""
    try:
        update = ClientIndexer(lake).apply_run(previous_generation, generation, changed, heads, full=full)
    except Exception as exc:  # noqa: BLE001 - the index must never fail the job; its next run rebuilds it
        log.error("updating the search index's client instances failed: %s", exc)
        return None
    if say is not None:
        say("search index: " + (f"rebuilt ({update.reason}), {heads.num_rows} client instances" if update.rebuilt
                                else f"{sum(update.rows.values())} client instances updated"))
    return update
