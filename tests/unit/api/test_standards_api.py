"""/api/v1/standards in process over a lake the standards engine judged (tests/unit/standards/test_check.py's):
the page's numbers, per cluster and per policy, the findings of one policy, and a hidden cluster nowhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.api.app import ApiSettings, create_app
from backend.api.tokens import Provider, TokenVerifier
from backend.auth.scope import Scope
from backend.views import standards_views
from tests.unit.api.test_tokens import AUDIENCE, ISSUER, Idp
from tests.unit.standards.test_check import HOSTILE, lake  # noqa: F401 - the judged lake (module fixture)

METADATA = f"{ISSUER}/.well-known/openid-configuration"


@pytest.fixture
def api(lake: Path, tmp_path: Path) -> Iterator[tuple[TestClient, str, str]]:  # noqa: F811
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'[auth]\nserver_metadata_url = "{METADATA}"\nclient_id = "{AUDIENCE}"\n', encoding="utf-8")
    app = create_app(ApiSettings(lake=str(lake / "lake"), fleet_file=lake / "clusters.toml",
                                 journal_dir=tmp_path / "audit", secrets_file=str(secrets), rate_per_s=1000.0,
                                 rate_burst=1000))
    idp = Idp()
    app.state.api._verifiers[(METADATA, AUDIENCE)] = TokenVerifier(Provider(METADATA, AUDIENCE), fetch=idp.fetch)
    with TestClient(app, client=("127.0.0.1", 40000)) as client:
        yield client, idp.token(sub="eu", groups=["eu"]), idp.token(sub="both", groups=["eu", "us"])


def _get(client: TestClient, path: str, token: str, **params: Any) -> Any:
    answer = client.get(f"/api/v1{path}", params=params, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, (path, answer.text)
    return answer.json()


def test_standards_per_cluster_and_policy_and_the_findings_of_a_policy(api: tuple[TestClient, str, str],
                                                                        lake: Path) -> None:  # noqa: F811
    client, eu, both = api
    mine = standards_views.load(str(lake / "lake"), Scope(frozenset({"eu", "dev"})))
    summary = standards_views.fleet_summary(mine)
    overview = _get(client, "/standards", eu)
    assert overview["clusters"] == 2 and overview["policies"] == summary["policies"]
    assert overview["compliance"]["pairs"] == summary["pairs"]
    assert overview["compliance"]["percent_passing"] == summary["percent_passing"]
    assert overview["compliance"]["statuses"] == {s: summary[s] for s in standards_views.STATUSES}
    assert overview["file"]["name"] == "policies.toml" and str(lake) not in json.dumps(overview)
    everyone = _get(client, "/standards", both)
    assert everyone["clusters"] == 3 and everyone["compliance"]["pairs"] == 8

    by_cluster = _get(client, "/standards/clusters", eu)
    assert [c["cluster"] for c in by_cluster["items"]] == list(standards_views.by_cluster(mine)["cluster_name"])
    assert _get(client, "/standards/clusters", eu, cluster="us")["total"] == 0  # hidden: as if it were not there
    assert _get(client, "/standards/clusters", both, tag="env=prod")["total"] == 2
    policies = {p["policy_id"]: p for p in _get(client, "/standards/policies", eu)["items"]}
    assert policies["rf"]["clusters"] == 1 and policies["rf"]["compliance"]["percent_passing"] == 0.0
    assert _get(client, "/standards/policies", both)["items"][0]["policy_id"] in {"rf", "auto-create"}
    violations = _get(client, "/standards/results", eu, status="violation")["items"]
    assert {r["cluster"] for r in violations} == {"eu"} and {r["policy_id"] for r in violations} == {"rf"}

    findings = _get(client, "/standards/policies/rf/findings", eu)["items"]
    assert {f["cluster"] for f in findings} == {"eu"}
    assert {(f["name"], f["outcome"]) for f in findings} == {(HOSTILE, "violation"), ("legacy", "waived")}
    assert _get(client, "/standards/policies/rf/findings", eu, outcome="waived")["total"] == 1
    assert _get(client, "/standards/policies/auto-create/findings", eu)["total"] == 0  # only us violates it
    assert _get(client, "/standards/policies/auto-create/findings", both)["items"][0]["cluster"] == "us"
    missing = client.get("/api/v1/standards/policies/nope/findings", headers={"Authorization": f"Bearer {eu}"})
    assert missing.status_code == 404 and missing.json()["detail"] == "no policy 'nope' visible to you"

    trend = _get(client, "/standards/trend", eu, scope="cluster", limit=1000)["items"]
    assert {t["name"] for t in trend} == {"eu", "dev"}
    fleet_line = _get(client, "/standards/trend", eu, scope="fleet", limit=1000)["items"]
    assert fleet_line[-1]["pairs"] == summary["pairs"]
    # Nothing of the hidden cluster in any answer the eu token got.
    for path in ("/standards", "/standards/clusters", "/standards/policies", "/standards/results",
                 "/standards/policies/auto-create/findings", "/standards/trend"):
        body = _get(client, path, eu, limit=1000) if path != "/standards" else _get(client, path, eu)
        assert '"us"' not in json.dumps(body) and "id-us" not in json.dumps(body), path
