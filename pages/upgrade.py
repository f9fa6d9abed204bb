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
    if not data.lake_state(location)[0] or data.latest_clusters(location).empty:
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
    components.data_table(verdicts, key="upgrade_verdicts", name=f"upgrade-readiness-{target}", hide_index=True)
    st.subheader("Checklist")
    shown = items.assign(status=items["status"].map(lambda s: f"{STATUS_ICONS.get(s, '?')} {s}"))
    for name in sorted(set(items["cluster_name"])):
        verdict = verdicts.loc[verdicts["cluster_name"] == name, "verdict"].iloc[0]
        with st.expander(f"{name} · {verdict}", expanded=verdict == readiness.BLOCKED):
            components.data_table(shown[shown["cluster_name"] == name].drop(columns=["cluster_name"]),
                                  key=f"upgrade_items_{name}", name=f"upgrade-checklist-{name}-{target}",
                                  hide_index=True)
    components.export_buttons(None, items, name=f"upgrade-checklist-{target}", key="upgrade_items_export")
    st.subheader("Client-config keys removed or with a changed default")
    st.caption(f"From the known-keys table built from the real client jars: per cluster and client type, the instances "
               f"that report each key, at its last 3.x default, at {components.plain(target)}'s, set otherwise, or "
               "not reporting it. `affected`: a removed key set to something else (ignored by the target's clients), "
               "or a changed key still on the old default (it changes when the client moves to the target).")
    keys = report.keys[report.keys["cluster_name"].isin(chosen)]
    if keys.empty:
        st.caption("No client-config results for these clusters yet (a config source and an analysis run fill it).")
    else:
        components.data_table(keys, key="upgrade_keys", name=f"upgrade-config-keys-{target}", hide_index=True)
    named = report.instances[report.instances["cluster_name"].isin(chosen)]
    if not named.empty:
        st.subheader("Instances to chase")
        st.caption("Every instance that sets a removed key to something other than its old default, or metric.reporters "
                   "without JmxReporter, as the pipeline's rules name it (docs/rules.md CC019–CC022): its client.id, "
                   "group.id and instance id lead to its owner.")
        components.data_table(named, key="upgrade_instances", name=f"upgrade-instances-{target}", hide_index=True)


main()
