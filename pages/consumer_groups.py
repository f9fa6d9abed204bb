"""Consumer groups page: every visible cluster's groups worst first, filters, server-side search and pages; a group's
detail (members, partitions and lag, the window its status is judged on, incidents, changes, members' configs);
the KIP-848 migration at a glance."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from backend.export.csv_safe import safe_csv
from backend.views import group_views, incident_views
from dashboard import charts, components, data
from dashboard.text import option

PAGE_SIZES = (50, 100, 500)
STATUS_HELP = ("Burrow-style, from the last reads of the group (its window of records waiting: the lag plus the "
               "records on partitions assigned without a commit): offset_ahead = a committed offset past the end of "
               "the log (the tool's negative LAG: truncated, or the topic recreated; never ok); lagging = the records "
               "waiting grew without falling; stalled = a partition kept its lag and its committed offset (or stayed "
               "uncommitted with records) over the whole window; stopped = nothing committed for "
               "group_stopped_after_s; empty_with_lag = no members while records wait; unknown = no lag known "
               "(nothing committed yet, or a share group whose coordinator told none)")


def group_link(cluster: str, key: str) -> str:
    """Relative URL of a group's detail (the key, never the group id, goes into the URL)."""
    from urllib.parse import urlencode

    return "./consumer_groups?" + urlencode({"cluster": cluster, "group": key})


def list_view(location: str, groups: pd.DataFrame, clusters: list[str]) -> None:
    """Tiles, filters, one page of groups, the CSV of everything filtered."""
    visible = groups[groups["cluster_name"].isin(clusters)]
    counts = group_views.status_counts(visible)
    tiles = st.columns(4)
    tiles[0].metric("Groups", f"{len(visible):,}", help="in the clusters the sidebar's tag filters keep")
    tiles[1].metric("Lagging, stalled, stopped or empty with lag",
                    f"{sum(counts.get(s, 0) for s in group_views.PROBLEMS):,}", help=STATUS_HELP)
    tiles[2].metric("Total lag (records)", f"{int(visible['lag'].fillna(0).sum()):,}",
                    help="summed over the groups whose lag is known")
    tiles[3].metric("Consumer protocol (KIP-848)", f"{int((visible['group_type'] == 'consumer').sum()):,}",
                    help="groups of type consumer; the others of type classic still run the classic protocol")
    st.caption(" · ".join(f"{s.replace('_', ' ')} {n:,}" for s, n in counts.items()) or "No groups read yet.")

    cols = st.columns([2, 2, 2, 2])
    chosen = cols[0].multiselect("Cluster", clusters, key="consumer_groups_clusters", format_func=components.option)
    statuses = cols[1].multiselect("Status", list(group_views.STATUS_RANK), key="consumer_groups_statuses",
                                   help=STATUS_HELP)
    types = cols[2].multiselect("Type / protocol", list(group_views.TYPES), key="consumer_groups_types",
                                help="classic (the classic rebalance protocol), consumer (KIP-848), share "
                                     "(KIP-932), streams (KIP-1071)")
    states = cols[3].multiselect("State", sorted(s for s in visible["state"].dropna().unique() if s),
                                 key="consumer_groups_states", format_func=components.option)
    cols = st.columns([3, 2, 1])
    query = cols[0].text_input("Search group ids", key="consumer_groups_query")
    topic = cols[1].text_input("Reads topic (exact name)", key="consumer_groups_topic")
    size = cols[2].selectbox("rows per page", PAGE_SIZES, key="consumer_groups_page_size")
    page = group_views.group_page(visible, page=st.session_state.get("consumer_groups_page", 1), page_size=size,
                                  clusters=chosen, statuses=statuses, types=types, states=states, topic=topic,
                                  query=query)
    rows = page.rows.copy()
    rows.insert(2, "open", [group_link(c, k) for c, k in zip(rows["cluster"], rows["key"], strict=True)])
    components.data_table(rows.drop(columns="key"), key="consumer_groups_table", hide_index=True, column_config={
        "open": st.column_config.LinkColumn("open", display_text="open ↗", width=52),
        "status": st.column_config.TextColumn("status", help=STATUS_HELP),
        "lag": st.column_config.NumberColumn("lag", help="records behind the end of the log (positive partition lags "
                                                         "summed; empty when no lag is known)", format="%d"),
        "uncommitted": st.column_config.NumberColumn("uncommitted", help="records on partitions the group is "
                                                     "assigned but has committed nothing on (the tool shows their "
                                                     "LAG as -): waiting beside the lag", format="%d"),
        "status_since": st.column_config.DatetimeColumn("status since (UTC)", format="YYYY-MM-DD HH:mm"),
        "group": st.column_config.TextColumn("group", width="medium")})
    nav = st.columns([1, 2, 1])
    nav[0].number_input("page", min_value=1, max_value=page.pages, value=page.page, key="consumer_groups_page")
    nav[1].caption(f"{page.total:,} matching groups of {len(visible):,} · page {page.page} of {page.pages} · "
                   "worst first (stalled, stopped, empty with lag, lagging, then the largest lag)")
    with nav[2]:
        if page.total and st.toggle("CSV of the matches", key="consumer_groups_csv_on",
                                    help="every matching group with its partitions and lag"):
            matched = group_views.filter_groups(visible, clusters=chosen, statuses=statuses, types=types,
                                                states=states, topic=topic, query=query)
            names = tuple(sorted(set(matched["cluster_name"])))
            frame = group_views.export_frame(matched, data.group_offsets(location, names),
                                             data.group_members(location, names))
            st.download_button("CSV", safe_csv(frame), file_name="consumer-groups.csv", mime="text/csv",
                               key="consumer_groups_csv", on_click=components.export_recorder("consumer-groups.csv", names))

    st.subheader("KIP-848 migration", help="Kafka 4.0 made the consumer rebalance protocol generally available; "
                 "group.protocol=consumer moves a group to it")
    brokers = data.latest_brokers(location, with_data=True)
    components.data_table(group_views.migration_table(visible, brokers, clusters), key="consumer_groups_migration",
                 hide_index=True)


