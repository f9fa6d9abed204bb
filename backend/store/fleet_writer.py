"""Fleet polls into the lake (status rows, changed state, change log, incidents) and back."""

from __future__ import annotations

import collections
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from backend.store import config_state, group_state, inventory_state, standards_state, state
from backend.store.commit import CommitConflict, delete_quietly, missing
from backend.store.group_model import GroupSnapshot
from backend.store.incidents import IncidentTracker, incidents_table
from backend.store.inventory_model import InventorySnapshot
from backend.store.lake import Lake, LakeError, _to_table
from backend.store.migrate import migrate_v1, needs_migration
from backend.store.model import Alert, ClusterSnapshot, ConfigSnapshot, FleetPoll, TopicSnapshot
from backend.store.schemas import (
    BROKER_SNAPSHOTS,
    CHANGES,
    CLUSTER_SNAPSHOTS,
    DAY_TABLES,
    INCIDENTS,
    POLICY_STATUS,
    SCHEMA_VERSION,
    TOPIC_SNAPSHOTS,
    ZK_SNAPSHOTS,
    schema_for,
)
from backend.store.standards_model import StandardsSnapshot
from backend.store.state import StateConflict

log = logging.getLogger(__name__)


def alert_id(poll_id: str, alert: Alert) -> str:
    """Return a stable id for an alert within a poll."""
    key = f"{poll_id}\x1f{alert.rule}\x1f{alert.cluster_name}\x1f{alert.subject}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


BROKER_FIELDS: tuple[str, ...] = (
    "host", "port", "rack", "is_controller", "reachable", "software_name", "software_version",
    "version_provenance", "version_min", "version_max", "version_confidence", "api_versions_json", "error",
)  # fmt: skip
VERSION_FIELDS = ("software_name", "software_version", "version_provenance", "version_min", "version_max")
ADDRESS_FIELDS = ("host", "port", "rack")
TOPIC_FIELDS: tuple[str, ...] = (
    "topic_id", "zk_topic_id", "partitions", "replication_factor", "internal", "under_replicated",
    "offline_partitions",
)  # fmt: skip
CLUSTER_FIELDS: tuple[str, ...] = ("tags_json", "cluster_id", "zk_cluster_id", "controller_id")
COMPACT_EVERY_S = 600.0
COMPACT_EVERY_POLLS = 100  # also by count, so a short interval cannot pile up files between runs
RETENTION_EVERY_S = 3600.0


def status_row(poll: FleetPoll, s: ClusterSnapshot) -> dict[str, Any]:
    """The poll status row of one cluster (cluster_snapshots columns)."""
    live = s.live_brokers
    return {
        "poll_id": poll.poll_id,
        "polled_at": poll.polled_at,
        "cluster_name": s.cluster_name,
        "tags_json": json.dumps(s.tags, sort_keys=True),
        "cluster_id": s.cluster_id,
        "zk_cluster_id": s.zk_cluster_id,
        "controller_id": s.controller_id,
        "status": s.status,
        "error": s.error,
        "broker_count": len(live) if s.has_data else None,
        "brokers_reachable": sum(1 for b in live if b.reachable) if s.has_data else None,
        "topic_count": len(s.topics) if s.has_data else None,
        "partition_count": s.partition_count if s.has_data else None,
        "under_replicated": s.under_replicated if s.has_data else None,
        "offline_partitions": s.offline_partitions if s.has_data else None,
        "duration_ms": round(s.duration_ms, 3),
        "schema_version": SCHEMA_VERSION,
    }


@dataclass
class ClusterMemory:
    """What the writer last committed for one cluster: the baseline of the next change detection."""

    cluster: dict[str, Any]
    brokers: dict[int, dict[str, Any]]
    topics: dict[str, tuple[Any, ...]]
    zk: dict[str, str]
    topics_ref: object = None  # the poller reuses an unchanged topic list: identity means unchanged
    counts: tuple[int, int, int] | None = None


