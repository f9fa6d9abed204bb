"""Login in real Chromium through a real OpenID Connect provider: who sees what, on every page and in every export.

What the server sends the browser is read off the wire (every WebSocket frame of the session) and from the
downloaded files, so "not shown" means "never sent", not "not drawn".
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import page_errors, wait_for_streamlit
from tests.e2e.auth.conftest import GRANTED, HIDDEN_TOPICS, USERS, AuthApp, block_the_internet, login

# One chart per kind of data: brokers, version history, incidents, drift, client software, per-key shares.
EXPORTED_CHARTS = ("Broker versions by cluster", "Upgrade timeline", "Alerts over time", "Config drift heatmap",
                   "Client software per cluster", "Client config overview (dominant value share)")


class Wire:
    """Every WebSocket frame the app sends to one page (protobuf with Arrow tables and Plotly JSON inside)."""

    def __init__(self, page: Any) -> None:
        self.frames: list[bytes] = []
        page.on("websocket", self._attach)

    def _attach(self, socket: Any) -> None:
        socket.on("framereceived", lambda data: self.frames.append(data if isinstance(data, bytes) else data.encode()))

    def holds(self, text: str) -> bool:
        """Whether any frame carries the text."""
        needle = text.encode("utf-8")
        return any(needle in frame for frame in self.frames)


def secrets_of(app: AuthApp, names: list[str]) -> list[str]:
    """Names, cluster ids, topic ids and distinctive topic names of the given lab clusters."""
    found = list(names) + [app.lab.cluster_ids[n] for n in names if app.lab.cluster_ids.get(n)]
    found += [topic_id for n in names for topic_id in app.lab.topic_ids[n]]
    return found + [t for n in names for t in app.lab.topics[n] if t in HIDDEN_TOPICS]


def leaked(app: AuthApp, wire: Wire, names: list[str]) -> list[str]:
    """Which names, ids or topics of the given clusters went over the wire."""
    return [text for text in secrets_of(app, names) if wire.holds(text)]


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A fresh browser context that reaches only the app and the provider; downloads allowed."""
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
    block_the_internet(ctx)
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def viewer_state(auth_app: AuthApp, browser: Any) -> dict[str, Any]:
    """The viewer's cookies after one real login (so several tests need not log in again)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    block_the_internet(ctx)
    try:
        page = ctx.new_page()
        login(page, auth_app, "viewer")
        page.get_by_role("heading", name="Fleet").first.wait_for(timeout=60000)
        return dict(ctx.storage_state())
    finally:
        ctx.close()


@pytest.fixture
def viewer(browser: Any, viewer_state: dict[str, Any]) -> Iterator[Any]:
    """A fresh context holding the viewer's login cookies."""
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000},
                              storage_state=viewer_state)  # type: ignore[arg-type]
    block_the_internet(ctx)
    yield ctx
    ctx.close()


def _open(page: Any, url: str, heading: str | None = None, marker: str | None = None) -> None:
    page.goto(url)
    wait_for_streamlit(page)
    if heading:
        page.get_by_role("heading", name=heading).first.wait_for(timeout=60000)
    if marker:
        page.get_by_test_id(marker).first.wait_for(timeout=60000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60000)
    wait_for_streamlit(page)


def _options(page: Any, label: str) -> list[str]:
    """The options of a select box or multiselect, as the browser lists them."""
    widget = page.get_by_test_id("stSelectbox").or_(page.get_by_test_id("stMultiSelect")).filter(has_text=label).first
    widget.scroll_into_view_if_needed()
    widget.locator("input").first.click()
    options = page.get_by_role("option")
    try:
        options.first.wait_for(timeout=5000)
    except Exception:  # noqa: BLE001 - a click that only focused the box: open it from the keyboard
        page.keyboard.press("ArrowDown")
        options.first.wait_for(timeout=30000)
    found = [o.inner_text().strip() for o in options.all() if o.inner_text().strip() != "Select all"]
    page.keyboard.press("Escape")
    return found


def without_plotly_js(html: str) -> str:
    """An exported HTML file without the inlined plotly.js library (whose code holds words such as "scratch")."""
    from plotly.offline import get_plotlyjs

    library = get_plotlyjs()
    assert library in html
    return html.replace(library, "")


def _download(page: Any, label: str, tmp_path: Path) -> bytes:
    with page.expect_download(timeout=120000) as info:
        page.get_by_test_id("stDownloadButton").filter(has_text=label).first.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    return target.read_bytes()


