"""The sidebar's search box, on every page: one query over the fleet, its best few hits as links, and the Search page
with all of them. It searches only the clusters the session may view (dashboard.data.search)."""

from __future__ import annotations

import streamlit as st

from backend.search.query import QueryRefused
from backend.views.group_views import display
from backend.views.search_views import link_target
from dashboard import data
from dashboard.text import plain

SUGGESTIONS = 5
HELP = ("Topic names and ids, consumer group ids, client ids, principals, client software and instance ids, broker "
        "ids, hosts and racks, cluster names, ids and tags, broker and topic config keys and values. Substring, "
        "case-insensitive; the Search page has prefix and regular-expression modes and filters.")


def search_box(location: str) -> None:
    """The search box and, under it, the best hits of what was typed (links to their pages) and a link to all."""
    text = st.text_input("Search the fleet", key="app_search", placeholder="topic, group, client, broker, config…",
                         help=HELP)
    if not text or not text.strip():
        return
    try:
        result = data.search(location, text, limit=SUGGESTIONS)
    except QueryRefused as exc:
        st.caption(plain(str(exc)))
        return
    if not result.total:
        st.caption("Nothing matches in the clusters you may view.")
    for hit in result.hits:
        page, params = link_target(hit.link or "")
        label = f"{hit.kind} {plain(display(hit.name, 60))} · {plain(display(hit.cluster, 40))}"
        if hit.state != "current":
            label += " (deleted)"
        st.page_link(f"../pages/{page}.py", label=label, query_params=params or None)
    if result.total:
        st.page_link("../pages/search.py", label=f"All {result.total:,} results", icon=":material/search:",
                     query_params={"q": text})
