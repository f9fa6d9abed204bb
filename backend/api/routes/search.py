"""/search and /topics/{name}/across, /groups/{group}/across (issue 38): the Search and Across pages' view functions
(backend.views.search_views) under the caller's grants."""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import RESPONSES, model_response, scoped
from backend.search.query import MAX_LIMIT, MAX_QUERY_CHARS, QueryRefused
from backend.views import search_views
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["search"], responses=RESPONSES)
_READERS: dict[str, search_views.IndexReader] = {}
_LOCK = threading.Lock()


def index_of(lake: str) -> search_views.IndexSnapshot:
    """The lake's search index in memory (one reader per lake in this process, refreshed as the index files change)."""
    with _LOCK:
        reader = _READERS.setdefault(lake, search_views.IndexReader(lake))
    return reader.snapshot()


def index(request: Request) -> search_views.IndexSnapshot:
    """The search index of the API's lake."""
    return index_of(request.app.state.api.lakes.lake)


@router.get("/search", response_model=m.SearchResult, summary="Search the fleet")
def search(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
           text: Annotated[str, Query(alias="q", min_length=1, max_length=MAX_QUERY_CHARS,
                                      description="what to look for (case-insensitive)")],
           mode: m.SearchMode = "substring",
           kind: Annotated[list[m.SearchKind], Query(description="only these kinds (default every kind)")] = [],  # noqa: B006
           cluster: Annotated[list[str], Query(description="only these clusters")] = [],  # noqa: B006
           current_only: bool = False,
           limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="hits returned, best first")] = 100) -> Response:
    """Topic names and ids, group ids, client ids, principals, software and instance ids, broker ids, hosts and
    racks, cluster names, ids and tags, config keys and values, ranked (exact, prefix, substring; current before
    deleted). A regular expression is RE2 and stops at its time limit (400 with the reason)."""
    try:
        result = search_views.search(index(request), text, scope=sl.seen, mode=mode, kinds=kind or None,
                                     clusters=cluster or None, include_deleted=not current_only, limit=limit)
    except QueryRefused as exc:
        raise q.Invalid(str(exc)) from None
    return model_response(request, m.SearchResult.model_validate(result.to_dict()), {h.cluster for h in result.hits})


def _mirror(request: Request) -> tuple[list[str] | None, str]:
    settings = request.app.state.api.policy.fleet().settings
    return settings.mirror_aliases, settings.mirror_separator


@router.get("/topics/{name:path}/across", response_model=m.TopicAcross, summary="A topic across the fleet")
def topic_across(request: Request, name: Annotated[str, Path(max_length=MAX_QUERY_CHARS)],
                 sl: Annotated[ScopedLake, Depends(scoped)],
                 alias: Annotated[list[str], Query(description="MirrorMaker 2 source aliases (default the fleet "
                                                               "file's mirror_aliases, else the cluster names)")] = [],  # noqa: B006
                 ) -> Response:
    """Every visible cluster holding a topic of the name or a MirrorMaker 2 copy of it, side by side: topic id,
    partitions, replication factor, min.insync.replicas, the configs that differ, the groups reading each copy."""
    aliases, separator = _mirror(request)
    view = search_views.topic_across(sl.location, index(request), name, scope=sl.seen, aliases=alias or aliases,
                                     separator=separator)
    return model_response(request, m.TopicAcross.model_validate(view.to_dict()), {c.cluster for c in view.copies})


@router.get("/groups/{group:path}/across", response_model=m.GroupAcross, summary="A consumer group across the fleet")
def group_across(request: Request, group: Annotated[str, Path(max_length=MAX_QUERY_CHARS)],
                 sl: Annotated[ScopedLake, Depends(scoped)]) -> Response:
    """Every visible cluster with a consumer group of the id: type, assignor, state, status, lag, members, topics."""
    view = search_views.group_across(sl.location, index(request), group, scope=sl.seen)
    return model_response(request, m.GroupAcross.model_validate(view.to_dict()), {c.cluster for c in view.copies})
