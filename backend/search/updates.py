"""Keeping the index in step with the lake as the data arrives.

`FleetIndexer` is the poller's: after each write of a poll (backend.store.fleet_writer.FleetWriter) it turns what the
write changed (its change rows, and the state tables it rewrote) into one delta per index table. `ClientIndexer` is
the Spark job's: after each committed run, the client instances whose latest snapshot changed. Each checks that the
index reflects the lake state the update starts from (the state generation); when it does not (a crash between the
two commits, another writer, an index that is missing or of another format) it rebuilds its part from the lake.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from backend.search import build
from backend.search import rows as R
from backend.search.ops import ops_table
from backend.search.store import PartStore, read_manifest
from backend.search.tables import tables_of
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


def _json(text: object) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Ops:
    """The operations of one update, per table, in arrival order (coalesced when written)."""

    def __init__(self) -> None:
        self.upserts: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.bulk: dict[str, list[pa.Table]] = defaultdict(list)
        self.deletes: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.parents: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.clears: dict[str, list[str]] = defaultdict(list)

    def upsert(self, name: str, row: dict[str, Any]) -> None:
        self.upserts[name].append(row)

    def delete(self, name: str, cluster: str, key: str) -> None:
        self.deletes[name].append((cluster, key))

    def tables(self) -> dict[str, pa.Table]:
        out = {}
        for name in {*self.upserts, *self.bulk, *self.deletes, *self.parents, *self.clears}:
            parts = list(self.bulk.get(name, []))
            if self.upserts.get(name):
                parts.append(R.rows_table(name, _last_per_key(self.upserts[name])))
            upserts = pa.concat_tables(parts) if parts else None
            out[name] = ops_table(name, upserts=upserts, deletes=self.deletes.get(name, ()),
                                  parents=self.parents.get(name, ()), clears=self.clears.get(name, ()))
        return out


def _last_per_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    last: dict[tuple[Any, Any], dict[str, Any]] = {}
    for row in rows:
        last[(row.get("cluster"), row["key"])] = row
    return list(last.values())


def _by_column(table: pa.Table, column: str, values: Iterable[str]) -> pa.Table:
    wanted = pa.array(sorted(set(values)), pa.string())
    return table.filter(pc.fill_null(pc.is_in(table.column(column), value_set=wanted), False))


def poll_ops(changes: Sequence[Mapping[str, Any]], tables: Mapping[str, Mapping[str, pa.Table]]) -> dict[str, pa.Table]:
    """One delta per index table from one poll's write: its change rows and the state tables it rewrote per cluster.

    Work follows what changed: a topic, group, broker or config change is one operation; a cluster's first
    sighting, first config read or first group read takes its rows from the state table the write produced; a
    group whose members changed takes its (group, client id) pairs from the rewritten members table.
    """
    ops = _Ops()
    by_cluster: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for change in changes:
        by_cluster[str(change["cluster_name"])].append(change)
    for cluster in sorted(set(by_cluster) | set(tables)):
        _cluster_ops(ops, cluster, by_cluster.get(cluster, []), tables.get(cluster, {}))
    return ops.tables()


def _cluster_ops(ops: _Ops, cluster: str, changes: list[Mapping[str, Any]], tables: Mapping[str, pa.Table]) -> None:
    kinds = {c["kind"] for c in changes}
    cluster_id = next((c.get("cluster_id") for c in changes if c.get("cluster_id")), None)
    if "clusters" in tables and (kinds & {"cluster_first_seen", "cluster_id_changed", "tags_changed"}):
        ops.bulk["cluster"].append(R.cluster_rows(tables["clusters"]))
    topics_bulk = "cluster_first_seen" in kinds and "topics" in tables
    if topics_bulk:
        ops.clears["topic"].append(cluster)
        ops.bulk["topic"].append(R.topic_rows(tables["topics"]))
    if "configs_first_seen" in kinds and "configs" in tables:
        ops.clears["config"].append(cluster)
        ops.bulk["config"].append(R.config_rows(tables["configs"]))
    groups_bulk = "groups_first_seen" in kinds and "groups" in tables
    if groups_bulk:
        ops.clears["group"].append(cluster)
        ops.bulk["group"].append(R.group_rows(tables["groups"]))
        if "group_members" in tables:
            ops.clears["member"].append(cluster)
            ops.bulk["member"].append(R.member_rows(tables["group_members"]))
    if "inventory" in tables:
        ops.clears["software"].append(cluster)
        ops.bulk["software"].append(R.software_rows(tables["inventory"]))
    member_groups: set[str] = set()
    new_brokers: list[str] = []
    for change in changes:
        entity, kind, subject = change["entity"], change["kind"], str(change["subject"])
        before, after = _json(change.get("before_json")), _json(change.get("after_json"))
        at = change.get("seen_at")
        cid = change.get("cluster_id") or cluster_id
        if entity == "topic" and not topics_bulk:
            if after is not None:
                ops.upsert("topic", {"cluster": cluster, "cluster_id": cid, "key": subject, "topic": subject,
                                     "topic_id": after.get("topic_id"), "internal": after.get("internal")})
            else:
                ops.delete("topic", cluster, subject)
            if before is not None and (after is None or kind == "topic_recreated"):
                old = {"cluster": cluster, "cluster_id": cid, "key": subject, "topic": subject,
                       "topic_id": before.get("topic_id"), "internal": before.get("internal")}
                ops.upsert("topic", R.tombstone("topic", old, at))
            if after is None:
                ops.parents["config"].append((cluster, f"topic{R.SEP}{subject}"))
        elif entity == "topic" and kind == "topic_recreated" and before is not None:
            old = {"cluster": cluster, "cluster_id": cid, "key": subject, "topic": subject,
                   "topic_id": before.get("topic_id"), "internal": before.get("internal")}
            ops.upsert("topic", R.tombstone("topic", old, at))
        elif entity == "broker":
            if after is None:
                ops.delete("broker", cluster, subject)
            else:
                ops.upsert("broker", R.broker_row(cluster, cid, subject, after))
        elif entity == "config" and kind in ("config_set", "config_changed") and after is not None:
            ops.upsert("config", R.config_row(cluster, cid, after))
        elif entity == "config" and kind == "config_removed" and before is not None:
            row = R.config_row(cluster, cid, before)
            ops.delete("config", cluster, row["key"])
        elif entity == "config" and kind == "broker_configs_first_seen" and "configs" in tables:
            new_brokers.append(subject.split(" ", 1)[-1])
        elif entity == "config" and kind == "broker_configs_gone":
            ops.parents["config"].append((cluster, f"broker{R.SEP}{subject.split(' ', 1)[-1]}"))
        elif entity == "group" and not groups_bulk:
            if kind in ("group_created", "group_protocol_changed") and after is not None:
                ops.upsert("group", {"cluster": cluster, "cluster_id": cid, "key": subject,
                                     "group_id": after.get("group_id", subject), "group_type": after.get("group_type")})
                member_groups.add(subject)
            elif kind == "group_deleted":
                ops.delete("group", cluster, subject)
                ops.parents["member"].append((cluster, subject))
                if before is not None:
                    old = {"cluster": cluster, "cluster_id": cid, "key": subject,
                           "group_id": before.get("group_id", subject), "group_type": before.get("group_type")}
                    ops.upsert("group", R.tombstone("group", old, at))
            elif kind in ("member_joined", "member_left"):
                facts = after if after is not None else before
                if facts is not None and facts.get("group_id") is not None:
                    member_groups.add(str(facts["group_id"]))
            elif kind == "members_changed":
                member_groups.add(subject)
    if new_brokers and "configs" in tables:
        configs = tables["configs"]
        mine = configs.filter(pc.and_(pc.equal(configs.column("resource_type"), "broker"),
                                      pc.is_in(configs.column("resource"), value_set=pa.array(new_brokers, pa.string()))))
        ops.bulk["config"].append(R.config_rows(mine))
    if member_groups and "group_members" in tables:
        for group in sorted(member_groups):
            ops.parents["member"].append((cluster, group))
        ops.bulk["member"].append(R.member_rows(_by_column(tables["group_members"], "group_id", member_groups)))


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
        on_disk = read_manifest(self.lake.where, "fleet")
        if on_disk is None or self.store.manifest is None or on_disk.get("generation") != self.store.manifest.get(
                "generation"):
            # Another writer (a `poll --once` job beside the service) moved the index on: go on from what it wrote
            # when it reflects the state this write started from, else rebuild below.
            self.store.manifest = on_disk
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
        for spec in tables_of(part="fleet"):
            if self.store.compaction_due(spec.name):
                result.compacted[spec.name] = self.store.compact(spec.name, now=now)
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
            except OSError as exc:
                log.error("committing the search index of %s failed: %s", self.lake.location, exc)
            self._dirty = False


def open_fleet_indexer(lake: Lake | str, *, retention_days: int = build.DEFAULT_RETENTION_DAYS) -> FleetIndexer | None:
    """The poller's indexer of a lake (built from the lake when missing or behind); None, logged, when it fails."""
    try:
        return FleetIndexer(lake, retention_days=retention_days)
    except Exception as exc:  # noqa: BLE001 - polling goes on without the index; readers build it in memory
        log.error("opening the search index of %s failed: %s", getattr(lake, "location", lake), exc)
        return None


def heads_ops(changed: pa.Table, replaced_ids: Iterable[str] = ()) -> dict[str, pa.Table]:
    """The clients part's delta from the instances whose latest snapshot a run changed (new heads replace old)."""
    del replaced_ids  # an updated instance keeps its key: its new row replaces the old one
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
        if self.store.compaction_due("instance"):
            result.compacted["instance"] = self.store.compact("instance")
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
