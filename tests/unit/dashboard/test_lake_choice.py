"""The lake is not a text box: the browser can only pick among the lakes the configuration names."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from backend import jobs
from tests.unit.dashboard.conftest import APP

EVIL = ["/etc", "s3://bucket/lake?endpoint_override=127.0.0.1:9&scheme=http", "file:///root"]


def _app(monkeypatch: pytest.MonkeyPatch, lake: Path, fleet: Path | None = None) -> AppTest:
    monkeypatch.setenv("FLEETVIEW_LAKE", str(lake))
    if fleet is None:
        monkeypatch.setenv("FLEETVIEW_FLEET", str(lake / "no-such-fleet.toml"))
    else:
        monkeypatch.setenv("FLEETVIEW_FLEET", str(fleet))
    return AppTest.from_file(str(APP), default_timeout=60)


def _started_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    started: list[list[str]] = []

    def record(self: jobs.JobRegistry, kind: str, command: list[str], cwd: Path | None = None) -> None:
        started.append(command)

    monkeypatch.setattr(jobs.JobRegistry, "start", record)
    return started


def test_there_is_no_lake_text_box(fixture_lake: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(monkeypatch, fixture_lake)
    app.run()
    assert not app.exception
    assert "app_lake" not in [t.key for t in app.text_input]
    lake_box = app.selectbox(key="app_lake")
    assert lake_box.options == ["default"] and lake_box.disabled


@pytest.mark.parametrize("evil", EVIL)
def test_a_lake_sent_by_the_browser_changes_nothing(fixture_lake: Path, monkeypatch: pytest.MonkeyPatch,
                                                   evil: str) -> None:
    started = _started_commands(monkeypatch)
    app = _app(monkeypatch, fixture_lake)
    app.session_state["app_lake"] = evil
    app.query_params["lake"] = evil
    app.run()
    assert not app.exception
    shown = {str(v) for frame in app.dataframe for v in frame.value.get("cluster", [])}
    assert {"prod-eu", "prod-us", "staging"} <= shown  # still the configured lake's clusters
    app.button(key="app_poll").click().run()
    app.button(key="app_recompute").click().run()
    assert len(started) == 2
    for command in started:
        assert command[command.index("--lake") + 1] == str(fixture_lake)
        assert evil not in command


def test_the_lakes_the_fleet_file_names_can_be_switched(fixture_lake: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(f'[settings]\nlakes = {{ archive = "{archive}" }}\n', encoding="utf-8")
    started = _started_commands(monkeypatch)
    app = _app(monkeypatch, fixture_lake, fleet)
    app.run()
    assert app.selectbox(key="app_lake").options == ["default", "archive"]
    app.selectbox(key="app_lake").select("archive").run()
    assert not app.exception
    assert not [frame for frame in app.dataframe if "cluster" in frame.value.columns]  # the empty archive lake
    app.button(key="app_poll").click().run()
    assert started and started[-1][started[-1].index("--lake") + 1] == str(archive)
