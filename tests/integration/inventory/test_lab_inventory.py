"""The client inventory end to end on the lab fleet (in-process brokers with their metrics endpoints): lake state,
change log and incidents; hostile client software names reach pages, CSV and /metrics labels only as plain text;
with login on, a user granted two clusters sees only their inventory and verdicts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest
from streamlit.testing.v1 import AppTest

from backend.collect.client_metrics import ClientMetricsCollector
from backend.collect.configs import ConfigCollector
from backend.collect.metrics import FleetMetrics
from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.export.csv_safe import safe_csv
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from backend.store import readers
from backend.store.lake import Lake
from backend.store.stats import read_stats
from backend.views import frames, inventory_views, readiness
from tests.unit.dashboard.conftest import APP
from tests.unit.dashboard.test_pages import _page_text

HOSTILE = '**bold** <img src=x onerror=alert(1)> [link](http://evil) =1+1 "quoted"\nsecond line'
LAB = {
    "lab": {},
    "clusters": [
        {"name": "eu", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}, {"id": 2}],
         "metrics_clients": [{"software_name": "apache-kafka-java", "software_version": "3.9.1", "connections": 2}]},
        {"name": "us", "profile": "apache-kafka-3.9-zk", "brokers": [{"id": 1}],
         "metrics_clients": [{"software_name": "unknown", "software_version": "unknown", "connections": 1,
                              "deprecated": ["Produce:2"], "rate": 5.0},
                             {"software_name": HOSTILE, "software_version": "=cmd|' /C calc'!A0", "connections": 1}]},
        {"name": "secret-apac", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}],
         "metrics_clients": [{"software_name": "apache-kafka-java", "software_version": "2.0.1", "connections": 1}]},
    ],
}


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, FleetMetrics]]:
    """Two polls of the lab (the second after the collection interval) into a lake."""
    work = tmp_path_factory.mktemp("lab-inventory")
    raw = {**LAB, "lab": {"state_dir": str(work / "lab")}}
    lab = LabFleet(parse_lab_config(raw, work))
    lab.start()
    try:
        fleet_file = lab.write_fleet_file(work / "clusters.toml")
        text = fleet_file.read_text(encoding="utf-8")
        fleet_file.write_text("[settings]\nclient_metrics_interval_s = 0.2\nconfig_interval_s = 0\n" + text,
                              encoding="utf-8")
        fleet = load_fleet(fleet_file)
        lake = work / "lake"
        metrics = FleetMetrics(str(lake))
        collector = ClientMetricsCollector()
        for _ in range(2):
            poll = run_poller(fleet, Lake(lake), once=True, client_metrics=collector, configs=ConfigCollector())
            assert poll is not None
            metrics.update(poll)
            time.sleep(0.3)
        yield lake, fleet_file, metrics
    finally:
        lab.stop()


def test_lake_state_changes_and_incidents(polled: tuple[Path, Path, FleetMetrics]) -> None:
    lake, _, _ = polled
    runs = frames.inventory_runs(str(lake))
    assert set(runs["cluster_name"]) == {"eu", "us", "secret-apac"} and set(runs["status"]) == {"ok"}
    with read_stats() as stats:
        frames.inventory_rows(str(lake), ["us"])
    assert stats.by_table.get("state/inventory", (0, 0))[0] == 1  # one cluster asked for: one state file read
    changes = readers.changes(str(lake), entity="client")
    assert set(changes["kind"]) >= {"inventory_first_seen"}
    incidents = readers.incidents(str(lake))
    found = {(r, c) for r, c in zip(incidents["rule"], incidents["cluster_name"], strict=True)}
    assert ("client_deprecated_protocol", "us") in found
    assert ("client_below_floor", "secret-apac") in found
    assert ("client_unknown_software_appeared", "us") in found


def test_readiness_blocks_on_the_old_client_and_never_says_ready_by_omission(
        polled: tuple[Path, Path, FleetMetrics]) -> None:
    lake, _, _ = polled
    args = (frames.latest_clusters(str(lake)), frames.latest_rows(str(lake), "broker_snapshots"),
            frames.inventory_rows(str(lake)), frames.inventory_runs(str(lake)))
    report = readiness.readiness(*args)
    verdicts = report.verdicts.set_index("cluster_name")["verdict"].to_dict()
    assert verdicts["us"] == "blocked" and verdicts["secret-apac"] == "blocked"
    assert verdicts["eu"] == "unverified"  # consumer groups not collected, no client-config results
    groups_item = report.items[(report.items["cluster_name"] == "eu")
                               & (report.items["item"] == "consumer groups on the classic protocol")]
    assert groups_item["detail"].iloc[0] == "consumer groups not collected"
    import pandas as pd

    groups = pd.DataFrame({"cluster_name": ["eu", "eu"], "group_id": ["billing", "new"],
                           "group_type": ["classic", "consumer"], "protocol_type": ["consumer", "consumer"],
                           "state": ["Stable", "Stable"]})
    with_groups = readiness.readiness(*args, groups=groups)
    item = with_groups.items[(with_groups.items["cluster_name"] == "eu")
                             & (with_groups.items["item"] == "consumer groups on the classic protocol")]
    assert item["status"].iloc[0] == "warn" and "billing" in item["detail"].iloc[0]


def test_hostile_names_are_plain_in_csv_and_metrics(polled: tuple[Path, Path, FleetMetrics]) -> None:
    lake, _, metrics = polled
    table = inventory_views.software_by_cluster(frames.inventory_rows(str(lake)))
    assert HOSTILE in set(table["software_name"])  # kept as data, whole
    csv = safe_csv(table)
    assert "\n'=cmd|" in csv or ",'=cmd|" in csv  # the formula cell neutralised
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    exposition = generate_latest(registry).decode()
    line = next(x for x in exposition.splitlines() if x.startswith("kafka_fleet_client_connections") and "bold" in x)
    # one line: the newline shown as ␊ (label_value, the one text rule), the quotes escaped by the exposition format
    assert "␊second line" in line and '\\"quoted\\"' in line


def _app(lake: Path, fleet_file: Path, monkeypatch: pytest.MonkeyPatch, page: str,
         user: dict[str, object] | None = None) -> AppTest:
    monkeypatch.setenv("FLEETVIEW_LAKE", str(lake))
    monkeypatch.setenv("FLEETVIEW_FLEET", str(fleet_file))
    app = AppTest.from_file(str(APP), default_timeout=60)
    if user is not None:
        app.secrets.update({"auth": {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
                                     "client_id": "fleetview", "client_secret": "s", "server_metadata_url":
                                     "http://127.0.0.1:9/.well-known/openid-configuration"}})
        app.user = {"iat": int(time.time()) - 60, **user}
    app.run()
    app.switch_page(f"../pages/{page}.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


@pytest.mark.parametrize("page", ["clients", "upgrade"])
def test_pages_show_hostile_names_only_as_plain_text(polled: tuple[Path, Path, FleetMetrics], page: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    lake, fleet_file, _ = polled
    app = _app(lake, fleet_file, monkeypatch, page)
    markdown = [str(e.value) for kind in ("markdown", "caption", "info", "warning", "error") for e in getattr(app, kind)]
    for text in markdown:  # Markdown surfaces: a hostile value only inside a code span (components.plain)
        if "<img" in text or "[link]" in text:
            assert "` **bold** <img" in text, text
    if page == "clients":
        assert "**bold** <img src=x onerror=alert(1)> [link](http://evil)" in _page_text(app)  # a dataframe cell


def test_login_user_sees_only_granted_clusters(polled: tuple[Path, Path, FleetMetrics],
                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lake, fleet_file, _ = polled
    granted = tmp_path / "clusters.toml"
    text = fleet_file.read_text(encoding="utf-8").replace("[settings]", "[auth]\nrequired = true\n\n[settings]", 1)
    for name in ("eu", "us"):
        text = text.replace(f'name = "{name}"\n', f'name = "{name}"\naccess = {{ view = ["group:two"] }}\n', 1)
    granted.write_text(text, encoding="utf-8")
    user = {"is_logged_in": True, "email": "two@example.com", "sub": "two", "groups": ["two"]}
    for page in ("clients", "upgrade", "export"):
        app = _app(lake, granted, monkeypatch, page, user)
        shown = _page_text(app)
        assert "secret-apac" not in shown and "2.0.1" not in shown, page
        assert "us" in shown or page == "export"
    # The Export page's readiness CSVs come from the same filtered reading: two clusters, the third not among them.
    assert "2 clusters: 1 blocked, 1 unverified" in [c.value for c in app.caption]
