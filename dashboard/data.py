"""Cached readers of the lake for the pages (every cache has a ttl; nothing here touches a cluster).

The one choke point of who sees what for the pages: every reader a page, export or report uses is the grant-filtered
reader of backend.views.scoped (the same ones the API and MCP call), for the clusters the session may view
(dashboard.auth), cached here with a ttl. The cache key holds the visible names, so sessions with different grants
never share an entry.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
import streamlit as st

from backend.auth.scope import Scope
from backend.config import default_fleet_file
from backend.service.status import service_for_lake
from backend.views import fleet_views, frames, lakes, readiness, search_views, standards_views
from backend.views.scoped import ScopedLake
from dashboard import audit, auth

Visible = tuple[str, ...] | None

SNAPSHOT_TTL_S = 15
RESULTS_TTL_S = 60
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


# Short-lived: its readers memoise, and each public reader below adds its own ttl on top.
SCOPED_LAKE_TTL_S = 5


@st.cache_resource(ttl=SCOPED_LAKE_TTL_S, show_spinner=False, max_entries=64)
def _lake(location: str, names: Visible) -> ScopedLake:
    """The grant-filtered readers (backend.views.scoped) of one lake for one set of visible names."""
    fleet, _ = auth.policy()
    return ScopedLake.open(location, names, [c.name for c in fleet.clusters] if fleet else [])


def _scope(location: str, names: Visible) -> Scope:
    return _lake(location, names).seen


def scope(location: str) -> Scope:
    """What this session sees of the lake: names, the cluster ids they report, hidden names to redact."""
    return _scope(location, visible())


def scoped_lake(location: str) -> ScopedLake:
    """This session's grant-filtered readers of the lake (the same ones the API and MCP read)."""
    return _lake(location, visible())


def may_view(location: str, cluster: str) -> bool:
    """Whether this session may view the cluster (says nothing about whether it exists)."""
    return scope(location).may_view(cluster)


def audit_refusal(action: str, cluster: str) -> None:
    """The audit record of a page asked for a cluster this session may not view (once per session and cluster)."""
    seen = st.session_state.setdefault("_fleetview_audit_refused", set())
    if (action, cluster) in seen:
        return
    seen.add((action, cluster))
    fleet, _ = auth.policy()
    audit.write(fleet, auth.person(), "refusal", action, outcome="not_found", clusters=[cluster],
                params={"cluster": cluster})


def restricted() -> bool:
    """True when login is on (a query naming an unseen cluster gets "no access", never "not found")."""
    access = auth.current()
    return access is None or access.login


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _cluster_history(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).cluster_history()


