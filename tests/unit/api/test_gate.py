"""The gate in process (Starlette's test client) over the fixture lake with login on: a memoised answer keeps every
promise of a computed one (grants, ETag/304, gzip, rate limit, one audit record per call, the token checked), answers
never cross scopes, and the next generation is warmed without a caller asking (and without an audit record)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from backend.api import queries
from backend.api.answers import answer_key, encode, normal_query
from backend.api.app import ApiSettings, create_app
from backend.api.tokens import Provider, TokenVerifier
from backend.audit.store import read_audit
from tests.unit.api.test_tokens import AUDIENCE, ISSUER, Idp
from tests.unit.dashboard.lake_fixture import build_lake

METADATA = f"{ISSUER}/.well-known/openid-configuration"
FLEET = f"""[auth]
required = true
api_audience = "{AUDIENCE}"

[[clusters]]
name = "prod-eu"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:eu"] }}

[[clusters]]
name = "prod-us"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:us"] }}

[[clusters]]
name = "staging"
bootstrap_servers = ["127.0.0.1:9"]
access = {{ view = ["group:eu", "group:us"] }}
"""


class Clock:
    """The verifier's clock, moved by the test."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[TestClient, Any, Idp, Clock, Path]]:
    lake = build_lake(tmp_path / "lake")
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(FLEET, encoding="utf-8")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'[auth]\nserver_metadata_url = "{METADATA}"\nclient_id = "fleetview"\n', encoding="utf-8")
    journals = tmp_path / "audit"
    app = create_app(ApiSettings(lake=str(lake), fleet_file=fleet, journal_dir=journals, secrets_file=str(secrets),
                                 rate_per_s=1000.0, rate_burst=1000))
    idp, clock = Idp(), Clock()
    state = app.state.api
    state._verifiers[(METADATA, AUDIENCE)] = TokenVerifier(Provider(METADATA, AUDIENCE), fetch=idp.fetch,
                                                          refresh_min_s=0.0, now=clock)
    with TestClient(app, client=("127.0.0.1", 40000)) as client:
        yield client, state, idp, clock, journals


def _get(client: TestClient, path: str, token: str | None, **headers: str) -> Any:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return client.get(f"/api/v1{path}", headers=headers)


