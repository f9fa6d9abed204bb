"""Hostile input, third round (issue 32), in real Chromium: what brokers and clients send stays text, every table
download is formula-safe, and a page load asks nothing of anyone but the app.

The lake comes from the real parts: the hostile lab cluster (tests/rig/hostile.py) polled by the poller, a client
that pushes configs with Markdown, HTML and bidi in the key names through KIP-1324 PushConfig to the lab broker,
whose policy writes them to its sink, and `python -m backend ingest` of that sink (the dropped key names land in
ingest_stats, behind the (?) tooltip of "sensitive keys dropped"). Client-config results carry hostile keys,
values and ids as the pipeline's tables would (written with their declared schema).

On the previous main: hovering the tooltip fetched http://evil.invalid/i.png and showed a live link; the tables'
own "Download as CSV" wrote `=HYPERLINK(...)` racks and `=`/`+`/`-`/`@` config values as they were; every page
fetched its favicon from fonts.gstatic.com; the bidi topic read `abcexe.jpg`.
"""

from __future__ import annotations

import csv
import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from streamlit.testing.v1 import AppTest

from backend.cli import main
from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.export.csv_safe import LINE_BREAKS
from backend.plain_text import visible
from backend.store.config_schemas import arrow_schema
from tests.conftest import StreamlitServer, page_errors, wait_for_streamlit
from tests.rig.hostile import (
    BIDI_TOPIC,
    EVIL,
    FORMULA_RACK,
    HOSTILE_CLIENT_ID,
    HOSTILE_GROUP,
    HOSTILE_KEYS,
    HOSTILE_SOFTWARE,
    hostile_lab,
    make_hostile,
    push_hostile_keys,
)

pytestmark = pytest.mark.timeout(600)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ROW_END = re.compile("\r\n|[" + "".join(LINE_BREAKS) + "]")
APP = Path(__file__).resolve().parents[3] / "dashboard" / "app.py"
PAGES = ["", "cluster?cluster=evil", "compare", "consumer_groups", "client_configs", "clients", "upgrade", "alerts",
         "export"]


