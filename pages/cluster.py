"""Cluster page: brokers, searchable paginated topics, ZooKeeper view and recent changes."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from backend.views import broker_config_views, fleet_views, group_views, incident_views
from dashboard import components, data

PAGE_SIZES = (50, 100, 500)


def choose_cluster(location: str) -> str | None:
    """Cluster from ?cluster=<name> or the selectbox; keeps the query param in sync."""
    names = list(data.chosen_clusters(location)["cluster_name"])
    wanted = st.query_params.get("cluster")
    if wanted and wanted not in names and data.restricted() and not data.may_view(location, wanted):
        # The same words whether or not the cluster exists: a name one may not view reveals nothing.
        st.error(f"No access to cluster {components.plain(wanted)}.", icon=":material/lock:")
        data.audit_refusal("page cluster", wanted)
        return None
    if wanted and wanted not in names:
        st.warning(f"Cluster {components.plain(wanted)} is not in the lake (or is hidden by the tag filters).")
    if wanted in names and wanted != st.session_state.get("cluster_followed_link"):
        st.session_state["cluster_name"] = wanted  # a new link wins over the last choice
    elif st.session_state.get("cluster_name") not in names:
        st.session_state["cluster_name"] = names[0] if names else None
    name = st.selectbox("Cluster", names, key="cluster_name")
    if name and name != wanted:
        st.query_params["cluster"] = name
    st.session_state["cluster_followed_link"] = name
    return name


def topics_section(location: str, cluster: str) -> None:
    """Server-side filtered, paginated topic table (only one page goes to the browser)."""
    topics = data.latest_topics(location, cluster)
    cols = st.columns([3, 1, 1, 1])
    query = cols[0].text_input("Search topics (name, or topic id prefix)", key="cluster_topic_query")
    include_internal = cols[1].toggle("internal", value=True, key="cluster_topic_internal")
    only_urp = cols[2].toggle("under-replicated only", key="cluster_topic_urp")
    size = cols[3].selectbox("rows per page", PAGE_SIZES, key="cluster_topic_page_size")
    page_no = st.session_state.get("cluster_topic_page", 1)
    page = fleet_views.topic_page(topics, query=query, include_internal=include_internal,
                                  only_under_replicated=only_urp, page=page_no, page_size=size)
    components.data_table(page.rows, key="cluster_topics", hide_index=True,
                 column_config={"topic_id": st.column_config.TextColumn("topic id", help="KIP-516")})
    nav = st.columns([1, 2])
    nav[0].number_input("page", min_value=1, max_value=page.pages, value=page.page, key="cluster_topic_page")
    nav[1].caption(f"{page.total:,} matching topics of {len(topics):,} · page {page.page} of {page.pages}")


def configs_section(location: str, cluster: str) -> None:
    """Broker configs (brokers that disagree first, then non-default ones, with their source) and topic overrides."""
    summary = broker_config_views.cluster_config_summary(data.config_runs(location, (cluster,)), cluster)
    if summary is None:
        st.caption("Not read yet: the poller reads broker and topic configs (DescribeConfigs) every "
                   "`config_interval_s` (10 minutes by default).")
        return
    text, error = summary
    st.caption(text)
    if error:
        st.caption(f":material/warning: could not read (last known values kept): {components.plain(error)}")
    frame = data.broker_configs(location, (cluster,))
    split = broker_config_views.disagreements(frame, cluster)
    if not split.empty:
        st.warning(f"The brokers disagree on {len(split)} config(s): a rolling change left half done, or brokers "
                   "built from different templates.", icon=":material/call_split:")
        components.data_table(split, key="cluster_config_split", hide_index=True)
    show_defaults = st.toggle("show configs at their default", value=False, key="cluster_config_defaults")
    table = broker_config_views.broker_config_table(frame, cluster, include_defaults=show_defaults)
    components.data_table(table, key="cluster_broker_configs", hide_index=True, column_config={
        "brokers_disagree": st.column_config.CheckboxColumn("brokers disagree"),
        "non_default": st.column_config.CheckboxColumn("not default"),
        "read_only": st.column_config.CheckboxColumn("read-only", help="not updatable dynamically"),
        "value": st.column_config.TextColumn("value", width="large"), "type": None})
    st.caption(f"{len(table):,} configs shown; values the broker marks sensitive (or that look like a secret) "
               "are never stored: they show as withheld.")
    overrides = broker_config_views.topic_overrides(frame, cluster)
    st.markdown("**Topic overrides**")
    if overrides.empty:
        st.caption("No topic overrides a config: every topic uses the brokers' values.")
    else:
        components.data_table(overrides.head(2000), key="cluster_topic_overrides", hide_index=True)
        st.caption(f"{overrides['topic'].nunique():,} topics override {len(overrides):,} configs.")


def groups_section(location: str, cluster: str) -> None:
    """The cluster's consumer groups, worst first (the Consumer groups page filters and pages them all)."""
    from datetime import UTC, datetime

    groups = data.groups(location)
    mine = groups[groups["cluster_name"] == cluster]
    text = group_views.last_read_text(data.group_runs(location), cluster, datetime.now(UTC))
    if text is None:
        st.caption("Not read yet: the poller reads consumer groups every `group_interval_s` (60 s by default).")
        return
    st.caption(text + " · " + " · ".join(f"{s.replace('_', ' ')} {n:,}"
                                         for s, n in group_views.status_counts(mine).items()))
    rows = group_views.list_rows(group_views.worst_first(mine).head(200))
    rows.insert(2, "open", ["./consumer_groups?" + urlencode({"cluster": cluster, "group": k}) for k in rows["key"]])
    components.data_table(rows.drop(columns=["key", "cluster"]), key="cluster_groups", hide_index=True, column_config={
        "open": st.column_config.LinkColumn("open", display_text="open ↗", width=52),
        "status_since": st.column_config.DatetimeColumn("status since (UTC)", format="YYYY-MM-DD HH:mm")})
    if len(mine) > 200:
        st.caption(f"The 200 worst of {len(mine):,} groups; the Consumer groups page has them all.")