def detail_view(location: str, groups: pd.DataFrame, cluster: str, key: str) -> None:
    """One group: status with its evidence, members, partitions and lag, window, incidents, changes, configs."""
    row = group_views.find_group(groups, cluster, key)
    st.page_link("../pages/consumer_groups.py", label="All consumer groups", icon=":material/arrow_back:")
    if row is None:
        st.warning(f"No such group in cluster {components.plain(cluster)} (it may have been deleted).")
        return
    gid = str(row["group_id"])
    st.subheader(f"Group {components.plain(group_views.display(gid, 200))}")
    st.caption(f"cluster {components.plain(cluster)} · {components.plain(row['group_type'])} · state "
               f"{components.plain(row['state'] or 'unknown')} · assignor {components.plain(row['protocol'] or '—')} · "
               f"coordinator broker {components.plain(row['coordinator_id'])}")
    if len(gid) > 200:
        st.text_area("full group id", option(gid), key="consumer_groups_full_id", disabled=True)
    head = st.columns(5)
    head[0].metric("status", str(row["status"]).replace("_", " "), help=STATUS_HELP)
    head[1].metric("lag", f"{int(row['lag']):,}" if pd.notna(row["lag"]) else "unknown",
                   help="a share group's lag as its coordinator computes it (kafka-share-groups.sh's LAG)"
                   if row["group_type"] == "share" else None)
    waiting = row.get("uncommitted_records")
    head[2].metric("uncommitted", f"{int(waiting):,}" if pd.notna(waiting) else "-",
                   help="records on partitions assigned without a commit (log end - log start), beside the lag")
    head[3].metric("members", int(row["members"]))
    head[4].metric("partitions", int(row["partitions"]))
    for line in group_views.evidence_lines(row):
        st.caption(components.plain(line))
    if isinstance(row["error"], str) and row["error"]:
        st.caption(f":material/warning: {components.plain(row['error'])}")

    st.markdown("**Records waiting over the window** (the lag, plus the records on partitions assigned without a "
                "commit: what the status is judged on)")
    window = group_views.window_frame(row)
    st.plotly_chart(charts.group_lag_window_chart(window, group=group_views.display(gid, 60)),
                    key="consumer_groups_window")
    names = (cluster,)
    members = data.group_members(location, names)
    offsets = data.group_offsets(location, names)
    st.markdown("**Members**")
    components.data_table(group_views.as_the_tool_shows(group_views.members_table(members, cluster, gid)),
                          key="consumer_groups_members", hide_index=True)
    share = row["group_type"] == "share"
    st.markdown("**Partitions** (as kafka-share-groups.sh --describe shows them: START-OFFSET, LAG; largest lag first)"
                if share else "**Partitions** (as kafka-consumer-groups.sh --describe shows them; largest lag first)")
    parts = group_views.partitions_table(offsets, members, cluster, gid)
    components.data_table(group_views.as_the_tool_shows(group_views.topic_lag(parts)),
                          key="consumer_groups_topic_lag", hide_index=True)
    components.data_table(group_views.as_the_tool_shows(parts, share=share), key="consumer_groups_partitions",
                          hide_index=True, column_config={
        "last_moved_at": st.column_config.DatetimeColumn("commit last moved (UTC)", format="YYYY-MM-DD HH:mm:ss")})

    st.markdown("**Incidents**")
    board = incident_views.alert_board(data.all_alerts(location))
    mine = group_views.group_incidents(board, cluster, gid)
    if mine.empty:
        st.caption("No incident for this group in the retention.")
    else:
        components.data_table(mine, key="consumer_groups_incidents", hide_index=True, column_config={
            "doc_url": st.column_config.LinkColumn("documentation", display_text="docs ↗"),
            "since": st.column_config.DatetimeColumn("since (UTC)", format="YYYY-MM-DD HH:mm"),
            "last_seen": None, "resolved": st.column_config.DatetimeColumn("resolved", format="YYYY-MM-DD HH:mm"),
            "cluster": None, "source": None})
    st.markdown("**Changes** (created, state, protocol, members joining and leaving; last 7 days)")
    components.data_table(group_views.group_changes(data.group_changes(location, cluster), cluster, gid),
                 key="consumer_groups_changes", hide_index=True)

    st.markdown("**Members' client configs** (KIP-1324 records with this group.id)")
    configs, drift = group_views.member_configs(_result(location, "group_configs", cluster),
                                                _result(location, "group_drift", cluster), gid)
    if configs.empty:
        st.caption("No KIP-1324 record names this group.id (or the client-config pipeline has not run).")
    else:
        components.data_table(configs, key="consumer_groups_configs", hide_index=True)
    if not drift.empty:
        st.caption("The members disagree on these keys (group drift, from the client-config job):")
        components.data_table(drift, key="consumer_groups_drift", hide_index=True)
    st.page_link("../pages/client_configs.py", label="Client configs of the fleet", icon=":material/tune:")