def test_a_memoised_answer_keeps_every_promise_and_never_crosses_scopes(
        gated: tuple[TestClient, Any, Idp, Clock, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    client, state, idp, clock, journals = gated
    computed: list[int] = []
    clusters_frame = queries.clusters_frame

    def counting(*args: Any, **kwargs: Any) -> Any:
        computed.append(1)
        return clusters_frame(*args, **kwargs)

    monkeypatch.setattr(queries, "clusters_frame", counting)
    eu, us = idp.token(sub="eu-machine", groups=["eu"]), idp.token(sub="us-machine", groups=["us"])

    first = _get(client, "/clusters", eu)
    again = _get(client, "/clusters", eu)
    assert first.status_code == again.status_code == 200
    assert {c["name"] for c in first.json()["items"]} == {"prod-eu", "staging"}
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert len(computed) == 1, "the repeat was computed again instead of memoised"
    assert _get(client, "/clusters", eu, **{"If-None-Match": first.headers["etag"]}).status_code == 304
    # Another scope asking the same question gets its own answer (the memo is per set of visible clusters).
    other = _get(client, "/clusters", us)
    assert {c["name"] for c in other.json()["items"]} == {"prod-us", "staging"}
    assert other.headers["etag"] != first.headers["etag"] and len(computed) == 2
    # A hidden cluster does not exist, memoised or not; no token, a forged one: 401 before any memo is looked at.
    for _ in range(2):
        hidden = _get(client, "/clusters/prod-us", eu)
        assert hidden.status_code == 404 and hidden.headers["content-type"] == "application/problem+json"
    assert _get(client, "/clusters", None).status_code == 401
    header, body, _ = eu.split(".")
    assert _get(client, "/clusters", f"{header}.{body}.AAAA").status_code == 401
    # gzip: the same bytes, compressed once; the list parameters keep their order in the memo's key.
    big = _get(client, "/topics", eu, **{"Accept-Encoding": "gzip"})
    big_again = _get(client, "/topics", eu, **{"Accept-Encoding": "gzip"})
    assert big.headers["content-encoding"] == big_again.headers["content-encoding"] == "gzip"
    assert big.content == big_again.content and big.headers["vary"] == "Authorization, Accept-Encoding"
    plain = client.get("/api/v1/topics", headers={"Authorization": f"Bearer {eu}", "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.json() == big.json()
    swapped = [_get(client, f"/configs/compare?cluster={a}&cluster={b}", eu).json()
               for a, b in (("prod-eu", "staging"), ("staging", "prod-eu"))]
    assert [list(r[0]["values"]) for r in swapped] == [["prod-eu", "staging"], ["staging", "prod-eu"]]
    # The token stays checked: once past its expiry (and the leeway), the memo does not answer it.
    clock.offset = 400
    expired = _get(client, "/clusters", eu)
    assert expired.status_code == 401 and "expired" in expired.json()["detail"]
    clock.offset = 0
    # One audit record per call, memoised or not, with what it answered.
    records = read_audit(state.lake, journals).sort_values("at")
    mine = records[records["action"] == "GET /api/v1/clusters"]
    assert list(mine["status"].astype(int)) == [200, 200, 304, 200, 401, 401, 401]
    assert list(mine["subject"])[:4] == ["eu-machine", "eu-machine", "eu-machine", "us-machine"]
    assert set(records["kind"][records["status"] == 404]) == {"refusal"}
    assert len(records) == 2 + 1 + 1 + 2 + 2 + 3 + 2 + 1


def test_the_rate_limit_holds_for_memoised_answers(tmp_path: Path) -> None:
    fleet = tmp_path / "clusters.toml"
    fleet.write_text('[[clusters]]\nname = "eu"\nbootstrap_servers = ["127.0.0.1:9"]\n', encoding="utf-8")
    app = create_app(ApiSettings(lake=str(build_lake(tmp_path / "lake")), fleet_file=fleet,
                                 journal_dir=tmp_path / "audit", rate_per_s=0.001, rate_burst=5))
    with TestClient(app, client=("127.0.0.1", 40000)) as client:
        statuses = [client.get("/api/v1/clusters").status_code for _ in range(7)]
    assert statuses == [200] * 5 + [429] * 2


def test_the_next_generation_is_warmed_before_the_current_one_expires(
        gated: tuple[TestClient, Any, Idp, Clock, Path]) -> None:
    client, state, idp, _, journals = gated
    state.lakes.ttl_s = 1.0
    token = idp.token(sub="eu-machine", groups=["eu"])
    assert _get(client, "/groups?status=stalled", token).status_code == 200
    visible = ("prod-eu", "staging")
    first = state.lakes.peek(visible)
    key = answer_key("/api/v1/groups", b"status=stalled")
    assert first is not None and first.peek(key) is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        current = state.lakes.peek(visible)
        if current is not None and current is not first and current.peek(key) is not None:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("no refreshed generation holds the answer")
    assert state.gate.refreshes >= 1
    # Nobody asked: a refresh leaves no audit record.
    assert len(read_audit(state.lake, journals)) == 1
    # Without callers, nothing is warmed again: the generation expires and the next caller reads afresh.
    time.sleep(2.5 * state.lakes.ttl_s)
    assert state.lakes.peek(visible) is None


def test_answers_are_encoded_once_with_their_headers() -> None:
    body = b'{"items": [' + b",".join(b'{"name": "topic-%05d"}' % i for i in range(100)) + b"]}"
    answer = encode(200, [(b"content-type", b"application/json"), (b"content-length", b"1"),
                          (b"vary", b"Authorization")], body, tag=True)
    status, headers, sent = answer.choose(None, accepts_gzip=True)
    named = dict(headers)
    assert status == 200 and named[b"content-encoding"] == b"gzip" and int(named[b"content-length"]) == len(sent)
    assert named[b"vary"] == b"Authorization, Accept-Encoding" and named[b"etag"].startswith(b'W/"')
    status, headers, sent = answer.choose(named[b"etag"].decode().removeprefix("W/"), accepts_gzip=True)
    assert status == 304 and sent == b"" and b"content-type" not in dict(headers)
    status, headers, sent = answer.choose(None, accepts_gzip=False)
    assert sent == body and b"content-encoding" not in dict(headers)
    small = encode(200, [(b"content-type", b"application/json")], b"[]", tag=True)
    assert small.gzipped is None and b"vary" not in dict(small.identity_headers)
    assert normal_query(b"cluster=b&limit=5&cluster=a") == (("cluster", "b"), ("cluster", "a"), ("limit", "5"))
    assert normal_query(b"limit=5&cluster=b") == normal_query(b"cluster=b&limit=5")