def _write_results(lake: Path, ids: dict[str, str]) -> None:
    """Client-config results with hostile keys, values, ids and software, in the pipeline's schema."""
    now = datetime.now(UTC)
    evil, calm = ids["evil"], ids["calm"]
    key, value = HOSTILE_KEYS[0], f"=HYPERLINK(\"http://{EVIL}\",\"x\") {HOSTILE_KEYS[1]}"
    tables: dict[str, list[dict[str, Any]]] = {
        "distributions": [
            {"cluster_id": cid, "client_type": "producer", "key": k, "value": v, "instance_count": n,
             "total_instances": 4, "share": n / 4, "raw_values": [v]}
            for cid in (evil, calm) for k, v, n in (("acks", value, 3), ("acks", "all", 1), (key, "-1+1", 4))],
        "drift_keys": [{"client_type": "producer", "key": HOSTILE_KEYS[1], "cluster_id": evil, "instances": 40,
                        "distinct_values": 40, "dominant_value": "x", "dominant_share": 0.025, "max_tvd": 0.0,
                        "distinct_share": 1.0}],
        "client_versions": [{"cluster_id": evil, "client_type": "producer", "client_software_name": HOSTILE_KEYS[2],
                             "client_software_version": "\u202e1.2.3", "instances": 4},
                            {"cluster_id": evil, "client_type": "producer", "client_software_name": "apache-kafka-java",
                             "client_software_version": "3.9.0", "instances": 2}],
        "numeric_summary": [{"cluster_id": evil, "client_type": "producer", "key": "linger.ms", "type": "LONG",
                             "instances": 4, "unparsable": 0, "min": 0.0, "p50": 5.0, "p90": 5.0, "max": 5.0}],
        "drift_clusters": [{"client_type": "producer", "key": "acks", "cluster_a": evil, "cluster_b": calm, "tvd": 0.5,
                            "instances_a": 4, "instances_b": 4, "dominant_value_a": value, "dominant_value_b": "all"}],
        "config_alerts": [{"alert_id": "a1", "rule_id": "CC004", "severity": "warning", "title": "acks=0",
                           "cluster_id": evil, "client_instance_id": "ci", "client_id": HOSTILE_CLIENT_ID,
                           "group_id": HOSTILE_KEYS[3], "client_type": "producer", "keys": "acks",
                           "observed_json": '{"acks": "=1+1"}', "explanation": "records can be lost",
                           "doc_url": "https://kafka.apache.org/documentation/"},
                          # Upgrade readiness names who sets a key 4.x removed (CC019) and a reporter list without JMX
                          {"alert_id": "a2", "rule_id": "CC019", "severity": "info", "title": "jmx",
                           "cluster_id": evil, "client_instance_id": "ci2", "client_id": HOSTILE_CLIENT_ID,
                           "group_id": HOSTILE_GROUP, "client_type": "producer", "keys": "auto.include.jmx.reporter",
                           "observed_json": '{"auto.include.jmx.reporter": "false"}', "explanation": "ignored on 4.x",
                           "doc_url": "https://kafka.apache.org/documentation/"},
                          {"alert_id": "a3", "rule_id": "CC020", "severity": "warning", "title": "reporters",
                           "cluster_id": evil, "client_instance_id": "ci3", "client_id": "=2+2",
                           "group_id": None, "client_type": "producer", "keys": "metric.reporters",
                           "observed_json": json.dumps({"metric.reporters": f"<img src='http://{EVIL}/r.png'>"}),
                           "explanation": "JMX lost on 4.x", "doc_url": "https://kafka.apache.org/documentation/"}],
        "default_share": [{"cluster_id": evil, "client_type": "producer", "key": key, "instances": 4, "default_count": 1,
                           "overridden_count": 3, "default_share": 0.25},
                          {"cluster_id": evil, "client_type": "producer", "key": "auto.include.jmx.reporter",
                           "instances": 1, "default_count": 0, "overridden_count": 1, "default_share": 0.0}],
        "group_drift": [{"cluster_id": evil, "group_id": HOSTILE_KEYS[1], "key": "acks", "members": 2,
                         "distinct_values": 2, "value_counts_json": '{"=1": 1, "@2": 1}'}],
    }
    for name, rows in tables.items():
        schema = arrow_schema(name)
        filled = [{"computed_at": now, "schema_version": 1, **{k: r.get(k) for k in schema.names if k in r}} for r in rows]
        folder = lake / "results" / name
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(filled, schema=schema), folder / "part-00000.parquet")


def build_hostile_lake(root: Path) -> tuple[Path, Path]:
    """Poll the hostile lab twice, ingest the hostile client's push, add results; returns (lake, fleet file)."""
    lab = hostile_lab(root / "lab", clients=True)
    lab.start()
    try:
        make_hostile(lab)
        pushed = push_hostile_keys(lab)
        assert pushed.status == "accepted", pushed
        fleet_file = lab.write_fleet_file(root / "clusters.toml")
        lake = root / "lake"
        fleet = load_fleet(str(fleet_file))
        for _ in range(2):
            run_poller(fleet, str(lake), once=True, stop=threading.Event())
        assert main(["ingest", "--sink", str(pushed.sink_dir), "--lake", str(lake)]) == 0
        ids = {name: info.cluster_id for name, info in lab.clusters.items()}
    finally:
        lab.stop()
    _write_results(lake, ids)
    return lake, fleet_file


@pytest.fixture(scope="module")
def hostile_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The hostile lake and the lab's fleet file."""
    return build_hostile_lake(tmp_path_factory.mktemp("hostile-round3"))


