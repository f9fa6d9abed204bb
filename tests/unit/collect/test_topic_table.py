"""A decoded Metadata answer becomes topic rows: errors, offline and under-replicated partitions."""

from __future__ import annotations

from backend.collect.topics import listing_from_metadata, view_from_metadata
from backend.kafka import protocol as P

TOPIC_ID = "5f5025d7KiiBzp_UBDrOTQ"


def _partition(index: int, leader: int, replicas: list[int], isr: list[int]) -> dict[str, object]:
    return {"error_code": 0, "partition_index": index, "leader_id": leader, "replica_nodes": replicas,
            "isr_nodes": isr, "offline_replicas": []}


def test_metadata_answer_becomes_topic_rows() -> None:
    body = {
        "cluster_id": "c1", "controller_id": 2,
        "brokers": [{"node_id": 2, "host": "b2", "port": 9092, "rack": None},
                    {"node_id": 1, "host": "b1", "port": 9092, "rack": "r1"}],
        "topics": [
            {"error_code": 0, "name": "orders", "topic_id": TOPIC_ID, "is_internal": False, "partitions": [
                _partition(0, 1, [1, 2, 3], [1, 2, 3]),
                _partition(1, -1, [3, 2], []),
                _partition(2, 2, [2, 1], [2]),
            ]},
            {"error_code": P.UNKNOWN_TOPIC_OR_PARTITION, "name": "gone", "topic_id": TOPIC_ID,
             "is_internal": False, "partitions": []},
            {"error_code": 29, "name": "secret", "topic_id": TOPIC_ID, "is_internal": False, "partitions": []},
            {"error_code": 0, "name": "__consumer_offsets", "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
             "is_internal": True, "partitions": []},
        ],
    }
    listing = listing_from_metadata(body)
    rows = {t.topic: t for t in listing.topics}
    assert set(rows) == {"orders", "__consumer_offsets"}
    orders = rows["orders"]
    assert (orders.topic_id, orders.partitions, orders.replication_factor) == (TOPIC_ID, 3, 3)
    assert (orders.offline_partitions, orders.under_replicated) == (1, 2)
    assert orders.replica_broker_ids == {1, 2, 3}
    assert rows["__consumer_offsets"].internal and rows["__consumer_offsets"].topic_id is None
    assert listing.failed == {"secret": f"Metadata error {P.error_name(29)}"}

    view = view_from_metadata(body)
    assert (view.cluster_id, view.controller_id) == ("c1", 2)
    assert [(n.broker_id, n.host, n.rack) for n in view.brokers] == [(1, "b1", "r1"), (2, "b2", None)]
    assert view.topic_names == ["__consumer_offsets", "gone", "orders", "secret"]
