"""/topics: topics over the fleet or of one cluster, with topic ids (KIP-516), overrides and recreations."""

from __future__ import annotations

from typing import Annotated

import pandas as pd
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import NOT_FOUND, RESPONSES, model_response, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["topics"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]
Search = Annotated[str, Query(max_length=300, description="part of the name, or the start of the topic id")]
ORDER = Order(("cluster_name", "topic"))


@router.get("/topics", response_model=m.Page[m.Topic], summary="Topics over the fleet")
def list_topics(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], search: Search = "",
                cluster: Annotated[list[str], Query(description="cluster names (any of them)")] = [],  # noqa: B006
                tag: Annotated[list[q.Selector], Query(description="tag selector key=value of the cluster")] = [],  # noqa: B006
                include_internal: bool = True, under_replicated: bool = False,
                limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Every visible cluster's topics that match, by cluster and name."""
    def matching() -> pd.DataFrame:
        frame = sl.all_topics()
        if cluster or tag:
            names = set(q.clusters_frame(sl, tags=tag, names=cluster)["cluster_name"])
            frame = frame[frame["cluster_name"].isin(names)]
        return q.filter_topics(frame, search, include_internal, under_replicated)

    return paged(request, matching, ORDER, q.topic_model, limit=limit, cursor=cursor, sl=sl)


@router.get("/clusters/{cluster}/topics", response_model=m.Page[m.Topic], responses=NOT_FOUND,
            summary="The topics of a cluster")
def cluster_topics(request: Request, cluster: str, sl: Annotated[ScopedLake, Depends(scoped)], search: Search = "",
                   include_internal: bool = True, under_replicated: bool = False,
                   limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Name, topic id, partitions, replication factor, under-replicated partitions, by name."""
    q.require_cluster(sl, cluster)
    return paged(request, lambda: q.filter_topics(sl.latest_topics(cluster), search, include_internal,
                                                  under_replicated), ORDER, q.topic_model, limit=limit, cursor=cursor,
                 sl=sl)


@router.get("/clusters/{cluster}/topics/{topic}", response_model=m.TopicDetail, responses=NOT_FOUND,
            summary="One topic")
def get_topic(request: Request, cluster: str, topic: str, sl: Annotated[ScopedLake, Depends(scoped)]) -> Response:
    """A topic with its config overrides and every time it was deleted and created again (old and new ids)."""
    return model_response(request, q.topic_detail(sl, cluster, topic), [cluster])
