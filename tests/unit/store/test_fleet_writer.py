"""A poll written to a real lake reads back as the same snapshots (checks survive restarts)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from backend.collect.checks import run_checks
from backend.store import readers
from backend.store.fleet_writer import write_fleet_poll
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import (
    BrokerSnapshot,
    ClusterSnapshot,
    FleetPoll,
    TopicSnapshot,
)
from backend.store.snapshots import load_previous_state


def _poll(topic_id: str, at: datetime, status: str = "ok") -> FleetPoll:
    poll_id = new_poll_id(at)
    polled_at = poll_id_time(poll_id)
    snapshot = ClusterSnapshot(
        cluster_name="c1",
        status=status,
        polled_at=polled_at,
        poll_id=poll_id,
        tags={"env": "test"},
        cluster_id="CID",
        controller_id=1,
        brokers=[
            BrokerSnapshot(
                1,
                "h1",
                9092,
                reachable=True,
                software_name="Kafka",
                software_version="4.1.0",
                version_provenance="reported",
            ),
            BrokerSnapshot(
                2,
                "h2",
                9092,
                reachable=False,
                error="not registered with the cluster (x)",
            ),
        ],
        topics=[
            TopicSnapshot(
                "orders",
                topic_id,
                partitions=3,
                replication_factor=2,
                under_replicated=1,
            )
        ],
        zk_nodes=[("/cluster/id", '{"id":"CID"}')],
        missing_broker_ids=[2],
        duration_ms=12.5,
    )
    if status == "down":
        snapshot.brokers, snapshot.topics, snapshot.zk_nodes = [], [], []
    return FleetPoll(
        poll_id=poll_id,
        polled_at=polled_at,
        clusters=[snapshot],
        alerts=[],
        duration_ms=13.0,
    )


def test_round_trip_and_restart_keeps_the_baseline(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    first = _poll("OLD", datetime(2026, 2, 1, 10, tzinfo=UTC))
    first.alerts = run_checks({}, first.clusters)
    write_fleet_poll(lake, first)
    write_fleet_poll(lake, _poll("", datetime(2026, 2, 1, 10, 1, tzinfo=UTC), status="down"))

    restored = load_previous_state(tmp_path)["c1"]
    assert restored.poll_id == first.poll_id  # the down poll is no baseline
    assert restored.topics[0].topic_id == "OLD"
    assert restored.missing_broker_ids == [2]
    assert [b.broker_id for b in restored.live_brokers] == [1]
    assert restored.brokers[0].software_version == "4.1.0"
    assert restored.tags == {"env": "test"}

    later = _poll("NEW", datetime(2026, 2, 1, 10, 2, tzinfo=UTC))
    recreated = [a for a in run_checks({"c1": restored}, later.clusters) if a.rule == "topic_recreated"]
    assert len(recreated) == 1 and recreated[0].evidence["new_topic_id"] == "NEW"

    clusters = readers.poll_history(tmp_path, "c1")
    assert clusters.status.tolist() == ["ok", "down"]
    row = clusters.iloc[0]
    assert (
        row.broker_count,
        row.brokers_reachable,
        row.topic_count,
        row.under_replicated,
    ) == (1, 1, 1, 1)
    assert json.loads(row.tags_json) == {"env": "test"}
    alerts = readers.alerts(tmp_path)
    assert set(alerts.rule) == {"under_replicated", "broker_missing"}
    urp = alerts[alerts.rule == "under_replicated"].iloc[0]
    assert json.loads(urp.evidence_json)["partitions"] == 1
