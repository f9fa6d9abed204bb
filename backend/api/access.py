"""Who is calling the API and what it may read: the fleet file's grants (backend/auth) applied to a token's claims.

Login on ([auth] required = true): a bearer token is required, checked by backend.api.tokens, and its claims go
through the same `grants_for` the UI uses. No cluster granted (and no audit grant): 403 everywhere. Login off: the
API listens on loopback only (backend.auth.exposure) and the caller sees everything, as the UI does.
"""

from __future__ import annotations

import os
import threading
import time
import tomllib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.auth.grants import Role, grants_for, may_audit, may_log_in, user_groups
from backend.config import Fleet, FleetConfigError, load_fleet
from backend.views.scoped import ScopedLake

POLICY_CHECK_S = 2.0


@dataclass(frozen=True)
class Caller:
    """One request's principal: who, from where, which clusters (None: every one, login off), the audit grant."""

    login: bool
    subject: str
    groups: tuple[str, ...]
    roles: tuple[tuple[str, Role], ...] | None
    audit: bool
    address: str
    user_agent: str
    key: str = field(default="", compare=False)  # what the rate limit counts by

    @property
    def visible(self) -> tuple[str, ...] | None:
        """Sorted names of the clusters this caller may view; None: every cluster."""
        return None if self.roles is None else tuple(sorted(name for name, _ in self.roles))


def caller_for(claims: dict[str, Any] | None, fleet: Fleet, *, address: str, user_agent: str) -> Caller:
    """The caller a token's claims make (None: login off, everything)."""
    if claims is None:
        return Caller(False, "", (), None, True, address, user_agent, key=f"addr:{address}")
    subject = str(claims.get(fleet.auth.user_claim) or claims.get("sub") or claims.get("client_id")
                  or claims.get("azp") or "")
    roles = grants_for(claims, fleet) if may_log_in(claims, fleet.auth) else {}
    return Caller(True, subject, tuple(sorted(user_groups(claims, fleet.auth))), tuple(sorted(roles.items())),
                  may_audit(claims, fleet), address, user_agent,
                  key=f"sub:{claims.get('iss', '')}|{claims.get('sub') or claims.get('client_id') or subject}")


class Policy:
    """The fleet file (grants, [auth]), read again when it changes: new grants apply without a restart."""

    def __init__(self, path: Path) -> None:
        """Watch the fleet file at path."""
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._fleet: Fleet | None = None
        self._checked = 0.0
        self.problem: str | None = None

    def fleet(self) -> Fleet:
        """The current fleet file (the last good one when it became unusable: a typo does not open the API)."""
        now = time.monotonic()
        if self._fleet is not None and now - self._checked < POLICY_CHECK_S:
            return self._fleet
        with self._lock:
            self._checked = now
            try:
                info = os.stat(self.path)
                stamp = (info.st_mtime_ns, info.st_size)
                if stamp != self._stamp:
                    self._fleet = load_fleet(self.path, resolve_secrets=False)
                    self._stamp, self.problem = stamp, None
            except (OSError, FleetConfigError) as exc:
                self.problem = str(exc)
                if self._fleet is None:
                    raise
            assert self._fleet is not None
            return self._fleet


def provider_settings(secrets_file: str | os.PathLike[str] | None, provider: str | None) -> dict[str, Any]:
    """The OIDC provider's table of Streamlit's secrets.toml ([auth] or [auth.<provider>]); {} when there is none."""
    if not secrets_file:
        return {}
    try:
        data = tomllib.loads(Path(secrets_file).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}
    section = data.get("auth")
    if not isinstance(section, dict):
        return {}
    if provider:
        inner = section.get(provider)
        return inner if isinstance(inner, dict) else {}
    return section


class ScopedLakes:
    """One ScopedLake per set of visible names, kept `ttl_s` seconds (its readers memoise: callers share reads)."""

    def __init__(self, lake: str, policy: Policy, ttl_s: float = 5.0, max_entries: int = 64) -> None:
        """Readers of `lake` for the callers of `policy`'s fleet."""
        self.lake = lake
        self.policy = policy
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._build = threading.Lock()
        self._entries: OrderedDict[tuple[str, ...] | None, tuple[float, ScopedLake]] = OrderedDict()

    def for_caller(self, caller: Caller) -> ScopedLake:
        """The caller's readers (shared with every caller that sees the same clusters)."""
        key = caller.visible
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and now - entry[0] < self.ttl_s:
                return entry[1]
        with self._build:  # one build at a time: a burst of callers waits for the first instead of reading alongside
            with self._lock:
                entry = self._entries.get(key)
            if entry is not None and now - entry[0] < self.ttl_s:
                return entry[1]
            fleet = self.policy.fleet()
            lake = ScopedLake.open(self.lake, key, [c.name for c in fleet.clusters])
        with self._lock:
            self._entries[key] = (now, lake)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return lake
