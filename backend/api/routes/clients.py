"""/clients and /client-configs: client software on the brokers, KIP-1324 config distributions and drift."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api.common import RESPONSES, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["clients"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]
Clusters = Annotated[list[str], Query(description="cluster names")]
Key = Annotated[str, Query(max_length=255, description="a client config key")]
ClientType = Annotated[str, Query(max_length=40, description="producer, consumer, share_consumer, admin, streams")]


@router.get("/clients", response_model=m.Page[m.ClientSoftware], summary="Client software connected to the brokers")
def list_clients(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], cluster: Clusters = [],  # noqa: B006
                 limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Connections by client software and version (KIP-511) per cluster, with what Kafka 4.x says of it."""
    return paged(request, lambda: q.client_software(sl, cluster),
                 Order(("cluster_name", "software_name", "software_version")), q.software_model, limit=limit,
                 cursor=cursor, sl=sl)


@router.get("/client-configs/distributions", response_model=m.Page[m.Distribution],
            summary="Client config value distributions")
def list_distributions(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], cluster: Clusters = [],  # noqa: B006
                       key: Key = "", client_type: ClientType = "", limit: Limit = DEFAULT_LIMIT,
                       cursor: Cursor = None) -> Response:
    """How each key's values are spread over a cluster's client instances (sensitive keys never appear)."""
    return paged(request, lambda: q.distributions(sl, clusters=cluster, key=key, client_type=client_type),
                 Order(("cluster", "client_type", "key", "value")), q.distribution_model, limit=limit, cursor=cursor,
                 cluster_column="cluster", sl=sl)


@router.get("/client-configs/drift", response_model=m.Page[m.Drift], summary="Client config drift between clusters")
def list_drift(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], key: Key = "",
               client_type: ClientType = "", limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Per key and pair of clusters the caller sees both of, the total variation distance, largest first."""
    return paged(request, lambda: q.drift(sl, key=key, client_type=client_type),
                 Order(("tvd", "client_type", "key", "cluster_a", "cluster_b"), (True,)), q.drift_model, limit=limit,
                 cursor=cursor, cluster_column="cluster_a_name", sl=sl)
