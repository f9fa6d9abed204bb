"""The Search page, the sidebar's search box and the Across page, run through dashboard/app.py (AppTest) on the fixture
lake: what they find, and that a user sees only the clusters granted (login on, st.user seeded)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.unit.dashboard.conftest import APP
from tests.unit.dashboard.lake_fixture import CLUSTERS
from tests.unit.dashboard.test_auth_gate import EU_USER, FLEET, SECRETS
from tests.unit.dashboard.test_pages import _page_text

Open = Callable[..., AppTest]


@pytest.fixture
def run_app(fixture_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Open:
    """Run the app on the fixture lake (login on with a user, or off) on a page with query parameters."""

    def run(page: str, query: dict[str, str] | None = None, *, user: dict[str, Any] | None = None,
            sidebar: str | None = None) -> AppTest:
        fleet = tmp_path / "clusters.toml"
        fleet.write_text(FLEET.format(required="true" if user else "false"), encoding="utf-8")
        monkeypatch.setenv("FLEETVIEW_LAKE", str(fixture_lake))
        monkeypatch.setenv("FLEETVIEW_FLEET", str(fleet))
        app = AppTest.from_file(str(APP), default_timeout=60)
        if user:
            app.secrets.update(SECRETS)
            app.user = {"iat": int(time.time()) - 60, **user}
        app.run()
        app.switch_page(f"../pages/{page}.py")
        for key, value in (query or {}).items():
            app.query_params[key] = value
        app.run()
        if sidebar is not None:
            app.sidebar.text_input(key="app_search").input(sidebar).run()
        assert not app.exception, [e.value for e in app.exception]
        return app

    return run


def _links(app: AppTest) -> list[str]:
    return [str(e.proto.label) for e in app.get("page_link")]


def _hits(app: AppTest) -> Any:
    return next(d.value for d in app.dataframe if "match" in d.value.columns)


def test_the_search_page_finds_topics_with_their_ids_and_links(run_app: Open) -> None:
    app = run_app("search", {"q": "orders"})
    hits = _hits(app)
    current = hits[hits["state"] == "current"]
    assert sorted(zip(current["cluster"], current["id"], strict=True)) == [
        ("prod-eu", "tid-orders-2"), ("prod-us", "tid-orders-us"), ("staging", "tid-orders-st")]
    assert list(hits[hits["state"] == "deleted"]["id"]) == ["tid-orders-1"]  # recreated: the old id ranks last
    assert set(hits["link"]) == {"./across?topic=orders", "./cluster?cluster=prod-eu"}
    assert "4 matches in 3 clusters" in _page_text(app)
    assert app.text_input(key="search_query").value == "orders"


def test_a_refused_regex_says_why(run_app: Open) -> None:
    app = run_app("search", {"q": r"(a)\1"})
    app.segmented_control(key="search_mode").set_value("regex").run()
    assert "no backreferences or lookaround" in app.error[0].value


def test_the_sidebar_box_suggests_and_links_to_all_results(run_app: Open) -> None:
    app = run_app("fleet", sidebar="payments")
    links = _links(app)
    assert any("payments" in label and "prod-eu" in label for label in links)
    assert links[-1] == "All 3 results"


def test_a_user_finds_only_the_granted_clusters(run_app: Open) -> None:
    others = ["prod-us", "staging", CLUSTERS["prod-us"]["id"], CLUSTERS["staging"]["id"], "tid-orders-us",
              "tid-orders-st", "tid-payments-us"]
    app = run_app("search", {"q": "orders"}, user=EU_USER, sidebar="orders")
    text = _page_text(app) + " ".join(_links(app))
    assert [o for o in others if o in text] == []
    hits = _hits(app)
    assert set(hits["cluster"]) == {"prod-eu"} and "2 matches in 1 cluster " in text  # current + recreated
    assert "All 2 results" in _links(app)
    across = run_app("across", {"topic": "orders"}, user=EU_USER)
    text = _page_text(across)
    assert "tid-orders-2" in text and [o for o in others if o in text] == []
    cluster_filter = run_app("search", {"q": "payments"}, user=EU_USER)
    assert all(str(o) not in ("prod-us", "staging") for box in cluster_filter.multiselect for o in box.options)


def test_the_across_page_shows_copies_side_by_side(run_app: Open) -> None:
    app = run_app("across", {"topic": "payments"})
    copies = next(d.value for d in app.dataframe if "replication_factor" in d.value.columns)
    assert sorted(copies["cluster"]) == ["prod-eu", "prod-us"]
    assert set(copies["topic_id"]) == {"tid-payments-eu", "tid-payments-us"}
    assert "min_insync_replicas" in copies.columns
    group = run_app("across", {"group": "no-such-group"})
    assert "No cluster you may view has a consumer group" in _page_text(group)
