"""/standards: how the clusters meet the policy file (issue 39), per cluster, per policy, the findings of a policy."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from backend.api import models as m
from backend.api import queries as q
from backend.api import standards as s
from backend.api.common import NOT_FOUND, RESPONSES, model_response, paged, scoped
from backend.api.paging import DEFAULT_LIMIT, MAX_LIMIT, Order
from backend.views.scoped import ScopedLake

router = APIRouter(tags=["standards"], responses=RESPONSES)
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")]
Cursor = Annotated[str | None, Query(max_length=4000, description="next_cursor of the previous page")]
Clusters = Annotated[list[str], Query(description="cluster names (any of them)")]
Tags = Annotated[list[q.Selector], Query(description="tag selector key=value of the cluster; every one must hold")]
Policies = Annotated[list[str], Query(description="policy ids (any of them)")]
Severities = Annotated[list[str], Query(description="critical, warning, info")]
Statuses = Annotated[list[str], Query(description="violation, unknown, upcoming, waived, pass")]
WORST_FIRST_CLUSTERS = Order(("percent_passing", "cluster_name"))
WORST_FIRST_POLICIES = Order(("percent_passing", "policy_id"))


@router.get("/standards", response_model=m.StandardsOverview, summary="Compliance with the policy file")
def get_standards(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], cluster: Clusters = [],  # noqa: B006
                  tag: Tags = [], policy: Policies = []) -> Response:  # noqa: B006
    """Pairs of policy and cluster judged, the share passing (pass, waived and not-yet-in-force pass; violation and
    unknown never do), the count per status, and the policy file's state."""
    overview = s.overview(sl, clusters=cluster, tags=tag, policies=policy)
    return model_response(request, overview, cluster, sl=sl)


@router.get("/standards/clusters", response_model=m.Page[m.ClusterCompliance], summary="Compliance per cluster")
def list_cluster_compliance(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                            cluster: Clusters = [], tag: Tags = [],  # noqa: B006
                            limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Per cluster: the policies that apply, the share passing and the count per status, worst first."""
    return paged(request, lambda: s.by_cluster(s.standards(sl, clusters=cluster, tags=tag)), WORST_FIRST_CLUSTERS,
                 s.cluster_compliance, limit=limit, cursor=cursor, sl=sl)


@router.get("/standards/policies", response_model=m.Page[m.PolicyCompliance], summary="Compliance per policy")
def list_policy_compliance(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
                           policy: Policies = [], severity: Severities = [],  # noqa: B006
                           cluster: Clusters = [], tag: Tags = [],  # noqa: B006
                           limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """Per policy: what it asks, the clusters it applies to (of those you may view, or those named) and how many
    pass, worst first."""
    return paged(request, lambda: s.by_policy(s.standards(sl, clusters=cluster, tags=tag), policies=policy,
                                              severities=severity),
                 WORST_FIRST_POLICIES, lambda row: s.policy_compliance(sl, row), limit=limit, cursor=cursor,
                 cluster_column=None, sl=sl)


@router.get("/standards/results", response_model=m.Page[m.PolicyResult], summary="Results per policy and cluster")
def list_results(request: Request, sl: Annotated[ScopedLake, Depends(scoped)], cluster: Clusters = [],  # noqa: B006
                 tag: Tags = [], policy: Policies = [], status: Statuses = [],  # noqa: B006
                 severity: Severities = [], limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:  # noqa: B006
    """The current result of every policy on every cluster it applies to, by cluster and policy."""
    return paged(request, lambda: s.results(s.standards(sl, clusters=cluster, tags=tag), policies=policy,
                                            statuses=status, severities=severity),
                 Order(("cluster_name", "policy_id")), lambda row: s.result_model(sl, row), limit=limit,
                 cursor=cursor, sl=sl)


@router.get("/standards/policies/{policy}/findings", response_model=m.Page[m.Finding], responses=NOT_FOUND,
            summary="The findings of one policy")
def list_findings(request: Request, policy: str, sl: Annotated[ScopedLake, Depends(scoped)],
                  cluster: Clusters = [], tag: Tags = [],  # noqa: B006
                  outcome: Annotated[list[str], Query(description="violation, unknown, upcoming, waived (default: "
                                                                  "every one)")] = [],  # noqa: B006
                  kind: Annotated[list[str], Query(description="topic, broker, group, clients, instance, "
                                                               "cluster")] = [],  # noqa: B006
                  limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """The topics, brokers, groups and client values behind a policy's results: the value seen, the value wanted,
    since when, and the waiver that covers it; and the client instances behind each client finding (kind
    `instance`: client.id, group.id, software, principal, address, last seen), each named up to 1,000 per policy and
    cluster (a clients finding's `named` says how many of its `count`). 404 for a policy the policy file does not
    have."""
    frame = s.findings(sl, policy, clusters=cluster, tags=tag, outcomes=outcome, kinds=kind)
    return paged(request, frame, Order(("cluster_name", "kind", "name", "outcome")), lambda row: s.finding_model(sl, row),
                 limit=limit, cursor=cursor, sl=sl)


@router.get("/standards/trend", response_model=m.Page[m.StandardsTrendPoint], summary="% passing day by day")
def list_trend(request: Request, sl: Annotated[ScopedLake, Depends(scoped)],
               days: Annotated[int, Query(ge=1, le=90, description="days back, today included")] = 30,
               scope: Annotated[list[str], Query(description="fleet, cluster, policy")] = [],  # noqa: B006
               name: Annotated[list[str], Query(description="cluster names or policy ids")] = [],  # noqa: B006
               limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Response:
    """The share passing per day, fleet-wide (over the clusters you may view), per cluster and per policy: a
    day without a new result keeps the last one before."""
    return paged(request, lambda: s.trend(sl, days=days, scopes=scope, names=name), Order(("day", "scope", "name")),
                 s.trend_model, limit=limit, cursor=cursor, cluster_column=None, sl=sl)
