"""The read-only API, the MCP tools and the audit log against a running `fleetview serve` on the lab fleet, with
login on and a real OpenID Connect provider (npm oidc-provider) issuing client-credentials and user tokens.

One serve for the module (tests/e2e/api/conftest.py). The browser test runs last: Playwright's sync API keeps an
event loop on the main thread, so the MCP client runs its own loop on a thread of its own.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from backend.views import fleet_views, group_views, standards_views
from backend.views.scoped import ScopedLake
from tests.conftest import wait_for_streamlit
from tests.e2e.api.conftest import AUDIENCE, GRANTED, ApiRig, decoded
from tests.e2e.auth.conftest import block_the_internet

CANARY_PASSWORD = "canary-password-5d1e"  # typed into the provider's sign-in form
CANARY_QUERY = "eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOjF9.Y2FuYXJ5LXF1ZXJ5LXRva2Vu"
CANARY_COOKIE = "canary-forged-cookie-4b7c"
POLICY = "prod-replication-factor"  # policies.example.toml: the lab's prod clusters have topics with fewer replicas


def _pages(rig: ApiRig, path: str, client: str, **params: Any) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Every item of a paged list (following next_cursor), and the raw bodies."""
    items, bodies, cursor = [], [], None
    for _ in range(1000):
        answer = rig.get(path, client, params={**params, **({"cursor": cursor} if cursor else {}), "limit": 50})
        assert answer.status_code == 200, (path, answer.text)
        bodies.append(answer.content)
        page = answer.json()
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items, bodies
    raise AssertionError("too many pages")