def _login_page_only(page: Any) -> None:
    page.get_by_role("button", name="Log in").wait_for(timeout=60000)
    wait_for_streamlit(page)
    assert page.get_by_test_id("stSidebarNav").count() == 0
    assert page.get_by_test_id("stDataFrame").count() == 0


def test_the_login_page_shows_nothing_of_the_fleet(auth_app: AuthApp, context: Any) -> None:
    page = context.new_page()
    wire = Wire(page)
    for path in ("", "cluster?cluster=prod-eu", "export"):
        _open(page, f"{auth_app.url}/{path}")
        _login_page_only(page)
    every = list(auth_app.lab.cluster_ids)
    assert set(leaked(auth_app, wire, every)) <= {"prod-eu"}  # at most the echo of the URL the browser asked for
    assert not any(wire.holds(auth_app.lab.cluster_ids[n]) for n in every)
    assert "Log in" in page.inner_text("body") and page_errors(page) == []


def test_the_viewer_sees_exactly_the_two_granted_clusters_on_every_page(auth_app: AuthApp, viewer: Any) -> None:
    page = viewer.new_page()
    wire = Wire(page)
    # Fleet: tiles count two clusters; the upgrade timeline chart too.
    _open(page, f"{auth_app.url}/", "Fleet", "stDataFrame")
    assert page.get_by_test_id("stMetric").first.inner_text().split("\n")[-1].strip() == "2"
    assert _options(page, "Open cluster") == list(GRANTED)
    page.get_by_text("Timeline chart").click()
    page.get_by_test_id("stPlotlyChart").first.wait_for(timeout=60000)
    wait_for_streamlit(page)
    # Cluster: only the two can be chosen; a link to one shows it.
    _open(page, f"{auth_app.url}/cluster?cluster=prod-us", "Cluster", "stDataFrame")
    assert sorted(_options(page, "Cluster")) == sorted(GRANTED)
    assert auth_app.lab.cluster_ids["prod-us"] in page.get_by_test_id("stCode").first.inner_text()
    # Compare: the two are the default pair, the only two there are; the drift heatmap is drawn.
    _open(page, f"{auth_app.url}/compare", "Compare clusters", "stPlotlyChart")
    chosen = page.get_by_test_id("stMultiSelect").filter(has_text="Clusters (two or more)").inner_text()
    assert all(name in chosen for name in GRANTED)
    # Client configs and Alerts: cluster filters list the two at most.
    _open(page, f"{auth_app.url}/client_configs", "Client configs", "stPlotlyChart")
    assert set(_options(page, "Cluster")) <= set(GRANTED)
    assert "shown only to those who may view every cluster" in page.inner_text("body")
    _open(page, f"{auth_app.url}/alerts", "Alerts", "stDataFrame")
    assert set(_options(page, "Cluster")) <= set(GRANTED)
    page.get_by_text("Chart of alerts opened").click()
    page.get_by_test_id("stPlotlyChart").first.wait_for(timeout=60000)
    wait_for_streamlit(page)
    _open(page, f"{auth_app.url}/export", "Export", "stDownloadButton")
    assert page_errors(page) == []

    hidden = auth_app.lab.hidden_names()
    assert len(hidden) == 5
    assert leaked(auth_app, wire, hidden) == []
    assert all(wire.holds(name) for name in GRANTED)
    assert all(wire.holds(auth_app.lab.cluster_ids[name]) for name in GRANTED)
    assert wire.holds("compression.type")  # client-config results of the granted clusters did arrive


