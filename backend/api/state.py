"""What every request of the API shares: its settings, the fleet file, the readers, the rate limiter, the token
verifier and the principals it made, the audit log."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.api.access import Caller, Policy, ScopedLakes, caller_for, provider_settings
from backend.api.ratelimit import RateLimiter
from backend.api.tokens import Provider, ProviderError, TokenVerifier
from backend.audit.store import AuditLog
from backend.config import Fleet

SECRETS_CHECK_S = 2.0
MAX_PRINCIPALS = 4096


@dataclass
class ApiSettings:
    """What the API process serves, from `serve`'s command line."""

    lake: str
    fleet_file: Path
    journal_dir: Path | None
    secrets_file: str | None = None
    address: str = "127.0.0.1"
    rate_per_s: float = 20.0
    rate_burst: int = 100


class ApiState:
    """Shared by every request: the fleet file, readers, rate limiter, token verifier, audit log."""

    def __init__(self, settings: ApiSettings) -> None:
        """Prepare (nothing is read from the network before the first request with a token)."""
        self.settings = settings
        self.lake = settings.lake
        self.journal_dir = None if settings.journal_dir is None else str(settings.journal_dir)
        self.policy = Policy(settings.fleet_file)
        self.lakes = ScopedLakes(settings.lake, self.policy)
        self.limiter = RateLimiter(settings.rate_per_s, settings.rate_burst)
        self.audit = AuditLog(settings.lake, settings.journal_dir)
        self._verifiers: dict[tuple[str, str], TokenVerifier] = {}
        self._provider: tuple[Fleet, tuple[int, int] | None, float, TokenVerifier | ProviderError] | None = None
        self._principals: dict[bytes, tuple[Fleet, Caller]] = {}
        self._lock = threading.Lock()
        self.gate: Any = None  # the backend.api.gate.Gate, set by itself once the app's middleware is built

    def verifier(self) -> TokenVerifier:
        """The verifier of the provider secrets.toml names now (read again when the fleet file or secrets.toml
        changes, checked at most every SECRETS_CHECK_S); raises ProviderError when it names none."""
        fleet = self.policy.fleet()
        now = time.monotonic()
        known = self._provider
        if known is not None and known[0] is fleet and now - known[2] < SECRETS_CHECK_S:
            found = known[3]
        else:
            stamp = _stamp(self.settings.secrets_file)
            if known is not None and known[0] is fleet and known[1] == stamp:
                found = known[3]
            else:
                found = self._verifier_for(fleet)
            self._provider = (fleet, stamp, now, found)
        if isinstance(found, ProviderError):
            raise ProviderError(str(found))
        return found

    def _verifier_for(self, fleet: Fleet) -> TokenVerifier | ProviderError:
        table = provider_settings(self.settings.secrets_file, fleet.auth.provider)
        url = table.get("server_metadata_url")
        audience = fleet.auth.api_audience or table.get("client_id")
        if not isinstance(url, str) or not url or not isinstance(audience, str) or not audience:
            return ProviderError("login is on but secrets.toml names no OpenID provider (server_metadata_url, "
                                 "client_id) and the fleet file no [auth] api_audience")
        key = (url, audience)
        with self._lock:
            if key not in self._verifiers:
                self._verifiers[key] = TokenVerifier(Provider(url, audience))
            return self._verifiers[key]

    def caller(self, token: str, claims: dict[str, Any], fleet: Fleet, *, address: str, user_agent: str) -> Caller:
        """The caller an accepted token makes under this fleet file (its grants worked out once per token and fleet
        file; only the address and user agent are the request's own)."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        known = self._principals.get(digest)
        if known is not None and known[0] is fleet:
            return dataclasses.replace(known[1], address=address, user_agent=user_agent)
        who = caller_for(claims, fleet, address=address, user_agent=user_agent)
        with self._lock:
            if len(self._principals) >= MAX_PRINCIPALS:
                for stale in list(self._principals)[: MAX_PRINCIPALS // 4]:
                    del self._principals[stale]
            self._principals[digest] = (fleet, who)
        return who


def _stamp(path: str | None) -> tuple[int, int] | None:
    if not path:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)
