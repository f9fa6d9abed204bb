"""The login gate and the filtered readers, run through dashboard/app.py with AppTest (st.user seeded).

The real login, through a real OpenID Connect provider in Chromium, is tests/e2e/auth; these check the same rules
on every page quickly, on the three-cluster fixture lake.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from tests.unit.dashboard.conftest import APP
from tests.unit.dashboard.lake_fixture import CLUSTERS
from tests.unit.dashboard.test_pages import PAGES, _page_text

SECRETS = {"auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
                    "client_id": "fleetview", "client_secret": "s", "server_metadata_url":
                        "http://127.0.0.1:9/.well-known/openid-configuration"}}
FLEET = """[auth]
required = {required}
max_session_hours = 12

[[clusters]]
name = "prod-eu"
bootstrap_servers = "127.0.0.1:9"
access = {{ view = ["group:eu"] }}

[[clusters]]
name = "prod-us"
bootstrap_servers = "127.0.0.1:9"

[[clusters]]
name = "staging"
bootstrap_servers = "127.0.0.1:9"
access = {{ operate = ["group:ops"] }}
"""
EU_USER = {"is_logged_in": True, "email": "eu@example.com", "sub": "eu", "groups": ["eu"]}
Open = Callable[..., AppTest]


@pytest.fixture
def gated(fixture_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Open:
    """Run the app on the fixture lake with login on (or as given), as a user, on a page."""

    def run(user: dict[str, Any] | None, page: str = "fleet", query: dict[str, str] | None = None, *,
            required: str = "true", secrets: bool = True) -> AppTest:
        fleet = tmp_path / "clusters.toml"
        fleet.write_text(FLEET.format(required=required), encoding="utf-8")
        monkeypatch.setenv("FLEETVIEW_LAKE", str(fixture_lake))
        monkeypatch.setenv("FLEETVIEW_FLEET", str(fleet))
        app = AppTest.from_file(str(APP), default_timeout=60)
        if secrets:
            app.secrets.update(SECRETS)
        app.user = {"iat": int(time.time()) - 60, **user} if user and user.get("is_logged_in") else dict(user or {})
        for key, value in (query or {}).items():
            app.query_params[key] = value
        app.run()
        if page != "fleet" and user and user.get("is_logged_in"):
            app.switch_page(f"../pages/{page}.py")
            app.run()
        assert not app.exception, [e.value for e in app.exception]
        return app

    return run


def _others() -> list[str]:
    return ["prod-us", "staging", CLUSTERS["prod-us"]["id"], CLUSTERS["staging"]["id"]]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_shows_only_the_granted_cluster(gated: Open, page: str) -> None:
    app = gated(EU_USER, page)
    text = _page_text(app) + " ".join(str(o) for box in app.selectbox for o in box.options)
    text += " ".join(str(o) for box in app.multiselect for o in box.options)
    assert [other for other in _others() if other in text] == []
    if page in ("fleet", "cluster", "client_configs", "alerts"):
        assert "prod-eu" in text


def test_logged_out_sees_the_login_page_and_nothing_else(gated: Open) -> None:
    app = gated({"is_logged_in": False}, query={"cluster": "prod-eu"})
    assert [t.value for t in app.title] == ["Kafka fleet view"]
    assert app.button(key="auth_login").label == "Log in"
    text = _page_text(app)
    assert not any(name in text for name in CLUSTERS) and not app.dataframe and not app.sidebar.selectbox


def test_login_on_without_a_provider_in_the_secrets_says_so(gated: Open) -> None:
    app = gated(EU_USER, secrets=False)
    assert "no usable [auth] section" in app.error[0].value
    assert not app.dataframe


def test_a_user_without_a_grant_gets_no_access(gated: Open) -> None:
    app = gated({**EU_USER, "groups": ["nobody"], "email": "x@example.com"})
    assert [t.value for t in app.title] == ["No access"]
    assert "x@example.com" in app.error[0].value and "no cluster" in app.error[0].value
    assert not app.dataframe


def test_an_old_session_is_sent_to_the_login_page(gated: Open) -> None:
    app = gated({**EU_USER, "iat": int(time.time()) - 13 * 3600})
    assert app.button(key="auth_login")
    assert "Your session has ended" in app.info[0].value
    assert not app.dataframe


def test_a_hidden_and_a_missing_cluster_read_the_same_no_access(gated: Open) -> None:
    texts = []
    for name in ("staging", "no-such-cluster"):
        app = gated(EU_USER, "cluster", {"cluster": name})
        assert app.error[0].value.startswith("No access to cluster")
        texts.append(app.error[0].value.replace(name, "NAME"))
        assert not app.dataframe
    assert texts[0] == texts[1]


def test_poll_now_and_recompute_need_operate_on_every_cluster(gated: Open) -> None:
    viewer = gated(EU_USER)
    assert not [b for b in viewer.sidebar.button if b.key in ("app_poll", "app_recompute")]
    ops = gated({**EU_USER, "groups": ["eu", "ops"]})  # operate on staging only: still not every cluster
    assert not [b for b in ops.sidebar.button if b.key in ("app_poll", "app_recompute")]
    open_app = gated({}, required="false")  # login off on loopback: everyone operates, as before
    assert {b.key for b in open_app.sidebar.button} >= {"app_poll", "app_recompute"}


def test_ingest_counts_are_for_those_who_see_every_cluster(gated: Open) -> None:
    app = gated(EU_USER, "client_configs")
    assert not [m for m in app.metric if m.label.startswith("records read")]
    assert any("shown only to those who may view every cluster" in c.value for c in app.caption)


@pytest.fixture
def address() -> Any:
    """Set Streamlit's server.address for one test (AppTest runs in this process)."""
    before = st_config.get_option("server.address")

    def set_address(value: str) -> None:
        st_config.set_option("server.address", value)

    yield set_address
    st_config.set_option("server.address", before)


