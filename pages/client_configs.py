"""Client configs page: value distributions, numeric spreads, defaults, client software, ingest counts."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.views import config_views
from dashboard import charts, components, data

OVERVIEW_KEYS = 40


def ingest_tiles(stats: pd.DataFrame) -> None:
    """Ingest counters since the lake began and of the last run per source."""
    for label, since_start in (("since the lake began (all ingest runs)", True),
                               ("last ingest run (per source)", False)):
        counts = config_views.ingest_counts(stats, since_start=since_start)
        st.caption(f"Ingest counts {label}")
        tiles = st.columns(4)
        tiles[0].metric(f"records read · {label.split(' (')[0]}", f"{counts.records_read:,}")
        tiles[1].metric(f"records written · {label.split(' (')[0]}", f"{counts.records_written:,}")
        tiles[2].metric(f"quarantined · {label.split(' (')[0]}", f"{counts.quarantined:,}")
        tiles[3].metric(f"sensitive keys dropped · {label.split(' (')[0]}", f"{counts.sensitive_dropped:,}",
                        help="dropped keys: " + components.plain_list(counts.dropped_keys))


def main() -> None:
    """Render the client-config page."""
    st.title("Client configs")
    location = data.lake()
    _, has_results = data.lake_state(location)
    if not has_results:
        components.no_results(location)
        return
    components.shared_cluster_ids(data.id_collisions(location))
    dist = data.result(location, "distributions")
    numeric = data.result(location, "numeric_summary")
    versions = data.result(location, "client_versions")
    defaults = data.result(location, "default_share")
    visible = data.visible_result_clusters(location, set(dist["cluster"]))

    cols = st.columns(4)
    clusters = cols[0].multiselect("Cluster", sorted(set(dist["cluster"]) & visible), key="client_configs_clusters",
                               format_func=components.option)
    types = cols[1].multiselect("Client type", sorted(dist["client_type"].dropna().unique()), key="client_configs_types")
    software = cols[2].multiselect("Client software", sorted(versions["client_software_name"].dropna().unique()),
                                   key="client_configs_software", format_func=components.option)
    keys = cols[3].multiselect("Key", sorted(set(dist["key"]) | set(numeric["key"])), key="client_configs_keys",
                           format_func=components.option)

    scope = {"clusters": clusters or sorted(visible), "client_types": types, "keys": keys}
    dist = config_views.filter_results(dist, **scope)
    numeric = config_views.filter_results(numeric, **scope)
    defaults = config_views.filter_results(defaults, **scope)
    versions = config_views.filter_results(versions, clusters=scope["clusters"], client_types=types)
    if software:
        versions = versions[versions["client_software_name"].isin(software)]

    if data.scope(location).everything:
        ingest_tiles(data.result(location, "ingest_stats"))
    else:
        st.caption("Ingest counts cover every cluster's clients, so they are shown only to those who may view every "
                   "cluster.")

    identity = config_views.identity_keys(data.result(location, "drift_keys"))
    if not st.toggle("include identity keys (client.id, group.id, … and keys unique per instance)", value=False,
                     key="client_configs_identity", help=components.plain_list(sorted(identity))):
        dist = config_views.drop_keys(dist, identity)
    numeric_keys = set(numeric["key"])
    overview = config_views.agreement(dist, keys=OVERVIEW_KEYS)
    ranked = list(config_views.agreement(dist, keys=len(set(dist["key"])) or 1)["key"].drop_duplicates())
    st.subheader("Overview")
    st.caption("Each cell is the share of a cluster's client instances on the key's most common value, which is "
               "written in the cell; red means the clients disagree. Keys the clients agree on least come first"
               + (f"; the {len(ranked) - OVERVIEW_KEYS} best-agreed keys are left out." if len(ranked) > OVERVIEW_KEYS
                  else "."))
    st.plotly_chart(charts.agreement_heatmap(overview), key="client_configs_overview")
    st.subheader("One key")
    options = ranked + sorted(numeric_keys - set(ranked))
    key = st.selectbox("Key (least agreed first)", options, key="client_configs_key", format_func=components.option)
    if key in numeric_keys:
        st.plotly_chart(charts.numeric_distribution(numeric, key=key), key="client_configs_num")
    elif key:
        st.plotly_chart(charts.categorical_distribution(config_views.top_values(dist, key), key=key,
                                                        spellings=config_views.spellings(dist, key)),
                        key="client_configs_cat")
    if key:
        shown = sorted(set(dist.loc[dist["key"] == key, "cluster"]))
        components.data_table(config_views.shares_side_by_side(dist, key, shown, with_spellings=True),
                     key="client_configs_shares", hide_index=True,
                     column_config={c: st.column_config.NumberColumn(c, format="percent") for c in shown})
    st.subheader("Default vs overridden")
    st.plotly_chart(charts.default_share_chart(defaults.head(60)), key="client_configs_defaults")
    st.subheader("Client software")
    st.plotly_chart(charts.client_versions_chart(versions), key="client_configs_versions")
    components.data_table(versions.drop(columns=["cluster_id", "computed_at", "schema_version"], errors="ignore"),
                 key="client_configs_versions_table", hide_index=True)
    groups = config_views.filter_results(data.result(location, "group_drift"), clusters=scope["clusters"], keys=keys)
    if not groups.empty:
        st.subheader("Consumer groups whose members disagree")
        components.data_table(groups[["cluster", "group_id", "key", "members", "distinct_values", "value_counts_json"]],
                     key="client_configs_group_drift", hide_index=True)


main()