@dataclass
class WriteResult:
    """What one poll wrote."""

    status_rows: int = 0
    changes: int = 0
    clusters_rewritten: list[str] = field(default_factory=list)
    degraded: dict[str, str] = field(default_factory=dict)
    incidents_opened: int = 0
    incidents_resolved: int = 0
    # What the write committed, for the search index (backend.search.updates): the state generation it started
    # from and the one it left, its change rows, and the state tables it rewrote per cluster and kind.
    base_generation: int | None = None
    generation: int | None = None
    change_rows: pa.Table | None = None  # the change log rows written (schema `changes`), None: none
    tables: dict[str, dict[str, pa.Table]] = field(default_factory=dict)


def _dumps(value: Mapping[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(dict(value), sort_keys=True, default=str)


def change_row(poll: FleetPoll, s: ClusterSnapshot, entity: str, kind: str, subject: str, before: Any,
               after: Any) -> dict[str, Any]:
    """One row of the change log."""
    name = s.cluster_name
    return {
        "change_id": hashlib.sha1(f"{poll.poll_id}\x1f{name}\x1f{entity}\x1f{kind}\x1f{subject}".encode()).hexdigest()[:20],
        "poll_id": poll.poll_id, "seen_at": poll.polled_at, "cluster_name": name,
        "cluster_id": s.cluster_id, "entity": entity, "kind": kind, "subject": subject,
        "before_json": _dumps(before), "after_json": _dumps(after), "schema_version": SCHEMA_VERSION,
    }


def _topic_dict(topics: list[TopicSnapshot]) -> dict[str, tuple[Any, ...]]:
    return {
        t.topic: (t.topic_id, t.zk_topic_id, t.partitions, t.replication_factor, t.internal, t.under_replicated,
                  t.offline_partitions)
        for t in topics
    }


def _topic_row(name: str, values: tuple[Any, ...]) -> dict[str, Any]:
    return {"topic": name, **dict(zip(TOPIC_FIELDS, values, strict=True))}


class FleetWriter:
    """Writes polls into the v2 lake: status rows, changed cluster state, change log, incidents."""

    def __init__(self, lake: Lake, *, flush_interval_s: float = 60.0, migrate: bool = True) -> None:
        """Open the lake's state (migrating a v1 lake first) as the baseline of change detection."""
        self.lake = lake
        if migrate:
            migrate_v1_if_needed(lake)
        self.flush_interval_s = flush_interval_s
        self.version: str | None = None
        self.manifest: dict[str, Any] = state.new_manifest()
        self.memory: dict[str, ClusterMemory] = {}
        self.configs: dict[str, ConfigSnapshot] = {}
        self.groups: dict[str, GroupSnapshot] = {}
        self.inventory: dict[str, InventorySnapshot] = {}
        self.standards: dict[str, StandardsSnapshot] = {}
        self._standards_day: dict[str, str] = {}  # per cluster, the day of its last baseline row of policy_status
        # The state files the last commit replaced: deleted at the next write, not at once, so that a reader holding
        # the manifest before it still finds them (one answer's groups, members and offsets stay of one poll).
        self._retiring: list[str] = []
        # The polls this writer committed (recent ones): compaction merges another writer's recent files only once
        # they are old enough to be committed (Lake.compact's `own`).
        self._own_polls: collections.deque[str] = collections.deque(maxlen=1024)
        self.incidents: IncidentTracker
        self._reload()
        self._checkpointed: str | None = None  # the last day this writer found (or made) a checkpoint for
        self._last_compact: datetime | None = None
        self._polls_since_compact = 0
        self._last_retention: datetime | None = None

    def write(self, poll: FleetPoll, *, status_rows: bool = True) -> WriteResult:
        """Write one poll; a cluster whose rows do not fit the schema gets a degraded status row.

        Everything the poll changes (the change log's rows, the changed state files, resolved and open incidents)
        is written under names of its own, then committed by one manifest over the version this writer read. When
        another writer committed first, the files are removed, the writer reloads the lake's state, and
        StateConflict says so: the poll is not written (not even its status rows), nothing of it is mixed in.
        """
        self._follow_other_writer()
        result = WriteResult(base_generation=int(self.manifest.get("generation", 0)))
        changes: list[dict[str, Any]] = []
        updates: dict[str, dict[str, pa.Table]] = {}
        degraded: dict[str, str] = {}
        history: list[dict[str, Any]] = []
        standards_day = dict(self._standards_day)  # restored when the commit is lost
        for snapshot in poll.clusters:
            if not snapshot.has_data:
                continue
            try:
                cluster_changes, tables, memory = self._diff(poll, snapshot)
                config_changes, config_tables = self._diff_configs(poll, snapshot)
                cluster_changes += config_changes
                tables.update(config_tables)
                group_changes, group_tables = self._diff_groups(poll, snapshot)
                cluster_changes += group_changes
                tables.update(group_tables)
                inventory_changes, inventory_tables = self._diff_inventory(poll, snapshot)
                cluster_changes += inventory_changes
                tables.update(inventory_tables)
                policy_rows, policy_tables = self._diff_standards(poll, snapshot)
                tables.update(policy_tables)
                for kind, table in tables.items():
                    _to_table(state.STATE_TABLES[kind], table, schema_for(state.STATE_TABLES[kind]))
                if cluster_changes:
                    pa.Table.from_pylist(cluster_changes, schema=schema_for(CHANGES))
            except (LakeError, pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                degraded[snapshot.cluster_name] = f"rows do not fit the lake schema: {str(exc)[:300]}"
                continue
            changes.extend(cluster_changes)
            if tables:
                updates[snapshot.cluster_name] = tables
            self.memory[snapshot.cluster_name] = memory
            if snapshot.configs is not None:
                self.configs[snapshot.cluster_name] = snapshot.configs
            if snapshot.groups is not None and group_tables:
                self.groups[snapshot.cluster_name] = snapshot.groups
            if snapshot.inventory is not None:
                self.inventory[snapshot.cluster_name] = snapshot.inventory
            if snapshot.standards is not None:
                self.standards[snapshot.cluster_name] = snapshot.standards
                history += policy_rows
                self._standards_day[snapshot.cluster_name] = poll.polled_at.astimezone(UTC).date().isoformat()
        change_table = pa.Table.from_pylist(changes, schema=schema_for(CHANGES)) if changes else None
        with_data = [s.cluster_name for s in poll.clusters if s.has_data and s.cluster_name not in degraded]
        alerts = [a for a in poll.alerts if a.cluster_name not in degraded]
        transitions = self.incidents.observe(poll.poll_id, poll.polled_at, alerts, with_data, poll.hold)
        open_table = self.incidents.pending(poll.polled_at, transitions)
        staged: list[str] = []
        replaced: list[str] = []
        generation = int(self.manifest.get("generation", 0)) + 1
        token = state.writer_token()
        manifest = self.manifest
        try:
            if change_table is not None:
                staged.append(self._append(CHANGES, change_table, poll.poll_id))
            if history:
                staged.append(self._append(POLICY_STATUS, history, poll.poll_id))
            if updates:
                manifest, written, old = state.stage_cluster_states(self.lake, manifest, updates, generation, token)
                staged += written
                replaced += old
            if transitions.resolved:
                staged.append(self._append(INCIDENTS, incidents_table(transitions.resolved), poll.poll_id))
            if open_table is not None:
                manifest, path, old_open = state.stage_open_incidents(self.lake, manifest, open_table, generation, token)
                staged.append(path)
                replaced.append(old_open)
            if manifest is not self.manifest or staged:
                manifest = {**manifest, "generation": generation}
                self.version = state.commit_manifest(self.lake, manifest, self.version)
        except BaseException:
            # Lost the commit (StateConflict), or the write failed: none of this poll stays, and the next poll
            # starts from what the lake holds.
            delete_quietly(self.lake.where, staged)
            self._standards_day = standards_day
            self._reload()
            raise
        self.manifest = manifest
        if open_table is not None:
            self.incidents.flushed(poll.polled_at)
        state.delete_entries(self.lake, self._retiring)
        self._retiring = replaced
        self._own_polls.append(poll.poll_id)
        self._checkpoint(poll)
        if status_rows:
            rows = []
            for snapshot in poll.clusters:
                row = self._status_row(poll, snapshot)
                if snapshot.cluster_name in degraded:
                    row.update(status="degraded", error=degraded[snapshot.cluster_name])
                rows.append(row)
            try:
                table = pa.Table.from_pylist(rows, schema=schema_for(CLUSTER_SNAPSHOTS))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                table = pa.Table.from_pylist([_fit_status_row(r) for r in rows], schema=schema_for(CLUSTER_SNAPSHOTS))
            self.lake.write(CLUSTER_SNAPSHOTS, table, poll_id=poll.poll_id)
            result.status_rows = len(rows)
        result.changes = len(changes)
        result.change_rows = change_table
        result.tables = updates
        result.generation = int(self.manifest.get("generation", 0))
        result.clusters_rewritten = sorted(updates)
        result.degraded = degraded
        result.incidents_opened = len(transitions.opened)
        result.incidents_resolved = len(transitions.resolved)
        return result

    def _append(self, table: str, rows: list[dict[str, Any]] | pa.Table, poll_id: str) -> str:
        path = self.lake.write(table, rows, poll_id=poll_id)
        assert path is not None  # rows are never empty here
        return path

    def _checkpoint(self, poll: FleetPoll) -> None:
        """The first committed state of a day (checked once a day per writer): the base fleet_state_at replays onto."""
        day = poll.polled_at.astimezone(UTC).date().isoformat()
        if self._checkpointed == day or not self.memory:
            return
        if not state.has_checkpoint(self.lake, day):
            state.write_checkpoint(self.lake, day, self.state_tables(), poll.polled_at)
        self._checkpointed = day

    def _load(self, manifest: dict[str, Any]) -> None:
        self.manifest = manifest
        self.memory = _memory_from_state(self.lake, manifest)
        self.configs = _configs_from_state(self.lake, manifest)
        self.groups = _groups_from_state(self.lake, manifest)
        self.inventory = _inventory_from_state(self.lake, manifest)
        self.standards = _standards_from_state(self.lake, manifest)
        self.incidents = IncidentTracker(self.lake, flush_interval_s=self.flush_interval_s, manifest=manifest)

    def _reload(self, manifest: dict[str, Any] | None = None, version: str | None = None) -> None:
        """Load what the lake holds (after a lost commit: another writer's state is the baseline), one generation
        whole: when another writer committed while it was read, read again."""
        if manifest is None:
            manifest, version = state.read_manifest_versioned(self.lake)
        for _attempt in range(10):
            try:
                self._load(manifest or state.new_manifest())
            except OSError as exc:
                if not missing(exc):
                    raise
            else:
                _, current = state.read_manifest_versioned(self.lake)
                if current == version:
                    self.version = version
                    return
            manifest, version = state.read_manifest_versioned(self.lake)
        raise StateConflict(self.lake.state_dir(state.MANIFEST), "the fleet state changed ten times while this writer "
                            "read it: is another writer committing without pause?")

    def _follow_other_writer(self) -> None:
        """Reload state and open incidents when another writer (e.g. a `poll --once` job) moved the lake on."""
        current, version = state.read_manifest_versioned(self.lake)
        if version == self.version:
            return
        log.info("lake %s changed under this writer (generation %s -> %s): reloading its state",
                 self.lake.location, self.manifest.get("generation"), (current or {}).get("generation"))
        self._reload(current, version)

    def _status_row(self, poll: FleetPoll, s: ClusterSnapshot) -> dict[str, Any]:
        memory = self.memory.get(s.cluster_name)
        if s.has_data and memory is not None and memory.topics_ref is s.topics and memory.counts is not None:
            # Unchanged topic list: reuse the counts instead of summing thousands of topics again.
            partitions, urp, offline = memory.counts
            row = status_row(FleetPoll(poll.poll_id, poll.polled_at, [], [], 0.0), _no_topics(s))
            row.update(topic_count=len(s.topics), partition_count=partitions, under_replicated=urp,
                       offline_partitions=offline)
            return row
        row = status_row(poll, s)
        if s.has_data and memory is not None and memory.topics_ref is s.topics:
            memory.counts = (row["partition_count"], row["under_replicated"], row["offline_partitions"])
        return row

    def _diff(
        self, poll: FleetPoll, s: ClusterSnapshot
    ) -> tuple[list[dict[str, Any]], dict[str, pa.Table], ClusterMemory]:
        name = s.cluster_name
        prev = self.memory.get(name)
        changes: list[dict[str, Any]] = []

        def change(entity: str, kind: str, subject: str, before: Any, after: Any) -> None:
            changes.append(change_row(poll, s, entity, kind, subject, before, after))

        cluster = {f: v for f, v in status_row(poll, _no_topics(s)).items() if f in CLUSTER_FIELDS}
        brokers = {b.broker_id: {f: getattr(b, f) for f in BROKER_FIELDS} for b in s.brokers}
        zk = dict(s.zk_nodes)
        if prev is not None and prev.topics_ref is s.topics:
            topics = prev.topics
        else:
            topics = _topic_dict(s.topics)
        tables: dict[str, pa.Table] = {}
        if prev is None:
            change("cluster", "cluster_first_seen", name, None, cluster)
            for bid, b in sorted(brokers.items()):
                change("broker", "broker_first_seen", str(bid), None, b)
            for t, values in sorted(topics.items()):
                change("topic", "topic_first_seen", t, None, _topic_row(t, values))
            for path, value in sorted(zk.items()):
                change("zk", "zk_node_first_seen", path, None, {"value": value})
            changed = {"clusters", "brokers", "topics", "zk_nodes"}
        else:
            changed = set()
            for f, kind in (("cluster_id", "cluster_id_changed"), ("zk_cluster_id", "zk_cluster_id_changed"),
                            ("controller_id", "controller_changed"), ("tags_json", "tags_changed")):
                if cluster[f] != prev.cluster.get(f):
                    change("cluster", kind, name, prev.cluster, cluster)
                    changed.add("clusters")
            if brokers != prev.brokers:
                changed.add("brokers")
                for bid in sorted(set(brokers) | set(prev.brokers)):
                    old, new = prev.brokers.get(bid), brokers.get(bid)
                    if old == new:
                        continue
                    if old is None:
                        kind = "broker_appeared"
                    elif new is None:
                        kind = "broker_gone"
                    elif any(old[f] != new[f] for f in VERSION_FIELDS) and new["reachable"]:
                        kind = "broker_version_changed"
                    elif any(old[f] != new[f] for f in ADDRESS_FIELDS):
                        kind = "broker_address_changed"
                    else:
                        kind = "broker_state_changed"
                    change("broker", kind, str(bid), old, new)
            if topics is not prev.topics and topics != prev.topics:
                changed.add("topics")
                for t in sorted(set(topics) | set(prev.topics)):
                    old_t, new_t = prev.topics.get(t), topics.get(t)
                    if old_t == new_t:
                        continue
                    if old_t is None:
                        kind = "topic_created"
                    elif new_t is None:
                        kind = "topic_deleted"
                    elif old_t[0] and new_t[0] and old_t[0] != new_t[0]:
                        kind = "topic_recreated"
                    elif old_t[2] != new_t[2]:
                        kind = "topic_partitions_changed"
                    elif old_t[3] != new_t[3]:
                        kind = "topic_rf_changed"
                    else:
                        kind = "topic_changed"
                    change("topic", kind, t, _topic_row(t, old_t) if old_t else None,
                           _topic_row(t, new_t) if new_t else None)
            if zk != prev.zk:
                changed.add("zk_nodes")
                for path in sorted(set(zk) | set(prev.zk)):
                    old_v, new_v = prev.zk.get(path), zk.get(path)
                    if old_v != new_v:
                        kind = "zk_node_added" if old_v is None else "zk_node_removed" if new_v is None else "zk_node_changed"
                        change("zk", kind, path, None if old_v is None else {"value": old_v},
                               None if new_v is None else {"value": new_v})
            if changed:
                changed.add("clusters")  # the cluster row carries the counts of the state it describes
        memory = ClusterMemory(cluster=cluster, brokers=brokers, topics=topics, zk=zk, topics_ref=s.topics)
        if prev is not None and prev.topics_ref is s.topics:
            memory.counts = prev.counts
        for kind in sorted(changed):
            tables[kind] = _state_table(kind, poll, s, memory)
        return changes, tables, memory

    def _diff_configs(self, poll: FleetPoll, s: ClusterSnapshot) -> tuple[list[dict[str, Any]], dict[str, pa.Table]]:
        """Change rows and state tables of a freshly collected configuration (nothing when it is the stored one)."""
        new = s.configs
        prev = self.configs.get(s.cluster_name)
        if new is None or new is prev:
            return [], {}
        if prev is not None and new.collected_at < prev.collected_at:
            return [], {}  # another writer (a `poll --once` job) stored a newer read: never go back to an older one
        tables = {"config_runs": config_state.runs_table(poll.poll_id, poll.polled_at, s.cluster_name, s.cluster_id, new)}
        if prev is not None and new.brokers == prev.brokers and new.topics == prev.topics:
            return [], tables
        found = config_state.diff(prev, new, s.cluster_name, (t.topic for t in s.topics))
        rows = [change_row(poll, s, "config", kind, subject, before, after) for kind, subject, before, after in found]
        tables["configs"] = config_state.state_table(poll.poll_id, poll.polled_at, s.cluster_name, s.cluster_id, new)
        return rows, tables

    def _diff_groups(self, poll: FleetPoll, s: ClusterSnapshot) -> tuple[list[dict[str, Any]], dict[str, pa.Table]]:
        """Change rows and state tables of a fresh read of the cluster's groups (nothing when it is the stored one)."""
        new = s.groups
        prev = self.groups.get(s.cluster_name)
        if new is None or new is prev:
            return [], {}
        if prev is not None and new.collected_at < prev.collected_at:
            return [], {}  # another writer stored a newer read: never go back to an older one
        found = group_state.diff(prev, new, s.cluster_name)
        rows = [change_row(poll, s, "group", kind, subject, before, after) for kind, subject, before, after in found]
        return rows, group_state.state_tables(poll.poll_id, poll.polled_at, s.cluster_name, s.cluster_id, prev, new)
    def _diff_inventory(self, poll: FleetPoll, s: ClusterSnapshot) -> tuple[list[dict[str, Any]], dict[str, pa.Table]]:
        """Change rows and state tables of a freshly read client inventory (nothing when it is the stored one)."""
        new = s.inventory
        prev = self.inventory.get(s.cluster_name)
        if new is None or new is prev:
            return [], {}
        if prev is not None and new.collected_at < prev.collected_at:
            return [], {}  # another writer stored a newer read
        tables = {"inventory_runs": inventory_state.runs_table(poll.poll_id, poll.polled_at, s.cluster_name,
                                                               s.cluster_id, new)}
        found = inventory_state.diff(prev, new, s.cluster_name)
        if prev is None or not inventory_state.same_content(prev, new):
            tables["inventory"] = inventory_state.state_table(poll.poll_id, poll.polled_at, s.cluster_name,
                                                              s.cluster_id, new)
        rows = [change_row(poll, s, "client", kind, subject, before, after) for kind, subject, before, after in found]
        return rows, tables

    def _diff_standards(self, poll: FleetPoll, s: ClusterSnapshot) -> tuple[list[dict[str, Any]], dict[str, pa.Table]]:
        """History rows (changes, and the day's baseline) and state tables of the cluster's policy results."""
        new = s.standards
        if new is None:
            return [], {}
        prev = self.standards.get(s.cluster_name)
        day = poll.polled_at.astimezone(UTC).date().isoformat()
        baseline = self._standards_day.get(s.cluster_name) != day
        if new is prev and not baseline:
            return [], {}
        rows = standards_state.history_rows(poll.poll_id, poll.polled_at, s.cluster_name, prev, new, baseline=baseline)
        if new is prev:
            return rows, {}
        return rows, standards_state.state_tables(poll.poll_id, poll.polled_at, s.cluster_name, s.cluster_id, new)

    def state_tables(self) -> dict[str, pa.Table]:
        """The whole current state from memory (for checkpoints)."""
        parts: dict[str, list[pa.Table]] = {k: [] for k in state.CHECKPOINTED}
        for name in sorted(self.memory):
            tables = state.read_state(self.lake, "clusters", name, self.manifest)
            parts["clusters"].append(tables)
            for kind in ("brokers", "topics", "zk_nodes"):
                parts[kind].append(state.read_state(self.lake, kind, name, self.manifest))
        return {k: pa.concat_tables(v) if v else state.empty_state(k) for k, v in parts.items()}

    def maintain(self, now: datetime, retention_days: int | None) -> None:
        """Compact the day tables (every 10 min or 100 polls) and apply retention (hourly); cheap when not due."""
        self._polls_since_compact += 1
        if (
            self._last_compact is None
            or (now - self._last_compact).total_seconds() >= COMPACT_EVERY_S
            or self._polls_since_compact >= COMPACT_EVERY_POLLS
        ):
            for table in DAY_TABLES:
                self.lake.compact(table, now=now, own=set(self._own_polls))
            self._last_compact = now
            self._polls_since_compact = 0
        if retention_days and (
            self._last_retention is None or (now - self._last_retention).total_seconds() >= RETENTION_EVERY_S
        ):
            self.lake.apply_retention(retention_days, today=now.date())
            state.apply_checkpoint_retention(self.lake, retention_days, today=now.date())
            self._last_retention = now

    @property
    def retiring(self) -> tuple[str, ...]:
        """The state files the last commit replaced, deleted by the next write or close."""
        return tuple(self._retiring)

    def close(self, at: datetime) -> None:
        """Commit the open incidents' last_seen moves not committed yet (the poller stops)."""
        try:
            self._flush_open(at)
        finally:
            state.delete_entries(self.lake, self._retiring)
            self._retiring = []

    def _flush_open(self, at: datetime) -> None:
        table = self.incidents.unflushed()
        if table is None:
            return
        self._follow_other_writer()
        table = self.incidents.unflushed()
        if table is None:
            return
        generation = int(self.manifest.get("generation", 0)) + 1
        manifest, path, replaced = state.stage_open_incidents(self.lake, self.manifest, table, generation,
                                                              state.writer_token())
        manifest = {**manifest, "generation": generation}
        try:
            self.version = state.commit_manifest(self.lake, manifest, self.version)
        except CommitConflict:
            delete_quietly(self.lake.where, [path])
            raise
        self.manifest = manifest
        self.incidents.flushed(at)
        state.delete_entries(self.lake, [replaced])


def _no_topics(s: ClusterSnapshot) -> ClusterSnapshot:
    return replace(s, topics=[])


def _fit_status_row(row: dict[str, Any]) -> dict[str, Any]:
    """Return the row if it fits cluster_snapshots, else a degraded row that says why (nothing raises)."""
    try:
        pa.Table.from_pylist([row], schema=schema_for(CLUSTER_SNAPSHOTS))
        return row
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        keep = ("poll_id", "polled_at", "cluster_name", "duration_ms", "schema_version")
        fitted = {k: row.get(k) for k in keep}
        fitted["cluster_name"] = str(fitted["cluster_name"])
        fitted.update(status="degraded", error=f"status row does not fit the lake schema: {str(exc)[:300]}")
        return fitted


def _state_table(kind: str, poll: FleetPoll, s: ClusterSnapshot, memory: ClusterMemory) -> pa.Table:
    base = {"poll_id": poll.poll_id, "polled_at": poll.polled_at, "cluster_name": s.cluster_name}
    if kind == "clusters":
        rows = [status_row(poll, s)]
        return pa.Table.from_pylist(rows, schema=schema_for(CLUSTER_SNAPSHOTS))
    if kind == "brokers":
        rows = [{**base, "cluster_id": s.cluster_id, "broker_id": b.broker_id,
                 **{f: getattr(b, f) for f in BROKER_FIELDS}, "probe_ms": b.probe_ms,
                 "schema_version": SCHEMA_VERSION} for b in s.brokers]
        return pa.Table.from_pylist(rows, schema=schema_for(BROKER_SNAPSHOTS))
    if kind == "zk_nodes":
        rows = [{**base, "path": p, "value": v, "schema_version": SCHEMA_VERSION} for p, v in s.zk_nodes]
        return pa.Table.from_pylist(rows, schema=schema_for(ZK_SNAPSHOTS))
    names = list(memory.topics)
    n = len(names)
    cols: dict[str, list[Any]] = {
        "poll_id": [poll.poll_id] * n, "polled_at": [poll.polled_at] * n, "cluster_name": [s.cluster_name] * n,
        "cluster_id": [s.cluster_id] * n, "topic": names,
    }
    values = list(memory.topics.values())
    for i, f in enumerate(TOPIC_FIELDS):
        cols[f] = [v[i] for v in values]
    cols["schema_version"] = [SCHEMA_VERSION] * n
    schema = schema_for(TOPIC_SNAPSHOTS)
    return pa.Table.from_pydict({f.name: cols[f.name] for f in schema}, schema=schema)


def _memory_from_state(lake: Lake, manifest: Mapping[str, Any]) -> dict[str, ClusterMemory]:
    if not manifest.get("clusters"):
        return {}
    clusters = state.read_state(lake, "clusters", manifest=manifest).to_pylist()
    brokers = state.read_state(lake, "brokers", manifest=manifest).to_pylist()
    topics = state.read_state(lake, "topics", manifest=manifest).to_pylist()
    zk = state.read_state(lake, "zk_nodes", manifest=manifest).to_pylist()
    out: dict[str, ClusterMemory] = {}
    for row in clusters:
        out[row["cluster_name"]] = ClusterMemory(
            cluster={f: row[f] for f in CLUSTER_FIELDS}, brokers={}, topics={}, zk={}
        )
    for b in brokers:
        if b["cluster_name"] in out:
            out[b["cluster_name"]].brokers[b["broker_id"]] = {f: b[f] for f in BROKER_FIELDS}
    for t in topics:
        if t["cluster_name"] in out:
            out[t["cluster_name"]].topics[t["topic"]] = tuple(t[f] for f in TOPIC_FIELDS)
    for z in zk:
        if z["cluster_name"] in out:
            out[z["cluster_name"]].zk[z["path"]] = z["value"]
    return out


def _configs_from_state(lake: Lake, manifest: Mapping[str, Any]) -> dict[str, ConfigSnapshot]:
    if not any(entry.get("config_runs") for entry in manifest.get("clusters", {}).values()):
        return {}
    return config_state.snapshots_from_tables(state.read_state(lake, "configs", manifest=manifest),
                                              state.read_state(lake, "config_runs", manifest=manifest))


def _groups_from_state(lake: Lake, manifest: Mapping[str, Any]) -> dict[str, GroupSnapshot]:
    if not any(entry.get("group_runs") for entry in manifest.get("clusters", {}).values()):
        return {}
    return group_state.snapshots_from_tables(*(state.read_state(lake, kind, manifest=manifest) for kind in (
        "groups", "group_members", "group_offsets", "group_runs")))
def _inventory_from_state(lake: Lake, manifest: Mapping[str, Any]) -> dict[str, InventorySnapshot]:
    if not any(entry.get("inventory_runs") for entry in manifest.get("clusters", {}).values()):
        return {}
    return inventory_state.snapshots_from_tables(state.read_state(lake, "inventory", manifest=manifest),
                                                 state.read_state(lake, "inventory_runs", manifest=manifest))


def _standards_from_state(lake: Lake, manifest: Mapping[str, Any]) -> dict[str, StandardsSnapshot]:
    if not any(entry.get("policy_results") for entry in manifest.get("clusters", {}).values()):
        return {}
    return standards_state.snapshots_from_tables(state.read_state(lake, "policy_results", manifest=manifest))


def migrate_v1_if_needed(lake: Lake) -> bool:
    """Migrate a v1 lake once, replaying its polls through a writer that does not migrate."""
    if not needs_migration(lake):
        return False
    return migrate_v1(lake, lambda: FleetWriter(lake, migrate=False, flush_interval_s=0.0))


_WRITERS: dict[str, FleetWriter] = {}


def fleet_writer(lake: Lake) -> FleetWriter:
    """The process's writer of a lake (cached; reloaded when another writer moved the state on)."""
    writer = _WRITERS.get(lake.location)
    manifest = state.read_manifest(lake)
    current_gen = manifest.get("generation") if manifest else None
    if writer is None or current_gen != (writer.manifest.get("generation") if manifest else None) or (
        manifest is None and writer.memory
    ):
        writer = FleetWriter(lake)
        _WRITERS[lake.location] = writer
    return writer


def write_fleet_poll(lake: Lake, poll: FleetPoll) -> WriteResult:
    """Write one poll: changed state and change log, incidents, then the status rows (the poll's commit)."""
    return fleet_writer(lake).write(poll)
