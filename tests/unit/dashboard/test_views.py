"""The pure views behind the pages: version labels, topic paging, changes, overlap, drift, alerts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import plotly.io as pio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.views import config_views, fleet_views, frames
from dashboard import charts


def _broker(**over: object) -> dict[str, object]:
    row: dict[str, object] = {"software_name": "Apache Kafka", "software_version": "3.9.1",
                              "version_provenance": "reported", "version_min": None, "version_max": None}
    row.update(over)
    return row


@pytest.mark.parametrize(("row", "label"), [
    (_broker(), "3.9.1"),
    (_broker(version_provenance="zookeeper", software_version="3.9.2"), "3.9.2 (zookeeper)"),
    (_broker(version_provenance="guessed", software_version=None, version_min="3.7", version_max="3.9"),
     "3.7–3.9 (guessed)"),
    (_broker(version_provenance="guessed", version_min="4.0", version_max="4.0"), "4.0 (guessed)"),
    (_broker(version_provenance="unknown", software_version=None), "unknown"),
    (_broker(version_provenance=None, software_version=None), "unknown"),
])
def test_version_label_never_makes_a_guess_look_like_a_fact(row: dict[str, object], label: str) -> None:
    assert fleet_views.version_label(pd.Series(row)) == label


def test_summarize_versions_uniform_and_mixed() -> None:
    same = pd.DataFrame([_broker()] * 3)
    assert fleet_views.summarize_versions(same) == "Apache Kafka 3.9.1 ×3"
    mixed = pd.DataFrame([_broker(), _broker(software_version="3.8.0")])
    assert fleet_views.summarize_versions(mixed) == "mixed: Apache Kafka 3.8.0 ×1, Apache Kafka 3.9.1 ×1"


def test_age_text_units() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert fleet_views.age_text(now - timedelta(seconds=42), now) == "42 s"
    assert fleet_views.age_text(now - timedelta(minutes=5), now) == "5 min"
    assert fleet_views.age_text(now - timedelta(days=3), now) == "3 d"
    assert fleet_views.age_text(None, now) == "never"


def _topics(n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "topic": [f"t-{i:06d}" for i in range(n)], "topic_id": [f"id{i}" for i in range(n)],
        "partitions": 1, "replication_factor": 3, "internal": False,
        "under_replicated": [1 if i % 1000 == 0 else 0 for i in range(n)],
    })


def test_topic_page_sends_only_one_page_of_100k_topics() -> None:
    page = fleet_views.topic_page(_topics(100_000), page=3, page_size=50)
    assert len(page.rows) == 50
    assert (page.total, page.pages, page.page) == (100_000, 2000, 3)
    assert page.rows["topic"].iloc[0] == "t-000100"
    urp = fleet_views.topic_page(_topics(100_000), only_under_replicated=True, page_size=500)
    assert urp.total == 100
    beyond = fleet_views.topic_page(_topics(10), page=99, page_size=4)
    assert beyond.page == 3 and list(beyond.rows["topic"]) == ["t-000008", "t-000009"]
    with pytest.raises(ValueError, match="page_size"):
        fleet_views.topic_page(_topics(1), page_size=0)


def test_recent_changes_skips_polls_without_data() -> None:
    t0 = pd.Timestamp("2026-01-01", tz="UTC")
    polls = pd.DataFrame({"poll_id": ["p1", "p2", "p3"], "polled_at": [t0, t0 + pd.Timedelta(1, "h"), t0 + pd.Timedelta(2, "h")],
                          "cluster_name": "c", "status": ["ok", "down", "ok"], "controller_id": [1, None, 1]})
    topics = pd.DataFrame({"poll_id": ["p1", "p1", "p3", "p3"], "cluster_name": "c",
                           "topic": ["a", "b", "a", "c"], "topic_id": ["a1", "b1", "a2", "c1"]})
    brokers = pd.DataFrame(columns=["cluster_name", "broker_id", "polled_at", "software_name", "software_version",
                                    "version_provenance", "version_min", "version_max"])
    changes = fleet_views.recent_changes(topics, brokers, polls, "c")
    got = {(r.change, r.subject, r.before, r.after) for r in changes.itertuples()}
    assert got == {("topic created", "c", "", "c1"), ("topic deleted", "b", "b1", ""), ("topic recreated", "a", "a1", "a2")}


def test_topic_overlap_counts_same_name_different_id() -> None:
    topics = pd.DataFrame({"cluster_name": ["x", "x", "y", "y", "z"], "topic": ["a", "b", "a", "b", "a"],
                           "topic_id": ["1", "2", "1", "9", "1"]})
    overlap = config_views.topic_overlap(topics, ["x", "y"])
    assert (overlap.shared, overlap.same_name_different_id) == (2, 1)
    row = overlap.table.set_index("topic").loc["a"]
    assert bool(row["same_id"]) and row["clusters"] == 2


def test_drift_matrix_orders_most_drifting_first_and_keeps_chosen_pairs() -> None:
    drift = pd.DataFrame({"client_type": "producer", "key": ["k1", "k2", "k1"], "cluster_a_name": ["a", "a", "a"],
                          "cluster_b_name": ["b", "b", "c"], "tvd": [0.1, 0.9, 0.7]})
    matrix = config_views.drift_matrix(drift, ["a", "b"])
    assert list(matrix.index) == ["k2 (producer)", "k1 (producer)"]
    assert list(matrix.columns) == ["a ↔ b"]
    assert config_views.drift_matrix(drift, ["a", "c"]).loc["k1 (producer)", "a ↔ c"] == pytest.approx(0.7)


def test_sensitive_keys_are_dropped_and_redacted() -> None:
    frame = pd.DataFrame({"key": ["acks", "ssl.keystore.password", "sasl.jaas.config", "ssl.key.password"]})
    assert list(config_views.drop_sensitive(frame)["key"]) == ["acks"]
    config = pd.DataFrame([{"computed_at": pd.Timestamp.now(tz="UTC"), "severity": "warning", "rule_id": "r",
                            "cluster_id": "id", "client_id": "c", "group_id": None, "client_instance_id": "i",
                            "observed_json": '{"acks": "0", "sasl.jaas.config": "s3cret"}', "title": "t",
                            "explanation": "e", "doc_url": "u"}])
    merged = config_views.unified_alerts(pd.DataFrame(), config, {"id": "name"})
    assert merged.loc[0, "cluster"] == "name"
    assert "s3cret" not in merged.loc[0, "evidence"] and "[REDACTED]" in merged.loc[0, "evidence"]


def test_charts_use_the_registered_fleetview_template() -> None:
    default_before = pio.templates.default
    charts.register_template()
    assert "fleetview" in pio.templates
    frame = pd.DataFrame({"cluster": ["a", "a", "b"], "key": "acks", "value": ["all", "1", "all"],
                          "instance_count": [3, 1, 2]})
    fig = charts.categorical_distribution(frame, key="acks")
    shares = {(t.name, x): y for t in fig.data for x, y in zip(t.x, t.y, strict=True)}
    assert shares[("all", "a")] == pytest.approx(0.75) and shares[("all", "b")] == pytest.approx(1.0)
    assert fig.layout.barmode == "stack"
    assert fig.layout.template.layout.font.family.startswith("Inter")
    empty = charts.drift_heatmap(pd.DataFrame())
    assert "no drift results" in empty.layout.annotations[0].text
    assert pio.templates.default == default_before, "a chart factory changed Plotly's global default template"


def test_current_alerts_keep_only_the_latest_poll_of_fleet_alerts() -> None:
    fleet = pd.DataFrame({"raised_at": pd.Timestamp("2026-01-01", tz="UTC"), "severity": "critical",
                          "rule": "zk_cluster_id_mismatch", "cluster_name": ["a", "a", "b"], "subject": "cluster id",
                          "evidence_json": "{}", "explanation": "", "doc_url": None, "poll_id": ["p1", "p2", "p1"]})
    merged = config_views.unified_alerts(fleet, pd.DataFrame(), {})
    current = config_views.current_alerts(merged, {"a": "p2", "b": "p1"})
    assert sorted(zip(current["cluster"], current["poll_id"], strict=True)) == [("a", "p2"), ("b", "p1")]


def test_current_alerts_keep_recent_events_from_earlier_polls() -> None:
    now = pd.Timestamp("2026-01-02T12:00", tz="UTC")
    fleet = pd.DataFrame({"raised_at": [now - pd.Timedelta(hours=1), now - pd.Timedelta(hours=30), now - pd.Timedelta(hours=1)],
                          "severity": "warning", "rule": ["topic_recreated", "topic_recreated", "version_skew"],
                          "cluster_name": "a", "subject": ["t1", "t0", "brokers"], "evidence_json": "{}",
                          "explanation": "", "doc_url": None, "poll_id": ["p1", "p0", "p1"]})
    merged = config_views.unified_alerts(fleet, pd.DataFrame(), {})
    current = config_views.current_alerts(merged, {"a": "p2"}, now=now)
    # The hour-old recreation stays; the 30-hour-old one and the superseded standing alert go.
    assert list(current["subject"]) == ["t1"]


def test_results_written_with_naive_spark_times_read_as_utc(tmp_path: Path) -> None:
    folder = tmp_path / "results" / "client_versions"
    folder.mkdir(parents=True)
    table = pa.table({"cluster_id": ["c"], "client_type": ["producer"], "client_software_name": ["x"],
                      "client_software_version": ["1"], "instances": [3],
                      "computed_at": pa.array([datetime(2026, 1, 1, 12)], pa.timestamp("us")), "schema_version": [1]})
    pq.write_table(table, folder / "part-00000.parquet")
    frame = frames.read_result(str(tmp_path), "client_versions")
    assert str(frame["computed_at"].dt.tz) == "UTC"
    assert frame["computed_at"].iloc[0] == pd.Timestamp("2026-01-01 12:00", tz="UTC")
    assert frames.read_result(str(tmp_path), "drift_keys").empty  # missing table: empty, with columns
    assert "max_tvd" in frames.read_result(str(tmp_path), "drift_keys").columns


def test_top_values_folds_the_rest_per_cluster_and_keeps_small_keys_whole() -> None:
    dist = pd.DataFrame({"cluster": ["a"] * 5 + ["b"] * 2, "client_type": "producer", "key": "k",
                         "value": ["v1", "v2", "v3", "v4", None, "v1", "v4"],
                         "instance_count": [10, 8, 3, 2, 1, 5, 4]})
    folded = config_views.top_values(dist, "k", n=2)
    assert set(folded.loc[~folded["folded"], "value"]) == {"v1", "v2"}
    other = folded[folded["folded"]].set_index("cluster")["instance_count"]
    assert other.to_dict() == {"a": 6, "b": 4}  # v3 + v4 + null in a, v4 in b: no instance lost
    assert set(folded.loc[folded["folded"], "value"]) == {"other (3 values)"}
    whole = config_views.top_values(dist, "k", n=4)  # 5 values: folding one value hides it, so none is folded
    assert not whole["folded"].any() and len(whole) == 7


def test_spellings_lists_only_values_reported_in_more_than_one_way() -> None:
    dist = pd.DataFrame({"key": ["acks", "acks", "acks"], "value": ["all", "all", "1"],
                         "raw_values": [["-1"], ["all", "ALL"], ["1"]]})
    assert config_views.spellings(dist, "acks") == {"all": "-1, ALL, all"}


def test_agreement_orders_keys_by_their_weakest_cluster_and_names_the_dominant_value() -> None:
    dist = pd.DataFrame({"cluster": ["a", "a", "b", "a", "b"], "key": ["acks", "acks", "acks", "lz", "lz"],
                         "value": ["all", "1", "all", "zstd", "zstd"], "instance_count": [3, 7, 5, 4, 4]})
    table = config_views.agreement(dist)
    assert list(table["key"]) == ["acks", "acks", "lz", "lz"]
    first = table.iloc[0]
    assert (first["cluster"], first["dominant_value"], first["dominant_share"], first["instances"]) == ("a", "1", 0.7, 10)
    assert list(config_views.agreement(dist, keys=1)["key"].unique()) == ["acks"]
    fig = charts.agreement_heatmap(table)
    assert fig.data[0].z[0][0] == 0.7 and fig.data[0].text[0][0] == "1"
