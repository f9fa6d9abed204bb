"""/api/v1/search, /api/v1/topics/{name}/across and /api/v1/groups/{group}/across in process: the same view functions
as the pages, with login off and with login on (a bearer token whose groups grant one cluster of three)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from backend.api.app import ApiSettings, create_app
from backend.api.tokens import Provider, TokenVerifier
from backend.search.updates import FleetIndexer
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake
from tests.unit.api.test_tokens import AUDIENCE, ISSUER, Idp
from tests.unit.search.fleet import START, cluster, groups, poll, topics

METADATA = f"{ISSUER}/.well-known/openid-configuration"
FLEET = """[auth]
required = {required}
api_audience = "{audience}"

[[clusters]]
name = "eu"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:eu"] }}

[[clusters]]
name = "us"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:us"] }}

[[clusters]]
name = "secret"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:secret"] }}
"""


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """eu, us and secret each hold orders (us its MirrorMaker 2 copy eu.orders) and a group billing; the poller's
    writer and indexer wrote it."""
    root = tmp_path_factory.mktemp("api-search") / "lake"
    at = START + timedelta(minutes=1)
    snapshots = [cluster("eu", at, "", topics=topics("orders"), groups=groups(at, {"billing": ["svc-a"]})),
                 cluster("us", at, "", topics=topics("eu.orders"),
                         groups=groups(at, {"billing": ["svc-b"]}, topic="eu.orders")),
                 cluster("secret", at, "", topics=topics("orders", "secret-plans"),
                         groups=groups(at, {"billing": ["svc-s"]}))]
    writer, index = FleetWriter(Lake(root)), FleetIndexer(Lake(root))
    index.apply_write(writer.write(poll(at, snapshots)))
    index.close()
    return root


def _client(tmp_path: Path, lake: Path, *, login: bool, idp: Idp | None = None) -> TestClient:
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(FLEET.format(required="true" if login else "false", audience=AUDIENCE), encoding="utf-8")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'[auth]\nserver_metadata_url = "{METADATA}"\nclient_id = "fleetview"\n', encoding="utf-8")
    app = create_app(ApiSettings(lake=str(lake), fleet_file=fleet, journal_dir=None, secrets_file=str(secrets)))
    if idp is not None:  # the provider's keys served from memory, as tests/unit/api/test_tokens does
        app.state.api._verifiers[(METADATA, AUDIENCE)] = TokenVerifier(Provider(METADATA, AUDIENCE), fetch=idp.fetch,
                                                                       refresh_min_s=0.0)
    return TestClient(app, client=("127.0.0.1", 40000))


def test_search_and_across_with_login_off(tmp_path: Path, lake: Path) -> None:
    with _client(tmp_path, lake, login=False) as client:
        found = client.get("/api/v1/search", params={"q": "orders", "kind": "topic"})
        assert found.status_code == 200, found.text
        body = found.json()
        assert {(h["cluster"], h["name"], h["id"]) for h in body["hits"]} == {
            ("eu", "orders", "id-orders"), ("secret", "orders", "id-orders"), ("us", "eu.orders", "id-eu.orders")}
        assert body["total"] == 3 and body["counts"]["topic"] == 3 and body["hits"][0]["link"].startswith("./across")
        refused = client.get("/api/v1/search", params={"q": r"(a)\1", "mode": "regex"})
        assert refused.status_code == 400 and "RE2" in refused.json()["detail"]
        assert refused.headers["content-type"] == "application/problem+json"
        across = client.get("/api/v1/topics/orders/across").json()
        assert [(c["cluster"], c["topic"]) for c in across["copies"]] == [
            ("eu", "orders"), ("secret", "orders"), ("us", "eu.orders")]
        group = client.get("/api/v1/groups/billing/across").json()
        assert [c["cluster"] for c in group["copies"]] == ["eu", "secret", "us"]


def test_a_token_granting_one_cluster_finds_nothing_of_the_others(tmp_path: Path, lake: Path) -> None:
    idp = Idp()
    with _client(tmp_path, lake, login=True, idp=idp) as client:
        headers = {"Authorization": f"Bearer {idp.token(groups=['eu'])}"}
        assert client.get("/api/v1/search", params={"q": "orders"}).status_code == 401  # no token
        found = client.get("/api/v1/search", params={"q": "orders"}, headers=headers)
        assert found.status_code == 200, found.text
        body = found.json()
        assert {h["cluster"] for h in body["hits"]} == {"eu"} and body["clusters"] == 1
        texts = [found.text,
                 client.get("/api/v1/search", params={"q": "secret"}, headers=headers).text,
                 client.get("/api/v1/search", params={"q": "svc-", "kind": "client"}, headers=headers).text,
                 client.get("/api/v1/topics/orders/across", headers=headers).text,
                 client.get("/api/v1/groups/billing/across", headers=headers).text]
        hidden = ('"cluster":"secret"', '"cluster":"us"', "secret-plans", "svc-s", "svc-b", "id-eu.orders", "CID-us",
                  "CID-secret")
        assert [(h, t[:200]) for t in texts for h in hidden if h in t] == []
        assert client.get("/api/v1/search", params={"q": "secret"}, headers=headers).json()["total"] == 0
        across = client.get("/api/v1/topics/orders/across", headers=headers).json()
        assert [c["cluster"] for c in across["copies"]] == ["eu"]
