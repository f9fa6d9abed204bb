"""The gate in front of /api/v1 and /mcp: a plain ASGI middleware (no per-request task group, no thread hop).

For every request: the caller (a bearer token with login on, checked once and then found by its digest until it
expires; loopback without login), 401/403, the rate limit per principal (429), then the answer, then one audit record
written and fsync'd (group commit: backend.audit.group_commit) before the answer leaves. Answers are encoded here
(backend.api.answers: ETag and 304 on every 200 to a GET, gzip above 1 KB); an answer the handler marked as depending
only on the caller's scope, path, query and data generation is memoised in that generation's ScopedLake, so a repeat
never reaches FastAPI. A background task asks the memoised questions of a busy scope again in its next generation
before the current one expires (refresh ahead): the callers keep getting answers read at most `ttl_s` ago without
waiting for the lake reads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import anyio
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api import models as m
from backend.api.access import Caller, Visible, caller_for
from backend.api.answers import GZIP_MIN_BYTES, HOT, Answer, AnswerKey, Replay, answer_key, encode
from backend.api.common import PROBLEM
from backend.api.ratelimit import retry_after
from backend.api.tokens import ProviderError, TokenError
from backend.audit.group_commit import AsyncAuditWriter
from backend.audit.record import AuditRecord, scrub_params
from backend.auth.exposure import is_loopback
from backend.views.scoped import ScopedLake

if TYPE_CHECKING:
    from backend.api.state import ApiState

PREFIX = "/api/v1"
MCP_PATH = "/mcp"
PUBLIC = frozenset({PREFIX, f"{PREFIX}/", f"{PREFIX}/openapi.json", f"{PREFIX}/docs"})
OUTCOME_BY_STATUS = {400: "invalid", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 422: "invalid",
                     429: "rate_limited"}
REFUSALS = frozenset({401, 403, 429})
REFRESH_TICK_S = 0.25
MAX_REFRESHED = 512  # questions asked again per scope and generation, at most
log = logging.getLogger("backend.api")


@dataclasses.dataclass
class Asked:
    """What the gate reads of one request's scope, once."""

    method: str
    path: str
    raw_path: bytes
    query_string: bytes
    client: str
    user_agent: str = ""
    authorization: str = ""
    if_none_match: str | None = None
    accepts_gzip: bool = False

    @classmethod
    def of(cls, scope: Scope) -> Asked:
        """The request of an ASGI http scope."""
        client = scope.get("client")
        asked = cls(scope["method"], scope["path"], scope.get("raw_path") or scope["path"].encode(),
                    scope.get("query_string", b""), client[0] if client else "")
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                asked.authorization = value.decode("latin-1")
            elif name == b"user-agent":
                asked.user_agent = value.decode("latin-1")
            elif name == b"if-none-match":
                asked.if_none_match = value.decode("latin-1")
            elif name == b"accept-encoding":
                asked.accepts_gzip = b"gzip" in value
        return asked

    @property
    def bearer(self) -> str | None:
        """The bearer token of the Authorization header, if any."""
        scheme, _, token = self.authorization.partition(" ")
        return token.strip() if scheme.lower() == "bearer" and token.strip() else None

    @property
    def door(self) -> str:
        """api or mcp."""
        return "mcp" if self.path == MCP_PATH or self.path.startswith(MCP_PATH + "/") else "api"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """An answer the gate gives before any handler: status, problem title and detail, headers, audit detail."""

    status: int
    title: str
    detail: str
    headers: tuple[tuple[str, str], ...] = ()
    audit_detail: str = ""
    who: Caller | None = None


