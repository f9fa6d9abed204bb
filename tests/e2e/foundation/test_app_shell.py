"""Real headless Chromium loads the app shell served by `streamlit run`, with no exception on the page."""

from __future__ import annotations

from typing import Any

from tests.conftest import StreamlitServer, page_errors, wait_for_streamlit


def test_chromium_loads_the_app_shell(app_server: StreamlitServer, page: Any) -> None:
    response = page.goto(app_server.url, wait_until="domcontentloaded")
    assert response is not None and response.ok
    wait_for_streamlit(page)
    assert page_errors(page) == []
    nav = page.inner_text("[data-testid='stSidebarNav']")
    for title in ("Fleet", "Cluster", "Compare", "Client configs", "Alerts", "Export"):
        assert title in nav, nav
    # First run: an empty lake explains what to do instead of failing.
    assert "make demo" in page.inner_text("[data-testid='stMain']") or "python -m backend poll" in page.inner_text("[data-testid='stMain']")
