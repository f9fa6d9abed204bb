"""/audit: the audit log, for callers holding the audit grant; JSON pages or CSV."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.access import Caller
from backend.api.common import RESPONSES, caller, paged, respond, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.export.csv_safe import safe_csv
from backend.views import audit_views
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["audit"], responses=RESPONSES)
DEFAULT_DAYS = 7
MAX_CSV_ROWS = 100_000


class NoAuditGrant(PermissionError):
    """The caller does not hold the audit grant."""


def _entry(row: pd.Series) -> m.AuditEntry:
    return m.AuditEntry(
        record_id=str(row["record_id"]), at=q.value(row["at"]), kind=str(row["kind"]), door=str(row["door"]),
        action=str(row["action"] or ""), subject=str(row["subject"] or ""), groups=list(row["groups"]),
        client_address=str(row["client_address"] or ""), user_agent=str(row["user_agent"] or ""),
        clusters=list(row["clusters"]), params=dict(row["params"]), outcome=str(row["outcome"]),
        status=q._int(row["status"]), duration_ms=q.value(row["duration_ms"]), detail=str(row["detail"] or ""))


@router.get("/audit", response_model=m.Page[m.AuditEntry],
            responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}}},
            summary="The audit log (audit grant)")
def get_audit(request: Request, who: Annotated[Caller, Depends(caller)], sl: Annotated[ScopedLake, Depends(scoped)],
              since: Annotated[datetime | None, Query(description="from (ISO 8601; default: 7 days ago)")] = None,
              until: Annotated[datetime | None, Query(description="until, excluded (ISO 8601)")] = None,
              kind: Annotated[list[str], Query(description="login, logout, view, operate, export, api, mcp, "
                                                           "refusal")] = [],  # noqa: B006
              outcome: Annotated[list[str], Query(description="ok, unauthenticated, forbidden, not_found, "
                                                              "rate_limited, invalid, error")] = [],  # noqa: B006
              subject: Annotated[str, Query(max_length=300, description="part of the subject")] = "",
              format: Literal["json", "csv"] = "json",
              limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
              cursor: Annotated[str | None, Query(max_length=4000)] = None) -> Response:
    """Who did and read what, through which door, from where, and what was refused, newest first."""
    if not who.audit:
        raise NoAuditGrant("reading the audit log needs the audit grant ([auth] audit in the fleet file)")
    state = request.app.state.api
    start = since if since is not None else datetime.now(UTC) - timedelta(days=DEFAULT_DAYS)
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    end = until if until is None or until.tzinfo else until.replace(tzinfo=UTC)
    frame = audit_views.audit_frame(state.lake, state.journal_dir, sl.seen, since=start, until=end, kinds=kind,
                                    outcomes=outcome, subject=subject)
    if format == "csv":
        body = safe_csv(audit_views.audit_table(frame.head(MAX_CSV_ROWS)))
        return respond(request, body.encode("utf-8"), "text/csv; charset=utf-8")
    return paged(request, frame, Order(("at", "record_id"), (True, True)), _entry, limit=limit, cursor=cursor,
                 cluster_column=None)
