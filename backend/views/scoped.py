"""The grant-filtered readers of one lake for one caller: every door (pages, exports, API, MCP) reads through them.

A `ScopedLake` holds a lake location and the caller's `Scope` (backend.auth.scope: the cluster names it may view,
the ids they report, the hidden names to redact). Each reader returns only what that scope may see: rows by cluster
name, client-config results by the cluster ids visible clusters report, drift rows only when both ids are visible,
hidden names replaced in text columns, fleet-wide figures only for a caller who sees every cluster. A cluster outside
the scope does not exist for the caller: not in a list, a count or an error.

Pure (no Streamlit). Readers memoise within one object, so the readers that build on others (results named by
cluster, readiness) read each table once; the pages keep one object per (lake, visible names) for a few seconds
(dashboard/data.py), the API one per (lake, visible names) for a few seconds (backend/api/access.py). Returned
frames are shared within the object: callers copy before they change one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import pandas as pd

from backend.auth.scope import Scope, scope_for
from backend.store import group_readers, readers
from backend.views import config_views, fleet_views, frames, readiness, standards_views

T = TypeVar("T")
Visible = tuple[str, ...] | None
HISTORY_POLLS = 20

# Text columns that may name another cluster (evidence, errors, change rows): hidden names are replaced there.
TEXT_COLUMNS = ("error", "evidence_json", "latest_evidence_json", "explanation", "subject", "evidence", "message",
                "latest_evidence", "rationale", "before_json", "after_json", "value")
# Results that are not per cluster: shown only to a caller who may view every cluster.
FLEET_WIDE_RESULTS = ("ingest_stats",)


def open_scope(location: str, names: Iterable[str] | None, fleet_names: Iterable[str] = ()) -> Scope:
    """The scope of visible cluster names (None: everything) over a lake's known clusters and the fleet file's."""
    return scope_for(None if names is None else tuple(names), frames.known_clusters(location), fleet_names)


class ScopedLake:
    """What one caller (its Scope) may read of one lake, reader by reader."""

    def __init__(self, location: str, seen: Scope) -> None:
        """Readers of `location` filtered to `seen` (Scope(): everything, login off)."""
        self.location = location
        self.seen = seen
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._guard = threading.Lock()

    @classmethod
    def open(cls, location: str, names: Iterable[str] | None, fleet_names: Iterable[str] = ()) -> ScopedLake:
        """A ScopedLake for visible names (None: everything), hidden names taken from the lake and the fleet file."""
        return cls(location, open_scope(location, names, fleet_names))

    @property
    def names(self) -> frozenset[str] | None:
        """The visible cluster names (None: every cluster)."""
        return self.seen.names

    def once(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        """Build a value once per object; concurrent callers of the same key wait for the first (other doors
        memoise their own derived values here too: the API its answers)."""
        if key in self._memo:
            return self._memo[key]  # type: ignore[no-any-return]
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = build()
            return self._memo[key]  # type: ignore[no-any-return]

    def peek(self, key: tuple[Any, ...]) -> Any | None:
        """What `once` or `keep` memoised under key, or None: never builds, never waits (an event loop may call it)."""
        return self._memo.get(key)

    def keep(self, key: tuple[Any, ...], value: T) -> T:
        """Memoise a value built elsewhere (the first one kept wins) and return the kept one."""
        return self._memo.setdefault(key, value)  # type: ignore[no-any-return]

    def by_name(self, frame: pd.DataFrame, column: str = "cluster_name") -> pd.DataFrame:
        """Rows of visible clusters, hidden names replaced in the text columns."""
        if self.seen.names is None:
            return frame
        return self.seen.redact_columns(self.seen.by_name(frame, column), TEXT_COLUMNS).reset_index(drop=True)

    def allowed(self, clusters: Iterable[str]) -> tuple[str, ...]:
        """The clusters asked for that this caller may view, in the order asked."""
        return tuple(c for c in clusters if self.seen.may_view(c))

    # ------------------------------------------------------------------ clusters, brokers, topics

    def cluster_history(self) -> pd.DataFrame:
        """Cluster rows with each cluster's last known id, oldest first (not the whole poll history on a v2 lake)."""
        return self.once(("history",), lambda: self.by_name(frames.known_clusters(self.location)))

    def latest_clusters(self) -> pd.DataFrame:
        """Latest status row per visible cluster, with tag columns."""
        return self.once(("clusters",), lambda: fleet_views.latest_clusters(
            self.by_name(frames.latest_clusters(self.location))))

    def latest_brokers(self, cluster: str | None = None, with_data: bool = False) -> pd.DataFrame:
        """Broker rows of each visible cluster's latest poll (with_data: the latest poll that had brokers)."""
        def build() -> pd.DataFrame:
            if cluster is not None and not self.seen.may_view(cluster):
                return frames.latest_rows(self.location, "broker_snapshots", "", with_data=with_data).iloc[0:0]
            return self.by_name(frames.latest_rows(self.location, "broker_snapshots", cluster, with_data=with_data))

        return self.once(("brokers", cluster, with_data), build)

    def version_timeline(self) -> pd.DataFrame:
        """First sighting and every version change of every visible broker."""
        return self.once(("timeline",), lambda: self.by_name(frames.version_timeline(self.location)))

    def latest_topics(self, cluster: str) -> pd.DataFrame:
        """Topic rows of one cluster's latest poll that had data (empty for a cluster outside the scope)."""
        def build() -> pd.DataFrame:
            if not self.seen.may_view(cluster):
                return frames.latest_rows(self.location, "topic_snapshots", "", with_data=True).iloc[0:0]
            return frames.latest_rows(self.location, "topic_snapshots", cluster, with_data=True)

        return self.once(("topics", cluster), build)

    def all_topics(self) -> pd.DataFrame:
        """Topic rows of every visible cluster's latest poll that had data."""
        return self.once(("all_topics",), lambda: self.by_name(
            frames.latest_rows(self.location, "topic_snapshots", with_data=True)))

    def latest_topics_of(self, clusters: Iterable[str]) -> pd.DataFrame:
        """Topic names and ids of several clusters' latest polls that had data (visible ones only)."""
        allowed = self.allowed(clusters)

        def build() -> pd.DataFrame:
            frame = frames.latest_rows(self.location, "topic_snapshots", with_data=True)
            return frame.loc[frame["cluster_name"].isin(allowed), ["cluster_name", "topic", "topic_id"]]

        return self.once(("topics_of", allowed), build)

    def recent_changes(self, cluster: str) -> pd.DataFrame:
        """Recent changes of one cluster: from the change log (v2 lake), else over its last HISTORY_POLLS polls."""
        def build() -> pd.DataFrame:
            if not self.seen.may_view(cluster):
                return fleet_views.recent_changes_from_log(frames.changes(self.location, "").iloc[0:0], cluster)
            if frames.is_v2(self.location):
                return fleet_views.recent_changes_from_log(self.by_name(frames.changes(self.location, cluster)), cluster)
            mine = frames.poll_history(self.location, cluster).tail(HISTORY_POLLS)
            polls = set(mine["poll_id"])
            topics = frames.read_snapshots(self.location, "topic_snapshots", polls, cluster)
            brokers = frames.read_snapshots(self.location, "broker_snapshots", polls, cluster)
            return fleet_views.recent_changes(topics, brokers, mine, cluster)

        return self.once(("changes", cluster), build)

    def changes(self, cluster: str | None = None) -> pd.DataFrame:
        """The change log of the last 7 days of one visible cluster (None: of every visible cluster)."""
        def build() -> pd.DataFrame:
            if cluster is not None and not self.seen.may_view(cluster):
                return frames.changes(self.location, "").iloc[0:0]
            return self.by_name(frames.changes(self.location, cluster))

        return self.once(("change_log", cluster), build)

    def topic_id_changes(self, cluster: str) -> pd.DataFrame:
        """Topics of one visible cluster deleted and created again under the same name (old and new topic ids)."""
        def build() -> pd.DataFrame:
            frame = readers.topic_id_changes(self.location, cluster)
            return frame.iloc[0:0] if not self.seen.may_view(cluster) else frame

        return self.once(("recreated", cluster), build)

    def zk_nodes(self, cluster: str) -> pd.DataFrame:
        """ZooKeeper nodes (path, value) of the cluster's newest poll that read any."""
        def build() -> pd.DataFrame:
            if not self.seen.may_view(cluster):
                return pd.DataFrame({"path": pd.Series(dtype=object), "value": pd.Series(dtype=object)})
            frame = self.by_name(frames.zk_nodes_last_seen(self.location, cluster))
            return frame[["path", "value"]].sort_values("path").reset_index(drop=True)

        return self.once(("zk", cluster), build)

    # ------------------------------------------------------------------ broker and topic configs

    def broker_configs(self, clusters: Iterable[str]) -> pd.DataFrame:
        """Broker configs and topic overrides of the clusters asked for that may be viewed (their state files)."""
        allowed = self.allowed(clusters)
        return self.once(("configs", allowed), lambda: self.by_name(frames.broker_configs(self.location, allowed)))

    def config_runs(self, clusters: Iterable[str]) -> pd.DataFrame:
        """When the configs of the clusters asked for (that may be viewed) were read, and what could not be."""
        allowed = self.allowed(clusters)
        return self.once(("config_runs", allowed), lambda: self.by_name(frames.config_runs(self.location, allowed)))

    # ------------------------------------------------------------------ incidents, results, alerts

    def fleet_alerts(self) -> pd.DataFrame:
        """All fleet alerts (incidents) of the visible clusters."""
        return self.once(("alerts",), lambda: self.by_name(frames.fleet_alerts(self.location)))

    def scoped_result(self, name: str) -> pd.DataFrame:
        """One results table as stored, rows of the cluster ids this caller may see (no names added)."""
        def build() -> pd.DataFrame:
            frame = frames.read_result(self.location, name)
            if self.seen.names is None:
                return frame
            if name in FLEET_WIDE_RESULTS:
                return frame if self.seen.everything else frame.iloc[0:0]
            if name == "drift_clusters":
                return self.seen.by_id(frame, "cluster_a", "cluster_b")
            return self.seen.by_id(frame, "cluster_id") if "cluster_id" in frame else frame.iloc[0:0]

        return self.once(("scoped_result", name), build)

    def result(self, name: str) -> pd.DataFrame:
        """One results table, sensitive keys removed, with a readable cluster column (visible ids only)."""
        def build() -> pd.DataFrame:
            frame = config_views.drop_sensitive(self.scoped_result(name))
            if "cluster_id" in frame:
                frame = config_views.name_clusters(frame, self.cluster_names())
            if name == "drift_clusters":
                frame = config_views.name_drift(frame, self.cluster_names())
            return frame.reset_index(drop=True)

        return self.once(("result", name), build)

    def cluster_names(self) -> dict[str, str]:
        """Cluster id -> cluster name ('a / b (same cluster id)' where visible clusters share an id)."""
        return self.once(("names",), lambda: config_views.id_to_name(
            self.cluster_history(), list(self.latest_clusters()["cluster_name"])))

    def id_collisions(self) -> dict[str, list[str]]:
        """Cluster ids that two or more visible clusters report, with their names."""
        return self.once(("collisions",), lambda: config_views.id_collisions(
            self.cluster_history(), list(self.latest_clusters()["cluster_name"])))

    def all_alerts(self) -> pd.DataFrame:
        """Fleet incidents and client-config alerts in one table."""
        return self.once(("all_alerts",), lambda: config_views.unified_alerts(
            self.fleet_alerts(), self.scoped_result("config_alerts"), self.cluster_names()))

    # ------------------------------------------------------------------ consumer groups

    def _allowed_or_all(self) -> list[str] | None:
        return None if self.seen.names is None else sorted(self.seen.names)

    def _state(self) -> dict[str, Any] | None:
        # One state manifest per object: a group's row, members and offsets read at different moments are still of
        # the same poll (a commit between two reads would otherwise mix two polls in one answer).
        return self.once(("state_manifest",), lambda: group_readers.state_manifest(self.location))

    def groups(self) -> pd.DataFrame:
        """Every group of the visible clusters (one state file per cluster)."""
        return self.once(("groups",), lambda: self.by_name(
            group_readers.read_groups(self.location, self._allowed_or_all(), manifest=self._state())))

    def group_members(self, clusters: Iterable[str]) -> pd.DataFrame:
        """The members of the groups of the clusters asked for that may be viewed."""
        allowed = self.allowed(clusters)
        return self.once(("members", allowed), lambda: self.by_name(
            group_readers.group_members(self.location, list(allowed), manifest=self._state())))

    def group_offsets(self, clusters: Iterable[str]) -> pd.DataFrame:
        """Committed and end offsets and lag per partition of the groups of the clusters asked for (viewable)."""
        allowed = self.allowed(clusters)
        return self.once(("offsets", allowed), lambda: self.by_name(
            group_readers.group_offsets(self.location, list(allowed), manifest=self._state())))

    def group_runs(self) -> pd.DataFrame:
        """The last read of each visible cluster's groups."""
        return self.once(("group_runs",), lambda: self.by_name(
            group_readers.group_runs(self.location, self._allowed_or_all(), manifest=self._state())))

    def group_changes(self, cluster: str) -> pd.DataFrame:
        """The change log's group rows of one cluster over the last 7 days."""
        def build() -> pd.DataFrame:
            changes = self.changes(cluster)
            return changes[changes["entity"] == "group"].reset_index(drop=True) if not changes.empty else changes

        return self.once(("group_changes", cluster), build)

    def consumer_groups(self) -> tuple[pd.DataFrame | None, frozenset[str]]:
        """(groups, clusters whose groups were read); (None, ∅) while no visible cluster's groups were ever read."""
        runs = self.group_runs()
        if runs.empty:
            return None, frozenset()
        return self.groups(), frozenset(runs["cluster_name"])

    # ------------------------------------------------------------------ client inventory and readiness

    def client_inventory(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(inventory rows, last read per cluster) of the visible clusters."""
        def build() -> tuple[pd.DataFrame, pd.DataFrame]:
            names = self._allowed_or_all()
            return (self.by_name(frames.inventory_rows(self.location, names)),
                    self.by_name(frames.inventory_runs(self.location, names)))

        return self.once(("inventory",), build)

    def readiness(self, target: str) -> readiness.Readiness:
        """Readiness of every visible cluster for the target release (backend.views.readiness)."""
        def build() -> readiness.Readiness:
            rows, runs = self.client_inventory()
            has_results = frames.results_exist(self.location)
            defaults, dist, versions, alerts = ((self.result(name) if has_results else None)
                                                for name in ("default_share", "distributions", "client_versions",
                                                             "config_alerts"))
            groups, groups_read = self.consumer_groups()
            return readiness.readiness(self.latest_clusters(), self.latest_brokers(None, True), rows, runs,
                                       default_share=defaults, distributions=dist, client_versions=versions,
                                       alerts=alerts, groups=groups, groups_read=groups_read, target=target)

        return self.once(("readiness", target), build)

    # ------------------------------------------------------------ standards (issue 39; backend.views.standards_views)

    def standards(self) -> standards_views.Standards:
        """The policies' results and findings on the visible clusters, the policy file's state and the waivers."""
        return self.once(("standards",), lambda: standards_views.load(self.location, self.seen))

    def standards_trend(self, days: int = standards_views.TREND_DAYS) -> pd.DataFrame:
        """% passing per day (fleet, per visible cluster, per policy) over the last `days` days."""
        return self.once(("standards_trend", days),
                         lambda: standards_views.trend(self.location, self.seen, days=days))
