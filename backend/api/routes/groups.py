"""/groups: consumer groups over the fleet (status, lag, evidence) and one group's members and lag."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import NOT_FOUND, RESPONSES, model_response, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["consumer groups"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]
Many = Annotated[list[str], Query()]


@router.get("/groups", response_model=m.Page[m.Group], summary="Consumer groups over the fleet")
def list_groups(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                cluster: Annotated[list[str], Query(description="cluster names")] = [],  # noqa: B006
                status: Annotated[list[str], Query(description="ok, lagging, stalled, stopped, empty_with_lag, "
                                                               "unknown")] = [],  # noqa: B006
                type: Annotated[list[str], Query(description="classic, consumer, share, streams")] = [],  # noqa: B006
                state: Annotated[list[str], Query(description="Stable, Empty, ...")] = [],  # noqa: B006
                topic: Annotated[str, Query(max_length=300, description="groups on this topic")] = "",
                search: Annotated[str, Query(max_length=300, description="part of the group id")] = "",
                tag: Annotated[list[q.Selector], Query(description="tag selector key=value of the cluster")] = [],  # noqa: B006
                limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Groups that pass the filters, by cluster and group id, with lag and their status's evidence."""
    return paged(request, lambda: q.groups_frame(sl, clusters=cluster, statuses=status, types=type, states=state,
                                                 topic=topic, search=search, tags=tag),
                 Order(("cluster_name", "group_id")), q.group_model, limit=limit, cursor=cursor, sl=sl)


@router.get("/clusters/{cluster}/groups/{group:path}", response_model=m.GroupDetail, responses=NOT_FOUND,
            summary="One consumer group")
def get_group(request: Request, cluster: str, group: str, sl: Annotated[ScopedLake, Depends(scoped)]) -> Response:
    """Status and evidence, members, lag per topic and per partition (as kafka-consumer-groups.sh --describe).
    The group id is the rest of the path, percent-encoded."""
    return model_response(request, q.group_detail(sl, cluster, group), [cluster])
