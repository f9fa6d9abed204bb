"""Compare page: versions, topic overlap, value distributions and drift of two or more clusters."""

from __future__ import annotations

import streamlit as st

from backend.views import broker_config_views, config_views, fleet_views, group_views
from dashboard import charts, components, data


def broker_configs_section(location: str, chosen: list[str]) -> None:
    """Broker configs side by side: differences first, defaults behind a toggle, CSV export."""
    st.subheader("Broker configs", help="DescribeConfigs: the value the brokers of each cluster report "
                 "(\"differs within the cluster\" when they disagree)")
    include = st.toggle("include configs at their default everywhere", value=False, key="compare_config_defaults")
    table = broker_config_views.compare_broker_configs(data.broker_configs(location, tuple(chosen)), chosen,
                                                       include_defaults=include)
    if table.empty:
        st.caption("No broker configs read for these clusters yet (the poller reads them every `config_interval_s`).")
        return
    st.caption(f"{int(table['differs'].sum()):,} of {len(table):,} configs differ; differences first.")
    components.data_table(table, key="compare_broker_configs", hide_index=True, column_config={
        "differs": st.column_config.CheckboxColumn("differs"),
        "all_default": st.column_config.CheckboxColumn("default everywhere")})
    components.export_buttons(None, table, name="broker-configs-" + "-".join(components.file_stem(c) for c in chosen),
                              key="compare_broker_configs_export")


def groups_section(location: str, chosen: list[str]) -> None:
    """Consumer groups by type and state, and by status, side by side."""
    st.subheader("Consumer groups", help="by type (classic, consumer = KIP-848, share, streams) and state, and by "
                 "Burrow-style status; the Consumer groups page lists them")
    groups = data.groups(location)
    mine = groups[groups["cluster_name"].isin(chosen)]
    if mine.empty:
        st.caption("No consumer groups read for these clusters yet (the poller reads them every `group_interval_s`).")
        return
    cols = st.columns(2)
    with cols[0]:
        components.data_table(group_views.compare_groups(mine, chosen), key="compare_groups", hide_index=True)
    with cols[1]:
        components.data_table(group_views.compare_statuses(mine, chosen), key="compare_group_statuses",
                              hide_index=True)


def main() -> None:
    """Render the compare page."""
    st.title("Compare clusters")
    location = data.lake()
    has_snapshots, has_results = data.lake_state(location)
    if not has_snapshots:
        components.no_lake(location)
        return
    names = list(data.chosen_clusters(location)["cluster_name"])
    preferred = data.clusters_with_configs_first(location, names) if has_results else names
    chosen = st.multiselect("Clusters (two or more)", names, default=preferred[:2], key="compare_clusters")
    if len(chosen) < 2:
        st.info("Pick at least two clusters to compare.")
        return

    st.subheader("Broker versions")
    matrix = fleet_views.version_matrix(data.latest_brokers(location))
    components.data_table(config_views.versions_side_by_side(matrix, chosen), key="compare_versions", hide_index=True)

    st.subheader("Topics")
    overlap = config_views.topic_overlap(data.latest_topics_of(location, tuple(chosen)), chosen)
    cols = st.columns(2)
    cols[0].metric("topic names in more than one cluster", overlap.shared)
    cols[1].metric("same name, different topic id", overlap.same_name_different_id,
                   help="KIP-516: a different id means a different topic, even with the same name")
    only_shared = st.toggle("shared names only", value=True, key="compare_shared_only")
    table = overlap.table[overlap.table["clusters"] > 1] if only_shared else overlap.table
    components.data_table(table.head(1000), key="compare_overlap", hide_index=True)

    broker_configs_section(location, chosen)
    groups_section(location, chosen)

    if not has_results:
        components.no_results(location)
        return
    components.shared_cluster_ids(data.id_collisions(location))
    st.subheader("Client config drift")
    drift = data.result(location, "drift_clusters")
    dist = data.result(location, "distributions")
    identity = config_views.identity_keys(data.result(location, "drift_keys"))
    if not st.toggle("include identity keys (client.id, group.id, … and keys unique per instance)", value=False,
                     key="compare_identity", help=components.plain_list(sorted(identity))):
        drift = config_views.drop_keys(drift, identity)
        dist = config_views.drop_keys(dist, identity)
    heat = config_views.drift_matrix(drift, chosen)
    st.plotly_chart(charts.drift_heatmap(heat), key="compare_drift")
    dist = dist[dist["cluster"].isin(chosen)]
    numeric = data.result(location, "numeric_summary")
    numeric = numeric[numeric["cluster"].isin(chosen)]
    drifting = config_views.keys_by_drift(heat)
    keys = drifting + sorted((set(dist["key"]) | set(numeric["key"])) - set(drifting))
    key = st.selectbox("Config key (most drifting first)", keys, key="compare_key", format_func=components.option)
    if key and key in set(numeric["key"]):
        st.plotly_chart(charts.numeric_distribution(numeric, key=key), key="compare_num")
    elif key:
        st.plotly_chart(charts.categorical_distribution(config_views.top_values(dist, key), key=key,
                                                        spellings=config_views.spellings(dist, key)),
                        key="compare_dist")
        side = config_views.shares_side_by_side(dist, key, chosen, with_spellings=True)
        components.data_table(side, key="compare_side", hide_index=True,
                     column_config={c: st.column_config.NumberColumn(c, format="percent") for c in chosen})


main()
