"""Alerts page: fleet and misconfiguration alerts in one filterable table, and alerts over time."""

from __future__ import annotations

import streamlit as st

from backend.views import config_views
from dashboard import charts, components, data


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
    alerts = data.all_alerts(location)
    visible = data.visible_result_clusters(location, set(alerts["cluster"]))
    every = alerts[alerts["cluster"].isin(visible)]
    alerts = every
    if st.toggle("current only (standing alerts of the latest poll, events of the last 24 h)", value=True, key="alerts_current"):
        alerts = config_views.current_alerts(every, data.latest_poll_ids(location))
    cols = st.columns(4)
    severities = cols[0].multiselect("Severity", ["critical", "warning", "info"], key="alerts_severity")
    clusters = cols[1].multiselect("Cluster", sorted(visible), key="alerts_clusters")
    sources = cols[2].multiselect("Source", ["fleet", "client config"], key="alerts_sources")
    text = cols[3].text_input("Rule or subject contains", key="alerts_text")
    shown = config_views.filter_alerts(alerts, severities=severities, clusters=clusters, sources=sources, text=text)
    st.caption(f"{len(shown)} of {len(alerts)} alerts")
    st.dataframe(shown, key="alerts_table", hide_index=True, column_config={
        "doc_url": st.column_config.LinkColumn("documentation", display_text="docs ↗"),
        "raised_at": st.column_config.DatetimeColumn("raised", format="YYYY-MM-DD HH:mm"),
        "evidence": st.column_config.TextColumn("evidence", width="medium"),
        "rationale": st.column_config.TextColumn("rationale", width="large"),
        "poll_id": None,
    })
    history = config_views.filter_alerts(every, severities=severities, clusters=clusters, sources=sources, text=text)
    st.plotly_chart(charts.alerts_over_time_chart(config_views.alerts_over_time(history)), key="alerts_over_time")


main()
