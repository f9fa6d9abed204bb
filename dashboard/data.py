"""Cached readers of the lake for the pages (every cache has a ttl; nothing here touches a cluster)."""

from __future__ import annotations

import logging

import pandas as pd
import streamlit as st

from backend.config import default_fleet_file
from backend.views import config_views, fleet_views, frames, lakes

SNAPSHOT_TTL_S = 15
RESULTS_TTL_S = 60
HISTORY_POLLS = 20
_log = logging.getLogger(__name__)


def fleet_file() -> str | None:
    """The fleet file to use for Poll now: env FLEETVIEW_FLEET or ./clusters.toml when present."""
    return default_fleet_file()


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


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def cluster_history(location: str) -> pd.DataFrame:
    """Cluster rows with each cluster's last known id, oldest first (not the whole poll history on a v2 lake)."""
    return frames.known_clusters(location)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def latest_clusters(location: str) -> pd.DataFrame:
    """Latest snapshot per cluster with tag columns."""
    return fleet_views.latest_clusters(frames.latest_clusters(location))


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def latest_brokers(location: str, cluster: str | None = None, with_data: bool = False) -> pd.DataFrame:
    """Broker rows of each cluster's latest poll (with_data: the latest poll that had brokers)."""
    return frames.latest_rows(location, "broker_snapshots", cluster, with_data=with_data)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def version_timeline(location: str) -> pd.DataFrame:
    """First sighting and every version change of every broker."""
    return frames.version_timeline(location)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def latest_topics(location: str, cluster: str) -> pd.DataFrame:
    """Topic rows of one cluster's latest poll that had data."""
    return frames.latest_rows(location, "topic_snapshots", cluster, with_data=True)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=4)
def latest_topics_of(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Topic names and ids of several clusters' latest polls that had data."""
    frame = frames.latest_rows(location, "topic_snapshots", with_data=True)
    return frame.loc[frame["cluster_name"].isin(clusters), ["cluster_name", "topic", "topic_id"]]


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=8)
def recent_changes(location: str, cluster: str) -> pd.DataFrame:
    """Recent changes of one cluster: from the change log (v2 lake), else over its last HISTORY_POLLS polls."""
    if frames.is_v2(location):
        return fleet_views.recent_changes_from_log(frames.changes(location, cluster), cluster)
    mine = frames.poll_history(location, cluster).tail(HISTORY_POLLS)
    polls = set(mine["poll_id"])
    topics = frames.read_snapshots(location, "topic_snapshots", polls, cluster)
    brokers = frames.read_snapshots(location, "broker_snapshots", polls, cluster)
    return fleet_views.recent_changes(topics, brokers, mine, cluster)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def broker_configs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """Broker configs and topic overrides of the clusters asked for (each cluster's state file, nothing else)."""
    return frames.broker_configs(location, clusters)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False, max_entries=16)
def config_runs(location: str, clusters: tuple[str, ...]) -> pd.DataFrame:
    """When the configs of the clusters asked for were read, and what could not be."""
    return frames.config_runs(location, clusters)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def zk_nodes(location: str, cluster: str) -> pd.DataFrame:
    """ZooKeeper nodes of the cluster's newest poll that read any."""
    frame = frames.zk_nodes_last_seen(location, cluster)
    return frame[["path", "value"]].sort_values("path").reset_index(drop=True)


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def fleet_alerts(location: str) -> pd.DataFrame:
    """All fleet alerts."""
    return frames.fleet_alerts(location)


@st.cache_data(ttl=RESULTS_TTL_S, show_spinner=False)
def result(location: str, name: str) -> pd.DataFrame:
    """One pipeline results table, sensitive keys removed, with a readable cluster column."""
    frame = config_views.drop_sensitive(frames.read_result(location, name))
    if "cluster_id" in frame:
        frame = config_views.name_clusters(frame, cluster_names(location))
    if name == "drift_clusters":
        frame = config_views.name_drift(frame, cluster_names(location))
    return frame


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def cluster_names(location: str) -> dict[str, str]:
    """Map cluster id to cluster name ('a / b (same cluster id)' where configured clusters share an id)."""
    return config_views.id_to_name(cluster_history(location), list(latest_clusters(location)["cluster_name"]))


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def id_collisions(location: str) -> dict[str, list[str]]:
    """Cluster ids that two or more configured clusters report, with their names."""
    return config_views.id_collisions(cluster_history(location), list(latest_clusters(location)["cluster_name"]))


@st.cache_data(ttl=SNAPSHOT_TTL_S, show_spinner=False)
def all_alerts(location: str) -> pd.DataFrame:
    """Fleet and client-config alerts in one table."""
    return config_views.unified_alerts(fleet_alerts(location), frames.read_result(location, "config_alerts"),
                                       cluster_names(location))


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
