"""Session age from the ID token (Streamlit's identity cookie lives 30 days and never checks exp)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

# A token issued this far in the future (seconds) is not trusted to say how old the session is.
CLOCK_SKEW_S = 300.0


def _epoch(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def session_started_at(claims: Mapping[str, Any]) -> float | None:
    """When the user authenticated (epoch seconds): auth_time, else the token's iat; None if neither is usable."""
    for name in ("auth_time", "iat"):
        at = _epoch(claims.get(name))
        if at is not None:
            return at
    return None


def session_expires_at(claims: Mapping[str, Any], max_hours: float) -> float:
    """Epoch seconds at which the session must end; -inf when the claims do not say when it began."""
    started = session_started_at(claims)
    return -math.inf if started is None else started + max_hours * 3600.0


def session_expired(claims: Mapping[str, Any], max_hours: float, now: float) -> bool:
    """True when the session is older than max_hours, or its start is unknown or implausibly in the future."""
    started = session_started_at(claims)
    if started is None or started > now + CLOCK_SKEW_S:
        return True
    return now >= started + max_hours * 3600.0


def session_key(claims: Mapping[str, Any]) -> str:
    """A stable digest of one login (issuer, subject, issue time, nonce), to remember it was logged out."""
    parts = [claims.get(name) for name in ("iss", "sub", "iat", "auth_time", "nonce", "sid")]
    return hashlib.sha256(json.dumps(parts, default=str).encode("utf-8")).hexdigest()
