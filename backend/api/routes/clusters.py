"""/clusters: the fleet's clusters, one cluster, its brokers, its broker configs; configs side by side."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import NOT_FOUND, RESPONSES, list_response, model_response, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["clusters"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]
Tags = Annotated[list[q.Selector], Query(description="tag selector key=value or key!=value; every one must hold")]
Names = Annotated[list[str], Query(description="cluster names (any of them)")]


@router.get("/clusters", response_model=m.Page[m.Cluster], summary="The clusters the caller may view")
def list_clusters(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], tag: Tags = [],  # noqa: B006
                  cluster: Names = [], status: Annotated[list[str], Query(description="ok, degraded, down, ...")] = [],  # noqa: B006
                  limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Both KIP-78 ids, status, tags, broker count, mode (ZooKeeper/KRaft) and versions, by cluster name."""
    return paged(request, lambda: q.clusters_frame(sl, tags=tag, names=cluster, statuses=status),
                 Order(("cluster_name",)), lambda row: q.cluster_model(sl, row), limit=limit, cursor=cursor, sl=sl)


@router.get("/clusters/{cluster}", response_model=m.Cluster, responses=NOT_FOUND, summary="One cluster")
def get_cluster(request: Request, cluster: str, sl: Annotated[ScopedLake, Depends(scoped)]) -> Response:
    """One cluster as its latest poll saw it (404 for a cluster the caller may not view, as for one that is not)."""
    return model_response(request, q.cluster_model(sl, q.require_cluster(sl, cluster)), [cluster])


@router.get("/clusters/{cluster}/brokers", response_model=list[m.Broker], responses=NOT_FOUND,
            summary="The brokers of a cluster")
def get_brokers(request: Request, cluster: str, sl: Annotated[ScopedLake, Depends(scoped)]) -> Response:
    """Each broker's id, host, rack, software and version with its provenance and range (controller first)."""
    request.state.clusters = [cluster]
    return list_response(request, q.brokers(sl, cluster))


@router.get("/clusters/{cluster}/configs", response_model=list[m.BrokerConfig], responses=NOT_FOUND,
            summary="The broker configs of a cluster")
def get_configs(request: Request, cluster: str, sl: Annotated[ScopedLake, Depends(scoped)],
                include_defaults: bool = False) -> Response:
    """Configs the brokers disagree on first, then non-default ones (every config with include_defaults)."""
    request.state.clusters = [cluster]
    return list_response(request, q.broker_configs(sl, cluster, include_defaults))


@router.get("/configs/compare", response_model=list[m.ConfigComparison], responses=NOT_FOUND,
            summary="Broker configs side by side")
def compare_configs(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                    cluster: Annotated[list[str], Query(min_length=1, max_length=20, description="clusters")],
                    include_defaults: bool = False) -> Response:
    """The drift of broker configs between clusters: differences first, 'differs within the cluster' where a
    cluster's own brokers disagree."""
    request.state.clusters = list(cluster)
    return list_response(request, q.compare_configs(sl, cluster, include_defaults))
