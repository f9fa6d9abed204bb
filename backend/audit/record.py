"""One audit record: who did or read what, through which door, from where, with what outcome (never a secret)."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from backend.configs.sensitive import REDACTED, credential_shape, is_secretish_name, redact_shapes

KINDS = ("login", "logout", "view", "operate", "export", "api", "mcp", "refusal")
DOORS = ("ui", "api", "mcp")
OUTCOMES = ("ok", "unauthenticated", "forbidden", "not_found", "rate_limited", "invalid", "forged_cookie", "error")
MAX_TEXT = 512
MAX_PARAM_VALUE = 256
MAX_PARAMS = 32
MAX_CLUSTERS = 200
MAX_GROUPS = 200
# Parameter names whose values are never kept, whatever they look like (OAuth and session material).
_SECRET_PARAMS = frozenset({"authorization", "cookie", "set-cookie", "code", "state", "nonce", "code_verifier",
                            "access_token", "id_token", "refresh_token", "client_secret", "assertion", "session",
                            "sessionid", "jwt", "key", "signature", "sig", "x-api-key"})


def _text(value: object, limit: int = MAX_TEXT) -> str:
    """Text for the audit log: credential-shaped spans redacted, control characters dropped, length capped."""
    text = value if isinstance(value, str) else str(value)
    text = "".join(ch for ch in text if ch.isprintable() or ch == " ")
    text = redact_shapes(text)
    return text if len(text) <= limit else text[:limit] + "…"


def secret_param(name: str) -> bool:
    """Whether a parameter (or header) name carries a credential: its value is never recorded."""
    lowered = name.strip().lower()
    return lowered in _SECRET_PARAMS or is_secretish_name(lowered) or lowered.endswith(("_token", "-token"))


def scrub_params(params: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> dict[str, str]:
    """Parameters as the audit log keeps them: names capped, secret names' values replaced, every value cut."""
    if params is None:
        return {}
    items = params.items() if isinstance(params, Mapping) else params
    out: dict[str, str] = {}
    for name, value in items:
        if len(out) >= MAX_PARAMS:
            out["…"] = "more parameters not recorded"
            break
        key = _text(name, 64)
        if secret_param(str(name)):
            out[key] = REDACTED
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out[key] = REDACTED if credential_shape(text) else _text(text, MAX_PARAM_VALUE)
    return out


@dataclass(frozen=True)
class AuditRecord:
    """One entry of the audit log (the columns of the lake's `audit` table)."""

    kind: str
    door: str
    action: str
    outcome: str = "ok"
    subject: str = ""
    groups: tuple[str, ...] = ()
    client_address: str = ""
    user_agent: str = ""
    clusters: tuple[str, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)
    status: int | None = None
    duration_ms: float | None = None
    detail: str = ""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown audit kind {self.kind!r}")
        if self.door not in DOORS:
            raise ValueError(f"unknown audit door {self.door!r}")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown audit outcome {self.outcome!r}")

    def row(self) -> dict[str, Any]:
        """The record as a row of the `audit` table, every text scrubbed and capped."""
        duration = self.duration_ms if self.duration_ms is not None and math.isfinite(self.duration_ms) else None
        return {
            "record_id": self.record_id,
            "at": self.at.astimezone(UTC),
            "kind": self.kind,
            "door": self.door,
            "action": _text(self.action, 300),
            "subject": _text(self.subject, 300),
            "groups_json": json.dumps([_text(g, 200) for g in list(self.groups)[:MAX_GROUPS]], ensure_ascii=False),
            "client_address": _text(self.client_address, 100),
            "user_agent": _text(self.user_agent, 300),
            "clusters_json": json.dumps([_text(c, 255) for c in list(self.clusters)[:MAX_CLUSTERS]],
                                        ensure_ascii=False),
            "params_json": json.dumps(scrub_params(self.params), ensure_ascii=False, sort_keys=True),
            "outcome": self.outcome,
            "status": self.status,
            "duration_ms": None if duration is None else round(duration, 3),
            "detail": _text(self.detail),
        }

    def line(self) -> bytes:
        """The record as one JSON line of a journal (times as ISO 8601 UTC)."""
        row = self.row()
        row["at"] = row["at"].isoformat()
        return (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


COLUMNS = tuple(AuditRecord(kind="api", door="api", action="").row())


def row_from_line(line: bytes) -> dict[str, Any] | None:
    """A journal line back as a row of the `audit` table; None for a line that is not a whole record."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(value, dict) or set(value) != set(COLUMNS):
        return None
    try:
        value["at"] = datetime.fromisoformat(value["at"]).astimezone(UTC)
    except (TypeError, ValueError):
        return None
    if not isinstance(value["record_id"], str) or value["kind"] not in KINDS or value["outcome"] not in OUTCOMES:
        return None
    return value


def record_for(claims: Mapping[str, Any] | None, *, user_claim: str = "email") -> str:
    """Who a set of claims is, for the audit log: the user claim, else the subject, else the client id."""
    if not claims:
        return ""
    for name in (user_claim, "email", "preferred_username", "sub", "client_id", "azp"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return ""