def main() -> None:
    """Render the cluster page."""
    st.title("Cluster")
    location = data.lake()
    has_snapshots, _ = data.lake_state(location)
    if not has_snapshots:
        components.no_lake(location)
        return
    cluster = choose_cluster(location)
    if cluster is None:
        if not st.query_params.get("cluster") or data.may_view(location, st.query_params.get("cluster", "")):
            st.info("No cluster matches the tag filters in the sidebar.")
        return
    latest = data.latest_clusters(location)
    row = latest[latest["cluster_name"] == cluster].iloc[0]
    head = st.columns([1, 2, 2, 1])
    with head[0]:
        components.status_badge(row["status"], row["error"])
    with head[1]:
        components.copyable_id("cluster id (KIP-78)", row["cluster_id"])
    with head[2]:
        if row["zk_cluster_id"]:
            components.copyable_id("cluster id in ZooKeeper", row["zk_cluster_id"])
    head[3].metric("controller", fleet_views.controller_text(row["controller_id"]))

    st.subheader("Brokers")
    brokers = data.latest_brokers(location, cluster, with_data=True)
    # The stored state carries the poll that last changed it, so compare statuses, not poll ids.
    if not brokers.empty and fleet_views.has_no_data(row["status"]):
        st.caption(f"The latest poll returned no data; showing brokers and topics last seen at "
                   f"{brokers['polled_at'].iloc[0]:%Y-%m-%d %H:%M} UTC.")
    components.data_table(fleet_views.broker_table(brokers), key="cluster_brokers", hide_index=True, column_config={
        "provenance": st.column_config.TextColumn("provenance", help=components.PROVENANCE_HELP)})
    if (brokers["version_provenance"] == "guessed").any():
        st.caption("Some brokers do not implement KIP-885: their version is a guess from ApiVersions, shown as a range.")
    with st.expander("ApiVersions fingerprints"):
        components.data_table(fleet_views.api_versions_table(brokers), key="cluster_api_versions", hide_index=True)

    st.subheader("Topics")
    topics_section(location, cluster)

    st.subheader("Broker configs", help="DescribeConfigs (read-only): every broker's configs and their source, "
                 "and each topic's overrides")
    configs_section(location, cluster)

    st.subheader("Consumer groups", help="ListGroups, Describe*, OffsetFetch, ListOffsets (read-only), judged "
                 "Burrow-style")
    groups_section(location, cluster)

    zk = data.zk_nodes(location, cluster)
    if not zk.empty:
        st.subheader("ZooKeeper")
        components.data_table(zk, key="cluster_zk", hide_index=True)

    alerts = data.all_alerts(location)
    board = incident_views.alert_board(alerts[alerts["cluster"] == cluster])
    st.subheader("Incidents")
    if board.empty:
        st.caption("No incident or client-config alert for this cluster in the retention.")
    else:
        counts = incident_views.open_counts(board)
        st.caption(f"{sum(counts.values())} open · {len(board) - sum(counts.values())} resolved; open ones first")
        components.data_table(board.head(200), key="cluster_alerts", hide_index=True, column_config={
            "doc_url": st.column_config.LinkColumn("documentation", display_text="docs ↗"),
            "since": st.column_config.DatetimeColumn("since (UTC)", format="YYYY-MM-DD HH:mm"),
            "last_seen": st.column_config.DatetimeColumn("last seen", format="YYYY-MM-DD HH:mm"),
            "resolved": st.column_config.DatetimeColumn("resolved", format="YYYY-MM-DD HH:mm"),
            "evidence": st.column_config.TextColumn("evidence", width="large"),
            "cluster": None, "source": None})

    st.subheader("Recent changes", help="from the change log: topics, brokers, cluster ids, controller")
    changes = data.recent_changes(location, cluster)
    if changes.empty:
        st.caption("No topic, version or controller changes in the recent polls.")
    else:
        components.data_table(changes, key="cluster_changes", hide_index=True)


main()
