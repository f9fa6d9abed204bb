"""The ASGI app: /api/v1 (FastAPI, OpenAPI 3.1 generated from backend.api.models) and /mcp (the MCP tools).

One gate in front of both (backend.api.gate, plain ASGI): the caller (bearer token with login on; loopback without),
401/403, the rate limit per principal (429), then the handler (or its memoised answer), then one audit record per
request (written to disk before the answer leaves). Errors are RFC 9457 problem+json. gzip for answers above 1 KB;
ETag/If-None-Match (304) on every GET.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api import models as m
from backend.api import queries
from backend.api.common import PROBLEM
from backend.api.docs_page import docs_html
from backend.api.gate import MCP_PATH, PREFIX, PUBLIC, Gate
from backend.api.paging import CursorError
from backend.api.routes import ROUTERS
from backend.api.routes.audit import NoAuditGrant
from backend.api.state import ApiSettings, ApiState

__all__ = ["MCP_PATH", "PREFIX", "PUBLIC", "ApiSettings", "ApiState", "create_app", "problem"]
log = logging.getLogger("backend.api")


def problem(status: int, title: str, detail: str | None = None, *, instance: str | None = None,
            headers: dict[str, str] | None = None) -> Response:
    """An RFC 9457 problem details answer."""
    body = m.Problem(title=title, status=status, detail=detail, instance=instance).model_dump_json(exclude_none=True)
    return Response(body, status_code=status, media_type=PROBLEM, headers=headers)


def _not_found(request: Request, exc: Exception) -> Response:
    request.state.refused_by_grant = isinstance(exc, queries.NotFound)
    return problem(404, "Not found", f"no {exc.what} visible to you" if isinstance(exc, queries.NotFound)
                   else "no such endpoint", instance=request.url.path)


def create_app(settings: ApiSettings) -> FastAPI:
    """The whole ASGI app: API routers, docs, MCP, the gate, problem+json, gzip."""
    from backend.api.mcp_tools import build_mcp

    state = ApiState(settings)
    mcp_app = build_mcp(state.lakes).streamable_http_app(
        streamable_http_path=MCP_PATH, json_response=True, stateless_http=True, host=settings.address)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp_app.router.lifespan_context(mcp_app):
            yield

    app = FastAPI(title="Kafka fleet view API", version="1",
                  description="Read-only: clusters, brokers, topics, configs, consumer groups, clients, client "
                              "configs, incidents, upgrade readiness and the audit log, under the same grants as the "
                              "UI (docs/api.md).",
                  openapi_url=f"{PREFIX}/openapi.json", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.api = state
    for router in ROUTERS:
        app.include_router(router, prefix=PREFIX)
    app.router.routes.extend(mcp_app.routes)

    @app.get(f"{PREFIX}/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(docs_html(app.openapi()))

    @app.exception_handler(queries.NotFound)
    async def not_found(request: Request, exc: queries.NotFound) -> Response:
        return _not_found(request, exc)

    @app.exception_handler(queries.Invalid)
    async def invalid(request: Request, exc: queries.Invalid) -> Response:
        return problem(400, "Bad request", str(exc), instance=request.url.path)

    @app.exception_handler(CursorError)
    async def bad_cursor(request: Request, exc: CursorError) -> Response:
        return problem(400, "Bad request", str(exc), instance=request.url.path)

    @app.exception_handler(NoAuditGrant)
    async def no_audit(request: Request, exc: NoAuditGrant) -> Response:
        return problem(403, "Forbidden", str(exc), instance=request.url.path)

    @app.exception_handler(RequestValidationError)
    async def validation(request: Request, exc: RequestValidationError) -> Response:
        where = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                          for e in exc.errors()[:5])
        return problem(400, "Bad request", where[:1000], instance=request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return _not_found(request, exc)
        return problem(exc.status_code, str(exc.detail) if exc.status_code != 405 else "Method not allowed",
                       instance=request.url.path, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error in %s %s", request.method, request.url.path)
        return problem(500, "Internal server error", "see the API's log", instance=request.url.path)

    app.add_middleware(Gate, state=state)
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    """The generated document, with the Problem schema every error answer refers to."""
    original: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = original()
        schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = m.Problem.model_json_schema()
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}
        schema["security"] = [{"bearer": []}]
        for path in PUBLIC:  # the entry point answers without a token (it says nothing of the fleet)
            for operation in schema.get("paths", {}).get(path, {}).values():
                operation["security"] = []
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

