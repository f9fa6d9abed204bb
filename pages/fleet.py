"""Fleet page: live tiles, one row per cluster, version matrix and upgrade timeline."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from backend.views import fleet_views, group_views, incident_views
from dashboard import charts, components, data

TILE_REFRESH_S = 15


@st.fragment(run_every=TILE_REFRESH_S)
def tiles(location: str) -> None:
    """Headline numbers, refreshed on their own every few seconds."""
    chosen = data.chosen_clusters(location)
    alerts = data.all_alerts(location)
    board = incident_views.alert_board(alerts[alerts["cluster"].isin(chosen["cluster_name"])])
    numbers = fleet_views.fleet_tiles(chosen, incident_views.open_incidents(board))
    cols = st.columns(4)
    cols[0].metric("Clusters", len(chosen),
                   help="by status: " + ", ".join(f"{k} {v}" for k, v in numbers.clusters_by_status.items()))
    cols[0].caption(components.colored_counts(numbers.clusters_by_status, components.STATUS_COLORS))
    cols[1].metric("Brokers reachable", f"{numbers.brokers_reachable}/{numbers.brokers}")
    cols[2].metric("Topics", f"{numbers.topics:,}")
    sev = numbers.alerts_by_severity
    cols[3].metric("Open incidents", sum(sev.values()),
                   help="open fleet incidents and the client-config alerts of the latest analysis")
    cols[3].caption(components.colored_counts(sev, components.SEVERITY_MARKDOWN_COLORS))


def fleet_columns(details: bool) -> dict[str, Any]:
    """The Fleet table's columns: compact (fits 1280 px without scrolling sideways) unless details are asked for."""
    columns: dict[str, object] = {
        "cluster": st.column_config.TextColumn("cluster", width=110),
        "page": st.column_config.LinkColumn("open", display_text="open ↗", width=52),
        "status": st.column_config.TextColumn("status", width=90),
        "brokers": st.column_config.TextColumn("brokers", width=62, help="reachable / registered"),
        "versions": st.column_config.TextColumn("broker versions", width=150,
                                                help="brokers per version; each broker on the cluster page"),
        "topics": st.column_config.NumberColumn("topics", width=56),
        "under_replicated": st.column_config.NumberColumn("URP", width=48, help="under-replicated partitions"),
        "group_summary": st.column_config.TextColumn("groups", width=60, help="consumer groups lagging, stalled, "
                                                      "stopped or empty with lag / all groups (the Consumer groups page "
                                                      "lists them)"),
        "groups": None, "lagging_groups": None,
        "problem": st.column_config.TextColumn("error", width=88,
                                               help="first line of the poll's error; the cluster page shows it whole"),
        "software": None, "error": None,
    }
    hidden = ("env", "region", "team", "cluster_id", "controller", "provenance")
    if details:
        columns |= {
            "cluster_id": st.column_config.TextColumn("cluster id", help="KIP-78 cluster id"),
            "controller": st.column_config.TextColumn("controller"),
            "provenance": st.column_config.TextColumn("version provenance", help=components.PROVENANCE_HELP),
        }
    else:
        columns |= dict.fromkeys(hidden)
    return columns


def main() -> None:
    """Render the fleet page."""
    st.title("Fleet")
    location = data.lake()
    has_snapshots, _ = data.lake_state(location)
    if not has_snapshots:
        components.no_lake(location)
        return
    tiles(location)
    chosen = data.chosen_clusters(location)
    brokers = data.latest_brokers(location)
    brokers = brokers[brokers["cluster_name"].isin(chosen["cluster_name"])]
    table = fleet_views.fleet_table(chosen, brokers)
    table = group_views.with_group_counts(table, data.groups(location))
    table["status"] = table["status"].map(components.status_cell)
    table.insert(1, "page", table["cluster"].map(components.cluster_link))
    head, switch = st.columns([3, 1])
    head.caption("Select a row (or use the link column) to open a cluster; the cluster page has every detail.")
    details = switch.toggle("ids, tags, provenance", key="fleet_details",
                            help="Add the cluster id, tags, controller and version provenance columns.")
    event = components.data_table(
        table, key="fleet_table", hide_index=True, on_select="rerun", selection_mode="single-row",
        column_config=fleet_columns(details),
    )
    for name, problem in fleet_views.cluster_problems(table):
        st.caption(f"{components.plain(name)}: {components.plain(problem)}")
    rows = event.selection.rows if event else []
    if rows:
        st.switch_page("../pages/cluster.py", query_params={"cluster": table.iloc[rows[0]]["cluster"]})
    left, right = st.columns([3, 1])
    with right:
        pick = st.selectbox("Open cluster", table["cluster"], key="fleet_open", index=None)
        if pick:
            st.page_link("../pages/cluster.py", label=f"Open {pick}", query_params={"cluster": pick},
                         icon=":material/open_in_new:")
    with left:
        st.subheader("Broker versions")
        components.data_table(fleet_views.version_table(fleet_views.version_matrix(brokers)), key="fleet_versions",
                     hide_index=True, column_config={
                         "clusters": st.column_config.TextColumn("clusters running it (brokers)", width="large")})
    upgrades(location, chosen)


def upgrades(location: str, chosen: pd.DataFrame) -> None:
    """Broker version changes as a table, newest first; the timeline chart on request (Plotly costs ~1 s a view)."""
    history = data.version_timeline(location)
    timeline = fleet_views.upgrade_timeline(history[history["cluster_name"].isin(chosen["cluster_name"])])
    head, switch = st.columns([3, 1])
    head.subheader("Upgrades")
    if switch.toggle("Timeline chart", key="fleet_timeline_chart"):
        st.plotly_chart(charts.upgrade_timeline_chart(timeline), key="fleet_timeline")
    elif timeline.empty:
        st.caption("No broker changed version in the retained history.")
    else:
        st.caption(f"{len(timeline):,} broker version changes in the retained history, newest first.")
        components.data_table(fleet_views.recent_upgrades(timeline), key="fleet_upgrades", hide_index=True, column_config={
            "changed_at": st.column_config.DatetimeColumn("seen at (UTC)", format="YYYY-MM-DD HH:mm"),
            "from_version": st.column_config.TextColumn("from"), "to_version": st.column_config.TextColumn("to")})


main()
