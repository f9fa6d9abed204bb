"""The login gate: runs before any page, decides who may see what (backend.auth), and draws the login page."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import streamlit as st

from backend.auth.ended import EndedLogins
from backend.auth.exposure import decide_exposure, insecure_requested
from backend.auth.grants import Role, grants_for, may_audit, may_log_in, operates_all, user_groups
from backend.auth.session import session_expired, session_expires_at, session_key
from backend.config import Fleet, FleetConfigError, default_fleet_file, load_fleet
from backend.service.status import service_state_dir
from backend.store.location import resolve_lake
from dashboard import audit
from dashboard.text import plain

ACCESS_KEY = "_fleetview_access"
POLICY_TTL_S = 60


@dataclass(frozen=True)
class Access:
    """What this session may do: roles per cluster (None: everything, login off) and who is logged in."""

    login: bool
    banner: str | None
    roles: tuple[tuple[str, Role], ...] | None
    operate_all: bool
    user: str = ""
    expires_at: float = math.inf
    key: str = ""
    ended_dir: str | None = None  # where Log out records this login as ended (the service's state directory)
    groups: tuple[str, ...] = ()
    audit: bool = False  # may read the audit log ([auth] audit; everyone with login off)

    @property
    def visible(self) -> tuple[str, ...] | None:
        """Sorted names of the clusters this session may view; None: every cluster (login off)."""
        return None if self.roles is None else tuple(sorted(name for name, _ in self.roles))


@st.cache_resource(ttl=POLICY_TTL_S, max_entries=8, show_spinner=False)
def _load_policy(path: str, stamp: tuple[int, int]) -> tuple[Fleet | None, str | None]:
    """The fleet file's clusters and [auth] (passwords not resolved), re-read when the file changes."""
    try:
        return load_fleet(path, resolve_secrets=False), None
    except FleetConfigError as exc:
        return None, str(exc)


def policy() -> tuple[Fleet | None, str | None]:
    """(fleet, problem): the fleet file in use, an empty fleet without one, or the reason it cannot be used."""
    path = default_fleet_file()
    if path is None:
        return Fleet(), None
    try:
        info = os.stat(path)
    except OSError as exc:
        return None, f"{path}: cannot read the fleet file: {exc.strerror}"
    return _load_policy(str(Path(path).resolve()), (info.st_mtime_ns, info.st_size))


@st.cache_resource(show_spinner=False)
def _ended_logins(directory: str | None) -> EndedLogins:
    """The logins ended with Log out, kept in the service's state directory (shared by every UI process using it)."""
    return EndedLogins(Path(directory) if directory else None)


def _ended_dir(fleet: Fleet) -> str | None:
    """The state directory of the service this UI belongs to: serve's, else the default lake's (None: remote lake)."""
    lake = resolve_lake(None, fleet_lake_path=fleet.settings.lake_path)
    directory = service_state_dir(lake, configured=fleet.service.state_dir)
    return None if directory is None else str(directory)


@st.cache_resource(show_spinner=False)
def _logins_recorded() -> set[str]:
    """Logins this UI process has written an audit record for (one record per login, not per browser tab)."""
    return set()


def _only(draw: Callable[[], None]) -> NoReturn:
    """Show one page instead of the app: a hidden one-page navigation replaces the sidebar's page links."""
    st.navigation([st.Page(draw, title="Kafka fleet view", default=True)], position="hidden").run()
    st.stop()
    raise AssertionError("st.stop() returns only outside a script run")


def _stop(title: str, message: str) -> NoReturn:
    def stopped() -> None:
        st.title(title)
        st.error(message, icon=":material/block:")

    _only(stopped)


def _provider_configured(provider: str | None) -> bool:
    try:
        section = st.secrets.get("auth")
    except FileNotFoundError:
        return False
    if not section or "redirect_uri" not in section or "cookie_secret" not in section:
        return False
    return (provider in section) if provider else ("client_id" in section or "server_metadata_url" in section)


def _login_page(provider: str | None, note: str | None = None) -> NoReturn:
    """The login page: nothing of the fleet, one button."""

    def login_page() -> None:
        st.title("Kafka fleet view")
        if note:
            st.info(note, icon=":material/schedule:")
        st.write("Log in to see the clusters you have access to.")
        if st.button("Log in", key="auth_login", type="primary", icon=":material/login:"):
            if provider:
                st.login(provider)
            else:
                st.login()

    _only(login_page)


def _no_access_page(claims: dict[str, Any], fleet: Fleet, who: str) -> NoReturn:
    groups = sorted(user_groups(claims, fleet.auth))
    shown = ", ".join(plain(g) for g in groups[:20]) + (f" and {len(groups) - 20} more" if len(groups) > 20 else "")
    reason = ("your groups may not log in to this fleet view" if not may_log_in(claims, fleet.auth)
              else "no cluster of this fleet view is granted to you")

    def no_access() -> None:
        st.title("No access")
        st.error(f"You are logged in as {plain(who)}, but {reason}. Ask an administrator to add you or one of your "
                 "groups to a cluster's `access` in the fleet file (see docs/auth.md).", icon=":material/lock:")
        st.caption(f"Groups in your ID token ({', '.join(fleet.auth.groups_claims)}): {shown or 'none'}")
        if st.button("Log out", key="auth_logout_denied", icon=":material/logout:"):
            st.logout()

    _only(no_access)


