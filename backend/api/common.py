"""What every router shares: the caller's readers, JSON with ETag/304, problem+json, pages, documented responses."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import pandas as pd
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel

from backend.api import models as m
from backend.api.access import Caller
from backend.api.paging import Order, page_of, signature
from backend.views.scoped import ScopedLake

T = TypeVar("T", bound=BaseModel)
PROBLEM = "application/problem+json"
MAX_AUDITED_CLUSTERS = 50


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}}


# Documented on every endpoint (Schemathesis holds each answer to these).
RESPONSES: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: the If-None-Match ETag still matches"},
    400: _problem("A parameter the API cannot use"),
    401: _problem("No bearer token, or one that is not accepted (login on)"),
    403: _problem("The token's claims grant no cluster of this fleet"),
    429: _problem("Too many requests from this principal: see Retry-After"),
    503: _problem("The OpenID provider's keys cannot be read"),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: _problem("No such cluster, topic or group visible to the caller")}


def caller(request: Request) -> Caller:
    """The request's caller, as the gate middleware decided it."""
    return request.state.caller  # type: ignore[no-any-return]


def scoped(request: Request) -> ScopedLake:
    """The caller's grant-filtered readers of the lake."""
    return request.app.state.api.lakes.for_caller(caller(request))  # type: ignore[no-any-return]


def touched(request: Request, clusters: Iterable[object]) -> None:
    """Record which clusters a request touched (for the audit log), at most MAX_AUDITED_CLUSTERS."""
    seen: list[str] = list(getattr(request.state, "clusters", []))
    for name in clusters:
        text = str(name)
        if text and text not in seen and len(seen) < MAX_AUDITED_CLUSTERS:
            seen.append(text)
    request.state.clusters = seen


def etag_of(body: bytes) -> str:
    """A weak ETag of a representation (weak: gzip may re-encode the bytes)."""
    return 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(header: str | None, tag: str) -> bool:
    if not header:
        return False
    wanted = tag.removeprefix("W/")
    return any(part.strip() == "*" or part.strip().removeprefix("W/") == wanted for part in header.split(","))


def respond(request: Request, body: bytes, media_type: str = "application/json") -> Response:
    """200 with an ETag, or 304 when If-None-Match holds it; private caching (the answer depends on the token)."""
    tag = etag_of(body)
    headers = {"ETag": tag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
    if _matches(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def model_response(request: Request, model: BaseModel, clusters: Iterable[object] = ()) -> Response:
    """A model as JSON (ETag, 304), noting the clusters it touched."""
    touched(request, clusters)
    return respond(request, model.model_dump_json().encode("utf-8"))


def list_response(request: Request, items: Sequence[BaseModel]) -> Response:
    """A JSON list of models (ETag, 304)."""
    body = b"[" + b",".join(i.model_dump_json().encode("utf-8") for i in items) + b"]"
    return respond(request, body)


def paged(request: Request, frame: pd.DataFrame | Callable[[], pd.DataFrame], order: Order,
          build: Callable[[pd.Series], BaseModel], *, limit: int, cursor: str | None,
          cluster_column: str | None = "cluster_name", sl: ScopedLake | None = None) -> Response:
    """One page of a frame in a stable order, as a Page of models (ETag, 304).

    With `sl`, the answer is memoised in the caller's ScopedLake (which lives a few seconds and is shared by every
    caller who sees the same clusters): the same query, cursor and all, is computed once per data generation."""
    sig = signature(request.url.path, dict(request.query_params.multi_items()))

    def compute() -> tuple[bytes, list[str]]:
        rows = frame() if callable(frame) else frame
        page = page_of(rows, order, limit=limit, cursor=cursor, sig=sig)
        items = [build(row) for _, row in page.rows.iterrows()]
        clusters = ([str(c) for c in page.rows[cluster_column].dropna().unique()]
                    if cluster_column and cluster_column in page.rows else [])
        result = m.Page[Any](items=items, total=page.total, limit=limit, next_cursor=page.next_cursor)
        return result.model_dump_json().encode("utf-8"), clusters

    key = ("api-page", request.url.path, tuple(sorted(request.query_params.multi_items())))
    body, clusters = sl.once(key, compute) if sl is not None else compute()
    touched(request, clusters)
    return respond(request, body)


def cached_body(request: Request, sl: ScopedLake, build: Callable[[], bytes]) -> bytes:
    """An answer's body memoised in the caller's ScopedLake, by path and query."""
    return sl.once(("api-body", request.url.path, tuple(sorted(request.query_params.multi_items()))), build)