def test_every_export_and_the_report_hold_only_the_granted_clusters(auth_app: AuthApp, viewer: Any,
                                                                   tmp_path: Path) -> None:
    page = viewer.new_page()
    wire = Wire(page)
    _open(page, f"{auth_app.url}/export", "Export", "stDownloadButton")
    hidden = secrets_of(auth_app, auth_app.lab.hidden_names())
    files: dict[str, bytes] = {}
    for chart in EXPORTED_CHARTS:
        page.get_by_test_id("stSelectbox").filter(has_text="Chart").click()
        page.keyboard.type(chart)  # the list is long and virtualised: filter it to the one option
        page.get_by_role("option", name=chart, exact=True).click()
        wait_for_streamlit(page)
        page.get_by_test_id("stPlotlyChart").first.wait_for(timeout=60000)
        formats = ("CSV", "Parquet", "HTML", "SVG", "PNG") if chart == EXPORTED_CHARTS[0] else ("CSV", "Parquet", "HTML")
        for fmt in formats:
            files[f"{chart}.{fmt}"] = _download(page, fmt, tmp_path)
    for name, content in files.items():
        if name.endswith(".Parquet"):
            assert content[:4] == b"PAR1"
            table = pq.read_table(io.BytesIO(content))
            text = json.dumps(table.to_pylist(), default=str)
        elif name.endswith(".PNG"):
            assert content.startswith(b"\x89PNG\r\n\x1a\n")
            continue  # pixels: the SVG of the same figure is read instead
        elif name.endswith(".HTML"):
            text = without_plotly_js(content.decode("utf-8"))
        else:
            text = content.decode("utf-8")
        assert [h for h in hidden if h in text] == [], name
    assert "prod-eu" in files["Broker versions by cluster.CSV"].decode()
    assert "prod-us" in files["Broker versions by cluster.SVG"].decode()
    assert "prod-eu" in files["Client software per cluster.CSV"].decode()

    # The report: only the two can be chosen, and the file names nothing else.
    assert sorted(_options(page, "Clusters")) == sorted(GRANTED)
    box = page.get_by_test_id("stMultiSelect").filter(has_text="Clusters")
    for count, name in enumerate(GRANTED, start=1):
        box.locator("input").first.click()
        page.get_by_role("option", name=name).click()
        page.keyboard.press("Escape")
        wait_for_streamlit(page)
        # One cluster first: its drift heatmap pairs it with every cluster there is, so scope matters most here.
        report = without_plotly_js(_download(page, "Download drift report", tmp_path).decode())
        assert "<h1>Client config drift</h1>" in report and all(n in report for n in GRANTED[:count])
        assert [h for h in hidden if h in report] == [], count
    assert leaked(auth_app, wire, auth_app.lab.hidden_names()) == []


def test_a_cluster_one_may_not_view_is_no_access_whether_or_not_it_exists(auth_app: AuthApp, viewer: Any) -> None:
    page = viewer.new_page()
    wire = Wire(page)
    messages = {}
    for name in ("edge-rp", "no-such-cluster"):
        _open(page, f"{auth_app.url}/cluster?cluster={name}", "Cluster")
        page.get_by_text("No access to cluster").first.wait_for(timeout=30000)
        messages[name] = page.get_by_test_id("stMain").inner_text().replace(name, "NAME")
        assert page.get_by_test_id("stDataFrame").count() == 0
    assert messages["edge-rp"] == messages["no-such-cluster"]  # nothing says that one of them exists
    hidden = [h for h in secrets_of(auth_app, auth_app.lab.hidden_names()) if h != "edge-rp"]
    assert [h for h in hidden if wire.holds(h)] == []


def test_a_view_only_user_has_no_poll_now_and_an_operator_has(auth_app: AuthApp, viewer: Any, context: Any) -> None:
    page = viewer.new_page()
    _open(page, f"{auth_app.url}/", "Fleet", "stDataFrame")
    sidebar = page.get_by_test_id("stSidebar")
    assert sidebar.get_by_role("button", name="Poll now").count() == 0
    assert sidebar.get_by_role("button", name="Recompute").count() == 0
    assert "need the operate role" in sidebar.inner_text()
    assert "viewer@example.com" in sidebar.inner_text()

    ops = context.new_page()
    login(ops, auth_app, "operator")
    _open(ops, f"{auth_app.url}/", "Fleet", "stDataFrame")
    ops_sidebar = ops.get_by_test_id("stSidebar")
    assert ops_sidebar.get_by_role("button", name="Poll now").count() == 1
    assert ops_sidebar.get_by_role("button", name="Recompute").count() == 1
    assert ops.get_by_test_id("stMetric").first.inner_text().split("\n")[-1].strip() == "7"


def test_a_nested_keycloak_roles_claim_grants_its_cluster(auth_app: AuthApp, context: Any) -> None:
    page = context.new_page()
    wire = Wire(page)
    login(page, auth_app, "keycloak")
    _open(page, f"{auth_app.url}/cluster", "Cluster", "stDataFrame")
    assert _options(page, "Cluster") == ["prod-us"]
    assert leaked(auth_app, wire, [n for n in auth_app.lab.cluster_ids if n != "prod-us"]) == []


