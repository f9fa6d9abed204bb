"""The dashboard in real headless Chromium against `streamlit run`, on a fixture lake."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ARTIFACTS, StreamlitServer, page_errors, wait_for_streamlit
from tests.rig.procs import REPO
from tests.unit.dashboard.lake_fixture import SECRET_VALUE, build_lake
from tests.unit.dashboard.test_report import external_references

SCREENSHOTS = ARTIFACTS / "screenshots"
# url path -> (heading, a test id that only a finished render of that page shows)
PAGES = {"": ("Fleet", "stDataFrame"), "fleet": ("Fleet", "stDataFrame"), "cluster": ("Cluster", "stDataFrame"),
         "compare": ("Compare clusters", "stPlotlyChart"), "client_configs": ("Client configs", "stPlotlyChart"),
         "alerts": ("Alerts", "stDataFrame"), "export": ("Export", "stDownloadButton")}


@pytest.fixture(scope="module")
def ui_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture lake the UI tests look at."""
    return build_lake(tmp_path_factory.mktemp("ui-lake"))


@pytest.fixture(scope="module")
def fleet_server(streamlit_app: Callable[..., StreamlitServer], ui_lake: Path) -> StreamlitServer:
    """The app served on the fixture lake."""
    return streamlit_app(ui_lake)


def _open(page: Any, url: str) -> None:
    page.goto(url)
    wait_for_streamlit(page)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60000)


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_renders_without_errors(fleet_server: StreamlitServer, page: Any, path: str) -> None:
    heading, marker = PAGES[path]
    _open(page, f"{fleet_server.url}/{path}")
    page.get_by_role("heading", name=heading).first.wait_for(timeout=30000)
    page.get_by_test_id(marker).first.wait_for(timeout=60000)
    page.wait_for_timeout(1500)  # let Plotly and the data grid paint before the screenshot
    assert page_errors(page) == []
    assert "Page not found" not in page.inner_text("body")
    assert SECRET_VALUE not in page.content()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{path or 'fleet'}.png"), full_page=True)


def test_empty_lake_explains_how_to_start(app_server: StreamlitServer, page: Any) -> None:
    _open(page, app_server.url)
    info = page.get_by_test_id("stAlertContentInfo").first
    info.wait_for(timeout=30000)
    assert "python -m backend poll" in info.inner_text()
    assert page_errors(page) == []


def test_clicking_a_cluster_opens_its_page(fleet_server: StreamlitServer, page: Any) -> None:
    _open(page, fleet_server.url)
    page.get_by_test_id("stSelectbox").filter(has_text="Open cluster").click()
    page.get_by_role("option", name="prod-us").click()
    page.get_by_role("link", name="Open prod-us").click()
    page.get_by_role("heading", name="Cluster").first.wait_for(timeout=30000)
    wait_for_streamlit(page)
    assert "cluster=prod-us" in page.url
    assert "UScluster-BBBBBBBBBBBB" in page.get_by_test_id("stCode").first.inner_text()
    assert page_errors(page) == []


def test_selecting_a_fleet_table_row_opens_that_cluster(fleet_server: StreamlitServer, page: Any) -> None:
    _open(page, fleet_server.url)
    grid = page.get_by_test_id("stDataFrame").first
    grid.wait_for(timeout=30000)
    box = grid.bounding_box()
    # Glide data grid: 35 px header, 35 px rows, the row-selection marker in the first 30 px.
    page.mouse.click(box["x"] + 15, box["y"] + 35 + 35 * 1 + 17)
    page.wait_for_url("**/cluster?cluster=prod-us", timeout=30000)
    wait_for_streamlit(page)
    assert "UScluster-BBBBBBBBBBBB" in page.get_by_test_id("stCode").first.inner_text()
    assert page_errors(page) == []


def test_report_download_from_the_export_page(fleet_server: StreamlitServer, page: Any, tmp_path: Path) -> None:
    _open(page, f"{fleet_server.url}/export")
    box = page.get_by_test_id("stMultiSelect").filter(has_text="Clusters")
    for name in ("prod-eu", "prod-us"):
        box.locator("input").first.click()
        option = page.get_by_role("option", name=name)
        try:
            option.wait_for(timeout=5000)
        except Exception:  # noqa: BLE001 - a click that only focused the box (as in test_login): open it by key
            page.keyboard.press("ArrowDown")
        option.click()
    page.keyboard.press("Escape")
    report = _download(page, "Download drift report", tmp_path).decode()
    assert "<h1>Client config drift</h1>" in report and "compression.type" in report
    assert external_references(report) == [] and SECRET_VALUE not in report


def _download(page: Any, label: str, tmp_path: Path) -> bytes:
    with page.expect_download(timeout=90000) as info:
        page.get_by_test_id("stDownloadButton").filter(has_text=label).first.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    return target.read_bytes()


def test_export_buttons_download_png_svg_html_and_data(fleet_server: StreamlitServer, page: Any, tmp_path: Path) -> None:
    _open(page, f"{fleet_server.url}/export")
    page.get_by_role("heading", name="Export").first.wait_for(timeout=30000)
    png = _download(page, "PNG", tmp_path)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    svg = _download(page, "SVG", tmp_path)
    assert b"<svg" in svg[:500] and b"prod-eu" in svg
    html = _download(page, "HTML", tmp_path)
    assert html.lstrip().lower().startswith(b"<!doctype html>") and b"prod-eu" in html
    assert external_references(html.decode()) == []  # plotly.js inlined, opens offline
    csv = _download(page, "CSV", tmp_path).decode()
    assert csv.splitlines()[0] == "cluster,version,brokers"
    parquet = _download(page, "Parquet", tmp_path)
    assert parquet[:4] == b"PAR1"


def test_cli_report_renders_offline_in_chromium(ui_lake: Path, page: Any, tmp_path: Path) -> None:
    lake = ui_lake
    out = tmp_path / "drift.html"
    done = subprocess.run([sys.executable, "-m", "backend", "export", "--report", "drift", "--clusters", "prod-eu,prod-us",
                           "--lake", str(lake), "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert external_references(text) == []
    requested: list[str] = []
    page.route("**/*", lambda route: (requested.append(route.request.url), route.continue_())
               if route.request.url.startswith("file:") else (requested.append(route.request.url), route.abort()))
    page.goto(out.as_uri())
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60000)
    assert page.locator(".js-plotly-plot").count() >= 4  # heatmap + one chart per key
    assert [u for u in requested if not u.startswith("file:")] == []  # nothing fetched from the network


def test_fleet_rows_fit_1280_px_without_scrolling_sideways(fleet_server: StreamlitServer, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        _open(page, fleet_server.url)
        grid = page.get_by_test_id("stDataFrame").first
        grid.wait_for(timeout=30000)
        page.wait_for_timeout(1000)  # the grid sizes its columns after the first paint
        sizes = page.evaluate("""() => {
            const s = document.querySelector('[data-testid="stDataFrame"] .dvn-scroller');
            return {scroll: s.scrollWidth, client: s.clientWidth};
        }""")
        assert sizes["scroll"] <= sizes["client"] + 1, sizes
        header = page.evaluate("() => document.querySelector('[data-testid=\"stDataFrame\"]').innerText")
        assert "broker versions" in header or "Apache Kafka 3.9.1 ×3" in page.content()
        page.screenshot(path=str(SCREENSHOTS / "fleet-1280.png"), full_page=False)
    finally:
        context.close()