@pytest.fixture(scope="module")
def hostile_app(streamlit_app: Callable[..., StreamlitServer], hostile_lake: tuple[Path, Path]) -> StreamlitServer:
    """The app (`streamlit run dashboard/app.py`, the repo's .streamlit/config.toml) on the hostile lake."""
    return streamlit_app(hostile_lake[0], extra_env={"FLEETVIEW_FLEET": str(hostile_lake[1])})


def _foreign(requests: list[str], origin: str) -> list[str]:
    return [u for u in requests if not (u.startswith(origin) or u.startswith(("data:", "blob:")))]


def _injected(page: Any) -> dict[str, int]:
    return page.evaluate(f"""() => ({{
        links: [...document.querySelectorAll('a[href]')].filter(a => a.href.includes('{EVIL}')).length,
        images: [...document.querySelectorAll('img[src], iframe[src]')].filter(i => i.src.includes('{EVIL}')).length,
        scripts: window.pwned ? 1 : 0,
    }})""")


def test_every_page_shows_hostile_text_as_text_and_asks_only_its_own_origin(
        hostile_app: StreamlitServer, page: Any) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    tooltips = 0
    for path in PAGES:
        page.goto(f"{hostile_app.url}/{path}")
        wait_for_streamlit(page)
        assert page_errors(page) == [], path
        if path == "client_configs":
            dropped = page.locator("[data-testid='stMetric']").filter(has_text="sensitive keys dropped")
            dropped.nth(1).wait_for(timeout=30000)
        # Every (?) tooltip on the page, hovered: help= text renders as Markdown there.
        icons = page.locator("[data-testid='stTooltipHoverTarget']")
        for i in range(icons.count()):
            icon = icons.nth(i)
            if icon.is_visible():
                icon.scroll_into_view_if_needed()
                icon.hover(force=True)
                page.wait_for_timeout(150)
                tooltips += 1
                assert _injected(page) == {"links": 0, "images": 0, "scripts": 0}, (path, i)
        assert _injected(page) == {"links": 0, "images": 0, "scripts": 0}, path
        favicon = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
        assert favicon and all(h.startswith("data:image/svg+xml") for h in favicon), favicon
    assert tooltips >= 6
    assert [u for u in requests if EVIL in u] == []
    assert _foreign(requests, hostile_app.url) == []  # no favicon from fonts.gstatic.com, nothing from anyone


def test_the_dropped_key_names_tooltip_shows_them_as_text(hostile_app: StreamlitServer, page: Any) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{hostile_app.url}/client_configs")
    wait_for_streamlit(page)
    metric = page.locator("[data-testid='stMetric']").filter(has_text="sensitive keys dropped").first
    metric.wait_for(timeout=30000)
    metric.locator("[data-testid='stTooltipHoverTarget']").first.hover(force=True)
    tip = page.locator("[data-testid='stTooltipContent']").first
    tip.wait_for(timeout=10000)
    shown = tip.inner_text()
    assert HOSTILE_KEYS[0] in shown and HOSTILE_KEYS[1] in shown, shown  # the names, literally
    assert "abc<U+202E>gpj.exe.key" in shown  # the bidi override shown, not obeyed
    assert tip.locator("a, img").count() == 0
    assert [u for u in requests if EVIL in u] == []


def _download(page: Any, key: str) -> str:
    button = page.locator(f".st-key-{key} button").first
    button.wait_for(timeout=30000)
    button.scroll_into_view_if_needed()
    with page.expect_download(timeout=30000) as info:
        button.click()
    return Path(info.value.path()).read_text(encoding="utf-8")


def _cells(text: str) -> list[list[str]]:
    """Rows as a reader that also ends a row at every CR (and other line breaks) finds them."""
    lines = ROW_END.split(text)
    return [next(csv.reader([line], strict=False)) for line in lines if line]


def _formulas(rows: list[list[str]]) -> list[str]:
    def number(cell: str) -> bool:
        try:
            float(cell)
            return True
        except ValueError:
            return False
    return [c for row in rows for c in row if c.startswith(FORMULA_STARTS) and not number(c)]


