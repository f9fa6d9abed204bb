"""/ and /me: the entry point and who the API takes the caller for."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api.access import Caller
from backend.api.common import RESPONSES, caller, model_response

router = APIRouter(tags=["meta"], responses=RESPONSES)


@router.get("", response_model=m.Index, summary="The API's entry point")
def index(request: Request) -> Response:
    """Where the OpenAPI document, the docs page and the MCP endpoint are."""
    base = str(request.base_url).rstrip("/")
    return model_response(request, m.Index(version="v1", openapi=f"{base}/api/v1/openapi.json",
                                           docs=f"{base}/api/v1/docs", mcp=f"{base}/mcp"))


@router.get("/me", response_model=m.Me, summary="Who the caller is")
def me(request: Request, who: Annotated[Caller, Depends(caller)]) -> Response:
    """The caller's subject, groups, how many clusters it may view, and whether it holds the audit grant."""
    fleet = request.app.state.api.policy.fleet()
    count = len(fleet.clusters) if who.visible is None else len(who.visible)
    return model_response(request, m.Me(login=who.login, subject=who.subject, groups=list(who.groups),
                                        clusters=count, audit=who.audit))
