"""Clients page: which client software talks to each cluster, as the brokers count it (KIP-511, KIP-896)."""

from __future__ import annotations

import streamlit as st

from backend.views import inventory_views
from dashboard import components, data

NO_SOURCE_HELP = (
    "No cluster has a broker metrics source yet. Add `[clusters.broker_metrics]` to the fleet file: "
    "`metrics_url = \"http://{host}:7071/metrics\"` (each broker's Prometheus JMX exporter) or "
    "`prometheus = \"http://prometheus:9090\"` with `matchers`; see docs/client-inventory.md."
)


def main() -> None:
    """Render the Clients page."""
    st.title("Clients")
    st.caption("Client software and versions as the brokers themselves count them (KIP-511 connections; KIP-896 "
               "requests on protocol versions Kafka 4.0 removed), read from their JMX metrics. A client that sends no "
               "name (a client before 2.4, or one that does not send ApiVersions v3, e.g. librdkafka with "
               "api.version.request=false) shows as `unknown`. The brokers' own controller and inter-broker "
               "connections are listed apart.")
    location = data.lake()
    if not data.lake_state(location)[0]:
        components.no_lake(location)
        return
    rows, runs = data.client_inventory(location)
    if runs.empty:
        st.info(NO_SOURCE_HELP, icon=":material/sensors:")
        return
    chosen = set(data.chosen_clusters(location)["cluster_name"])
    runs = runs[runs["cluster_name"].isin(chosen) | ~runs["cluster_name"].isin(set(data.latest_clusters(location)["cluster_name"]))]
    rows = rows[rows["cluster_name"].isin(set(runs["cluster_name"]))]
    status = inventory_views.status_rows(runs)
    problems = status[status["status"] != "ok"]
    for row in problems.itertuples(index=False):
        st.warning(f"{components.plain(row.cluster_name)}: {components.plain(row.status)}: "
                   f"{components.plain(row.message)}", icon=":material/warning:")
    for row in status[(status["status"] == "ok") & status["message"].notna()].itertuples(index=False):
        st.info(f"{components.plain(row.cluster_name)}: {components.plain(row.message)}", icon=":material/info:")

    by_cluster = inventory_views.software_by_cluster(rows)
    hide_own = st.toggle("hide this product's own connections", value=True, key="clients_hide_own")
    if hide_own:
        by_cluster = by_cluster[~by_cluster["this_product"]]
    st.subheader("Fleet-wide")
    fleet = inventory_views.fleet_software(by_cluster)
    components.data_table(fleet, key="clients_fleet", name="client-software-fleet", hide_index=True)

    st.subheader("Per cluster")
    names = sorted(set(status["cluster_name"]))
    picked = st.multiselect("Cluster", names, key="clients_clusters", format_func=components.option)
    shown = by_cluster[by_cluster["cluster_name"].isin(picked or names)]
    components.data_table(shown, key="clients_by_cluster", name="client-software-by-cluster", hide_index=True)

    brokers_own = inventory_views.software_by_cluster(rows, role="broker")
    brokers_own = brokers_own[brokers_own["cluster_name"].isin(picked or names)]
    if not brokers_own.empty and st.toggle("show the brokers' own connections", value=False,
                                           key="clients_show_brokers",
                                           help="controller and inter-broker connections (on a controller listener, "
                                                "or Apache Kafka's Java client at a broker's version on the "
                                                "inter-broker listener): not clients"):
        components.data_table(brokers_own, key="clients_brokers_own", name="broker-connections", hide_index=True)

    st.subheader("Requests on protocol versions Kafka 4.0 removed (KIP-896)")
    deprecated = inventory_views.deprecated_requests(rows, runs)
    deprecated = deprecated[deprecated["cluster_name"].isin(picked or names)]
    if deprecated.empty:
        st.caption("None counted by the brokers of these clusters (see each cluster's status above for clusters whose "
                   "exporter rules do not export them).")
    else:
        st.caption("A request counted within the cluster's window (client_metrics_window_s) blocks the upgrade until "
                   "the window has passed since it was last counted (`blocks_for`); counts are compared only between "
                   "two reads of the same broker process.")
        components.data_table(deprecated, key="clients_deprecated", name="deprecated-requests", hide_index=True)

    st.subheader("Brokers vs client-config sources")
    st.caption("What the brokers count (connections) beside what the client-config sources report (instances, "
               "KIP-1324 pushes, Java logs, .properties) for the same cluster: `brokers only` are clients no config "
               "source covers; `config sources only` are clients not connected now (or not reporting a name).")
    versions = data.result(location, "client_versions") if data.lake_state(location)[1] else None
    compared = inventory_views.compare_with_configs(shown, versions if versions is not None else by_cluster.iloc[0:0])
    components.data_table(compared, key="clients_compare", name="clients-brokers-vs-configs", hide_index=True)

    st.subheader("Last read")
    components.data_table(status, key="clients_status", name="client-inventory-status", hide_index=True)


main()