class Gate:
    """The ASGI gate: authenticate, authorise, rate-limit, answer (memoised where it may be), audit."""

    def __init__(self, app: ASGIApp, state: ApiState) -> None:
        """Gate `app` with the API's shared `state`."""
        self.app = app
        self.state = state
        self.streamed = GZipMiddleware(app, minimum_size=GZIP_MIN_BYTES)  # /mcp: compressed as it streams
        self._writer: AsyncAuditWriter | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._refreshing: set[Visible] = set()
        self.refresh_lead_s = 1.0
        self.refreshes = 0
        state.gate = self

    # ------------------------------------------------------------------ the request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        asked = Asked.of(scope)
        state = scope.setdefault("state", {})
        if asked.path in PUBLIC:  # the entry point, the document and its page: nothing of the fleet, no token
            await self._buffered(scope, receive, send, asked, None, started, audit=False)
            return
        self._start_refresher()
        admitted = await self._admit(asked)
        if isinstance(admitted, Refusal):
            await self._refuse(send, asked, admitted, started)
            return
        who = admitted
        state["caller"] = who
        if asked.door == "mcp":
            await self._streamed_mcp(scope, receive, send, asked, who, started)
            return
        if asked.method == "GET":
            lake = self.state.lakes.peek(who.visible)
            if lake is not None:
                key = answer_key(asked.path, asked.query_string)
                answer = lake.peek(key)
                if isinstance(answer, Answer):
                    hot = _hot(lake)
                    if key not in hot:
                        hot[key] = Replay(asked.raw_path, asked.query_string, who)
                    status, headers, body = answer.choose(asked.if_none_match, asked.accepts_gzip)
                    await self._audit(asked, who, status, started, clusters=answer.clusters, params=answer.params)
                    await _send(send, status, headers, body)
                    return
        await self._buffered(scope, receive, send, asked, who, started, audit=True)

    async def _admit(self, asked: Asked) -> Caller | Refusal:
        """The caller, or why it is refused (before any handler runs)."""
        try:
            fleet = self.state.policy.fleet()
        except Exception:  # noqa: BLE001 - an unusable fleet file before any good one: nothing is served
            return Refusal(503, "Fleet file problem", "the fleet file cannot be used; see the service log",
                           audit_detail="fleet file unusable")
        if fleet.auth.login:
            token = asked.bearer
            if token is None:
                return Refusal(401, "Unauthorized", "a bearer token is required (Authorization: Bearer <token>)",
                               (("WWW-Authenticate", 'Bearer realm="fleetview"'),), "no bearer token")
            try:
                verifier = self.state.verifier()
                claims = verifier.cached(token)
                if claims is None:
                    claims = await anyio.to_thread.run_sync(verifier.verify, token)
            except TokenError as exc:
                reason = exc.reason.replace('"', "'")
                return Refusal(401, "Unauthorized", exc.reason, (("WWW-Authenticate", f'Bearer realm="fleetview", '
                                                                  f'error="invalid_token", error_description="{reason}"'),),
                               exc.reason)
            except ProviderError as exc:
                log.error("bearer tokens cannot be checked: %s", exc)
                return Refusal(503, "Service unavailable", "the OpenID provider's keys cannot be read now",
                               (("Retry-After", "5"),), str(exc))
            who = self.state.caller(token, claims, fleet, address=asked.client, user_agent=asked.user_agent)
            if not who.roles and not who.audit:
                return Refusal(403, "Forbidden", "no cluster of this fleet is granted to this token's subject or "
                                                 "groups (docs/auth.md: access, default_access, allowed_groups)",
                               audit_detail="no grant", who=who)
        else:
            if not _loopback(asked.client) or not _loopback(self.state.settings.address):
                return Refusal(403, "Forbidden", "login is off: the API answers loopback clients only",
                               audit_detail="not loopback without login")
            who = caller_for(None, fleet, address=asked.client, user_agent=asked.user_agent)
        wait = self.state.limiter.take(who.key)
        if wait > 0:
            return Refusal(429, "Too many requests", f"rate limit of {self.state.settings.rate_per_s:g} requests a "
                           "second per principal", (("Retry-After", retry_after(wait)),), "rate limit", who)
        return who

    async def _refuse(self, send: Send, asked: Asked, refusal: Refusal, started: float) -> None:
        body = m.Problem(title=refusal.title, status=refusal.status, detail=refusal.detail).model_dump_json(
            exclude_none=True).encode("utf-8")
        headers = [(b"content-type", PROBLEM.encode()), (b"content-length", str(len(body)).encode())]
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in refusal.headers]
        await self._audit(asked, refusal.who, refusal.status, started, detail=refusal.audit_detail)
        await _send(send, refusal.status, headers, body)

    async def _buffered(self, scope: Scope, receive: Receive, send: Send, asked: Asked, who: Caller | None,
                        started: float, *, audit: bool) -> None:
        """Run the app, encode its answer (ETag, gzip), memoise it when the handler allows, audit, send."""
        try:
            status, headers, body = await _run(self.app, scope, receive)
        except Exception:
            if audit:
                await self._audit(asked, who, 500, started, detail="internal error")
            raise
        state = scope["state"]
        clusters = tuple(state.get("clusters", ()))
        params = _params(asked.query_string, state.get("audit_params"))
        answer = encode(status, headers, body, tag=status == 200 and asked.method in ("GET", "HEAD"),
                        clusters=clusters, params=params)
        lake = state.get("answer_of")
        if isinstance(lake, ScopedLake) and status == 200 and asked.method == "GET" and who is not None:
            key = answer_key(asked.path, asked.query_string)
            answer = lake.keep(key, answer)
            _hot(lake)[key] = Replay(asked.raw_path, asked.query_string, who)
        status, chosen, body = answer.choose(asked.if_none_match, asked.accepts_gzip)
        if audit:
            await self._audit(asked, who, status, started, clusters=clusters, params=params,
                              action=state.get("audit_action"), detail=str(state.get("audit_detail", "")),
                              by_grant=bool(state.get("refused_by_grant")))
        await _send(send, status, chosen, body)

    async def _streamed_mcp(self, scope: Scope, receive: Receive, send: Send, asked: Asked, who: Caller,
                            started: float) -> None:
        """MCP answers pass through as they come (compressed), the audit record written before the first byte."""
        held: Message | None = None
        audited = False

        async def relay(message: Message) -> None:
            nonlocal held, audited
            if message["type"] == "http.response.start":
                held = message
                return
            if held is not None:
                state = scope["state"]
                audited = True
                await self._audit(asked, who, int(held["status"]), started, clusters=tuple(state.get("clusters", ())),
                                  params=_params(asked.query_string, state.get("audit_params")),
                                  action=state.get("audit_action"), detail=str(state.get("audit_detail", "")))
                start, held = held, None
                await send(start)
            await send(message)

        try:
            await self.streamed(scope, receive, relay)
        except Exception:
            if not audited:
                await self._audit(asked, who, 500, started, detail="internal error")
            raise

    # ------------------------------------------------------------------ the audit record

    async def _audit(self, asked: Asked, who: Caller | None, status: int, started: float, *,
                     clusters: tuple[str, ...] = (), params: Mapping[str, str] | None = None, action: str | None = None,
                     detail: str = "", by_grant: bool = False) -> None:
        kind = asked.door
        record = AuditRecord(
            kind="refusal" if status in REFUSALS or by_grant else kind, door=kind,
            action=action or f"{asked.method} {asked.path}",
            outcome="ok" if status < 400 else OUTCOME_BY_STATUS.get(status, "error"),
            subject=who.subject if who else "", groups=who.groups if who else (), client_address=asked.client,
            user_agent=asked.user_agent, clusters=clusters,
            params=params if params is not None else _params(asked.query_string, None), status=status,
            duration_ms=(time.perf_counter() - started) * 1000.0, detail=detail)
        if self._writer is None:
            self._writer = AsyncAuditWriter(self.state.audit)
        await self._writer.record(record)

    # ------------------------------------------------------------------ refresh ahead

    def _start_refresher(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_TICK_S)
            ttl = self.state.lakes.ttl_s
            for visible, age, lake in self.state.lakes.generations():
                hot = lake.peek(HOT)
                if visible in self._refreshing or not hot or age < ttl - self.refresh_lead_s or age >= ttl * 1.5:
                    continue
                self._refreshing.add(visible)
                asyncio.get_running_loop().create_task(self._refresh(visible, dict(hot)))

    async def _refresh(self, visible: Visible, hot: dict[AnswerKey, Replay]) -> None:
        """Open the next generation of a scope, ask its memoised questions there, then serve it."""
        began = time.monotonic()
        promoted = False
        try:
            lake = await anyio.to_thread.run_sync(self.state.lakes.successor, visible)
            for key, replay in list(hot.items())[:MAX_REFRESHED]:
                if lake.peek(key) is None:
                    await self._replay(lake, key, replay)
            promoted = self.state.lakes.promote(visible, lake)
            self.refreshes += 1
        except Exception:  # a failed refresh leaves the callers to the ordinary path
            log.exception("refreshing the API's answers failed")
        finally:
            if not promoted:
                self.state.lakes.abandon(visible)
            self._refreshing.discard(visible)
            took = time.monotonic() - began
            log.debug("refreshed %d answers of scope %s in %.3f s", len(hot), "all" if visible is None else len(visible),
                      took)
            self.refresh_lead_s = min(self.state.lakes.ttl_s / 2, max(1.0, took + 0.5))

    async def _replay(self, lake: ScopedLake, key: AnswerKey, replay: Replay) -> None:
        """Ask one question again, in `lake`, as an internal request (no audit record: no one asked)."""
        path = key[1]
        scope: Scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                        "scheme": "http", "path": path, "raw_path": replay.raw_path, "root_path": "",
                        "query_string": replay.query_string, "headers": [(b"host", b"refresh.invalid")],
                        "client": ("127.0.0.1", 0), "server": ("refresh.invalid", 80),
                        "state": {"caller": replay.caller, "scoped_lake": lake}}

        async def nothing() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        status, headers, body = await _run(self.app, scope, nothing)
        state = scope["state"]
        if status == 200 and state.get("answer_of") is lake:
            lake.keep(key, encode(status, headers, body, tag=True, clusters=tuple(state.get("clusters", ())),
                                  params=_params(replay.query_string, state.get("audit_params"))))


def _hot(lake: ScopedLake) -> dict[AnswerKey, Replay]:
    """The questions callers asked of a generation (asked again in the next one)."""
    return lake.once(HOT, dict)


async def _run(app: ASGIApp, scope: Scope, receive: Receive) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run an ASGI app to the end of its answer: (status, headers, body)."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def capture(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, capture)
    if start is None:
        raise RuntimeError("the app returned without an answer")
    return int(start["status"]), list(start.get("headers", ())), b"".join(chunks)


async def _send(send: Send, status: int, headers: Any, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": list(headers)})
    await send({"type": "http.response.body", "body": body})


def _params(query_string: bytes, extra: Any) -> dict[str, str]:
    items: list[tuple[str, Any]] = list(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
    if isinstance(extra, dict):
        items += list(extra.items())
    return scrub_params(items)


_LOOPBACK: dict[str, bool] = {}


def _loopback(address: str) -> bool:
    found = _LOOPBACK.get(address)
    if found is None:
        found = is_loopback(address)
        if len(_LOOPBACK) < 4096:
            _LOOPBACK[address] = found
    return found

