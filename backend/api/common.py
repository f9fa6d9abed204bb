"""What every router shares: the caller's readers, JSON answers, pages, documented responses.

The gate (backend.api.gate) adds the ETag, answers 304 and compresses. A handler whose answer depends only on the
caller's scope, its path and query and the data generation passes its ScopedLake (`sl=`) to `paged`,
`model_response`, `list_response` or `cached_body`: the gate then memoises the encoded answer in that ScopedLake.
"""

from __future__ import annotations

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
    """The caller's grant-filtered readers of the lake (the next generation's, when the gate refreshes answers)."""
    lake = getattr(request.state, "scoped_lake", None)
    if isinstance(lake, ScopedLake):
        return lake
    return request.app.state.api.lakes.for_caller(caller(request))  # type: ignore[no-any-return]


def memoisable(request: Request, sl: ScopedLake | None) -> None:
    """Let the gate keep this request's answer in `sl`: it depends only on the caller's scope (sl), the path, the
    query and the data generation (not on the subject, the time of day or a header)."""
    if sl is not None:
        request.state.answer_of = sl


def touched(request: Request, clusters: Iterable[object]) -> None:
    """Record which clusters a request touched (for the audit log), at most MAX_AUDITED_CLUSTERS."""
    seen: list[str] = list(getattr(request.state, "clusters", []))
    for name in clusters:
        text = str(name)
        if text and text not in seen and len(seen) < MAX_AUDITED_CLUSTERS:
            seen.append(text)
    request.state.clusters = seen


def respond(request: Request, body: bytes, media_type: str = "application/json") -> Response:
    """200 with private caching (the answer depends on the token); the gate adds the ETag or answers 304."""
    return Response(body, media_type=media_type, headers={"Cache-Control": "private, no-cache",
                                                          "Vary": "Authorization"})


def model_response(request: Request, model: BaseModel, clusters: Iterable[object] = (), *,
                   sl: ScopedLake | None = None) -> Response:
    """A model as JSON, noting the clusters it touched (memoisable in `sl`)."""
    touched(request, clusters)
    memoisable(request, sl)
    return respond(request, model.model_dump_json().encode("utf-8"))


def list_response(request: Request, items: Sequence[BaseModel], *, sl: ScopedLake | None = None) -> Response:
    """A JSON list of models (memoisable in `sl`)."""
    memoisable(request, sl)
    body = b"[" + b",".join(i.model_dump_json().encode("utf-8") for i in items) + b"]"
    return respond(request, body)


def paged(request: Request, frame: pd.DataFrame | Callable[[], pd.DataFrame], order: Order,
          build: Callable[[pd.Series], BaseModel], *, limit: int, cursor: str | None,
          cluster_column: str | None = "cluster_name", sl: ScopedLake | None = None) -> Response:
    """One page of a frame in a stable order, as a Page of models.

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
    memoisable(request, sl)
    return respond(request, body)


def cached_body(request: Request, sl: ScopedLake, build: Callable[[], bytes]) -> bytes:
    """An answer's body memoised in the caller's ScopedLake, by path and query (and the whole answer by the gate)."""
    memoisable(request, sl)
    return sl.once(("api-body", request.url.path, tuple(sorted(request.query_params.multi_items()))), build)