def _mcp(rig: ApiRig, token: str | None, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """List the tools and call some through the mcp SDK's own client, on a thread with its own event loop."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, Any] = {}

    async def session() -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                streamable_http_client(f"{rig.base}/mcp", http_client=http) as (read, write, *_), \
                ClientSession(read, write) as mcp:
            await mcp.initialize()
            out["tools"] = (await mcp.list_tools()).tools
            for name, arguments in calls:
                out[(name, json.dumps(arguments, sort_keys=True))] = await mcp.call_tool(name, arguments)

    def run() -> None:
        try:
            anyio.run(session)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=120)
    return out


def _tamper(token: str, **claims: Any) -> str:
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body.update(claims)
    return f"{header}.{base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip('=')}.{signature}"


def _unauthorized(answer: httpx.Response, reason: str) -> None:
    assert answer.status_code == 401, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"].startswith('Bearer realm="fleetview"')
    assert reason in answer.json()["detail"], answer.json()


def test_bearer_tokens_of_the_real_provider(api_rig: ApiRig) -> None:
    rig = api_rig
    missing = rig.get("/clusters", None)
    _unauthorized(missing, "bearer token is required")
    assert "error=" not in missing.headers["www-authenticate"]

    operator = rig.get("/clusters", "m-ops")
    assert operator.status_code == 200 and operator.json()["total"] == 7
    assert {c["name"] for c in rig.get("/clusters", "m-viewer").json()["items"]} == set(GRANTED)
    # A person's token (authorization code flow): the same grants as the UI gives them (groups and e-mail).
    person = rig.user_token("viewer")
    assert decoded(person)[1]["aud"] == AUDIENCE and decoded(person)[1]["email"] == "viewer@example.com"
    me = rig.get("/me", token=person).json()
    assert me == {"login": True, "subject": "viewer@example.com", "groups": ["team-eu"], "clusters": 2, "audit": False}
    assert {c["name"] for c in rig.get("/clusters", token=person).json()["items"]} == set(GRANTED)
    keycloak_style = rig.user_token("keycloak")  # roles under realm_access.roles
    assert [c["name"] for c in rig.get("/clusters", token=keycloak_style).json()["items"]] == ["prod-us"]

    for client in ("m-nogrant", "m-stranger"):  # valid tokens, nothing granted: deny by default
        refused = rig.get("/clusters", client)
        assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"

    from tests.rig.oidc import client_credentials_token
    wrong_audience = client_credentials_token(rig.idp, "m-ops", "m-ops-secret-for-tests", "urn:another:api")
    assert decoded(wrong_audience)[1]["aud"] == "urn:another:api"
    _unauthorized(rig.get("/clusters", token=wrong_audience), "wrong audience")
    _unauthorized(rig.get("/clusters", token=_tamper(rig.token("m-viewer"), groups=["kafka-admins"])), "signature")
    header, payload, _ = rig.token("m-ops").split(".")
    none = base64.urlsafe_b64encode(b'{"alg":"none","typ":"at+jwt"}').decode().rstrip("=")
    _unauthorized(rig.get("/clusters", token=f"{none}.{payload}."), "algorithm 'none'")
    _unauthorized(rig.get("/clusters", token="not-a-jwt"), "not a signed JWT")
    # Expired: the one-second token, once past its expiry and the API's 10 s leeway.
    time.sleep(max(0.0, rig.short_token_at + 13 - time.monotonic()))
    _unauthorized(rig.get("/clusters", token=rig.short_token), "expired")

    # ETag on every GET, 304 on If-None-Match; gzip for large answers.
    first = rig.get("/clusters", "m-ops")
    assert first.headers["etag"].startswith('W/"')
    again = rig.get("/clusters", "m-ops", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    raw = httpx.get(f"{rig.api}/clusters", headers={"Authorization": f"Bearer {rig.token('m-ops')}",
                                                     "Accept-Encoding": "gzip"}, timeout=30)
    assert raw.headers["content-encoding"] == "gzip" and json.loads(raw.content)["total"] == 7
    assert gzip.compress(b"x")  # (httpx already decoded it: the header says it came compressed)
    problem = rig.get("/clusters", "m-ops", params={"limit": 0})
    assert problem.status_code == 400 and problem.headers["content-type"] == "application/problem+json"
    assert problem.json()["status"] == 400 and problem.json()["title"] == "Bad request"

    # Rate limit per principal: one machine gets 429 with Retry-After, another goes on.
    limited: list[httpx.Response] = []
    with httpx.Client(headers={"Authorization": f"Bearer {rig.token('m-burst')}"}, timeout=30) as http:
        def hammer() -> None:
            for _ in range(300):
                if limited:
                    return
                answer = http.get(f"{rig.api}/me")
                if answer.status_code == 429:
                    limited.append(answer)
        threads = [threading.Thread(target=hammer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert limited, "no 429 after 2,400 requests"
    assert int(limited[0].headers["retry-after"]) >= 1 and limited[0].json()["status"] == 429
    assert rig.get("/me", "m-viewer").status_code == 200

    # Key rotation: the provider now signs with a key the API has not seen; the API fetches the keys again.
    rig.rotate_keys()
    rotated = rig.token("m-viewer")
    assert decoded(rotated)[0]["kid"] == "k2"
    assert rig.get("/clusters", token=rotated).json()["total"] == 2


def test_a_token_for_2_of_7_clusters_reads_nothing_of_the_other_5(api_rig: ApiRig) -> None:
    rig = api_rig
    hidden = rig.hidden()
    assert len(hidden) == 5
    secrets = rig.secrets_of(hidden)
    spec = httpx.get(f"{rig.api}/openapi.json", timeout=30).json()
    assert spec["openapi"].startswith("3.1")
    docs = httpx.get(f"{rig.api}/docs", timeout=30)
    assert docs.status_code == 200 and "GET /api/v1/clusters" in docs.text and "<script" not in docs.text
    bodies: list[bytes] = []
    a_hidden_topic = next(t for n in hidden for t in rig.topics[n])
    groups_of_hidden = {n: [g["group_id"] for g in rig.get("/groups", "m-ops", params={"cluster": n,
                                                                                        "limit": 5}).json()["items"]]
                        for n in hidden}
    policy = POLICY
    _eventually("standards judged", lambda: rig.get("/standards", "m-ops").json()["compliance"]["pairs"] > 0, 60)
    for path, operations in spec["paths"].items():
        route = path.removeprefix("/api/v1").replace("{policy}", policy)
        if "get" not in operations:
            continue
        if "{cluster}" not in route:
            if route == "/audit":
                assert rig.get(route, "m-viewer").status_code == 403
                continue
            if route == "/search":  # the widest queries of each mode: hits of the granted clusters only, counted so
                for params in ({"q": "e", "limit": 10000}, {"q": ".", "mode": "regex", "limit": 10000},
                               {"q": "payments"}):
                    answer = rig.get(route, "m-viewer", params=params)
                    assert answer.status_code == 200, (route, answer.text)
                    found = answer.json()
                    assert {h["cluster"] for h in found["hits"]} <= set(GRANTED), (route, params)
                    assert found["clusters"] <= len(GRANTED), (route, params)
                    bodies.append(answer.content)
                continue
            if route == "/configs/compare":
                for name in hidden:
                    assert rig.get(route, "m-viewer", params={"cluster": [GRANTED[0], name]}).status_code == 404
                bodies.append(rig.get(route, "m-viewer", params={"cluster": list(GRANTED)}).content)
                continue
            answer = rig.get(route, "m-viewer")
            assert answer.status_code == 200, (route, answer.text)
            body = answer.json()
            if isinstance(body, dict) and "next_cursor" in body:
                items, pages = _pages(rig, route, "m-viewer")
                bodies += pages
                names = {i.get(k) for i in items for k in ("cluster", "cluster_a", "cluster_b")} - {None}
                assert names <= set(GRANTED), (route, names)
                takes_cluster = any(p["name"] == "cluster" for p in operations["get"].get("parameters", []))
                for name in hidden if takes_cluster else []:  # filtering by a hidden cluster finds nothing
                    filtered = rig.get(route, "m-viewer", params={"cluster": name})
                    assert filtered.status_code == 200 and filtered.json()["total"] == 0, (route, name)
            else:
                bodies.append(answer.content)
            continue
        for name in hidden + ["no-such-cluster"]:
            filled = (route.replace("{cluster}", name).replace("{topic}", a_hidden_topic)
                      .replace("{group}", (groups_of_hidden.get(name) or ["g"])[0]))
            refused = rig.get(filled, "m-viewer")
            assert refused.status_code == 404, (filled, refused.text)
            # The same words for a hidden cluster as for one that does not exist (only the caller's input echoed).
            assert refused.json()["detail"] == f"no cluster {name!r} visible to you", refused.json()
        for name in GRANTED:
            filled = route.replace("{cluster}", name).replace("{topic}", rig.topics[name][0])
            if "{group}" in filled:
                groups = rig.get("/groups", "m-viewer", params={"cluster": name, "limit": 1}).json()["items"]
                filled = filled.replace("{group}", groups[0]["group_id"]) if groups else ""
            if filled:
                answer = rig.get(filled, "m-viewer")
                assert answer.status_code == 200, (filled, answer.text)
                bodies.append(answer.content)
    readiness = rig.get("/readiness", "m-viewer").json()
    assert {r["cluster"] for r in readiness} == set(GRANTED)
    for name in hidden:
        assert rig.get("/readiness", "m-viewer", params={"cluster": name}).status_code == 404
    everything = b"\n".join(bodies).decode("utf-8")
    assert not [s for s in secrets if s in everything], "hidden clusters leaked through the API"
    assert rig.get("/me", "m-viewer").json()["clusters"] == 2

    # The same through every MCP tool.
    calls = [("list_clusters", {}), ("find_topic", {"search": ""}), ("find_group", {}), ("readiness", {}),
             ("open_incidents", {}), ("search_fleet", {"text": "e", "limit": 200}), ("standards", {}),
             ("standards", {"policy": POLICY})]
    for name in hidden:
        calls += [("describe_cluster", {"cluster": name}), ("readiness", {"cluster": [name]}),
                  ("group_lag", {"cluster": name, "group": (groups_of_hidden.get(name) or ["g"])[0]}),
                  ("open_incidents", {"cluster": [name]})]
    out = _mcp(rig, rig.token("m-viewer"), calls)
    assert "error" not in out, out.get("error")
    answers = {k: r for k, r in out.items() if k != "tools"}
    for (_tool, arguments), answer in answers.items():
        if answer.is_error:  # the caller's own input echoed, in the words a cluster that does not exist gets
            asked = json.loads(arguments)["cluster"]
            name = asked[0] if isinstance(asked, list) else asked
            assert answer.content[0].text.endswith(f"no cluster {name!r} visible to you"), answer.content
    texts = json.dumps([[c.model_dump(mode="json") for c in r.content] + [r.structured_content]
                        for r in answers.values() if not r.is_error])
    assert not [s for s in secrets if s in texts], "hidden clusters leaked through MCP"
    listed = out[("list_clusters", "{}")].structured_content
    assert listed["total"] == 2 and {c["name"] for c in listed["clusters"]} == set(GRANTED)
    for name in hidden:
        refused = out[("describe_cluster", json.dumps({"cluster": name}))]
        assert refused.is_error and f"no cluster '{name}' visible to you" in refused.content[0].text


def test_mcp_tools_through_the_sdk_client(api_rig: ApiRig) -> None:
    rig = api_rig
    refused = _mcp(rig, None, [])
    assert "error" in refused and "tools" not in refused, refused  # the SDK's client gives up at initialize
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    raw = httpx.post(f"{rig.base}/mcp", json=initialize, timeout=30,
                     headers={"Accept": "application/json, text/event-stream"})
    _unauthorized(raw, "bearer token is required")
    group = rig.get("/groups", "m-ops", params={"cluster": "prod-eu", "limit": 1}).json()["items"][0]["group_id"]
    calls = [("list_clusters", {"tag": ["env=prod"]}), ("describe_cluster", {"cluster": "prod-eu"}),
             ("find_topic", {"search": "payments"}), ("group_lag", {"cluster": "prod-eu", "group": group}),
             ("readiness", {"target": "4.1", "cluster": ["legacy-zk"]}), ("open_incidents", {}),
             ("search_fleet", {"text": "payments", "kind": ["topic"]}),
             ("standards", {"policy": POLICY, "outcome": ["violation"]})]
    out = _mcp(rig, rig.token("m-ops"), calls)
    assert "error" not in out, out.get("error")
    tools = {t.name: t for t in out["tools"]}
    assert set(tools) == {"list_clusters", "describe_cluster", "find_topic", "find_group", "group_lag", "readiness",
                          "open_incidents", "search_fleet", "standards"}
    assert all(t.annotations and t.annotations.read_only_hint and not t.annotations.destructive_hint
               for t in tools.values())

    def result(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = out[(name, json.dumps(arguments, sort_keys=True))]
        assert not answer.is_error, answer.content
        return answer.structured_content  # type: ignore[no-any-return]

    # What does not move while the lab runs: the tools' answers as the tools are meant to give them.
    prod = result("list_clusters", {"tag": ["env=prod"]})["clusters"]
    assert {c["name"] for c in prod} == {c["name"] for c in rig.get("/clusters", params={"tag": "env=prod"})
                                         .json()["items"]} and prod
    found = result("find_topic", {"search": "payments"})["topics"]
    assert {(t["cluster"], t["topic_id"]) for t in found} >= {("prod-eu", rig.lab.topic_id("prod-eu", "payments"))}
    assert result("group_lag", {"cluster": "prod-eu", "group": group})["group_id"] == group
    verdict = result("readiness", {"target": "4.1", "cluster": ["legacy-zk"]})["clusters"][0]
    assert verdict["cluster"] == "legacy-zk" and verdict["verdict"] == "blocked"
    searched = result("search_fleet", {"text": "payments", "kind": ["topic"]})
    assert ("prod-eu", rig.lab.topic_id("prod-eu", "payments")) in {(h["cluster"], h["id"]) for h in searched["hits"]}
    judged = result("standards", {"policy": POLICY, "outcome": ["violation"]})
    assert judged["findings_total"] > 0  # the lab's seeded problems violate it

    # What moves with every poll (last poll times, incidents, compliance): the tools and the API answer the same
    # when asked of the same lake state; a poll landing between the two is waited out, bounded.
    last: list[str] = []

    def same_as_the_api() -> bool:
        nonlocal out
        searched = result("search_fleet", {"text": "payments", "kind": ["topic"]})
        judged = result("standards", {"policy": POLICY, "outcome": ["violation"]})
        same = rig.get("/search", params={"q": "payments", "kind": "topic", "limit": 50}).json()
        findings = rig.get(f"/standards/policies/{POLICY}/findings",
                           params={"outcome": "violation", "limit": 1000}).json()
        pairs = [
            ("describe_cluster", result("describe_cluster", {"cluster": "prod-eu"}),
             {**rig.get("/clusters/prod-eu").json(), "brokers": rig.get("/clusters/prod-eu/brokers").json()}),
            ("open_incidents", result("open_incidents", {})["total"], rig.get("/incidents").json()["total"]),
            ("search_fleet", ([(h["cluster"], h["name"], h["id"]) for h in searched["hits"]], searched["total"]),
             ([(h["cluster"], h["name"], h["id"]) for h in same["hits"]], same["total"])),
            ("standards findings", (judged["findings_total"], judged["findings"]),
             (findings["total"], findings["items"][:len(judged["findings"])])),
            ("standards overview", judged["overview"]["compliance"], rig.get("/standards").json()["compliance"])]
        wrong = [f"{name}: MCP {str(a)[:600]} / API {str(b)[:600]}" for name, a, b in pairs if a != b]
        if wrong:
            last[:] = wrong
            out = _mcp(rig, rig.token("m-ops"), calls)  # ask again, then the API again
            assert "error" not in out, out.get("error")
        return not wrong

    _eventually("the MCP tools answer as the API", same_as_the_api, 90, lambda: last)


def test_schemathesis_every_answer_matches_the_openapi_document(api_rig: ApiRig) -> None:
    """No 5xx, every answer (status, content type, body, headers) as documented, for any parameter of any
    operation of the API's own OpenAPI document (a bounded number of examples each)."""
    schema = schemathesis.openapi.from_url(f"{api_rig.api}/openapi.json")
    headers = {"Authorization": f"Bearer {api_rig.token('m-fuzz')}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 24
    assert {o.path for o in operations} >= {"/api/v1/standards", "/api/v1/standards/policies/{policy}/findings"}
    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                  database=None)
        def check(case: Any) -> None:
            # Every check but "schema-valid data is accepted": an opaque cursor that is well-formed base64 but not
            # one the API handed out is refused (400), as it must be.
            case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        check()


def test_pages_and_the_api_agree_with_each_other_and_with_the_brokers(api_rig: ApiRig) -> None:
    rig = api_rig
    for runtime in rig.lab.runtimes.values():
        runtime.groups.freeze()  # lag stops moving: the next group read is the last that changes the lake

    def views() -> ScopedLake:
        return ScopedLake.open(str(rig.lake), None)

    last: list[str] = []

    def differ(part: str, api: object, page: object) -> bool:
        last[:] = [f"{part}: API {str(api)[:1500]} / page {str(page)[:1500]}"]
        return False

    def agree() -> bool:
        lake = views()
        for name in rig.cluster_ids:
            # Broker versions as the Cluster page shows them (fleet_views.broker_table).
            page = fleet_views.broker_table(lake.latest_brokers(name, True))
            api = rig.get(f"/clusters/{name}/brokers").json()
            if [(b["broker_id"], b["version_label"]) for b in api] != list(zip(page["broker_id"], page["version"],
                                                                               strict=True)):
                return differ(f"{name} brokers", api, page.to_dict("records"))
            # Topic ids: the page's table and the lab brokers' own ids.
            topics, _ = _pages(rig, f"/clusters/{name}/topics", "m-ops")
            by_api = {t["name"]: t["topic_id"] for t in topics}
            by_page = dict(zip(lake.latest_topics(name)["topic"], lake.latest_topics(name)["topic_id"], strict=True))
            brokers_say = dict(zip(rig.topics[name], [rig.lab.topic_id(name, t) for t in rig.topics[name]],
                                   strict=True))
            if by_api != by_page or any(by_api.get(t) != tid for t, tid in brokers_say.items()):
                return differ(f"{name} topic ids", by_api, (by_page, brokers_say))
        # Lag: the Consumer groups page's rows and every group's partitions.
        groups, _ = _pages(rig, "/groups", "m-ops")
        rows = group_views.list_rows(lake.groups())
        if sorted((g["cluster"], g["group_id"], g["lag"], g["status"]) for g in groups) != sorted(
                (c, g, None if v is None or v != v else int(v), s) for c, g, v, s in
                zip(lake.groups()["cluster_name"], lake.groups()["group_id"], rows["lag"].astype(object),
                    lake.groups()["status"], strict=True)):
            return differ("groups", groups, rows.to_dict("records"))
        # Standards as the Standards page counts them (backend.views.standards_views), per cluster and per policy.
        found = lake.standards()
        by_cluster = standards_views.by_cluster(found)
        api_clusters = _pages(rig, "/standards/clusters", "m-ops")[0]
        if [(c["cluster"], c["compliance"]["percent_passing"], c["compliance"]["statuses"]["violation"])
                for c in api_clusters] != list(zip(by_cluster["cluster_name"], by_cluster["percent_passing"],
                                                   by_cluster["violation"], strict=True)) or not api_clusters:
            return differ("standards per cluster", api_clusters, by_cluster.to_dict("records"))
        by_policy = standards_views.by_policy(found)
        if {p["policy_id"]: p["compliance"]["passing"] for p in _pages(rig, "/standards/policies", "m-ops")[0]} != \
                dict(zip(by_policy["policy_id"], by_policy["passing"], strict=True)):
            return differ("standards per policy", _pages(rig, "/standards/policies", "m-ops")[0],
                          by_policy.to_dict("records"))
        # Readiness as the Upgrade readiness page computes it.
        report = lake.readiness("4.1")
        api_ready = {r["cluster"]: r["verdict"] for r in rig.get("/readiness", params={"target": "4.1"}).json()}
        if api_ready != dict(zip(report.verdicts["cluster_name"], report.verdicts["verdict"], strict=True)):
            return differ("readiness", api_ready, report.verdicts.to_dict("records"))
        return True

    _eventually("the API and the pages agree", agree, 90, lambda: last)
    # And with what the lab brokers answer now about one group's lag, partition by partition (the read after the
    # freeze may land after the agreement above: wait for the page's reader to hold what the API answers).
    group = next(g for g in _pages(rig, "/groups", "m-ops", cluster="prod-eu")[0] if g["lag"])
    details: list[dict[str, Any]] = []

    def same_partitions() -> bool:
        details[:] = [rig.get(f"/clusters/prod-eu/groups/{group['group_id']}").json()]
        lake = views()
        partitions = group_views.partitions_table(lake.group_offsets(["prod-eu"]), lake.group_members(["prod-eu"]),
                                                  "prod-eu", group["group_id"])
        return [(p["topic"], p["partition"], p["lag"]) for p in details[0]["lag_by_partition"]] == [
            (t, int(p), int(v)) for t, p, v in zip(partitions["topic"], partitions["partition"], partitions["lag"],
                                                   strict=True)]

    _eventually("the group's partitions as the page reads them", same_partitions, 60)
    detail = details[0]
    # one answer is of one poll: the group's lag is the sum of its partitions' (a commit between the answer's reads
    # of the groups and of the offsets once gave 3,540 beside 3,545)
    assert sum(p["lag"] for p in detail["lag_by_partition"] if p["lag"] and p["lag"] > 0) == detail["lag"]


def _eventually(what: str, check: Callable[[], bool], timeout_s: float,
                why: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(1.0)
    raise AssertionError(f"timed out: {what}; last seen: {why()}")


def test_a_scripted_session_leaves_exactly_its_audit_records(api_rig: ApiRig, browser: Any) -> None:
    """Login, a page view, an export, Poll now, a denied URL, a forged cookie, API calls, logout: exactly those
    records, none holding a token, cookie or password; the Audit page, GET /api/v1/audit and /metrics show them."""
    from backend.audit.store import read_audit
    from tests.e2e.auth.conftest import AuthApp  # noqa: F401 - the login helper's type

    rig = api_rig
    began = time.time()
    tokens_seen: list[str] = []
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
    block_the_internet(context)
    page = context.new_page()
    try:
        page.goto(f"{rig.ui}/")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_selector("input[name=login]", timeout=30000)
        page.fill("input[name=login]", "auditor")
        page.fill("input[name=password]", CANARY_PASSWORD)
        page.get_by_role("button", name="Sign-in").click()
        page.locator("button:has-text('Continue'), [data-testid='stApp']").first.wait_for(timeout=30000)
        if not page.url.startswith(rig.ui):
            page.get_by_role("button", name="Continue").click()
        page.wait_for_url(lambda u: u.startswith(rig.ui), timeout=30000)
        wait_for_streamlit(page)
        page.get_by_role("heading", name="Fleet").first.wait_for(timeout=60000)
        cookies = [c["value"] for c in context.cookies() if c["name"].startswith("_streamlit")]
        assert cookies, "no identity cookie"
        with page.expect_download(timeout=60000):
            page.get_by_role("button", name="CSV").first.click()
        page.get_by_role("button", name="Poll now").click()
        page.get_by_text("The service polls now.").wait_for(timeout=30000)
        page.goto(f"{rig.ui}/cluster?cluster=nowhere-cluster")
        wait_for_streamlit(page)
        page.get_by_text("No access to cluster").first.wait_for(timeout=60000)
        page.get_by_role("link", name="Audit").first.click()
        wait_for_streamlit(page)
        page.get_by_text("records in the last").first.wait_for(timeout=60000)
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(lambda u: not u.startswith(rig.ui) or "/logout" in u, timeout=30000)
    finally:
        context.close()
    forged = browser.new_context()
    block_the_internet(forged)
    forged.add_cookies([{"name": "_streamlit_user", "value": CANARY_COOKIE, "url": rig.ui}])
    forged_page = forged.new_page()
    forged_page.goto(f"{rig.ui}/")
    forged_page.get_by_role("button", name="Log in").wait_for(timeout=60000)
    forged.close()

    auditor = rig.token("m-auditor")
    tokens_seen += [auditor, rig.token("m-viewer")]
    api_calls = [rig.get("/clusters", token=auditor, params={"access_token": CANARY_QUERY, "tag": "env=prod"},
                         headers={"Cookie": f"_streamlit_user={CANARY_COOKIE}"}),
                 rig.get("/clusters/edge-rp", "m-viewer"),  # 404 by grant
                 rig.get("/clusters", None, headers={"Authorization": f"Bearer {CANARY_QUERY}"})]
    assert [a.status_code for a in api_calls] == [200, 404, 401]

    def session_records() -> Any:
        frame = read_audit(str(rig.lake), str(rig.journal_dir))
        return frame[frame["at"] >= __import__("pandas").Timestamp(began, unit="s", tz="UTC")]

    def ui_kinds() -> list[tuple[str, str, str]]:
        frame = session_records()
        mine = frame[(frame["door"] == "ui")].sort_values("at")
        return [(k, a, o) for k, a, o in zip(mine["kind"], mine["action"], mine["outcome"], strict=True)]

    expected_ui = [("login", "login", "ok"), ("view", "page home", "ok"), ("export", "fleet-table.csv", "ok"),
                   ("operate", "poll_now", "ok"), ("refusal", "page cluster", "not_found"),
                   ("view", "page audit", "ok"), ("logout", "logout", "ok"),
                   ("refusal", "login", "forged_cookie")]
    _eventually("the session's UI records", lambda: ui_kinds() == expected_ui, 60)
    frame = session_records()
    ui = frame[frame["door"] == "ui"]
    assert set(ui["subject"][ui["kind"] != "refusal"]) == {"auditor@example.com"}
    assert json.loads(ui[ui["action"] == "page cluster"]["clusters_json"].iloc[0]) == ["nowhere-cluster"]
    api = frame[frame["door"] == "api"].sort_values("at")
    mine = api[api["action"].isin(["GET /api/v1/clusters", "GET /api/v1/clusters/edge-rp"])].tail(3)
    assert list(mine["kind"]) == ["api", "refusal", "refusal"]
    assert list(mine["outcome"]) == ["ok", "not_found", "unauthenticated"]
    assert list(mine["status"].astype(int)) == [200, 404, 401]
    assert json.loads(mine["params_json"].iloc[0]) == {"access_token": "[REDACTED]", "tag": "env=prod"}
    assert mine["subject"].iloc[0] == "m-auditor" and mine["subject"].iloc[1] == "m-viewer"

    # No token, cookie or password anywhere in the audit log: journals, lake files, the API's JSON and CSV.
    listing = rig.get("/audit", token=auditor, params={"since": "2000-01-01T00:00:00Z", "limit": 1000})
    csv = rig.get("/audit", token=auditor, params={"format": "csv", "since": "2000-01-01T00:00:00Z"})
    assert listing.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert {r["record_id"] for r in listing.json()["items"]} >= set(frame["record_id"])
    canaries = [CANARY_PASSWORD, CANARY_QUERY, CANARY_COOKIE, *cookies, *tokens_seen, *rig.tokens.values()]
    stored = b"".join(p.read_bytes() for p in (rig.lake / "audit").rglob("*.parquet"))
    stored += b"".join(p.read_bytes() for p in rig.journal_dir.glob("*.jsonl"))
    stored += listing.content + csv.content
    assert stored and not [c for c in canaries if c.encode() in stored], "a secret reached the audit log"

    # /metrics counts what the compactor rolled, by kind and outcome.
    def counted() -> bool:
        text = httpx.get(f"{rig.metrics}/metrics", timeout=10).text
        return ('kafka_fleet_audit_records_total{kind="login",outcome="ok"}' in text
                and 'kafka_fleet_audit_records_total{kind="refusal",outcome="forged_cookie"}' in text)

    _eventually("audit counters on /metrics", counted, 30)
