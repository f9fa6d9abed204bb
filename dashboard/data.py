"""Cached readers of the lake for the pages (every cache has a ttl; nothing here touches a cluster).

The one choke point of who sees what: every reader a page, export or report uses is filtered to the clusters the
session may view (dashboard.auth, backend.auth.scope) before it returns, so no page can forget. The cache key holds
the visible names, so sessions with different grants never share an entry.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
import streamlit as st

from backend.auth.scope import Scope, scope_for
from backend.config import default_fleet_file
from backend.service.status import service_for_lake
from backend.store import group_readers
from backend.views import config_views, fleet_views, frames, lakes, readiness, search_views
from dashboard import auth

Visible = tuple[str, ...] | None

SNAPSHOT_TTL_S = 15
RESULTS_TTL_S = 60
HISTORY_POLLS = 20
_log = logging.getLogger(__name__)


def fleet_file() -> str | None:
    """The fleet file to use for Poll now: env FLEETVIEW_FLEET or ./clusters.toml when present."""
    return default_fleet_file()


def service_status(location: str) -> dict[str, Any] | None:
    """The status of the service running on this lake (its status.json), or None. Not cached: one small file."""
    return service_for_lake(location)[1]


def lake_choices() -> dict[str, str]:
    """The lakes the configuration names, by name: "default" (the one resolver's answer) and the fleet file's lakes.

    Not cached: it follows the environment and the fleet file, and reading them is cheap.
    """
    return lakes.configured_lakes()


def lake() -> str:
    """The lake chosen in the shared sidebar: only a name the configuration lists selects anything."""
    choices = lake_choices()
    chosen = st.session_state.get("app_lake")
    return choices[chosen] if isinstance(chosen, str) and chosen in choices else choices[lakes.DEFAULT_NAME]


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def lake_error(location: str) -> str | None:
    """Why the lake cannot be opened, or None."""
    return frames.lake_error(location)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def lake_state(location: str) -> tuple[bool, bool]:
    """(has snapshots, has pipeline results); (False, False) for a lake that cannot be opened."""
    if frames.lake_error(location):
        return False, False
    return frames.lake_exists(location), frames.results_exist(location)


@st.cache_data(ttl=RESULTS_TTL_S, show_spinner=False)
def lake_problems(location: str) -> list[str]:
    """Result files that cannot be read (they are skipped, and the pages say so)."""
    return [] if frames.lake_error(location) else frames.unreadable_results(location)


def visible() -> Visible:
    """The cluster names this session may view (None: every cluster, login off)."""
    return auth.visible()


@st.cache_resource(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=64)
def _scope(location: str, names: Visible) -> Scope:
    fleet, _ = auth.policy()
    return scope_for(names, frames.known_clusters(location), [c.name for c in fleet.clusters] if fleet else [])


def scope(location: str) -> Scope:
    """What this session sees of the lake: names, the cluster ids they report, hidden names to redact."""
    return _scope(location, visible())


def may_view(location: str, cluster: str) -> bool:
    """Whether this session may view the cluster (says nothing about whether it exists)."""
    return scope(location).may_view(cluster)


def restricted() -> bool:
    """True when login is on (a query naming an unseen cluster gets "no access", never "not found")."""
    access = auth.current()
    return access is None or access.login


_TEXT_COLUMNS = ("error", "evidence_json", "latest_evidence_json", "explanation", "subject", "evidence", "message",
                 "latest_evidence", "rationale", "before_json", "after_json", "value")


def _by_name(frame: pd.DataFrame, location: str, names: Visible, column: str = "cluster_name") -> pd.DataFrame:
    if names is None:
        return frame
    seen = _scope(location, names)
    return seen.redact_columns(seen.by_name(frame, column), _TEXT_COLUMNS).reset_index(drop=True)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _cluster_history(location: str, names: Visible) -> pd.DataFrame:
    return _by_name(frames.known_clusters(location), location, names)


def cluster_history(location: str) -> pd.DataFrame:
    """Cluster rows with each cluster's last known id, oldest first (not the whole poll history on a v2 lake)."""
    return _cluster_history(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _latest_clusters(location: str, names: Visible) -> pd.DataFrame:
    return fleet_views.latest_clusters(_by_name(frames.latest_clusters(location), location, names))


def latest_clusters(location: str) -> pd.DataFrame:
    """Latest snapshot per cluster with tag columns."""
    return _latest_clusters(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _latest_brokers(location: str, cluster: str | None, with_data: bool, names: Visible) -> pd.DataFrame:
    if cluster is not None and names is not None and cluster not in names:
        return frames.latest_rows(location, "broker_snapshots", "", with_data=with_data).iloc[0:0]
    return _by_name(frames.latest_rows(location, "broker_snapshots", cluster, with_data=with_data), location, names)


def latest_brokers(location: str, cluster: str | None = None, with_data: bool = False) -> pd.DataFrame:
    """Broker rows of each cluster's latest poll (with_data: the latest poll that had brokers)."""
    return _latest_brokers(location, cluster, with_data, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _version_timeline(location: str, names: Visible) -> pd.DataFrame:
    return _by_name(frames.version_timeline(location), location, names)


def version_timeline(location: str) -> pd.DataFrame:
    """First sighting and every version change of every broker."""
    return _version_timeline(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _latest_topics(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    if names is not None and cluster not in names:
        return frames.latest_rows(location, "topic_snapshots", "", with_data=True).iloc[0:0]
    return frames.latest_rows(location, "topic_snapshots", cluster, with_data=True)


def latest_topics(location: str, cluster: str) -> pd.DataFrame:
    """Topic rows of one cluster's latest poll that had data."""
    return _latest_topics(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=4)
def _latest_topics_of(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    allowed = [c for c in clusters if names is None or c in names]
    frame = frames.latest_rows(location, "topic_snapshots", with_data=True)
    return frame.loc[frame["cluster_name"].isin(allowed), ["cluster_name", "topic", "topic_id"]]


def latest_topics_of(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Topic names and ids of several clusters' latest polls that had data."""
    return _latest_topics_of(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _recent_changes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    if names is not None and cluster not in names:
        return fleet_views.recent_changes_from_log(frames.changes(location, "").iloc[0:0], cluster)
    if frames.is_v2(location):
        changes = _by_name(frames.changes(location, cluster), location, names)
        return fleet_views.recent_changes_from_log(changes, cluster)
    mine = frames.poll_history(location, cluster).tail(HISTORY_POLLS)
    polls = set(mine["poll_id"])
    topics = frames.read_snapshots(location, "topic_snapshots", polls, cluster)
    brokers = frames.read_snapshots(location, "broker_snapshots", polls, cluster)
    return fleet_views.recent_changes(topics, brokers, mine, cluster)


def recent_changes(location: str, cluster: str) -> pd.DataFrame:
    """Recent changes of one cluster: from the change log (v2 lake), else over its last HISTORY_POLLS polls."""
    return _recent_changes(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _broker_configs(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    allowed = tuple(c for c in clusters if names is None or c in names)
    return _by_name(frames.broker_configs(location, allowed), location, names)


def broker_configs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Broker configs and topic overrides of the clusters asked for that this session may view (their state files)."""
    return _broker_configs(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _config_runs(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    allowed = tuple(c for c in clusters if names is None or c in names)
    return _by_name(frames.config_runs(location, allowed), location, names)


def config_runs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """When the configs of the clusters asked for (that this session may view) were read, and what could not be."""
    return _config_runs(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _zk_nodes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    if names is not None and cluster not in names:
        return pd.DataFrame({"path": pd.Series(dtype=object), "value": pd.Series(dtype=object)})
    frame = _by_name(frames.zk_nodes_last_seen(location, cluster), location, names)
    return frame[["path", "value"]].sort_values("path").reset_index(drop=True)


def zk_nodes(location: str, cluster: str) -> pd.DataFrame:
    """ZooKeeper nodes of the cluster's newest poll that read any."""
    return _zk_nodes(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _fleet_alerts(location: str, names: Visible) -> pd.DataFrame:
    return _by_name(frames.fleet_alerts(location), location, names)


def fleet_alerts(location: str) -> pd.DataFrame:
    """All fleet alerts (of the clusters this session may view)."""
    return _fleet_alerts(location, visible())


# Results that are not per cluster: shown only to a session that may view every cluster.
FLEET_WIDE_RESULTS = ("ingest_stats",)


def _scoped_result(location: str, name: str, names: Visible) -> pd.DataFrame:
    frame = frames.read_result(location, name)
    if names is None:
        return frame
    seen = _scope(location, names)
    if name in FLEET_WIDE_RESULTS:
        return frame if seen.everything else frame.iloc[0:0]
    if name == "drift_clusters":
        return seen.by_id(frame, "cluster_a", "cluster_b")
    return seen.by_id(frame, "cluster_id") if "cluster_id" in frame else frame.iloc[0:0]


@st.cache_data(ttl=RESULTS_TTL_S, show_spinner=False)
def _result(location: str, name: str, names: Visible) -> pd.DataFrame:
    frame = config_views.drop_sensitive(_scoped_result(location, name, names))
    if "cluster_id" in frame:
        frame = config_views.name_clusters(frame, _cluster_names(location, names))
    if name == "drift_clusters":
        frame = config_views.name_drift(frame, _cluster_names(location, names))
    return frame.reset_index(drop=True)


def result(location: str, name: str) -> pd.DataFrame:
    """One pipeline results table, sensitive keys removed, with a readable cluster column.

    Results are keyed by cluster id: a session sees the rows of ids that a cluster it may view reports (its latest
    id); rows of any other id are not shown.
    """
    return _result(location, name, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _cluster_names(location: str, names: Visible) -> dict[str, str]:
    history = _cluster_history(location, names)
    return config_views.id_to_name(history, list(_latest_clusters(location, names)["cluster_name"]))


def cluster_names(location: str) -> dict[str, str]:
    """Map cluster id to cluster name ('a / b (same cluster id)' where configured clusters share an id)."""
    return _cluster_names(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _id_collisions(location: str, names: Visible) -> dict[str, list[str]]:
    history = _cluster_history(location, names)
    return config_views.id_collisions(history, list(_latest_clusters(location, names)["cluster_name"]))


def id_collisions(location: str) -> dict[str, list[str]]:
    """Cluster ids that two or more configured clusters report, with their names."""
    return _id_collisions(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _all_alerts(location: str, names: Visible) -> pd.DataFrame:
    config = _scoped_result(location, "config_alerts", names)
    return config_views.unified_alerts(_fleet_alerts(location, names), config, _cluster_names(location, names))


def all_alerts(location: str) -> pd.DataFrame:
    """Fleet and client-config alerts in one table."""
    return _all_alerts(location, visible())


def chosen_clusters(location: str) -> pd.DataFrame:
    """Latest cluster rows that pass the sidebar tag filters."""
    chosen = {key: st.session_state.get(f"app_tag_{key}", []) for key in fleet_views.TAG_KEYS}
    return fleet_views.filter_by_tags(latest_clusters(location), chosen)


def visible_result_clusters(location: str, in_results: set[str]) -> set[str]:
    """Result clusters passing the tag filters (clusters never polled have no tags and stay visible)."""
    known = set(latest_clusters(location)["cluster_name"])
    return (in_results & set(chosen_clusters(location)["cluster_name"])) | (in_results - known)


def latest_poll_ids(location: str) -> dict[str, str]:
    """Each cluster's latest poll id."""
    latest = latest_clusters(location)
    return dict(zip(latest["cluster_name"], latest["poll_id"], strict=True))


def clusters_with_configs_first(location: str, names: list[str]) -> list[str]:
    """Cluster names, those whose clients pushed configs first (so a default pair has drift to show)."""
    with_configs = set(result(location, "distributions")["cluster"])
    return sorted(names, key=lambda name: name not in with_configs)


# ------------------------------------------------------------------ consumer groups (backend/store/group_readers.py)


def _allowed(location: str, names: Visible) -> list[str] | None:
    return None if names is None else list(names)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _groups(location: str, names: Visible) -> pd.DataFrame:
    return _by_name(group_readers.read_groups(location, _allowed(location, names)), location, names)


def groups(location: str) -> pd.DataFrame:
    """Every group of the clusters this session may view (one state file per cluster; cached)."""
    return _groups(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _group_members(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    allowed = [c for c in clusters if names is None or c in names]
    return _by_name(group_readers.group_members(location, allowed), location, names)


def group_members(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """The members of the groups of the clusters asked for that this session may view."""
    return _group_members(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _group_offsets(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    allowed = [c for c in clusters if names is None or c in names]
    return _by_name(group_readers.group_offsets(location, allowed), location, names)


def group_offsets(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Committed and end offsets and lag per partition of the groups of the clusters asked for (that may be viewed)."""
    return _group_offsets(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _group_runs(location: str, names: Visible) -> pd.DataFrame:
    return _by_name(group_readers.group_runs(location, _allowed(location, names)), location, names)


def group_runs(location: str) -> pd.DataFrame:
    """The last read of each visible cluster's groups."""
    return _group_runs(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _group_changes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    if names is not None and cluster not in names:
        return frames.changes(location, "").iloc[0:0]
    changes = frames.changes(location, cluster)
    return _by_name(changes[changes["entity"] == "group"] if not changes.empty else changes, location, names)


def group_changes(location: str, cluster: str) -> pd.DataFrame:
    """The change log's group rows of one cluster over the last 7 days (created, state, protocol, members)."""
    return _group_changes(location, cluster, visible())
# ---------------------------------------------------------------- client inventory and upgrade readiness
# (issue 30: the brokers' own JMX metrics; every reader is filtered to the clusters this session may view)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _inventory(location: str, names: Visible) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = _by_name(frames.inventory_rows(location, names), location, names)
    runs = _by_name(frames.inventory_runs(location, names), location, names)
    return rows, runs


def client_inventory(location: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(inventory rows, last read per cluster) of the clusters this session may view."""
    return _inventory(location, visible())


def consumer_groups(location: str, names: Visible) -> tuple[pd.DataFrame | None, frozenset[str]]:
    """Consumer groups (cluster_name, group_id, group_type, protocol_type, state) of the clusters `names` may view and
    the clusters whose groups were read; (None, ∅) while no cluster's groups were ever read (readiness: "not
    collected")."""
    runs = _group_runs(location, names)
    if runs.empty:
        return None, frozenset()
    return _groups(location, names), frozenset(runs["cluster_name"])


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _readiness(location: str, target: str, names: Visible) -> readiness.Readiness:
    clusters = _latest_clusters(location, names)
    brokers = _latest_brokers(location, None, True, names)
    rows, runs = _inventory(location, names)
    has_results = frames.results_exist(location)
    defaults, dist, versions, alerts = ((_result(location, name, names) if has_results else None)
                                        for name in ("default_share", "distributions", "client_versions",
                                                     "config_alerts"))
    groups, groups_read = consumer_groups(location, names)
    return readiness.readiness(clusters, brokers, rows, runs, default_share=defaults, distributions=dist,
                               client_versions=versions, alerts=alerts, groups=groups, groups_read=groups_read,
                               target=target)


def upgrade_readiness(location: str, target: str) -> readiness.Readiness:
    """Readiness of every cluster this session may view for the target release (backend.views.readiness)."""
    return _readiness(location, target, visible())
# ---------------------------------------------------------------- fleet-wide search and across the fleet
# (issue 38: backend/search keeps the index, backend/views/search_views.py queries it; filtered like every reader)


@st.cache_resource(show_spinner=False, max_entries=8)
def _search_reader(location: str) -> search_views.IndexReader:
    return search_views.IndexReader(location)


def search_index(location: str) -> search_views.IndexSnapshot:
    """The lake's search index in memory (one per server process, refreshed when the index files change)."""
    return _search_reader(location).snapshot()


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=128)
def _search(location: str, text: str, mode: str, kinds: tuple[str, ...], clusters: tuple[str, ...],
            include_deleted: bool, limit: int, names: Visible) -> search_views.SearchResult:
    return search_views.search(search_index(location), text, scope=_scope(location, names), mode=mode,
                               kinds=kinds or None, clusters=clusters or None, include_deleted=include_deleted,
                               limit=limit)


def search(location: str, text: str, *, mode: str = "substring", kinds: tuple[str, ...] = (),
           clusters: tuple[str, ...] = (), include_deleted: bool = True,
           limit: int = search_views.DEFAULT_LIMIT) -> search_views.SearchResult:
    """Search the clusters this session may view (raises backend.search.query.QueryRefused for a refused query)."""
    return _search(location, text, mode, kinds, clusters, include_deleted, limit, visible())


def mirror_settings() -> tuple[list[str] | None, str]:
    """The fleet file's MirrorMaker 2 source aliases (None: the cluster names) and separator."""
    fleet, _ = auth.policy()
    settings = fleet.settings if fleet is not None else None
    return (settings.mirror_aliases, settings.mirror_separator) if settings is not None else (None, ".")


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=32)
def _topic_across(location: str, name: str, aliases: tuple[str, ...] | None, separator: str,
                  names: Visible) -> search_views.TopicAcross:
    return search_views.topic_across(location, search_index(location), name, scope=_scope(location, names),
                                     aliases=aliases, separator=separator)


def topic_across(location: str, name: str, aliases: tuple[str, ...] | None, separator: str) -> search_views.TopicAcross:
    """A topic name across the clusters this session may view."""
    return _topic_across(location, name, aliases, separator, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=32)
def _group_across(location: str, group_id: str, names: Visible) -> search_views.GroupAcross:
    return search_views.group_across(location, search_index(location), group_id, scope=_scope(location, names))


def group_across(location: str, group_id: str) -> search_views.GroupAcross:
    """A consumer group id across the clusters this session may view."""
    return _group_across(location, group_id, visible())


def resolve_ref(location: str, value: str, kind: str) -> str | None:
    """The topic name or group id a link's parameter stands for, among the names this session may view."""
    return search_views.resolve_ref(search_index(location), value, kind, scope(location))
