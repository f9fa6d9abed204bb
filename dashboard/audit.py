"""The UI's audit records: logins and logouts, page views, Poll now / Recompute, exports, refusals.

Each record goes through backend.audit (the service's journal, on disk before the call returns). Who (the session's
user and groups) and from where (client address, user agent) are taken during the script run, so an export recorded
later, when the browser fetches a deferred download, still says who asked for it. No cookie, token or password is
ever part of a record: parameters pass backend.audit.record.scrub_params.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import streamlit as st

from backend.audit.journal import journal_dir
from backend.audit.record import AuditRecord
from backend.audit.store import AuditLog
from backend.config import Fleet
from backend.service.status import service_state_dir
from backend.store.location import resolve_lake

T = TypeVar("T")
LAST_VIEW_KEY = "_fleetview_audit_view"
FORGED_KEY = "_fleetview_audit_forged"
COOKIE_PREFIX = "_streamlit_user"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Who:
    """The session's user, groups, address and user agent, as known during a script run."""

    subject: str = ""
    groups: tuple[str, ...] = ()
    address: str = ""
    user_agent: str = ""


@st.cache_resource(show_spinner=False)
def _audit_log(lake: str, directory: str | None) -> AuditLog:
    return AuditLog(lake, directory)


def audit_log(fleet: Fleet | None) -> AuditLog:
    """Where this UI writes its audit records: the service's journal directory (serve's, else the default lake's)."""
    lake = resolve_lake(None, fleet_lake_path=fleet.settings.lake_path if fleet else None)
    state = service_state_dir(lake, configured=fleet.service.state_dir if fleet else "")
    return _audit_log(lake, None if state is None else str(journal_dir(state)))


def who(subject: str = "", groups: Iterable[str] = ()) -> Who:
    """Who is asking, from where (the script run's context)."""
    try:
        address = st.context.ip_address or ""
        agent = st.context.headers.get("User-Agent", "") if st.context.headers else ""
    except Exception:  # noqa: BLE001 - outside a script run (tests): no context
        address, agent = "", ""
    return Who(subject, tuple(groups), address, agent)


def write(fleet: Fleet | None, person: Who, kind: str, action: str, *, outcome: str = "ok",
          clusters: Iterable[str] = (), params: Mapping[str, Any] | None = None, detail: str = "") -> None:
    """One record of the UI door; a record that cannot be written is logged, never shown to the user."""
    try:
        audit_log(fleet).record(AuditRecord(
            kind=kind, door="ui", action=action, outcome=outcome, subject=person.subject, groups=person.groups,
            client_address=person.address, user_agent=person.user_agent, clusters=tuple(clusters),
            params=dict(params or {}), detail=detail))
    except (OSError, ValueError) as exc:
        log.error("audit record not written: %s", exc)


def on_export(fleet: Fleet | None, person: Who, name: str, make: Callable[[], T],
              clusters: Iterable[str] = ()) -> Callable[[], T]:
    """A deferred download's data maker that records the export when the browser fetches it."""
    chosen = tuple(clusters)

    def made() -> T:
        data = make()
        write(fleet, person, "export", name, clusters=chosen)
        return data

    return made


def forged_cookie(fleet: Fleet) -> None:
    """An identity cookie the server does not accept (not signed with cookie_secret): one refusal per session."""
    try:
        cookies = st.context.cookies
    except Exception:  # noqa: BLE001 - outside a script run
        return
    if st.session_state.get(FORGED_KEY) or not any(str(name).startswith(COOKIE_PREFIX) for name in cookies):
        return
    st.session_state[FORGED_KEY] = True
    write(fleet, who(), "refusal", "login", outcome="forged_cookie",
          detail="an identity cookie that is not signed with this server's cookie_secret was ignored")


def page_view(fleet: Fleet | None, person: Who, page: str, params: Mapping[str, str]) -> None:
    """A page view: recorded when the session's page or its cluster/group parameters change, not at every rerun."""
    key = (page, tuple(sorted(params.items())))
    if st.session_state.get(LAST_VIEW_KEY) == key:
        return
    st.session_state[LAST_VIEW_KEY] = key
    cluster = params.get("cluster")
    write(fleet, person, "view", f"page {page}", clusters=[cluster] if cluster else [], params=params)


def journal_of(fleet: Fleet | None) -> str | None:
    """The journal directory this UI writes to (the Audit page reads the unrolled records from it)."""
    directory = audit_log(fleet).directory
    return None if directory is None else str(Path(directory))
