"""Export page: any chart as PNG/SVG/HTML, its data as CSV/Parquet, upgrade readiness as CSV, the one-file drift report."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from backend.export import report
from backend.export.csv_safe import safe_csv
from backend.views import config_views, fleet_views, group_views, readiness
from dashboard import charts, components, data


def chart_catalog(location: str, has_results: bool) -> dict[str, Callable[[], tuple[go.Figure, pd.DataFrame]]]:
    """Charts the user can export, each built only when chosen."""
    def versions() -> tuple[go.Figure, pd.DataFrame]:
        frame = fleet_views.version_matrix(data.latest_brokers(location))
        return charts.version_matrix_chart(frame), frame

    def upgrades() -> tuple[go.Figure, pd.DataFrame]:
        frame = fleet_views.upgrade_timeline(data.version_timeline(location))
        return charts.upgrade_timeline_chart(frame), frame

    def alerts() -> tuple[go.Figure, pd.DataFrame]:
        frame = config_views.alerts_over_time(data.all_alerts(location))
        return charts.alerts_over_time_chart(frame), frame

    def groups() -> tuple[go.Figure, pd.DataFrame]:
        names = sorted(data.chosen_clusters(location)["cluster_name"])
        frame = group_views.compare_statuses(data.groups(location), names)
        return charts.groups_by_status_chart(frame), frame

    catalog = {"Broker versions by cluster": versions, "Upgrade timeline": upgrades, "Alerts over time": alerts,
               "Consumer groups by status": groups}
    if has_results:
        def drift() -> tuple[go.Figure, pd.DataFrame]:
            frame = config_views.drift_matrix(data.result(location, "drift_clusters"))
            return charts.drift_heatmap(frame), frame.reset_index()

        def software() -> tuple[go.Figure, pd.DataFrame]:
            frame = data.result(location, "client_versions")
            return charts.client_versions_chart(frame), frame

        def defaults() -> tuple[go.Figure, pd.DataFrame]:
            frame = data.result(location, "default_share")
            return charts.default_share_chart(frame), frame

        catalog |= {"Config drift heatmap": drift, "Client software per cluster": software,
                    "Default vs overridden": defaults}
        dist = data.result(location, "distributions")
        numeric = data.result(location, "numeric_summary")
        def overview() -> tuple[go.Figure, pd.DataFrame]:
            frame = config_views.agreement(dist)
            return charts.agreement_heatmap(frame), frame

        catalog["Client config overview (dominant value share)"] = overview
        for key in config_views.categorical_keys(dist, numeric):
            catalog[f"Value shares · {key}"] = partial(_value_chart, dist, key)
        for key in sorted(numeric["key"].unique()):
            catalog[f"Numeric spread · {key}"] = partial(_key_chart, charts.numeric_distribution, numeric, key)
    return catalog


def _value_chart(frame: pd.DataFrame, key: str) -> tuple[go.Figure, pd.DataFrame]:
    fig = charts.categorical_distribution(config_views.top_values(frame, key), key=key,
                                          spellings=config_views.spellings(frame, key))
    return fig, frame[frame["key"] == key].drop(columns=["cluster_id"], errors="ignore")


def _key_chart(factory: Callable[..., go.Figure], frame: pd.DataFrame, key: str) -> tuple[go.Figure, pd.DataFrame]:
    return factory(frame, key=key), frame[frame["key"] == key].drop(columns=["cluster_id"], errors="ignore")


def readiness_section(location: str) -> None:
    """Upgrade readiness of every cluster this session may view, as CSV (the checklist, the keys, their instances)."""
    st.subheader("Upgrade readiness (CSV)")
    target = st.selectbox("Target release", readiness.known_targets(), index=0, key="export_readiness_target")
    ready = data.upgrade_readiness(location, target)  # the page's own cached reading, filtered by the grants
    checklist = safe_csv(report.readiness_checklist(ready))
    keys = safe_csv(ready.keys.assign(target=ready.target))
    instances = safe_csv(ready.instances.assign(target=ready.target))
    st.caption(f"{len(ready.verdicts)} clusters: " + ", ".join(
        f"{n} {v}" for v, n in ready.verdicts["verdict"].value_counts().sort_index().items()))
    left, right, third = st.columns(3)
    left.download_button("Download readiness checklist (CSV)", checklist, file_name=f"upgrade-readiness-{target}.csv",
                         mime="text/csv", key="export_readiness_download",
                         on_click=components.export_recorder(f"upgrade-readiness-{target}.csv"))
    right.download_button("Download client-config keys (CSV)", keys,
                          file_name=f"upgrade-readiness-keys-{target}.csv", mime="text/csv",
                          key="export_readiness_keys_download",
                          on_click=components.export_recorder(f"upgrade-readiness-keys-{target}.csv"))
    third.download_button("Download instances that set them (CSV)", instances,
                          file_name=f"upgrade-readiness-instances-{target}.csv", mime="text/csv",
                          key="export_readiness_instances_download",
                          on_click=components.export_recorder(f"upgrade-readiness-instances-{target}.csv"))


def report_section(location: str) -> None:
    """Build the one-file HTML config-drift report for chosen clusters and keys."""
    st.subheader("Config-drift report (one HTML file)")
    dist = data.result(location, "distributions")
    clusters = st.multiselect("Clusters", sorted(dist["cluster"].unique()), key="export_report_clusters",
                              format_func=components.option)
    keys = st.multiselect("Keys (empty: the most drifting)", sorted(dist["key"].unique()), key="export_report_keys",
                          format_func=components.option)
    identity = st.toggle("rank identity keys too (client.id, group.id, …)", value=False,
                         key="export_report_identity")
    if not clusters:
        st.caption("Choose clusters to build the report.")
        return
    try:
        text = report.build_drift_report(location, clusters, keys or None, include_identity=identity,
                                         scope=data.scope(location))
    except report.ReportError as exc:
        st.error(components.plain(exc))
        return
    st.download_button("Download drift report (HTML)", text, file_name="config-drift-report.html",
                       mime="text/html", key="export_report_download",
                       on_click=components.export_recorder("config-drift-report.html", clusters))


def groups_section(location: str) -> None:
    """Consumer groups and their lag per partition, as CSV, for chosen clusters."""
    st.subheader("Consumer groups and lag (CSV)")
    names = sorted(set(data.groups(location)["cluster_name"]))
    if not names:
        st.caption("No consumer groups read yet.")
        return
    clusters = st.multiselect("Export groups from", names, key="export_groups_clusters",
                              format_func=components.option)
    if not clusters:
        st.caption("Choose clusters to export their groups.")
        return
    try:
        text = report.build_groups_csv(location, clusters, scope=data.scope(location))
    except report.ReportError as exc:
        st.error(components.plain(exc))
        return
    st.download_button("Download groups (CSV)", text, file_name="consumer-groups.csv", mime="text/csv",
                       key="export_groups_download", on_click=components.export_recorder("consumer-groups.csv", clusters))


def main() -> None:
    """Render the export page."""
    st.title("Export")
    location = data.lake()
    has_snapshots, has_results = data.lake_state(location)
    if not has_snapshots:
        components.no_lake(location)
        return
    catalog = chart_catalog(location, has_results)
    name = st.selectbox("Chart", list(catalog), key="export_chart", format_func=components.option)
    fig, frame = catalog[name]()
    st.plotly_chart(fig, key="export_preview")
    components.export_buttons(fig, frame, name=components.file_stem(name), key="export_chart_buttons")
    groups_section(location)
    readiness_section(location)
    if has_results:
        report_section(location)
    else:
        components.no_results(location)


main()
