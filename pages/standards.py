"""Standards page: how the clusters meet the policy file, per cluster and per policy, over 30 days, down to each
violating topic, broker, group, client value and client instance (docs/standards.md)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from backend.views import standards_views
from dashboard import charts, components, data

STATUS_COLORS = {"violation": "red", "unknown": "gray", "upcoming": "orange", "waived": "violet", "pass": "green"}
STATUS_ICONS = {"violation": "✗", "unknown": "?", "upcoming": "…", "waived": "~", "pass": "✓"}
PCT = st.column_config.ProgressColumn("% passing", min_value=0, max_value=100, format="%.0f%%")
TIMES = {c: st.column_config.DatetimeColumn(c.replace("_", " ") + " (UTC)", format="YYYY-MM-DD HH:mm")
         for c in ("since", "evaluated_at", "evidence_at")}


def _status(frame: pd.DataFrame, column: str = "status") -> pd.DataFrame:
    return frame.assign(**{column: frame[column].map(lambda s: f"{STATUS_ICONS.get(s, '?')} {s}")})


def main() -> None:
    """Render the Standards page."""
    st.title("Standards")
    location = data.lake()
    if not data.lake_state(location)[0]:
        components.no_lake(location)
        return
    found = data.standards(location)
    _file_banner(found.file, found)
    if found.empty:
        return
    chosen = set(data.chosen_clusters(location)["cluster_name"])
    shown = found.only(clusters=chosen)
    summary = standards_views.fleet_summary(shown)
    cols = st.columns(4)
    cols[0].metric("Passing", "–" if summary["percent_passing"] is None else f"{summary['percent_passing']:.0f} %",
                   help="policy/cluster pairs that pass (waived and not-yet-in-force findings included); unknown "
                        "never counts as passing")
    cols[1].metric("Violated", summary["violation"])
    cols[2].metric("Unknown", summary["unknown"], help="evidence missing: configs not read, a broker not reached, no "
                                                       "analysis, a guessed version across the floor")
    cols[3].metric("Policies × clusters", f"{summary['policies']} × {summary['clusters']}")
    st.caption(components.colored_counts({s: summary[s] for s in STATUS_COLORS}, STATUS_COLORS))

    by_cluster, by_policy, grid, trend, waivers = st.tabs(["By cluster", "By policy", "Grid", "30 days", "Waivers"])
    with by_cluster:
        components.data_table(standards_views.by_cluster(shown), key="standards_by_cluster",
                              name="standards-by-cluster", hide_index=True, column_config={"percent_passing": PCT})
    with by_policy:
        components.data_table(standards_views.by_policy(shown), key="standards_by_policy", name="standards-by-policy",
                              hide_index=True, column_config={"percent_passing": PCT})
    with grid:
        st.plotly_chart(charts.standards_matrix_chart(standards_views.matrix(shown)), key="standards_grid")
    with trend:
        _trend(location, chosen)
    with waivers:
        _waivers(found.waivers, chosen)
    _drill_down(shown)


def _file_banner(file: dict[str, object], found: standards_views.Standards) -> None:
    if not file.get("path") and found.empty:
        st.info("No policy file yet. Put a `policies.toml` beside the fleet file (or name one with `[settings] "
                "policies = \"...\"`); `policies.example.toml` shows every kind of check. See docs/standards.md.")
        return
    if file.get("error"):
        st.error(f"The policy file was refused: {components.plain(file['error'])}. The service keeps judging with "
                 f"the last good one (loaded {components.plain(file.get('loaded_at') or 'never')}).")
    st.caption(f"Policy file {components.plain(file.get('path') or '?')} · digest "
               f"{components.plain(file.get('digest') or '?')} · loaded {components.plain(file.get('loaded_at') or '?')}"
               + (" · results judged with an earlier version (the next poll catches up)"
                  if not found.results.empty and bool(found.results["stale"].any()) else ""))
    if found.empty:
        st.caption("No results yet: the poller judges the policies at its next poll.")


def _trend(location: str, chosen: set[str]) -> None:
    frame = data.standards_trend(location)
    view = st.segmented_control("Lines", ["fleet", "cluster", "policy"], default="fleet", key="standards_trend_by")
    lines = frame[frame["scope"] == (view or "fleet")]
    if view == "cluster":
        lines = lines[lines["name"].isin(chosen)]
    st.plotly_chart(charts.standards_trend_chart(lines), key="standards_trend_chart")
    components.export_buttons(None, lines, name="standards-trend", key="standards_trend_export")


def _waivers(waivers: pd.DataFrame, chosen: set[str]) -> None:
    if waivers.empty:
        st.caption("No waivers in the policy file.")
        return
    shown = waivers[waivers["cluster"].isin(chosen)].sort_values(["active", "expires"], ascending=[False, True])
    st.caption("A waiver covers a policy on a cluster, or one topic or group of it, until it expires; an expired one "
               "turns the violation back on and says so.")
    components.data_table(shown, key="standards_waivers", name="standards-waivers", hide_index=True)


def _drill_down(shown: standards_views.Standards) -> None:
    st.subheader("Findings")
    results = shown.results
    left, right, outcome = st.columns([2, 2, 2])
    policies = sorted(results["policy_id"].unique())
    policy = left.selectbox("Policy", [None, *policies], key="standards_policy",
                            format_func=lambda p: "every policy" if p is None else components.option(p))
    clusters = sorted(results["cluster_name"].unique())
    cluster = right.selectbox("Cluster", [None, *clusters], key="standards_cluster",
                              format_func=lambda c: "every cluster" if c is None else components.option(c))
    outcomes = outcome.multiselect("Outcome", list(STATUS_COLORS)[:-1], default=["violation", "unknown"],
                                   key="standards_outcomes")
    pairs = results
    if policy is not None:
        pairs = pairs[pairs["policy_id"] == policy]
    if cluster is not None:
        pairs = pairs[pairs["cluster_name"] == cluster]
    components.data_table(_status(pairs.drop(columns=["stale"])), key="standards_pairs", name="standards-results",
                          hide_index=True, column_config=TIMES)
    items = standards_views.drill_down(shown, policy, cluster, outcomes or None)
    st.caption(f"{len(items)} findings: the topics, brokers, groups and client values behind the results above, with "
               "the value seen, the value wanted and since when.")
    components.data_table(_status(items, "outcome"), key="standards_items", name="standards-findings", hide_index=True,
                          column_config={"since": TIMES["since"]})
    _instances(shown, policy, cluster, outcomes)


def _instances(shown: standards_views.Standards, policy: str | None, cluster: str | None,
               outcomes: list[str]) -> None:
    named = standards_views.drill_down_instances(shown, policy, cluster, outcomes or None)
    clients = standards_views.drill_down(shown, policy, cluster, outcomes or None)
    clients = clients[clients["kind"] == "clients"]
    if clients.empty:
        return
    st.subheader("Instances to chase")
    total = int(clients["count"].sum())
    st.caption(f"The client instances behind the {len(clients)} client findings above: {len(named)} of {total} named "
               "(client.id, group.id, software, principal, address and when last seen, from their latest pushed "
               "configuration; at most 1,000 per policy and cluster, the rest counted). An instance that does not "
               "report the key is 'not reported': unknown unless the policy's `unreported` says otherwise.")
    if named.empty:
        return
    components.data_table(_status(named, "outcome"), key="standards_instances", name="standards-instances",
                          hide_index=True, column_config={"last_seen": st.column_config.DatetimeColumn(
                              "last seen (UTC)", format="YYYY-MM-DD HH:mm")})


main()
