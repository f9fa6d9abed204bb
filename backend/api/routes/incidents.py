"""/incidents: fleet incidents and client-config alerts, open and resolved."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import RESPONSES, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["incidents"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]


@router.get("/incidents", response_model=m.Page[m.Incident], summary="Incidents and alerts")
def list_incidents(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                   state: Literal["open", "resolved", "all"] = "open",
                   since: Annotated[datetime | None, Query(description="resolved ones since (ISO 8601)")] = None,
                   cluster: Annotated[list[str], Query(description="cluster names")] = [],  # noqa: B006
                   severity: Annotated[list[str], Query(description="critical, warning, info")] = [],  # noqa: B006
                   rule: Annotated[list[str], Query(description="rule ids")] = [],  # noqa: B006
                   limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """What the Alerts page shows: open ones, and resolved ones (since a time), with the latest evidence."""
    return paged(request, lambda: q.incidents(sl, state=state, clusters=cluster, since=since, severities=severity,
                                              rules=rule),
                 Order(("since", "rule", "cluster", "subject", "state")), q.incident_model, limit=limit, cursor=cursor,
                 cluster_column="cluster", sl=sl)
