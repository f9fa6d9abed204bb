"""/readiness: is a cluster ready for a Kafka release (verdict, checklist, instances to chase)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import NOT_FOUND, RESPONSES, cached_body, respond, scoped
from backend.views import readiness
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["readiness"], responses=RESPONSES)


@router.get("/readiness", response_model=list[m.ClusterReadiness], responses=NOT_FOUND,
            summary="Upgrade readiness for a target release")
def get_readiness(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                  target: Annotated[str | None, Query(max_length=20, description="e.g. 4.1 (default: newest 4.x)",
                                                      json_schema_extra={"enum": readiness.known_targets()})] = None,
                  cluster: Annotated[list[str], Query(description="cluster names (default: every one)")] = []  # noqa: B006
                  ) -> Response:
    """Per cluster: ready, blocked or unverified, the checklist behind it (pass, fail, warn, unknown: never 'ready'
    by omission) and the client instances to chase."""
    result = sl.once(("api-readiness", target, tuple(cluster)), lambda: q.readiness_for(sl, target, cluster))
    request.state.clusters = [r.cluster for r in result][:50]
    body = cached_body(request, sl, lambda: b"[" + b",".join(r.model_dump_json().encode() for r in result) + b"]")
    return respond(request, body)
