"""librdkafka (confluent-kafka AdminClient) and kcat read every lab cluster correctly."""

from __future__ import annotations

import base64
import json
import subprocess

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from backend.kafka.protocol import kafka_str_to_uuid
from backend.lab.fleet import LabFleet

CLUSTERS = ("k4", "k43", "k39", "k28", "rp")


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000,
                        "socket.connection.setup.timeout.ms": 5000})


def _uuid_bytes(text: str) -> bytes:
    """Topic ids as librdkafka prints them (standard base64) or as Kafka does (URL-safe)."""
    return base64.b64decode(text.replace("-", "+").replace("_", "/") + "==")


@pytest.mark.parametrize("name", CLUSTERS)
def test_admin_client_describe_cluster_and_topics(lab: LabFleet, name: str) -> None:
    info = lab.clusters[name]
    spec = lab.runtimes[name].spec
    admin = _admin(info.bootstrap)

    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert described.cluster_id == info.cluster_id
    assert described.controller.id == spec.effective_controller
    assert sorted((n.id, n.host, n.port, n.rack) for n in described.nodes) == sorted(
        (b.id, b.host, b.port, b.rack) for b in info.brokers)

    metadata = admin.list_topics(timeout=10)
    assert metadata.cluster_id == info.cluster_id
    assert metadata.controller_id == spec.effective_controller
    expected = {t.name: t for t in lab.state.topics(name)}
    assert set(metadata.topics) == set(expected)
    for topic_name, topic in metadata.topics.items():
        assert len(topic.partitions) == expected[topic_name].partitions
        for p in topic.partitions.values():
            assert len(p.replicas) == expected[topic_name].replication_factor
            assert p.leader == p.replicas[0]
            assert sorted(p.isrs) == sorted(p.replicas)

    futures = admin.describe_topics(TopicCollection(sorted(expected)), request_timeout=10)
    for topic_name, future in futures.items():
        desc = future.result(timeout=15)
        assert _uuid_bytes(str(desc.topic_id)) == kafka_str_to_uuid(expected[topic_name].topic_id).bytes
        assert desc.is_internal == (topic_name == "__consumer_offsets")
        assert len(desc.partitions) == expected[topic_name].partitions


@pytest.mark.parametrize("name", CLUSTERS)
def test_kcat_metadata_listing(lab: LabFleet, name: str) -> None:
    info = lab.clusters[name]
    out = subprocess.run(["kcat", "-L", "-J", "-b", info.bootstrap, "-m", "10"],
                         capture_output=True, text=True, timeout=30, check=True)
    doc = json.loads(out.stdout)
    assert doc["controllerid"] == lab.runtimes[name].spec.effective_controller
    assert sorted(b["id"] for b in doc["brokers"]) == sorted(b.id for b in info.brokers)
    assert {b["name"] for b in doc["brokers"]} == {f"{b.host}:{b.port}" for b in info.brokers}
    expected = {t.name: t for t in lab.state.topics(name)}
    assert {t["topic"] for t in doc["topics"]} == set(expected)
    for t in doc["topics"]:
        assert len(t["partitions"]) == expected[t["topic"]].partitions
        assert all(len(p["replicas"]) == expected[t["topic"]].replication_factor for p in t["partitions"])


def test_cluster_ids_and_topic_ids_have_kafkas_text_form(lab: LabFleet) -> None:
    ids = [c.cluster_id for c in lab.clusters.values()]
    assert len(set(ids)) == len(ids)
    for text in ids + [t.topic_id for n in CLUSTERS for t in lab.state.topics(n)]:
        assert len(text) == 22 and not text.startswith("-")
        kafka_str_to_uuid(text)  # raises on anything that is not Kafka's base64 UUID text
