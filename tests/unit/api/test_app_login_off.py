"""The API in process (Starlette's test client) over an empty lake with login off: loopback only, problem+json,
ETag/304, one audit record per request."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from backend.api.app import ApiSettings, create_app
from backend.audit.store import read_audit

FLEET = '[[clusters]]\nname = "eu"\nbootstrap_servers = ["127.0.0.1:9"]\n'


def _app(tmp_path: Path, address: str = "127.0.0.1") -> tuple[TestClient, Path]:
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(FLEET, encoding="utf-8")
    journals = tmp_path / "audit"
    app = create_app(ApiSettings(lake=str(tmp_path / "lake"), fleet_file=fleet, journal_dir=journals,
                                 address=address))
    return TestClient(app, client=("127.0.0.1", 40000)), journals


def test_login_off_serves_loopback_with_etags_and_problems(tmp_path: Path) -> None:
    client, journals = _app(tmp_path)
    with client:
        first = client.get("/api/v1/clusters")
        assert first.status_code == 200 and first.json() == {"items": [], "total": 0, "limit": 100, "next_cursor": None}
        assert client.get("/api/v1/clusters", headers={"If-None-Match": first.headers["etag"]}).status_code == 304
        missing = client.get("/api/v1/clusters/eu")
        assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
        assert client.get("/api/v1/me").json() == {"login": False, "subject": "", "groups": [], "clusters": 1,
                                                    "audit": True}
        bad = client.get("/api/v1/clusters", params={"tag": "no-selector"})
        assert bad.status_code == 400 and bad.json()["title"] == "Bad request"
        assert client.delete("/api/v1/clusters").status_code == 405
        assert client.get("/api/v1/readiness").status_code == 200
    records = read_audit(str(tmp_path / "lake"), journals)
    assert list(records.sort_values("at")["status"].astype(int)) == [200, 304, 404, 200, 400, 405, 200]
    assert list(records.sort_values("at")["kind"])[2] == "refusal"  # a cluster that is not there, as one not granted


def test_login_off_refuses_a_client_that_is_not_on_loopback(tmp_path: Path) -> None:
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(FLEET, encoding="utf-8")
    app = create_app(ApiSettings(lake=str(tmp_path / "lake"), fleet_file=fleet, journal_dir=None))
    with TestClient(app, client=("192.0.2.7", 40000)) as client:
        refused = client.get("/api/v1/clusters")
    assert refused.status_code == 403 and "loopback" in refused.json()["detail"]
