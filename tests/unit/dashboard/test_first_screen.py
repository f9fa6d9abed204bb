"""The first screen of Fleet, Cluster and Alerts draws tables only; Plotly charts are drawn on request.

Plotly's bundle costs about a second of browser time per page view on this machine
(benchmarks/README.md), so the pages an SRE opens most show the same facts as tables first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from backend.views import fleet_views

OpenPage = Callable[..., AppTest]


def test_version_table_one_row_per_version_in_numeric_order_with_its_clusters() -> None:
    matrix = pd.DataFrame({"cluster": ["a", "a", "b"],
                           "version": ["Apache Kafka 3.10.0", "Apache Kafka 3.9.1", "Apache Kafka 3.9.1"],
                           "brokers": [1, 2, 3]})
    table = fleet_views.version_table(matrix)
    assert list(table["version"]) == ["Apache Kafka 3.9.1", "Apache Kafka 3.10.0"]
    assert list(table["brokers"]) == [5, 1]
    assert list(table["clusters"]) == ["b ×3, a ×2", "a ×1"]  # no cell for a version a cluster does not run
    assert fleet_views.version_table(matrix.iloc[0:0]).empty


def test_recent_upgrades_newest_first_and_bounded() -> None:
    timeline = pd.DataFrame({"changed_at": pd.to_datetime(["2026-01-01", "2026-03-01", "2026-02-01"], utc=True),
                             "cluster": ["a", "b", "c"], "broker_id": [1, 2, 3],
                             "from_version": ["3.9.1"] * 3, "to_version": ["4.3.1"] * 3})
    recent = fleet_views.recent_upgrades(timeline, limit=2)
    assert list(recent["cluster"]) == ["b", "c"]


def test_api_versions_table_rows_per_api_and_unparsable_text_kept_as_text() -> None:
    brokers = pd.DataFrame({"broker_id": [2, 1, 3], "api_versions_json": [
        json.dumps({"3": [0, 12], "0": [0, 11]}), None, "<b>not json</b>"]})
    table = fleet_views.api_versions_table(brokers)
    metadata = table[(table["broker_id"] == 2) & (table["api_key"] == 3)].iloc[0]
    assert metadata["api"] == "Metadata" and metadata["max_version"] == 12
    bad = table[table["broker_id"] == 3].iloc[0]
    assert bad["api"] == "unparsable answer" and bad["raw"] == "<b>not json</b>"
    assert 1 not in set(table["broker_id"])  # no answer, no rows


def test_fleet_first_screen_has_no_plotly_chart_until_the_timeline_is_asked_for(
        fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake)
    assert not app.exception
    assert not app.get("plotly_chart")
    versions = [t.value for t in app.dataframe if {"version", "brokers", "clusters"} <= set(t.value.columns)]
    assert versions and "prod-eu ×3" in versions[0].set_index("version").loc["Apache Kafka 3.9.1", "clusters"]
    app.toggle(key="fleet_timeline_chart").set_value(True).run()
    assert not app.exception and len(app.get("plotly_chart")) == 1


def test_alerts_chart_only_on_request(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "alerts")
    assert not app.exception and not app.get("plotly_chart")
    app.toggle(key="alerts_chart").set_value(True).run()
    assert not app.exception and len(app.get("plotly_chart")) == 1


def test_cluster_fingerprints_are_one_table(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster")
    assert not app.exception and not app.get("json")
    tables = [t.value for t in app.dataframe if {"api_key", "min_version", "max_version"} <= set(t.value.columns)]
    assert tables and "ApiVersions" in set(tables[0]["api"])


def test_last_seen_caption_only_for_a_cluster_whose_latest_poll_read_nothing(
        fixture_lake: Path, open_page: OpenPage) -> None:
    """Decided by the latest status, not by comparing poll ids of two readers cached at different times."""
    assert fleet_views.has_no_data("down") and fleet_views.has_no_data("auth_failed")
    assert not fleet_views.has_no_data("ok") and not fleet_views.has_no_data("degraded")

    def captions(app: AppTest) -> str:
        return "\n".join(str(c.value) for c in app.caption)

    healthy = open_page(fixture_lake, "cluster", {"cluster": "prod-eu"})
    assert not healthy.exception and "returned no data" not in captions(healthy)
    down = open_page(fixture_lake, "cluster", {"cluster": "staging"})
    assert not down.exception and "returned no data" in captions(down)


def test_condensed_versions_names_the_software_once_and_counts_brokers_per_version() -> None:
    brokers = pd.DataFrame({"software_name": ["Kafka", "Kafka", "Apache Kafka", "Redpanda"],
                            "software_version": ["4.3.1", "4.2.0", "4.3.1", "24.1.2"],
                            "version_provenance": ["reported"] * 4})
    text = fleet_views.condensed_versions(brokers)
    assert text.count("Apache Kafka") == 1
    assert "4.2.0 ×1, 4.3.1 ×2" in text and "24.1.2 ×1" in text
    assert fleet_views.condensed_versions(brokers.iloc[0:0]) == "no brokers"


def test_short_error_keeps_the_first_line_and_cuts_long_ones() -> None:
    assert fleet_views.short_error("timed out\nstack trace here") == "timed out"
    assert fleet_views.short_error(None) == "" and fleet_views.short_error(float("nan")) == ""
    cut = fleet_views.short_error("x" * 300, limit=40)
    assert len(cut) == 40 and cut.endswith("…")


def test_cluster_problems_lists_only_rows_with_an_error() -> None:
    table = pd.DataFrame({"cluster": ["a", "b", "c"], "error": ["", "auth failed\nmore", None]})
    assert fleet_views.cluster_problems(table) == [("b", "auth failed")]
