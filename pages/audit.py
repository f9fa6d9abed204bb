"""Audit page: who did and read what, through which door (UI, API, MCP), and what was refused (audit grant)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from backend.audit.record import KINDS, OUTCOMES
from backend.views import audit_views
from dashboard import auth, components, data

WINDOWS = {"1 hour": timedelta(hours=1), "24 hours": timedelta(days=1), "7 days": timedelta(days=7),
           "30 days": timedelta(days=30)}
MAX_ROWS = 5000


def main() -> None:
    """Render the audit page."""
    st.title("Audit")
    if not auth.may_audit_log():
        st.error("Reading the audit log needs the audit grant ([auth] audit in the fleet file).", icon=":material/lock:")
        return
    location = data.lake()
    cols = st.columns([1, 2, 2, 2])
    window = cols[0].selectbox("Window", list(WINDOWS), index=1, key="audit_window")
    kinds = cols[1].multiselect("Kind", KINDS, key="audit_kinds", placeholder="every kind")
    outcomes = cols[2].multiselect("Outcome", OUTCOMES, key="audit_outcomes", placeholder="every outcome")
    subject = cols[3].text_input("Subject contains", key="audit_subject")
    fleet, _ = auth.policy()
    frame = audit_views.audit_frame(location, components.audit_journal(fleet), data.scope(location),
                                    since=datetime.now(UTC) - WINDOWS[window], kinds=kinds, outcomes=outcomes,
                                    subject=subject)
    refused = int((frame["kind"] == "refusal").sum())
    st.caption(f"{len(frame):,} records in the last {window}, {refused:,} refusals; newest first"
               + (f" (the newest {MAX_ROWS:,} shown; the CSV has them all)" if len(frame) > MAX_ROWS else "")
               + ". Names of clusters you may not view are replaced.")
    table = audit_views.audit_table(frame)
    components.data_table(table.head(MAX_ROWS), key="audit_records", name="audit", hide_index=True,
                          column_config={"at": st.column_config.DatetimeColumn("at (UTC)",
                                                                               format="YYYY-MM-DD HH:mm:ss"),
                                         "record_id": None})


main()