@pytest.mark.parametrize("user", ["nogrant", "stranger"])
def test_a_user_without_a_grant_gets_a_clear_no_access_page(auth_app: AuthApp, context: Any, user: str) -> None:
    page = context.new_page()
    wire = Wire(page)
    login(page, auth_app, user)
    page.get_by_role("heading", name="No access").wait_for(timeout=60000)
    text = page.get_by_test_id("stMain").inner_text()
    assert USERS[user]["email"] in text
    assert ("your groups may not log in" in text) == (user == "stranger")
    assert ("no cluster of this fleet view is granted to you" in text) == (user == "nogrant")
    _open(page, f"{auth_app.url}/cluster?cluster=prod-eu")
    page.get_by_role("heading", name="No access").wait_for(timeout=60000)
    assert leaked(auth_app, wire, [n for n in auth_app.lab.cluster_ids if n != "prod-eu"]) == []
    assert not wire.holds(auth_app.lab.cluster_ids["prod-eu"])
    assert page.get_by_test_id("stSidebarNav").count() == 0
    page.get_by_role("button", name="Log out").wait_for()


def test_logout_works_and_the_old_cookie_is_refused_afterwards(auth_app: AuthApp, context: Any) -> None:
    page = context.new_page()
    login(page, auth_app, "viewer")
    page.get_by_role("heading", name="Fleet").first.wait_for(timeout=60000)
    before = [c for c in context.cookies() if c["name"].startswith("_streamlit_user")]
    assert before
    page.get_by_test_id("stSidebar").get_by_role("button", name="Log out").click()
    # Streamlit ends the provider's session too (end_session_endpoint), which asks first.
    page.get_by_role("button", name="Yes, sign me out").click(timeout=60000)
    page.wait_for_url(lambda u: u.startswith(auth_app.url), timeout=60000)
    _login_page_only(page)
    assert [c for c in context.cookies() if c["name"].startswith("_streamlit_user")] == []
    # A copy of the cookie taken before logging out is a stale login: refused.
    context.add_cookies(before)
    _open(page, f"{auth_app.url}/")
    _login_page_only(page)
    assert "Your session has ended" in page.inner_text("body")
    # Still refused by a restarted UI: the ended login is kept with the service's state, not in the process.
    auth_app.restart()
    context.clear_cookies()
    context.add_cookies(before)
    _open(page, f"{auth_app.url}/")
    _login_page_only(page)
    assert "Your session has ended" in page.inner_text("body")


def test_a_forged_cookie_leads_to_the_login_page(auth_app: AuthApp, context: Any, viewer_state: dict[str, Any]) -> None:
    from streamlit.web.server.starlette.starlette_app_utils import create_signed_value

    claims = {"email": "ops@example.com", "email_verified": True, "groups": ["kafka-admins"], "sub": "operator",
              "iat": 4102444800, "is_logged_in": True, "provider": "default", "origin": auth_app.url}
    real = next(c for c in viewer_state["cookies"] if c["name"] == "_streamlit_user")
    forgeries = [
        create_signed_value("not-the-server-secret", "_streamlit_user", json.dumps(claims)).decode(),  # wrong key
        json.dumps(claims),  # not signed at all
        real["value"][:-4] + ("AAAA" if not real["value"].endswith("AAAA") else "BBBB"),  # a real one, tampered
    ]
    page = context.new_page()
    for value in forgeries:
        context.clear_cookies()
        context.add_cookies([{**real, "value": value}])
        _open(page, f"{auth_app.url}/")
        _login_page_only(page)


def test_a_session_older_than_max_session_hours_is_logged_out(auth_app: AuthApp, viewer: Any) -> None:
    page = viewer.new_page()
    _open(page, f"{auth_app.url}/", "Fleet", "stDataFrame")
    try:
        auth_app.set_max_session_hours(0.0001)  # 0.36 s: the viewer's login is older than that by now
        page.get_by_text("Timeline chart").click()  # the open session's next run ends it
        _login_page_only(page)
        _open(page, f"{auth_app.url}/")  # and so does a new visit with the same cookie
        _login_page_only(page)
        assert "Your session has ended (sessions last 0.0001 hours" in page.inner_text("body")
    finally:
        auth_app.set_max_session_hours(12)
    _open(page, f"{auth_app.url}/", "Fleet", "stDataFrame")  # within 12 hours, the same cookie is good again