def test_without_login_the_app_refuses_a_non_loopback_address(gated: Open, address: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    address("0.0.0.0")
    monkeypatch.delenv("FLEETVIEW_INSECURE_NO_LOGIN", raising=False)
    app = gated({}, required="false")  # the fleet file's exception alone is not enough
    assert [t.value for t in app.title] == ["Not served"] and "--insecure-no-login" in app.error[0].value
    assert not app.dataframe
    monkeypatch.setenv("FLEETVIEW_INSECURE_NO_LOGIN", "1")
    app = gated({}, required="false")
    assert "Login is off" in app.warning[0].value and app.dataframe  # served, with the banner on every page
    app.switch_page("../pages/alerts.py")
    app.run()
    assert "Login is off" in app.warning[0].value
    assert gated(EU_USER, required="true").dataframe  # login on: any address


def test_a_broken_fleet_file_shows_nothing(gated: Open, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           fixture_lake: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[auth]\nrequired = tru\n", encoding="utf-8")
    monkeypatch.setenv("FLEETVIEW_LAKE", str(fixture_lake))
    monkeypatch.setenv("FLEETVIEW_FLEET", str(broken))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    assert [t.value for t in app.title] == ["Fleet file problem"] and str(broken) in app.error[0].value
    assert not app.dataframe


def test_after_log_out_the_same_login_is_refused(gated: Open) -> None:
    app = gated({**EU_USER, "nonce": "n-logout-test"})
    old = dict(app.user)
    app.sidebar.button(key="auth_logout").click().run()
    app.run()  # in a browser, st.logout() redirects; here the next run is the logged-out one
    assert app.button(key="auth_login")
    app.user = old  # the same login presented again, as a copied cookie would
    app.run()
    assert app.button(key="auth_login") and "Your session has ended" in app.info[0].value
    app.user = {**old, "nonce": "n-a-new-login", "iat": old["iat"] + 1}
    app.run()
    assert app.dataframe  # a new login is let in
