"""MCP tools (the `mcp` SDK, streamable HTTP at /mcp): the API's read functions for assistants, under the same auth.

The gate (backend.api.gate) checks the bearer token, the grants and the rate limit of every /mcp request before the
SDK sees it, and writes its audit record (the tool's name and arguments); each tool reads through the caller's
ScopedLake and backend.api.queries, exactly as the HTTP endpoints do. Read-only: no tool changes anything.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from backend.api import queries as q
from backend.api import standards as st
from backend.api.access import ScopedLakes
from backend.api.paging import Order, page_of
from backend.api.routes.search import index_of
from backend.search.query import QueryRefused
from backend.views import group_views, search_views
from backend.views.scoped import ScopedLake

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
MAX_ROWS = 200


def _context(state: ScopedLakes, ctx: Context[Any, Any], tool: str, arguments: dict[str, Any]) -> ScopedLake:
    request = ctx.request_context.request
    if request is None or not hasattr(request.state, "caller"):
        raise ToolError("no caller: the MCP tools answer only through the API's /mcp endpoint")
    request.state.audit_action = f"tool {tool}"
    request.state.audit_params = {k: v for k, v in arguments.items() if v not in (None, "", [])}
    return state.for_caller(request.state.caller)  # type: ignore[no-any-return]


def _touch(ctx: Context[Any, Any], clusters: list[str]) -> None:
    request = ctx.request_context.request
    if request is not None:
        seen = list(getattr(request.state, "clusters", []))
        request.state.clusters = (seen + [c for c in clusters if c not in seen])[:50]


def _hidden(exc: q.NotFound) -> ToolError:
    return ToolError(f"no {exc.what} visible to you")


def build_mcp(state: ScopedLakes) -> MCPServer[Any]:
    """The MCP server and its read-only tools over `state`'s readers."""
    server: MCPServer[Any] = MCPServer(
        name="fleetview", title="Kafka fleet view",
        instructions="Read-only facts about the Kafka clusters you may view: clusters, brokers and versions, topics, "
                     "consumer groups and their lag, upgrade readiness, open incidents, compliance with the policy "
                     "file (standards).")

    @server.tool(annotations=READ_ONLY)
    def list_clusters(ctx: Context[Any, Any], tag: list[str] | None = None, status: list[str] | None = None
                      ) -> dict[str, Any]:
        """The clusters you may view: ids (KIP-78), status, mode, brokers, versions. `tag`: selectors like env=prod."""
        sl = _context(state, ctx, "list_clusters", {"tag": tag, "status": status})
        try:
            frame = q.clusters_frame(sl, tags=tag or [], statuses=status or [])
        except q.Invalid as exc:
            raise ToolError(str(exc)) from None
        clusters = [q.cluster_model(sl, row).model_dump(mode="json") for _, row in
                    frame.sort_values("cluster_name").head(MAX_ROWS).iterrows()]
        _touch(ctx, [c["name"] for c in clusters])
        return {"clusters": clusters, "total": len(frame)}

    @server.tool(annotations=READ_ONLY)
    def describe_cluster(ctx: Context[Any, Any], cluster: str) -> dict[str, Any]:
        """One cluster with its brokers (software, version and where the version comes from)."""
        sl = _context(state, ctx, "describe_cluster", {"cluster": cluster})
        try:
            row = q.require_cluster(sl, cluster)
            out = q.cluster_model(sl, row).model_dump(mode="json")
            out["brokers"] = [b.model_dump(mode="json") for b in q.brokers(sl, cluster)]
        except q.NotFound as exc:
            raise _hidden(exc) from None
        _touch(ctx, [cluster])
        return out

    @server.tool(annotations=READ_ONLY)
    def find_topic(ctx: Context[Any, Any], search: str) -> dict[str, Any]:
        """Topics across the fleet whose name holds `search` (or whose topic id starts with it), with their ids."""
        sl = _context(state, ctx, "find_topic", {"search": search})
        frame = q.filter_topics(sl.all_topics(), search, names=q.topic_names(sl) if search.strip() else None)
        page = page_of(frame, Order(("cluster_name", "topic")), limit=MAX_ROWS, cursor=None, sig="")
        topics = [q.topic_model(r).model_dump(mode="json") for _, r in page.rows.iterrows()]
        _touch(ctx, sorted({t["cluster"] for t in topics}))
        return {"topics": topics, "total": page.total}

    @server.tool(annotations=READ_ONLY)
    def find_group(ctx: Context[Any, Any], search: str = "", status: list[str] | None = None) -> dict[str, Any]:
        """Consumer groups across the fleet whose id holds `search`, worst first (status: stalled, lagging, ...)."""
        sl = _context(state, ctx, "find_group", {"search": search, "status": status})
        frame = group_views.worst_first(q.groups_frame(sl, statuses=status or [], search=search))
        groups = [q.group_model(r).model_dump(mode="json") for _, r in frame.head(MAX_ROWS).iterrows()]
        _touch(ctx, sorted({g["cluster"] for g in groups}))
        return {"groups": groups, "total": len(frame)}

    @server.tool(annotations=READ_ONLY)
    def group_lag(ctx: Context[Any, Any], cluster: str, group: str) -> dict[str, Any]:
        """One group's status with its evidence, members, and lag per topic and per partition."""
        sl = _context(state, ctx, "group_lag", {"cluster": cluster, "group": group})
        try:
            detail = q.group_detail(sl, cluster, group)
        except q.NotFound as exc:
            raise _hidden(exc) from None
        _touch(ctx, [cluster])
        return detail.model_dump(mode="json")

    @server.tool(annotations=READ_ONLY)
    def readiness(ctx: Context[Any, Any], target: str | None = None, cluster: list[str] | None = None
                  ) -> dict[str, Any]:
        """Upgrade readiness for a target release (e.g. 4.1): verdict, checklist and instances to chase per cluster."""
        sl = _context(state, ctx, "readiness", {"target": target, "cluster": cluster})
        try:
            result = q.readiness_for(sl, target, cluster or [])
        except q.NotFound as exc:
            raise _hidden(exc) from None
        except q.Invalid as exc:
            raise ToolError(str(exc)) from None
        _touch(ctx, [r.cluster for r in result])
        return {"clusters": [r.model_dump(mode="json") for r in result]}

    @server.tool(annotations=READ_ONLY)
    def search_fleet(ctx: Context[Any, Any], text: str, mode: str = "substring", kind: list[str] | None = None,
                     limit: int = 50) -> dict[str, Any]:
        """Find topics (names, ids), consumer groups, clients (ids, principals, software, instance ids), brokers
        (ids, hosts, racks), clusters (names, ids, tags) and broker/topic configs (keys, values) across the fleet.
        `mode`: substring (default), prefix, or regex (RE2). Best hits first, with the field that matched."""
        sl = _context(state, ctx, "search_fleet", {"text": text, "mode": mode, "kind": kind, "limit": limit})
        try:
            result = search_views.search(index_of(state.lake), text, scope=sl.seen, mode=mode, kinds=kind or None,
                                         limit=max(1, min(limit, MAX_ROWS)))
        except QueryRefused as exc:
            raise ToolError(str(exc)) from None
        _touch(ctx, sorted({h.cluster for h in result.hits}))
        return result.to_dict()

    @server.tool(annotations=READ_ONLY)
    def open_incidents(ctx: Context[Any, Any], cluster: list[str] | None = None) -> dict[str, Any]:
        """Open fleet incidents and client-config alerts, most severe and oldest first, with their latest evidence."""
        sl = _context(state, ctx, "open_incidents", {"cluster": cluster})
        frame = q.incidents(sl, state="open", clusters=cluster or [])
        incidents = [q.incident_model(r).model_dump(mode="json") for _, r in frame.head(MAX_ROWS).iterrows()]
        _touch(ctx, sorted({i["cluster"] for i in incidents if i["cluster"]}))
        return {"incidents": incidents, "total": len(frame)}

    @server.tool(annotations=READ_ONLY)
    def standards(ctx: Context[Any, Any], cluster: list[str] | None = None, policy: str | None = None,
                  outcome: list[str] | None = None) -> dict[str, Any]:
        """How the clusters you may view meet the policy file: % passing overall, per cluster and per policy (worst
        first). With `policy`: that policy's findings, the topics, brokers, groups and client values behind it, and
        the client instances behind each client value (kind `instance`: client.id, group.id, software, principal,
        address, last seen) (`outcome`: violation, unknown, upcoming, waived)."""
        sl = _context(state, ctx, "standards", {"cluster": cluster, "policy": policy, "outcome": outcome})
        try:
            found = st.standards(sl, clusters=cluster or [])
            out: dict[str, Any] = {
                "overview": st.overview(sl, clusters=cluster or []).model_dump(mode="json"),
                "clusters": [st.cluster_compliance(r).model_dump(mode="json")
                             for _, r in st.by_cluster(found).head(MAX_ROWS).iterrows()],
                "policies": [st.policy_compliance(sl, r).model_dump(mode="json")
                             for _, r in st.by_policy(found, policies=[policy] if policy else []).head(MAX_ROWS)
                             .iterrows()]}
            if policy:
                frame = st.findings(sl, policy, clusters=cluster or [], outcomes=outcome or [])
                out["findings"] = [st.finding_model(sl, r).model_dump(mode="json")
                                   for _, r in frame.head(MAX_ROWS).iterrows()]
                out["findings_total"] = len(frame)
        except q.NotFound as exc:
            raise _hidden(exc) from None
        except q.Invalid as exc:
            raise ToolError(str(exc)) from None
        _touch(ctx, [c["cluster"] for c in out["clusters"]])
        return out

    return server