def _result(location: str, name: str, cluster: str) -> pd.DataFrame:
    frame = data.result(location, name)
    return frame[frame["cluster"] == cluster] if "cluster" in frame else frame.iloc[0:0]


def main() -> None:
    """Render the consumer groups page."""
    st.title("Consumer groups")
    location = data.lake()
    has_snapshots, _ = data.lake_state(location)
    if not has_snapshots:
        components.no_lake(location)
        return
    groups = data.groups(location)
    clusters = sorted(data.chosen_clusters(location)["cluster_name"])
    if groups.empty:
        st.info("No consumer group read yet: the poller reads them every `group_interval_s` (60 s by default; 0 turns "
                "reading off).", icon=":material/groups:")
        return
    wanted_cluster, wanted_group = st.query_params.get("cluster"), st.query_params.get("group")
    if wanted_cluster and wanted_group:
        if not data.may_view(location, wanted_cluster):
            st.error(f"No access to cluster {components.plain(wanted_cluster)}.", icon=":material/lock:")
            return
        detail_view(location, groups, wanted_cluster, wanted_group)
        return
    runs = data.group_runs(location)
    now = datetime.now(UTC)
    for cluster in clusters:
        text = group_views.last_read_text(runs, cluster, now)
        run = runs[runs["cluster_name"] == cluster]
        if text is not None and not run.empty and isinstance(run.iloc[0]["error"], str) and run.iloc[0]["error"]:
            st.caption(f"{components.plain(cluster)}: {components.plain(run.iloc[0]['error'])}")
    list_view(location, groups, clusters)


main()
