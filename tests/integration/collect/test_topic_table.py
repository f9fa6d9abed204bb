"""The topic table from one Metadata request: equal to librdkafka's DescribeTopics, memoised, with a fallback."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from backend.collect.poller import poll_cluster
from backend.collect.topics import TopicFetchError, TopicTable, TopicTables
from backend.config import ClusterConfig
from backend.kafka.admin import AdminClientCache, TopicInfo
from backend.lab.fleet import LabFleet
from tests.integration.collect.conftest import fleet_from, kafka4_toml, lab_toml, settings_toml
from tests.rig.kafka import KafkaKraftCluster

pytestmark = pytest.mark.timeout(240)


def _as_rows(topics: list[TopicInfo]) -> dict[str, tuple[object, ...]]:
    return {
        t.topic: (t.topic_id, t.internal, t.partitions, t.replication_factor, t.under_replicated,
                  t.offline_partitions, frozenset(t.replica_broker_ids))
        for t in topics
    }


class _RefusingTables(TopicTables):
    """A topic-table source whose brokers never answer the direct request (as a proxy that drops it would)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def fetch(self, cluster: ClusterConfig, candidates: Sequence[tuple[str, int]], deadline: float,
              request_timeout_s: float, *, max_response_bytes: int = 0) -> TopicTable:
        self.asked += 1
        raise TopicFetchError("dropped by the test")


def test_direct_metadata_equals_librdkafka_describe_topics_on_real_kraft(
    kafka4: KafkaKraftCluster, tmp_path: Path
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    names = [f"table-{time.time_ns()}-{i}" for i in range(3)]
    futures = admin.create_topics([NewTopic(n, i + 1, min(3, i + 1)) for i, n in enumerate(names)], request_timeout=30)
    for future in futures.values():
        future.result(timeout=60)
    fleet = fleet_from(settings_toml(request_timeout_s=10, poll_deadline_s=30) + kafka4_toml(kafka4), tmp_path)
    cluster = fleet.clusters[0]
    # The two reads are two instants: while the ISR of a broker an earlier test restarted still catches up, the
    # under-replicated counts may move between them. Compare once the cluster holds still (both reads agree), or
    # at the deadline, where a real disagreement fails the assertions below.
    deadline = time.monotonic() + 60
    while True:
        table = TopicTables().fetch(cluster, [(b.host, b.port) for b in kafka4.brokers], time.monotonic() + 20, 10)
        described = AdminClientCache().get(cluster, 10).describe_topics(table.view.topic_names, 20)
        listed = set(names) <= {t.topic for t in table.listing.topics}
        if (listed and _as_rows(table.listing.topics) == _as_rows(described.topics)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    assert not table.listing.failed and not described.failed
    assert set(names) <= set(_as_rows(table.listing.topics))
    assert _as_rows(table.listing.topics) == _as_rows(described.topics)
    assert table.view.cluster_id == kafka4.cluster_id
    assert [n.broker_id for n in table.view.brokers] == sorted(b.node_id for b in kafka4.brokers)


def test_an_unchanged_answer_is_reused_and_a_recreated_topic_is_seen(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-eu"]), tmp_path)
    cluster = fleet.clusters[0]
    brokers = [(b.host, b.port) for b in lab_fleet.clusters["prod-eu"].brokers]
    tables = TopicTables()

    first = tables.fetch(cluster, brokers, time.monotonic() + 10, 5)
    second = tables.fetch(cluster, brokers, time.monotonic() + 10, 5)
    assert tables.reused == 1
    assert second.listing is first.listing

    old_id = lab_fleet.topic_id("prod-eu", "orders")
    lab_fleet.recreate_topic("prod-eu", "orders")
    third = tables.fetch(cluster, brokers, time.monotonic() + 10, 5)
    assert tables.reused == 1, "a changed answer must be decoded again"
    ids = {t.topic: t.topic_id for t in third.listing.topics}
    assert ids["orders"] == lab_fleet.topic_id("prod-eu", "orders") != old_id
    assert {t: i for t, i in ids.items() if t != "orders"} == {
        t.topic: t.topic_id for t in first.listing.topics if t.topic != "orders"
    }


def test_a_stopped_first_broker_is_skipped(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-eu"]), tmp_path)
    brokers = [(b.host, b.port) for b in lab_fleet.clusters["prod-eu"].brokers]
    lab_fleet.stop_broker("prod-eu", 1)
    try:
        table = TopicTables().fetch(fleet.clusters[0], brokers, time.monotonic() + 10, 5)
    finally:
        lab_fleet.start_broker("prod-eu", 1)
    assert table.answered_by != f"{brokers[0][0]}:{brokers[0][1]}"
    assert 1 not in {n.broker_id for n in table.view.brokers}
    assert any(t.under_replicated for t in table.listing.topics)


def test_poll_falls_back_to_describe_topics_when_no_broker_answers_directly(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-eu"]), tmp_path)
    cluster, settings = fleet.clusters[0], fleet.settings
    clients = AdminClientCache()
    refusing = _RefusingTables()

    direct = poll_cluster(cluster, settings, clients=clients, topic_tables=TopicTables())
    fallback = poll_cluster(cluster, settings, clients=clients, topic_tables=refusing)

    assert refusing.asked == 1
    assert direct.status == fallback.status == "ok", (direct.error, fallback.error)
    assert [(t.topic, t.topic_id, t.partitions, t.replication_factor) for t in fallback.topics] == [
        (t.topic, t.topic_id, t.partitions, t.replication_factor) for t in direct.topics
    ]
    assert fallback.partition_count == direct.partition_count > 0
