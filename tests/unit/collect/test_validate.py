"""sanitize_snapshot: every hostile value is made to fit the lake's columns, and named."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.collect.validate import sanitize_snapshot
from backend.store import readers
from backend.store.fleet_writer import write_fleet_poll
from backend.store.lake import Lake
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot


def test_hostile_values_are_replaced_named_and_then_fit_the_schema(tmp_path: Path) -> None:
    odd: Any = "1"
    snapshot = ClusterSnapshot(
        cluster_name="c", status="ok", polled_at=datetime.now(UTC), cluster_id=["x"], controller_id=2**40,  # type: ignore[arg-type]
        brokers=[BrokerSnapshot(broker_id=odd, host=None, port=None),
                 BrokerSnapshot(broker_id=2, host="h" * 999, port=70000, rack=7),  # type: ignore[arg-type]
                 BrokerSnapshot(broker_id=2, host="dup", port=1)],
        topics=[TopicSnapshot(topic="t", topic_id=None, partitions=-1), TopicSnapshot(topic="x" * 300, topic_id=None)],
        zk_nodes=[("/a", b"x")],  # type: ignore[list-item]
    )
    problems = sanitize_snapshot(snapshot)
    text = "\n".join(problems)
    for expected in ("broker id: '1'", "broker 2 host: 999 characters", "broker 2 port: 70000", "broker 2 rack: 7",
                     "broker id 2 listed twice", "topic t partitions: -1", "topic name 'xxx", "ZooKeeper /a",
                     "cluster id: ['x']", "controller id: 1099511627776"):
        assert expected in text, (expected, text)
    assert [b.broker_id for b in snapshot.brokers] == [2]
    assert snapshot.brokers[0].port is None and len(snapshot.brokers[0].host or "") == 255
    assert [t.topic for t in snapshot.topics] == ["t"] and snapshot.topics[0].partitions == 0
    assert snapshot.zk_nodes == [] and snapshot.cluster_id is None and snapshot.controller_id is None
    result = write_fleet_poll(Lake(tmp_path), FleetPoll("20260101T000000000000Z-abcdef01", datetime.now(UTC), [snapshot],
                                                       [], 0.0))
    assert result.degraded == {}  # the sanitized rows fit the lake's schema
    assert readers.latest_brokers(tmp_path)["broker_id"].tolist() == [2]


def test_a_valid_snapshot_is_untouched() -> None:
    topics = [TopicSnapshot(topic="t", topic_id="AAAAAAAAAAAAAAAAAAAAAB", partitions=3, replication_factor=3)]
    snapshot = ClusterSnapshot(cluster_name="ok", status="ok", polled_at=datetime.now(UTC), cluster_id="id",
                               brokers=[BrokerSnapshot(broker_id=1, host="h", port=9092, reachable=True)], topics=topics)
    assert sanitize_snapshot(snapshot) == []
    assert snapshot.topics is topics and snapshot.brokers[0].port == 9092
