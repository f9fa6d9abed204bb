"""The metrics collector: values from the latest poll, hostile label values stay labels, no data is no counts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from backend.collect.metrics import MAX_LABEL_CHARS, FleetMetrics, label_value
from backend.store.model import Alert, BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot

AT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
HOSTILE = '4.2.0 [upgrade](https://evil.example) "quoted"\nnewline\\' + "x" * 300


def _samples(metrics: FleetMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode("utf-8")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_values_come_from_the_latest_poll_and_hostile_strings_stay_labels(tmp_path: Path) -> None:
    ok = ClusterSnapshot("prod", "ok", AT, "p1", cluster_id="CID", duration_ms=250.0,
                         brokers=[BrokerSnapshot(1, "h", 9092, reachable=True, software_name="Apache Kafka",
                                                 software_version=HOSTILE, version_provenance="reported"),
                                  BrokerSnapshot(2, "h", 9093, reachable=False, version_min="3.7", version_max="3.9",
                                                 version_provenance="guessed")],
                         topics=[TopicSnapshot("t", "id", partitions=6, replication_factor=3, under_replicated=2)])
    down = ClusterSnapshot("gone", "down", AT, "p1", error="connection refused")
    recreated = Alert("topic_recreated", "warning", "prod", "topic t", {}, "e", "u")
    metrics = FleetMetrics(str(tmp_path / "lake"))  # an empty lake: incidents and config alerts read as none
    metrics.update(FleetPoll("p1", AT, [ok, down], [recreated], 300.0))
    samples = _samples(metrics)
    assert {s[0]["cluster"]: s[1] for s in samples["kafka_fleet_cluster_up"]} == {"prod": 1.0, "gone": 0.0}
    assert ({"cluster": "gone", "status": "down"}, 1.0) in samples["kafka_fleet_cluster_status"]
    assert [s[0]["cluster"] for s in samples["kafka_fleet_brokers"]] == ["prod"]  # no zeros for a down cluster
    assert samples["kafka_fleet_brokers_reachable"] == [({"cluster": "prod"}, 1.0)]
    assert samples["kafka_fleet_under_replicated_partitions"] == [({"cluster": "prod"}, 2.0)]
    assert samples["kafka_fleet_poll_duration_seconds"][0] == ({"cluster": "gone"}, 0.0)
    assert samples["kafka_fleet_last_successful_poll_timestamp_seconds"] == [({"cluster": "prod"}, AT.timestamp())]
    assert samples["kafka_fleet_topic_recreations_total"] == [({"cluster": "gone"}, 0.0), ({"cluster": "prod"}, 1.0)]
    info = {s[0]["broker_id"]: s[0] for s in samples["kafka_fleet_broker_info"]}
    # the line break shown visibly, quotes and backslashes escaped by the format and parsed back intact, cut
    assert info["1"]["version"] == HOSTILE.replace("\n", "␊")[: MAX_LABEL_CHARS - 1] + "…"
    assert info["2"]["version"] == "3.7-3.9" and info["2"]["provenance"] == "guessed"


def test_control_and_bidi_characters_reach_labels_only_visibly() -> None:
    for raw, shown in (("4.3.1\r", "4.3.1␍"), ("a\x1b[31mred\x07", "a␛[31mred␇"), ("abc\u202egpj.exe", "abc<U+202E>gpj.exe"),
                       ("x\x00y\u2028z\udcff", "x␀y<U+2028>z<U+DCFF>"), (None, ""), (7, "7")):
        assert label_value(raw) == shown
    assert len(label_value("\x1b" * 500)) == MAX_LABEL_CHARS
