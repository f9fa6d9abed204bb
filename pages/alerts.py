"""Alerts page: open incidents first (since when, for how long, by rule), then those resolved in a window."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.views import config_views, incident_views
from dashboard import charts, components, data

WINDOWS = {"last 24 hours": pd.Timedelta(hours=24), "last 7 days": pd.Timedelta(days=7),
           "last 30 days": pd.Timedelta(days=30)}
BOARD_CONFIG = {
    "doc_url": st.column_config.LinkColumn("documentation", display_text="docs ↗"),
    "since": st.column_config.DatetimeColumn("since (UTC)", format="YYYY-MM-DD HH:mm"),
    "last_seen": st.column_config.DatetimeColumn("last seen", format="YYYY-MM-DD HH:mm"),
    "resolved": st.column_config.DatetimeColumn("resolved", format="YYYY-MM-DD HH:mm"),
    "for": st.column_config.TextColumn("for", help="how long it has been open (or was open)"),
    "evidence": st.column_config.TextColumn("evidence", width="large", help="latest evidence, key = value"),
    "evidence_at_opening": st.column_config.TextColumn("evidence at opening", width="medium"),
    "rationale": st.column_config.TextColumn("rationale", width="large"),
    "state": None,
}


def main() -> None:
    """Render the alerts page."""
    st.title("Alerts")
    location = data.lake()
    has_snapshots, has_results = data.lake_state(location)
    if not has_snapshots and not has_results:
        components.no_lake(location)
        return
    if not has_results:
        components.no_results(location)
    every = data.all_alerts(location)
    visible = data.visible_result_clusters(location, set(every["cluster"]))
    every = every[every["cluster"].isin(visible)]
    cols = st.columns([1, 1, 1, 1, 1])
    window = cols[0].selectbox("Resolved in", list(WINDOWS), key="alerts_window")
    severities = cols[1].multiselect("Severity", ["critical", "warning", "info"], key="alerts_severity")
    clusters = cols[2].multiselect("Cluster", sorted(visible), key="alerts_clusters", format_func=components.option)
    sources = cols[3].multiselect("Source", ["fleet", "client config"], key="alerts_sources")
    text = cols[4].text_input("Rule or subject contains", key="alerts_text")
    chosen = config_views.filter_alerts(every, severities=severities, clusters=clusters, sources=sources, text=text)
    now = pd.Timestamp.now(tz="UTC")
    board = incident_views.alert_board(chosen, now=now)
    open_rows = incident_views.open_incidents(board)
    resolved = incident_views.resolved_incidents(board, now - WINDOWS[window])

    st.caption(f"{len(open_rows) + len(resolved)} of {len(board)} alerts: open now, or resolved in the {window}")
    st.subheader("Open now")
    counts = incident_views.open_counts(board)
    tiles = st.columns(3)
    for col, severity in zip(tiles, ("critical", "warning", "info"), strict=True):
        col.metric(severity, counts[severity])
    if open_rows.empty:
        st.success("Nothing is open.", icon=":material/check_circle:")
    else:
        components.data_table(incident_views.by_rule(board, now=now), key="alerts_by_rule", hide_index=True, column_config={
            "title": st.column_config.TextColumn("title", help="what a client-config rule checks"),
            "open": st.column_config.NumberColumn("open", help="open incidents and client-config alerts"),
            "clusters": st.column_config.NumberColumn("clusters"),
            "subjects": st.column_config.NumberColumn("subjects", help="topics, brokers, clients or groups"),
            "open_since": st.column_config.DatetimeColumn("oldest since (UTC)", format="YYYY-MM-DD HH:mm"),
            "longest": st.column_config.TextColumn("open for (longest)")})
        components.data_table(open_rows.drop(columns=["resolved"]), key="alerts_table", hide_index=True,
                     column_config=BOARD_CONFIG)

    st.subheader(f"Resolved in the {window}")
    if resolved.empty:
        st.caption("No incident was resolved in this window.")
    else:
        components.data_table(resolved, key="alerts_resolved", hide_index=True, column_config=BOARD_CONFIG)
    # Plotly costs about a second per page view, so the chart is drawn on request only.
    if st.toggle(f"Chart of alerts opened in the {window}", key="alerts_chart"):
        history = chosen[pd.to_datetime(chosen["raised_at"], utc=True) >= now - WINDOWS[window]]
        st.plotly_chart(charts.alerts_over_time_chart(config_views.alerts_over_time(history),
                                                      title=f"Opened in the {window}"), key="alerts_over_time")


main()
