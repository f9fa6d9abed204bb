"""Upgrade readiness page: per cluster, can it move to a chosen Kafka 4.x release, and what stands in the way."""

from __future__ import annotations

import streamlit as st

from backend.views import readiness
from dashboard import components, data

VERDICT_COLORS = {readiness.READY: "green", readiness.BLOCKED: "red", readiness.UNVERIFIED: "orange"}
STATUS_ICONS = {readiness.PASS: "✓", readiness.FAIL: "✗", readiness.WARN: "!", readiness.UNKNOWN: "?"}


def main() -> None:
    """Render the Upgrade readiness page."""
    st.title("Upgrade readiness")
    location = data.lake()
    if data.latest_clusters(location).empty:
        components.no_lake(location)
        return
    targets = readiness.known_targets()
    target = st.selectbox("Target release", targets, index=0, key="upgrade_target",
                          help="The releases the versions table knows (backend/kafka/versions_table.json)")
    report = data.upgrade_readiness(location, target)
    chosen = set(data.chosen_clusters(location)["cluster_name"])
    verdicts = report.verdicts[report.verdicts["cluster_name"].isin(chosen)]
    items = report.items[report.items["cluster_name"].isin(chosen)]
    counts = verdicts["verdict"].value_counts().to_dict()
    st.caption(components.colored_counts({v: int(counts.get(v, 0)) for v in VERDICT_COLORS}, VERDICT_COLORS)
               + f" · target {components.plain(target)} · blocked: an item fails; unverified: the product cannot tell "
                 "an item (never ready by omission)")
    st.dataframe(verdicts, key="upgrade_verdicts", hide_index=True)
    components.export_buttons(None, verdicts, name=f"upgrade-readiness-{target}", key="upgrade_verdicts_export")
    st.subheader("Checklist")
    shown = items.assign(status=items["status"].map(lambda s: f"{STATUS_ICONS.get(s, '?')} {s}"))
    for name in sorted(set(items["cluster_name"])):
        verdict = verdicts.loc[verdicts["cluster_name"] == name, "verdict"].iloc[0]
        with st.expander(f"{name} · {verdict}", expanded=verdict == readiness.BLOCKED):
            st.dataframe(shown[shown["cluster_name"] == name].drop(columns=["cluster_name"]),
                         key=f"upgrade_items_{name}", hide_index=True)
    components.export_buttons(None, items, name=f"upgrade-checklist-{target}", key="upgrade_items_export")


main()