@pytest.mark.parametrize(("path", "key", "expect"), [
    ("cluster?cluster=evil", "cluster_brokers_csv", "'" + FORMULA_RACK),
    ("cluster?cluster=evil", "cluster_broker_configs_csv", "'" + FORMULA_RACK),
    ("cluster?cluster=evil", "cluster_topic_overrides_csv", "'=1+1"),
    ("cluster?cluster=evil", "cluster_topics_csv", visible(BIDI_TOPIC)),
    ("compare", "compare_broker_configs_csv", "'+1+1"),
    ("alerts", "alerts_table_csv", None),
    ("consumer_groups", "consumer_groups_table_csv", HOSTILE_GROUP),
    ("clients", "clients_by_cluster_csv", "'" + visible(HOSTILE_SOFTWARE)),
    ("upgrade", "upgrade_instances_csv", "'=2+2"),
    ("upgrade", "upgrade_keys_csv", None),
])
def test_every_table_download_is_formula_safe(hostile_app: StreamlitServer, page: Any, path: str, key: str,
                                              expect: str | None) -> None:
    page.goto(f"{hostile_app.url}/{path}")
    wait_for_streamlit(page)
    rows = _cells(_download(page, key))
    assert len(rows) > 1 and len({len(r) for r in rows}) == 1, rows[:3]  # no row starts inside a cell
    assert _formulas(rows) == []
    if expect is not None:
        assert expect in {c for row in rows for c in row}, (expect, rows[:5])


@pytest.mark.parametrize("args", [[], ["--client.disableDataExport", "false"]], ids=["repo-config", "no-config"])
def test_no_table_offers_the_raw_toolbar_download(hostile_app: StreamlitServer, streamlit_app: Callable[..., StreamlitServer],
                                                  hostile_lake: tuple[Path, Path], page: Any, args: list[str]) -> None:
    """The toolbar keeps search and fullscreen but has no "Download as CSV", also on a server started without the
    repo's setting (the app turns it off itself, on the page the link asked for)."""
    server = hostile_app if not args else streamlit_app(hostile_lake[0], extra_args=args)
    page.goto(f"{server.url}/compare")
    wait_for_streamlit(page)
    page.locator(".st-key-compare_broker_configs_csv").wait_for(timeout=30000)  # the page the link asked for
    assert page.url.endswith("/compare")
    page.locator("[data-testid='stDataFrame']").first.hover()
    page.wait_for_timeout(300)
    labels = page.evaluate("() => [...document.querySelectorAll('[data-testid=stElementToolbar] button')]"
                           ".map(b => b.getAttribute('aria-label') || b.innerText)")
    assert "Search" in labels and "Fullscreen" in labels, labels  # the toolbar is there...
    assert not any("download" in (label or "").lower() for label in labels), labels  # ...without its raw CSV


def test_tables_and_tooltips_get_hidden_characters_visibly(hostile_lake: tuple[Path, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """What the browser is sent (AppTest of the real entrypoint): the bidi topic, the control-character version and
    the dropped key names as visible, inert text."""
    monkeypatch.setenv("FLEETVIEW_LAKE", str(hostile_lake[0]))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params["cluster"] = "evil"
    app.run()
    app.switch_page("../pages/cluster.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    cells = {str(v) for table in app.dataframe for column in table.value.columns for v in table.value[column]}
    assert "abc<U+202E>gpj.exe" in cells and BIDI_TOPIC not in cells
    assert any("4.3.1␍␛[31m␇<U+202E>" in c for c in cells), sorted(c for c in cells if "4.3" in c)
    assert not any(ch in c for c in cells for ch in "\r\x1b\x07\u202e")
    app.switch_page("../pages/client_configs.py")
    app.run()
    helps = [m.help for m in app.metric if m.label.startswith("sensitive keys dropped")]
    assert helps and all(f"` {HOSTILE_KEYS[0]} `" in h and "` abc<U+202E>gpj.exe.key `" in h for h in helps), helps