def gate() -> Access:
    """Decide what this session may see, before any page or sidebar widget is drawn; stops the run otherwise."""
    fleet, problem = policy()
    if fleet is None:
        _stop("Fleet file problem", f"The fleet file cannot be used, so nothing is shown: {plain(problem)}")
    address = st.get_option("server.address")
    exposure = decide_exposure(address, fleet.auth, insecure_requested())
    if not exposure.allowed:
        _stop("Not served", plain(exposure.reason))
    if not exposure.login:
        banner = (f"Login is off and this UI listens on {address or 'every interface'}: anyone who can reach it sees "
                  "every cluster and can start polls ([auth] required = false, --insecure-no-login)."
                  if exposure.banner else None)
        access = Access(login=False, banner=banner, roles=None, operate_all=True, audit=True)
        st.session_state[ACCESS_KEY] = access
        return access
    if not _provider_configured(fleet.auth.provider):
        _stop("Login is not configured", "The fleet file turns login on ([auth] required = true), but "
              ".streamlit/secrets.toml has no usable [auth] section (redirect_uri, cookie_secret and the provider"
              + (f" [auth.{fleet.auth.provider}]" if fleet.auth.provider else "") + "). See docs/auth.md.")
    if not st.user.is_logged_in:
        st.session_state.pop(ACCESS_KEY, None)
        audit.forged_cookie(fleet)
        _login_page(fleet.auth.provider)
    claims = st.user.to_dict()
    now = time.time()
    key = session_key(claims)
    ended_dir = _ended_dir(fleet)
    if session_expired(claims, fleet.auth.max_session_hours, now) or _ended_logins(ended_dir).holds(key, now):
        st.session_state.pop(ACCESS_KEY, None)
        _login_page(fleet.auth.provider, f"Your session has ended (sessions last {fleet.auth.max_session_hours:g} "
                                         "hours, or you logged out). Log in again.")
    who = str(claims.get("email") or claims.get("preferred_username") or claims.get("name") or claims.get("sub") or "")
    roles = grants_for(claims, fleet)
    groups = tuple(sorted(user_groups(claims, fleet.auth)))
    auditor = may_audit(claims, fleet)
    if not roles and not auditor:
        st.session_state.pop(ACCESS_KEY, None)
        if not st.session_state.get("_fleetview_audit_denied"):
            st.session_state["_fleetview_audit_denied"] = True
            audit.write(fleet, audit.who(who, groups), "refusal", "login", outcome="forbidden",
                        detail="no cluster of this fleet is granted")
        _no_access_page(claims, fleet, who)
    access = Access(login=True, banner=None, roles=tuple(sorted(roles.items())), operate_all=operates_all(roles, fleet),
                    user=who, expires_at=session_expires_at(claims, fleet.auth.max_session_hours), key=key,
                    ended_dir=ended_dir, groups=groups, audit=auditor)
    if key not in _logins_recorded():
        _logins_recorded().add(key)
        audit.write(fleet, audit.who(who, groups), "login", "login",
                    params={"provider": fleet.auth.provider or "default"})
    st.session_state[ACCESS_KEY] = access
    return access


def current() -> Access | None:
    """This session's access as the gate decided it; a session that has passed its end is sent through the gate again."""
    access = st.session_state.get(ACCESS_KEY)
    if not isinstance(access, Access):
        return None
    if time.time() >= access.expires_at:
        st.session_state.pop(ACCESS_KEY, None)
        st.rerun()
    return access


def visible() -> tuple[str, ...] | None:
    """Cluster names this session may view (None: all); nothing at all when the gate has not let it in."""
    access = current()
    return () if access is None else access.visible


def may_audit_log() -> bool:
    """Whether this session may read the audit log (the Audit page)."""
    access = current()
    return access is not None and access.audit


def person() -> audit.Who:
    """Who this session is, for its audit records."""
    access = current()
    return audit.who(access.user if access else "", access.groups if access else ())


def may_operate() -> bool:
    """Whether this session may start Poll now and Recompute (operate on every cluster of the fleet file)."""
    access = current()
    return access is not None and access.operate_all


def logout_button() -> None:
    """Who is logged in, and Log out (which also refuses this login's cookie from now on in this server)."""
    access = current()
    if access is None or not access.login:
        return
    st.caption(f":material/person: {plain(access.user)}")
    if st.button("Log out", key="auth_logout", width="stretch", icon=":material/logout:"):
        fleet, _ = policy()
        audit.write(fleet, audit.who(access.user, access.groups), "logout", "logout")
        _ended_logins(access.ended_dir).add(access.key, time.time())
        st.session_state.pop(ACCESS_KEY, None)
        st.logout()
        st.stop()  # the browser is sent away; draw nothing more
