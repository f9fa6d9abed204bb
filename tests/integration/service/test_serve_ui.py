"""The UI that `serve` starts shows the service's jobs, and its Poll now asks the service (no second writer)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

from backend.lab.fleet import LabFleet
from backend.store import readers
from tests.conftest import ARTIFACTS, page_errors, wait_for_streamlit
from tests.integration.service.conftest import write_service_fleet
from tests.integration.service.servicerig import start_service


def _polls(lake: Path) -> int:
    return int(readers.poll_history(lake)["poll_id"].nunique())


def _sidebar(page: Any) -> str:
    return str(page.inner_text("[data-testid='stSidebar']"))


@pytest.mark.slow
def test_the_sidebar_shows_the_service_and_poll_now_asks_it(service_lab: LabFleet, browser: Any, tmp_path: Path) -> None:
    # A long interval: after the first poll, only the button can make another one soon.
    fleet_file = write_service_fleet(service_lab, tmp_path / "clusters.toml", poll_interval_s=600)
    lake = tmp_path / "lake"
    service = start_service(fleet_file, lake, tmp_path / "serve.log", ui=True, extra=["--no-analyze"])
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        service.wait("the first poll", lambda: _polls(lake) == 1)
        service.wait("the UI", lambda: service.component("ui")["up"])
        page.goto(f"http://127.0.0.1:{service.ui_port}/")
        wait_for_streamlit(page, timeout_ms=90000)
        page.wait_for_function("() => document.querySelector('[data-testid=\"stSidebar\"]').innerText"
                               ".includes('Poll: ok')", timeout=30000)
        sidebar = _sidebar(page)
        assert "Service running" in sidebar and "next in" in sidebar, sidebar
        assert page_errors(page) == []
        shots = ARTIFACTS / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "serve-sidebar.png"))

        ui_pid = service.component("ui")["pid"]
        page.get_by_role("button", name="Poll now").click()
        service.wait("the requested poll", lambda: _polls(lake) == 2, 60)
        assert service.component("poll")["runs"] == {"ok": 2}
        # The service ran it: the UI started no poll process of its own.
        started = [p.cmdline() for p in psutil.Process(ui_pid).children(recursive=True)]
        assert not [c for c in started if "poll" in c], started
        assert service.terminate(signal.SIGTERM) < 15
    finally:
        context.close()
        service.kill()
