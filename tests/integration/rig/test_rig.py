"""The test rig talks to every real component: Kafka 3.9 (ZooKeeper mode), Kafka 4.x (KRaft), ZooKeeper, Spark."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer

KAFKA_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def _describe(conf: dict[str, object]) -> object:
    admin = AdminClient({"socket.timeout.ms": 10000, **conf})
    return admin.describe_cluster(request_timeout=20).result(timeout=30)


@pytest.mark.parametrize("fixture_name", ["kafka39", "kafka4"])
def test_describe_cluster_returns_kafka_cluster_id(request: pytest.FixtureRequest, fixture_name: str) -> None:
    cluster = request.getfixturevalue(fixture_name)
    described = _describe({"bootstrap.servers": cluster.bootstrap})
    assert KAFKA_ID.match(described.cluster_id), described.cluster_id
    assert described.cluster_id == cluster.cluster_id
    assert len(described.nodes) == len(cluster.brokers)
    assert {node.port for node in described.nodes} == {b.port for b in cluster.brokers}


def test_zookeeper_holds_cluster_id_of_kafka39(kafka39: KafkaZkCluster) -> None:
    zk = KazooClient(hosts=kafka39.zk_connect, timeout=10)
    zk.start(timeout=15)
    try:
        raw, _ = zk.get("/cluster/id")
        broker_ids = zk.get_children("/brokers/ids")
    finally:
        zk.stop()
        zk.close()
    registered = json.loads(raw)
    assert set(registered) >= {"version", "id"}
    metadata_id = AdminClient({"bootstrap.servers": kafka39.bootstrap}).list_topics(timeout=15).cluster_id
    assert registered["id"] == metadata_id == kafka39.cluster_id
    assert broker_ids == ["0"]


def test_zookeeper_is_a_real_server(zookeeper: ZooKeeperServer) -> None:
    zk = KazooClient(hosts=zookeeper.connect, timeout=10)
    zk.start(timeout=15)
    try:
        path = f"/rig-check-{time.time_ns()}"
        zk.create(path, b"hello")
        assert zk.get(path)[0] == b"hello"
        zk.delete(path)
        assert zk.exists(path) is None
    finally:
        zk.stop()
        zk.close()


def test_kraft_cluster_replicates_across_three_brokers(kafka4: KafkaKraftCluster) -> None:
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    name = f"rig-rf3-{time.time_ns()}"
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)])[name].result(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=name, timeout=10).topics[name]
        if topic.error is None and len(topic.partitions) == 3:
            break
        time.sleep(0.3)
    assert all(len(p.replicas) == 3 for p in topic.partitions.values())
    admin.delete_topics([name])[name].result(timeout=30)


def test_stop_and_restart_one_broker(kafka4_all_up: KafkaKraftCluster) -> None:
    kafka4 = kafka4_all_up
    victim = kafka4.brokers[-1]
    kafka4.stop_broker(victim.node_id)
    assert not victim.proc.alive()
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if victim.node_id not in admin.list_topics(timeout=10).brokers:
            break
        time.sleep(0.5)
    assert victim.node_id not in admin.list_topics(timeout=10).brokers
    kafka4.start_broker(victim.node_id)
    assert victim.proc.alive()
    assert victim.node_id in AdminClient({"bootstrap.servers": kafka4.bootstrap}).list_topics(timeout=10).brokers


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_scram_listener_accepts_only_the_right_password(kafka4: KafkaKraftCluster, mechanism: str) -> None:
    base = {
        "bootstrap.servers": kafka4.sasl_bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": kafka4.scram_user,
        "ssl.ca.location": kafka4.ca_file,
    }
    described = _describe({**base, "sasl.password": kafka4.scram_password})
    assert described.cluster_id == kafka4.cluster_id
    # librdkafka reports authentication failures through error_cb; the request itself times out.
    seen: list[KafkaError] = []
    admin = AdminClient({**base, "sasl.password": "definitely-wrong", "error_cb": seen.append})
    with pytest.raises(KafkaException):
        admin.describe_cluster(request_timeout=3).result(timeout=10)
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        admin.poll(0.5)  # serves error_cb
    assert any(err.code() == KafkaError._AUTHENTICATION for err in seen), [str(e) for e in seen]


def test_local_spark_session_computes(spark: object) -> None:
    df = spark.range(1, 1001)  # type: ignore[attr-defined]
    assert df.selectExpr("sum(id) AS s").collect()[0]["s"] == sum(range(1, 1001))
    assert spark.sparkContext.master.startswith("local")  # type: ignore[attr-defined]
