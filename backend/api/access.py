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
Visible = tuple[str, ...] | None


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
    """One ScopedLake per set of visible names, kept `ttl_s` seconds (its readers memoise: callers share reads).

    A generation is a ScopedLake and the moment it was opened: what it answers was read at most `ttl_s` before. The
    API's gate (backend.api.gate) warms the next generation of a busy set of names before the current one expires
    (`successor`, then `promote`), so its callers go on getting memoised answers instead of waiting for the reads.
    While a successor is warming, the current generation stays in service past `ttl_s`, up to `max_age_s` (twice
    `ttl_s`): a late refresh on a busy machine costs freshness, bounded, rather than making every caller wait."""

    def __init__(self, lake: str, policy: Policy, ttl_s: float = 5.0, max_entries: int = 64) -> None:
        """Readers of `lake` for the callers of `policy`'s fleet."""
        self.lake = lake
        self.policy = policy
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._build = threading.Lock()
        self._entries: OrderedDict[Visible, tuple[float, ScopedLake]] = OrderedDict()
        self._next: dict[Visible, tuple[float, ScopedLake]] = {}
        self._warming: set[Visible] = set()

    @property
    def max_age_s(self) -> float:
        """How long a generation may serve while its successor is warming."""
        return 2.0 * self.ttl_s

    def _fresh(self, key: Visible, now: float) -> ScopedLake | None:
        """The current generation of key when it is fresh (or within max_age_s while a successor warms), else a
        fresh successor (promoted); under the lock."""
        entry = self._entries.get(key)
        if entry is not None and (now - entry[0] < self.ttl_s
                                  or (key in self._warming and now - entry[0] < self.max_age_s)):
            return entry[1]
        successor = self._next.get(key)
        if successor is not None and now - successor[0] < self.ttl_s:
            self._install(key, *successor)
            return successor[1]
        return None

    def _install(self, key: Visible, born: float, lake: ScopedLake) -> None:
        self._entries[key] = (born, lake)
        self._entries.move_to_end(key)
        if self._next.get(key, (0.0, None))[1] is lake:
            del self._next[key]
            self._warming.discard(key)
        while len(self._entries) > self.max_entries:
            dropped, _ = self._entries.popitem(last=False)
            self._next.pop(dropped, None)

    def peek(self, visible: Visible) -> ScopedLake | None:
        """The fresh readers of a set of visible names, or None: never reads the lake (an event loop may call it)."""
        with self._lock:
            return self._fresh(visible, time.monotonic())

    def for_caller(self, caller: Caller) -> ScopedLake:
        """The caller's readers (shared with every caller that sees the same clusters)."""
        key = caller.visible
        with self._lock:
            found = self._fresh(key, time.monotonic())
        if found is not None:
            return found
        with self._build:  # one build at a time: a burst of callers waits for the first instead of reading alongside
            with self._lock:
                found = self._fresh(key, time.monotonic())
            if found is not None:
                return found
            now = time.monotonic()
            lake = self._open(key)
            with self._lock:
                self._install(key, now, lake)
        return lake

    def _open(self, key: Visible) -> ScopedLake:
        return ScopedLake.open(self.lake, key, [c.name for c in self.policy.fleet().clusters])

    def generations(self) -> list[tuple[Visible, float, ScopedLake]]:
        """(visible names, age in seconds, readers) of every current generation."""
        now = time.monotonic()
        with self._lock:
            return [(key, now - born, lake) for key, (born, lake) in self._entries.items()]

    def successor(self, visible: Visible) -> ScopedLake:
        """New readers of a set of visible names, opened now and not served until promoted (or until the current
        generation expires: a caller then gets these, fresh, rather than a third set)."""
        with self._lock:
            self._warming.add(visible)
        try:
            with self._build:
                now = time.monotonic()
                lake = self._open(visible)
                with self._lock:
                    self._next[visible] = (now, lake)
        except BaseException:
            self.abandon(visible)
            raise
        return lake

    def abandon(self, visible: Visible) -> None:
        """Give up warming a successor (the current generation then expires at ttl_s as usual)."""
        with self._lock:
            self._warming.discard(visible)
            self._next.pop(visible, None)

    def promote(self, visible: Visible, lake: ScopedLake) -> bool:
        """Serve a successor from now on (False when it is no longer the pending one, or too old)."""
        with self._lock:
            pending = self._next.get(visible)
            if pending is None or pending[1] is not lake or time.monotonic() - pending[0] >= self.ttl_s:
                return False
            self._install(visible, *pending)
            return True