def cluster_history(location: str) -> pd.DataFrame:
    """Cluster rows with each cluster's last known id, oldest first (not the whole poll history on a v2 lake)."""
    return _cluster_history(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _latest_clusters(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).latest_clusters()


def latest_clusters(location: str) -> pd.DataFrame:
    """Latest snapshot per cluster with tag columns."""
    return _latest_clusters(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _latest_brokers(location: str, cluster: str | None, with_data: bool, names: Visible) -> pd.DataFrame:
    return _lake(location, names).latest_brokers(cluster, with_data)


def latest_brokers(location: str, cluster: str | None = None, with_data: bool = False) -> pd.DataFrame:
    """Broker rows of each cluster's latest poll (with_data: the latest poll that had brokers)."""
    return _latest_brokers(location, cluster, with_data, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _version_timeline(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).version_timeline()


def version_timeline(location: str) -> pd.DataFrame:
    """First sighting and every version change of every broker."""
    return _version_timeline(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _latest_topics(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).latest_topics(cluster)


def latest_topics(location: str, cluster: str) -> pd.DataFrame:
    """Topic rows of one cluster's latest poll that had data."""
    return _latest_topics(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=4)
def _latest_topics_of(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    return _lake(location, names).latest_topics_of(clusters)


def latest_topics_of(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Topic names and ids of several clusters' latest polls that had data."""
    return _latest_topics_of(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _recent_changes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).recent_changes(cluster)


def recent_changes(location: str, cluster: str) -> pd.DataFrame:
    """Recent changes of one cluster: from the change log (v2 lake), else over its last polls."""
    return _recent_changes(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _broker_configs(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    return _lake(location, names).broker_configs(clusters)


def broker_configs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Broker configs and topic overrides of the clusters asked for that this session may view (their state files)."""
    return _broker_configs(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _config_runs(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    return _lake(location, names).config_runs(clusters)


def config_runs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """When the configs of the clusters asked for (that this session may view) were read, and what could not be."""
    return _config_runs(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _zk_nodes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).zk_nodes(cluster)


def zk_nodes(location: str, cluster: str) -> pd.DataFrame:
    """ZooKeeper nodes of the cluster's newest poll that read any."""
    return _zk_nodes(location, cluster, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _fleet_alerts(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).fleet_alerts()


def fleet_alerts(location: str) -> pd.DataFrame:
    """All fleet alerts (of the clusters this session may view)."""
    return _fleet_alerts(location, visible())


@st.cache_data(ttl=RESULTS_TTL_S, show_spinner=False)
def _result(location: str, name: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).result(name)


def result(location: str, name: str) -> pd.DataFrame:
    """One pipeline results table, sensitive keys removed, with a readable cluster column.

    Results are keyed by cluster id: a session sees the rows of ids that a cluster it may view reports (its latest
    id); rows of any other id are not shown.
    """
    return _result(location, name, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _cluster_names(location: str, names: Visible) -> dict[str, str]:
    return _lake(location, names).cluster_names()


def cluster_names(location: str) -> dict[str, str]:
    """Map cluster id to cluster name ('a / b (same cluster id)' where configured clusters share an id)."""
    return _cluster_names(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _id_collisions(location: str, names: Visible) -> dict[str, list[str]]:
    return _lake(location, names).id_collisions()


def id_collisions(location: str) -> dict[str, list[str]]:
    """Cluster ids that two or more configured clusters report, with their names."""
    return _id_collisions(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _all_alerts(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).all_alerts()


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


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _groups(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).groups()


def groups(location: str) -> pd.DataFrame:
    """Every group of the clusters this session may view (one state file per cluster; cached)."""
    return _groups(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _group_members(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    return _lake(location, names).group_members(clusters)


def group_members(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """The members of the groups of the clusters asked for that this session may view."""
    return _group_members(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _group_offsets(location: str, clusters: tuple[str, ...], names: Visible) -> pd.DataFrame:
    return _lake(location, names).group_offsets(clusters)


def group_offsets(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Committed and end offsets and lag per partition of the groups of the clusters asked for (that may be viewed)."""
    return _group_offsets(location, clusters, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def _group_runs(location: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).group_runs()


def group_runs(location: str) -> pd.DataFrame:
    """The last read of each visible cluster's groups."""
    return _group_runs(location, visible())


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def _group_changes(location: str, cluster: str, names: Visible) -> pd.DataFrame:
    return _lake(location, names).group_changes(cluster)


def group_changes(location: str, cluster: str) -> pd.DataFrame:
    """The change log's group rows of one cluster over the last 7 days (created, state, protocol, members)."""
    return _group_changes(location, cluster, visible())
# ---------------------------------------------------------------- client inventory and upgrade readiness
# (issue 30: the brokers' own JMX metrics; every reader is filtered to the clusters this session may view)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _inventory(location: str, names: Visible) -> tuple[pd.DataFrame, pd.DataFrame]:
    return _lake(location, names).client_inventory()


def client_inventory(location: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(inventory rows, last read per cluster) of the clusters this session may view."""
    return _inventory(location, visible())


def consumer_groups(location: str, names: Visible) -> tuple[pd.DataFrame | None, frozenset[str]]:
    """Consumer groups (cluster_name, group_id, group_type, protocol_type, state) of the clusters `names` may view and
    the clusters whose groups were read; (None, ∅) while no cluster's groups were ever read (readiness: "not
    collected")."""
    return _lake(location, names).consumer_groups()


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _readiness(location: str, target: str, names: Visible) -> readiness.Readiness:
    return _lake(location, names).readiness(target)


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


# ---------------------------------------------------------------- standards (issue 39: policies per tag, waivers)
# (through the session's ScopedLake: a cluster outside its grants is not shown or counted)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def _standards(location: str, names: Visible) -> standards_views.Standards:
    return _lake(location, names).standards()


def standards(location: str) -> standards_views.Standards:
    """The policies' results on the clusters this session may view, their findings, the policy file's state."""
    return _standards(location, visible())


@st.cache_data(ttl=RESULTS_TTL_S, show_spinner=False, max_entries=16)
def _standards_trend(location: str, days: int, names: Visible) -> pd.DataFrame:
    return _lake(location, names).standards_trend(days)


def standards_trend(location: str, days: int = standards_views.TREND_DAYS) -> pd.DataFrame:
    """% passing per day (fleet, per cluster, per policy) over the visible clusters."""
    return _standards_trend(location, days, visible())
