"""The ASGI app: /api/v1 (FastAPI, OpenAPI 3.1 generated from backend.api.models) and /mcp (the MCP tools).

One gate in front of both: the caller (bearer token with login on; loopback without), 401/403, the rate limit per
principal (429), then the handler, then one audit record per request (written to disk before the answer leaves).
Errors are RFC 9457 problem+json. gzip for answers above 1 KB; ETag/If-None-Match (304) on every GET.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api import models as m
from backend.api import queries
from backend.api.access import Caller, Policy, ScopedLakes, caller_for, provider_settings
from backend.api.common import PROBLEM
from backend.api.docs_page import docs_html
from backend.api.paging import CursorError
from backend.api.ratelimit import RateLimiter, retry_after
from backend.api.routes import ROUTERS
from backend.api.routes.audit import NoAuditGrant
from backend.api.tokens import Provider, ProviderError, TokenError, TokenVerifier
from backend.audit.record import AuditRecord, scrub_params
from backend.audit.store import AuditLog
from backend.auth.exposure import is_loopback

PREFIX = "/api/v1"
MCP_PATH = "/mcp"
PUBLIC = frozenset({PREFIX, f"{PREFIX}/", f"{PREFIX}/openapi.json", f"{PREFIX}/docs"})
log = logging.getLogger("backend.api")


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

    def verifier(self) -> TokenVerifier:
        """The verifier of the provider secrets.toml names now (re-read with the fleet file)."""
        fleet = self.policy.fleet()
        table = provider_settings(self.settings.secrets_file, fleet.auth.provider)
        url = table.get("server_metadata_url")
        audience = fleet.auth.api_audience or table.get("client_id")
        if not isinstance(url, str) or not url or not isinstance(audience, str) or not audience:
            raise ProviderError("login is on but secrets.toml names no OpenID provider (server_metadata_url, "
                                "client_id) and the fleet file no [auth] api_audience")
        key = (url, audience)
        if key not in self._verifiers:
            self._verifiers[key] = TokenVerifier(Provider(url, audience))
        return self._verifiers[key]


def problem(status: int, title: str, detail: str | None = None, *, instance: str | None = None,
            headers: dict[str, str] | None = None) -> Response:
    """An RFC 9457 problem details answer."""
    body = m.Problem(title=title, status=status, detail=detail, instance=instance).model_dump_json(exclude_none=True)
    return Response(body, status_code=status, media_type=PROBLEM, headers=headers)


def _client(request: Request) -> str:
    return request.client.host if request.client else ""


def _kind(path: str) -> str:
    return "mcp" if path == MCP_PATH or path.startswith(MCP_PATH + "/") else "api"


OUTCOME_BY_STATUS = {400: "invalid", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 422: "invalid",
                     429: "rate_limited"}
REFUSALS = frozenset({401, 403, 429})


async def _audit(state: ApiState, request: Request, response: Response | None, started: float,
                 who: Caller | None, detail: str = "") -> None:
    status = response.status_code if response is not None else 500
    kind = _kind(request.url.path)
    refused_by_grant = bool(getattr(request.state, "refused_by_grant", False))
    outcome = "ok" if status < 400 else OUTCOME_BY_STATUS.get(status, "error")
    action = getattr(request.state, "audit_action", None) or f"{request.method} {request.url.path}"
    record = AuditRecord(
        kind="refusal" if status in REFUSALS or refused_by_grant else kind,
        door="mcp" if kind == "mcp" else "api", action=action, outcome=outcome,
        subject=who.subject if who else "", groups=who.groups if who else (),
        client_address=_client(request), user_agent=request.headers.get("user-agent", ""),
        clusters=tuple(getattr(request.state, "clusters", ())),
        params=scrub_params(list(request.query_params.multi_items()) + list(getattr(request.state, "audit_params",
                                                                                    {}).items())),
        status=status, duration_ms=(time.perf_counter() - started) * 1000.0,
        detail=detail or str(getattr(request.state, "audit_detail", "")))
    await anyio.to_thread.run_sync(state.audit.record, record)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def gate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Authenticate, authorise, rate-limit, run the handler, audit."""
    state: ApiState = request.app.state.api
    started = time.perf_counter()
    path = request.url.path
    if path in PUBLIC:
        return await call_next(request)
    who: Caller | None = None
    try:
        fleet = state.policy.fleet()
    except Exception:  # noqa: BLE001 - an unusable fleet file before any good one: nothing is served
        response = problem(503, "Fleet file problem", "the fleet file cannot be used; see the service log")
        await _audit(state, request, response, started, None, "fleet file unusable")
        return response
    address, agent = _client(request), request.headers.get("user-agent", "")
    if fleet.auth.login:
        token = _bearer(request)
        if token is None:
            response = problem(401, "Unauthorized", "a bearer token is required (Authorization: Bearer <token>)",
                               headers={"WWW-Authenticate": 'Bearer realm="fleetview"'})
            await _audit(state, request, response, started, None, "no bearer token")
            return response
        try:
            claims = await anyio.to_thread.run_sync(state.verifier().verify, token)
        except TokenError as exc:
            reason = exc.reason.replace('"', "'")
            response = problem(401, "Unauthorized", exc.reason, headers={
                "WWW-Authenticate": f'Bearer realm="fleetview", error="invalid_token", error_description="{reason}"'})
            await _audit(state, request, response, started, None, exc.reason)
            return response
        except ProviderError as exc:
            log.error("bearer tokens cannot be checked: %s", exc)
            response = problem(503, "Service unavailable", "the OpenID provider's keys cannot be read now",
                               headers={"Retry-After": "5"})
            await _audit(state, request, response, started, None, str(exc))
            return response
        who = caller_for(claims, fleet, address=address, user_agent=agent)
        if not who.roles and not who.audit:
            response = problem(403, "Forbidden", "no cluster of this fleet is granted to this token's subject or "
                                                 "groups (docs/auth.md: access, default_access, allowed_groups)")
            await _audit(state, request, response, started, who, "no grant")
            return response
    else:
        if not is_loopback(address) or not is_loopback(state.settings.address):
            response = problem(403, "Forbidden", "login is off: the API answers loopback clients only")
            await _audit(state, request, response, started, None, "not loopback without login")
            return response
        who = caller_for(None, fleet, address=address, user_agent=agent)
    wait = state.limiter.take(who.key)
    if wait > 0:
        response = problem(429, "Too many requests", f"rate limit of {state.settings.rate_per_s:g} requests a second "
                           "per principal", headers={"Retry-After": retry_after(wait)})
        await _audit(state, request, response, started, who, "rate limit")
        return response
    request.state.caller = who
    try:
        response = await call_next(request)
    except Exception:
        await _audit(state, request, None, started, who, "internal error")
        raise
    await _audit(state, request, response, started, who)
    return response


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

    app.middleware("http")(gate)
    app.add_middleware(GZipMiddleware, minimum_size=1000)
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

