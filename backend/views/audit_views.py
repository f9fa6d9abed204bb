"""The audit log as the Audit page and GET /api/v1/audit show it: filtered, and with hidden clusters redacted.

Reading the audit log needs the fleet-wide `audit` grant ([auth] audit). An auditor who may not view every cluster
still sees every record (who did what, when), but the names of the clusters it may not view are replaced with
"(a cluster you cannot view)" in the clusters, the action, the parameters and the detail: a hidden cluster stays
hidden there too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import pandas as pd

from backend.audit.store import read_audit
from backend.auth.scope import HIDDEN_CLUSTER, Scope

TEXT_COLUMNS = ("action", "params_json", "detail")
SHOWN_COLUMNS = ("at", "kind", "door", "action", "subject", "groups", "client_address", "user_agent", "clusters",
                 "params", "outcome", "status", "duration_ms", "detail", "record_id")


def _clusters(text: object, seen: Scope) -> list[str]:
    try:
        names = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        names = []
    out: list[str] = []
    for name in names if isinstance(names, list) else []:
        shown = str(name) if seen.may_view(name) else HIDDEN_CLUSTER
        if shown not in out:
            out.append(shown)
    return out


def _list(text: object) -> list[str]:
    try:
        value = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _params(text: object) -> dict[str, str]:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def audit_frame(location: str, journal_dir: str | None, seen: Scope, *, since: datetime | None = None,
                until: datetime | None = None, kinds: Sequence[str] = (), outcomes: Sequence[str] = (),
                subject: str = "") -> pd.DataFrame:
    """The records in the window that pass the filters, newest first, hidden cluster names redacted."""
    frame = read_audit(location, journal_dir, since=since, until=until)
    if kinds:
        frame = frame[frame["kind"].isin(list(kinds))]
    if outcomes:
        frame = frame[frame["outcome"].isin(list(outcomes))]
    if subject.strip():
        frame = frame[frame["subject"].str.lower().str.contains(subject.strip().lower(), regex=False)]
    frame = seen.redact_columns(frame, TEXT_COLUMNS)
    out = frame.assign(
        groups=[_list(v) for v in frame["groups_json"]],
        clusters=[_clusters(v, seen) for v in frame["clusters_json"]],
        params=[_params(v) for v in frame["params_json"]],
    )
    return out[list(SHOWN_COLUMNS)].reset_index(drop=True)


def audit_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The records as flat text columns (the Audit page's table and the CSV)."""
    return frame.assign(
        groups=[", ".join(v) for v in frame["groups"]],
        clusters=[", ".join(v) for v in frame["clusters"]],
        params=[json.dumps(v, ensure_ascii=False, sort_keys=True) if v else "" for v in frame["params"]],
    )
