"""Client configs page: value distributions, numeric spreads, defaults, client software, ingest counts."""

from __future__ import annotations

import streamlit as st

from backend.views import config_views
from dashboard import charts, components, data

CHARTS_PER_SECTION = 8


def main() -> None:
    """Render the client-config page."""
    st.title("Client configs")
    location = data.lake()
    _, has_results = data.lake_state(location)
    if not has_results:
        components.no_results(location)
        return
    dist = data.result(location, "distributions")
    numeric = data.result(location, "numeric_summary")
    versions = data.result(location, "client_versions")
    defaults = data.result(location, "default_share")
    visible = data.visible_result_clusters(location, set(dist["cluster"]))

    cols = st.columns(4)
    clusters = cols[0].multiselect("Cluster", sorted(set(dist["cluster"]) & visible), key="client_configs_clusters")
    types = cols[1].multiselect("Client type", sorted(dist["client_type"].dropna().unique()), key="client_configs_types")
    software = cols[2].multiselect("Client software", sorted(versions["client_software_name"].dropna().unique()),
                                   key="client_configs_software")
    keys = cols[3].multiselect("Key", sorted(set(dist["key"]) | set(numeric["key"])), key="client_configs_keys")

    scope = {"clusters": clusters or sorted(visible), "client_types": types, "keys": keys}
    dist = config_views.filter_results(dist, **scope)
    numeric = config_views.filter_results(numeric, **scope)
    defaults = config_views.filter_results(defaults, **scope)
    versions = config_views.filter_results(versions, clusters=scope["clusters"], client_types=types)
    if software:
        versions = versions[versions["client_software_name"].isin(software)]

    stats = data.result(location, "ingest_stats")
    for label, since_start in (("since the lake began (all ingest runs)", True),
                               ("last ingest run (per source)", False)):
        counts = config_views.ingest_counts(stats, since_start=since_start)
        st.caption(f"Ingest counts {label}")
        tiles = st.columns(4)
        tiles[0].metric(f"records read · {label.split(' (')[0]}", f"{counts.records_read:,}")
        tiles[1].metric(f"records written · {label.split(' (')[0]}", f"{counts.records_written:,}")
        tiles[2].metric(f"quarantined · {label.split(' (')[0]}", f"{counts.quarantined:,}")
        tiles[3].metric(f"sensitive keys dropped · {label.split(' (')[0]}", f"{counts.sensitive_dropped:,}",
                        help="dropped keys: " + (", ".join(counts.dropped_keys) or "none"))

    identity = config_views.identity_keys(data.result(location, "drift_keys"))
    if not st.toggle("include identity keys (client.id, group.id, … and keys unique per instance)", value=False,
                     key="client_configs_identity", help=", ".join(sorted(identity))):
        dist = config_views.drop_keys(dist, identity)
    categorical = config_views.categorical_keys(dist, numeric)
    numeric_keys = sorted(numeric["key"].unique())
    st.subheader("Categorical keys")
    for key in categorical[:CHARTS_PER_SECTION]:
        st.plotly_chart(charts.categorical_distribution(dist, key=key), key=f"client_configs_cat_{key}")
    st.subheader("Numeric keys")
    for key in numeric_keys[:CHARTS_PER_SECTION]:
        st.plotly_chart(charts.numeric_distribution(numeric, key=key), key=f"client_configs_num_{key}")
    hidden = max(0, len(categorical) - CHARTS_PER_SECTION) + max(0, len(numeric_keys) - CHARTS_PER_SECTION)
    if hidden:
        st.caption(f"{hidden} more keys: pick them in the Key filter above.")
    st.subheader("Default vs overridden")
    st.plotly_chart(charts.default_share_chart(defaults.head(60)), key="client_configs_defaults")
    st.subheader("Client software")
    st.plotly_chart(charts.client_versions_chart(versions), key="client_configs_versions")
    st.dataframe(versions.drop(columns=["cluster_id", "computed_at", "schema_version"], errors="ignore"),
                 key="client_configs_versions_table", hide_index=True)
    groups = config_views.filter_results(data.result(location, "group_drift"), clusters=scope["clusters"], keys=keys)
    if not groups.empty:
        st.subheader("Consumer groups whose members disagree")
        st.dataframe(groups[["cluster", "group_id", "key", "members", "distinct_values", "value_counts_json"]],
                     key="client_configs_group_drift", hide_index=True)


main()
