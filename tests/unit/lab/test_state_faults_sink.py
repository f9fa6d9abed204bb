"""State file, fault control file and sink writer."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.kafka.protocol import kafka_str_to_uuid
from backend.lab.faults import BrokerFaults, read_control_file, set_fault_in_file
from backend.lab.model import parse_lab_config
from backend.lab.sink import RECORD_FIELDS, SinkWriter
from backend.lab.state import LabState, TopicState, new_kafka_id, partition_assignment


def _spec(tmp: Path) -> object:
    raw = {"clusters": [{"name": "c", "profile": "apache-kafka-3.9-zk", "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
                         "topics": [{"name": "t", "partitions": 4, "replication_factor": 2}]}]}
    return parse_lab_config(raw, tmp).clusters[0]


def test_ids_are_kafka_uuid_text() -> None:
    ids = {new_kafka_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        kafka_str_to_uuid(text)


def test_state_round_trip_and_operations(tmp_path: Path) -> None:
    path = tmp_path / "s" / "state.json"
    state = LabState.load(path)
    cs = state.ensure_cluster(_spec(tmp_path))  # type: ignore[arg-type]
    assert set(cs.topics) == {"t", "__consumer_offsets"}
    assert cs.topics["__consumer_offsets"].internal and cs.topics["__consumer_offsets"].partitions == 50
    state.save()
    again = LabState.load(path)
    assert again.clusters["c"].cluster_id == cs.cluster_id
    assert again.clusters["c"].topics["t"] == cs.topics["t"]
    old = again.clusters["c"].topics["t"].topic_id
    assert again.recreate_topic("c", "t").topic_id != old
    again.delete_topic("c", "t")
    again.ensure_cluster(_spec(tmp_path))  # type: ignore[arg-type]
    assert "t" not in again.clusters["c"].topics  # deleted topics are not re-seeded from lab.toml
    with pytest.raises(KeyError):
        again.delete_topic("c", "t")


def test_unreadable_state_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        LabState.load(path)


def test_partition_assignment_spreads_leaders_and_replicas() -> None:
    t = TopicState("t", new_kafka_id(), 6, 3)
    a = partition_assignment(t, [3, 1, 2])
    assert a[0] == [1, 2, 3] and a[1] == [2, 3, 1] and a[2] == [3, 1, 2]
    assert sorted(r[0] for r in a.values()) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(r)) == 3 for r in a.values())


def test_fault_control_file_round_trip_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    assert read_control_file(path) == {}
    set_fault_in_file(path, "c", 1, "latency_ms", 300)
    set_fault_in_file(path, "c", 1, "malformed", True)
    set_fault_in_file(path, "d", 2, "refuse", True)
    faults = read_control_file(path)
    assert faults[("c", 1)] == BrokerFaults(latency_ms=300, malformed=True)
    assert faults[("d", 2)].refuse
    set_fault_in_file(path, "d", 2, "refuse", False)
    assert ("d", 2) not in read_control_file(path)
    with pytest.raises(ValueError, match="unknown fault mode"):
        set_fault_in_file(path, "c", 1, "explode", True)
    path.write_text(json.dumps({"c": {"1": {"latency_ms": -5}}}))
    with pytest.raises(ValueError, match="non-negative"):
        read_control_file(path)
    path.write_text(json.dumps({"c": {"1": {"refuse": "yes"}}}))
    with pytest.raises(TypeError, match="true or false"):
        read_control_file(path)


def _record(broker: int) -> dict[str, object]:
    values: dict[str, object] = dict.fromkeys(RECORD_FIELDS)
    values.update(snapshot_id="s", received_at="2026-01-01T00:00:00.000Z", cluster_id="c", broker_id=broker,
                  client_instance_id="i", configs=[])
    return values


def test_sink_writes_one_line_per_record_per_broker_per_day(tmp_path: Path) -> None:
    sink = SinkWriter(tmp_path, "prod")
    day1 = datetime(2026, 1, 1, 23, 59, tzinfo=UTC)
    day2 = datetime(2026, 1, 2, 0, 1, tzinfo=UTC)
    p1 = sink.write(_record(1), day1)
    sink.write(_record(1), day1)
    p2 = sink.write(_record(1), day2)
    p3 = sink.write(_record(2), day1)
    assert p1.name == "broker-1-2026-01-01.jsonl" and p2.name == "broker-1-2026-01-02.jsonl"
    assert p3.name == "broker-2-2026-01-01.jsonl" and p1.parent == tmp_path / "prod"
    assert len(p1.read_text().splitlines()) == 2
    assert [tuple(json.loads(x)) for x in p1.read_text().splitlines()] == [RECORD_FIELDS] * 2
    with pytest.raises(ValueError, match="differ"):
        sink.write({"snapshot_id": "x"}, day1)
