"""Fixtures for the dashboard tests: a fixture lake and an AppTest of the real entrypoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.unit.dashboard.lake_fixture import build_lake

APP = Path(__file__).resolve().parents[3] / "dashboard" / "app.py"


@pytest.fixture(scope="session")
def fixture_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake with two polls of three clusters and a full set of pipeline results."""
    return build_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="session")
def snapshots_only_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake that was polled but never analyzed."""
    return build_lake(tmp_path_factory.mktemp("lake_no_results"), with_results=False)


@pytest.fixture
def open_page(monkeypatch: pytest.MonkeyPatch) -> Callable[..., AppTest]:
    """Run dashboard/app.py on a lake and switch to one page; returns the finished AppTest."""

    def run(lake: Path | str, page: str = "fleet", query: dict[str, str] | None = None) -> AppTest:
        monkeypatch.setenv("FLEETVIEW_LAKE", str(lake))
        app = AppTest.from_file(str(APP), default_timeout=60)
        for key, value in (query or {}).items():
            app.query_params[key] = value
        app.run()
        if page != "fleet":
            app.switch_page(f"../pages/{page}.py")
            app.run()
        assert not app.exception, [e.value for e in app.exception]
        return app

    return run
