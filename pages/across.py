"""Across the fleet: a topic name on every cluster the session may view (and its MirrorMaker 2 copies) side by side,
or a consumer group id seen on several clusters; CSV of both."""

from __future__ import annotations

import streamlit as st

from backend.views.group_views import display
from dashboard import components, data

KINDS = ("topic", "group")


def _wanted(location: str) -> tuple[str, str]:
    """(kind, name) from ?topic= / ?group= (a "~" hash resolved among the visible names), else the widgets."""
    for kind in KINDS:
        value = st.query_params.get(kind)
        if value and value != st.session_state.get("across_followed"):
            st.session_state["across_followed"] = value
            st.session_state["across_kind"] = kind
            st.session_state["across_name"] = data.resolve_ref(location, value, kind) or ""
    cols = st.columns([1, 4])
    kind = cols[0].segmented_control("Kind", KINDS, default="topic", key="across_kind") or "topic"
    name = cols[1].text_input("Topic name" if kind == "topic" else "Consumer group id", key="across_name")
    return kind, name


def topic_view(location: str, name: str) -> None:
    """A topic name across the fleet: one row per copy, the configs that differ, the groups reading each copy."""
    aliases, separator = data.mirror_settings()
    view = data.topic_across(location, name, tuple(aliases) if aliases is not None else None, separator)
    for note in view.notes:
        st.info(note, icon=":material/info:")
    if not view.copies:
        return
    st.caption(f"{len(view.copies)} copies of {components.plain(display(name, 120))} · names looked for: "
               + components.plain_list(display(n, 80) for n in view.names)
               + f" (MirrorMaker 2 names a remote copy source alias, separator {components.plain(separator)}, topic; "
               "the aliases are the fleet file's `mirror_aliases`, else the names of the clusters you may view)")
    if view.differing:
        st.warning("The copies differ on " + components.plain_list(view.differing), icon=":material/call_split:")
    components.data_table(view.copies_frame(), key="across_copies", name="topic-across", hide_index=True,
                          column_config={"link": st.column_config.LinkColumn("cluster page", display_text="open ↗"),
                                         "topic_id": st.column_config.TextColumn("topic id", help="KIP-516")})
    st.subheader("Consumer groups reading it")
    groups = view.groups_frame()
    if groups.empty:
        st.caption("No consumer group has committed offsets on any copy.")
        return
    components.data_table(groups, key="across_groups", name="topic-across-groups", hide_index=True, column_config={
        "link": st.column_config.LinkColumn("group", display_text="open ↗"),
        "lag": st.column_config.NumberColumn("lag", format="%d", help="records behind on this topic")})


def group_view(location: str, group_id: str) -> None:
    """A consumer group id across the fleet: one row per cluster holding it."""
    view = data.group_across(location, group_id)
    for note in view.notes:
        st.info(note, icon=":material/info:")
    if not view.copies:
        return
    st.caption(f"Group {components.plain(display(group_id, 120))} on {len(view.copies)} clusters")
    components.data_table(view.frame(), key="across_group", name="group-across", hide_index=True, column_config={
        "link": st.column_config.LinkColumn("group", display_text="open ↗"),
        "lag": st.column_config.NumberColumn("lag", format="%d")})


def main() -> None:
    """Render the Across the fleet page."""
    st.title("Across the fleet")
    location = data.lake()
    if not data.lake_state(location)[0]:
        components.no_lake(location)
        return
    kind, name = _wanted(location)
    if not name:
        st.caption("A topic name shows every cluster holding it, with MirrorMaker 2's remote copies; a group id every "
                   "cluster with that consumer group. The Search page links here.")
        return
    if kind == "topic":
        topic_view(location, name)
    else:
        group_view(location, name)


main()
