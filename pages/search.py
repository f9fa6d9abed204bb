"""Search page: one query over every cluster the session may view, with filters (mode, kinds, clusters, deleted),
ranked hits with the field that matched and a link to each hit's page, and the CSV of the hits."""

from __future__ import annotations

import streamlit as st

from backend.search.query import MODES, QueryRefused
from backend.search.tables import KINDS
from backend.views import search_views
from dashboard import components, data

LIMITS = (100, 500, 2000)
MODE_HELP = ("substring: the text anywhere in a field; prefix: fields that start with it; regex: an RE2 regular "
             "expression (no backreferences or lookaround), stopped at its time limit. Always case-insensitive.")


def main() -> None:
    """Render the Search page."""
    st.title("Search")
    location = data.lake()
    if not data.lake_state(location)[0]:
        components.no_lake(location)
        return
    wanted = st.query_params.get("q")
    if wanted is not None and wanted != st.session_state.get("search_followed"):
        st.session_state["search_query"] = wanted  # a new link (the sidebar box) wins over the last query
        st.session_state["search_followed"] = wanted
    cols = st.columns([4, 2, 1])
    text = cols[0].text_input("Search", key="search_query", placeholder="payments, checkout-svc, 4.3.1, retention.ms…")
    mode = cols[1].segmented_control("Mode", MODES, default="substring", key="search_mode", help=MODE_HELP) or "substring"
    limit = cols[2].selectbox("Hits shown", LIMITS, key="search_limit")
    cols = st.columns([2, 3, 1])
    kinds = cols[0].multiselect("Kinds", KINDS, key="search_kinds", placeholder="every kind")
    clusters = cols[1].multiselect("Clusters", sorted(data.latest_clusters(location)["cluster_name"]),
                                   key="search_clusters", placeholder="every cluster you may view",
                                   format_func=components.option)
    deleted = cols[2].toggle("deleted too", value=True, key="search_deleted",
                             help="Topics and groups deleted within the lake's retention, ranked after current ones")
    if text != st.query_params.get("q", ""):
        if text:
            st.query_params["q"] = text
        elif "q" in st.query_params:
            del st.query_params["q"]
    if not text:
        st.caption("Type a topic name or id, a group id, a client id, principal or software, a broker id, host or "
                   "rack, a cluster name, id or tag, or a config key or value.")
        st.page_link("../pages/across.py", label="A topic or a consumer group across the fleet",
                     icon=":material/public:")
        return
    try:
        result = data.search(location, text, mode=mode, kinds=tuple(kinds), clusters=tuple(clusters),
                             include_deleted=deleted, limit=limit)
    except QueryRefused as exc:
        st.error(components.plain(str(exc)), icon=":material/block:")
        return
    for note in result.notes:
        st.info(note, icon=":material/info:")
    per_kind = " · ".join(f"{kind} {n:,}" for kind, n in result.counts.items() if n)
    st.caption(f"{result.total:,} matches in {result.clusters:,} cluster{'' if result.clusters == 1 else 's'} ({per_kind or 'none'}) · "
               f"{result.elapsed_ms:,.0f} ms" + (f" · the best {len(result.hits):,} shown" if result.truncated else ""))
    if not result.hits:
        return
    frame = search_views.hits_frame(result)
    components.data_table(frame, key="search_hits", name="search-hits", hide_index=True, column_config={
        "link": st.column_config.LinkColumn("open", display_text="open ↗", width=60),
        "across": st.column_config.LinkColumn("across the fleet", display_text="across ↗", width=70),
        "deleted_at": st.column_config.DatetimeColumn("deleted (UTC)", format="YYYY-MM-DD HH:mm"),
        "name": st.column_config.TextColumn("name", width="medium"),
        "value": st.column_config.TextColumn("matched value", width="medium"),
        "field": st.column_config.TextColumn("field", help="the field the text matched"),
    }, column_order=["kind", "cluster", "name", "field", "match", "state", "value", "id", "detail", "deleted_at",
                     "link", "across"])


main()
