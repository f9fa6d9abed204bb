"""The probe against real Apache Kafka 3.9 (ZooKeeper) and 4.x (KRaft, SASL_SSL SCRAM) brokers."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from backend.kafka import protocol as P
from backend.kafka import versions as V
from backend.kafka.probe import ProbeSecurity, probe_broker, probe_brokers
from tests.rig.kafka import KAFKA_KRAFT_VERSION, KAFKA_ZK_VERSION, KafkaKraftCluster, KafkaZkCluster

TIMEOUT_S = 10.0


def _contains(result_min: str | None, result_max: str | None, true_version: str) -> bool:
    release = V.release_key(".".join(true_version.split(".")[:2]))
    assert result_min is not None
    return V.release_key(result_min) <= release and (result_max is None or release <= V.release_key(result_max))


def test_kafka39_zookeeper_broker_guessed_range_contains_3_9(kafka39: KafkaZkCluster) -> None:
    node = kafka39.brokers[0]
    result = probe_broker(node.host, node.port, timeout_s=TIMEOUT_S)
    assert result.ok, result.error
    assert result.provenance == "guessed" and result.software_version is None
    assert result.software_name == V.APACHE
    assert _contains(result.version_min, result.version_max, KAFKA_ZK_VERSION), (
        result.version_min, result.version_max, result.evidence)
    assert any("ZooKeeper" in e for e in result.evidence)
    assert result.api_versions_request_version_used == 3
    assert result.describe_cluster_version_used == 1  # 3.9 offers DescribeCluster 0-1
    assert result.cluster_id == kafka39.cluster_id
    assert [b["broker_id"] for b in result.describe_cluster["brokers"]] == [node.node_id]


def test_kafka4_every_broker_guessed_range_contains_the_true_version(kafka4_all_up: KafkaKraftCluster) -> None:
    cluster = kafka4_all_up
    results = probe_brokers([(b.host, b.port) for b in cluster.brokers], timeout_s=TIMEOUT_S, max_workers=3)
    for node, result in zip(cluster.brokers, results, strict=True):
        assert result.ok, result.error
        assert result.provenance == "guessed", result
        assert _contains(result.version_min, result.version_max, KAFKA_KRAFT_VERSION), (
            result.version_min, result.version_max, result.evidence)
        assert V.release_key(result.version_min or "0") >= (4, 0)  # KIP-896 removals seen
        assert result.describe_cluster_version_used == 2  # 4.x offers 0-2: no KIP-885 yet
        assert result.cluster_id == cluster.cluster_id
        assert sorted(b["broker_id"] for b in result.describe_cluster["brokers"]) == sorted(
            b.node_id for b in cluster.brokers)
        assert result.port == node.port


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka4_sasl_ssl_scram_listener(kafka4: KafkaKraftCluster, mechanism: str) -> None:
    host, port = kafka4.sasl_bootstrap.split(",")[0].rsplit(":", 1)
    sec = ProbeSecurity("SASL_SSL", mechanism, kafka4.scram_user, kafka4.scram_password,
                        ssl_cafile=kafka4.ca_file)
    result = probe_broker(host, int(port), security=sec, timeout_s=TIMEOUT_S)
    assert result.ok, result.error
    assert {"tls", "auth", "api_versions", "describe_cluster"} <= set(result.timings_ms)
    assert result.cluster_id == kafka4.cluster_id
    assert mechanism in (result.sasl_mechanisms or [])


def test_kafka4_wrong_password_fails_fast_as_auth_without_the_password(kafka4: KafkaKraftCluster) -> None:
    host, port = kafka4.sasl_bootstrap.split(",")[0].rsplit(":", 1)
    wrong = "wrong-" + uuid.uuid4().hex
    sec = ProbeSecurity("SASL_SSL", "SCRAM-SHA-256", kafka4.scram_user, wrong, ssl_cafile=kafka4.ca_file)
    start = time.monotonic()
    result = probe_broker(host, int(port), security=sec, timeout_s=TIMEOUT_S)
    elapsed = time.monotonic() - start
    assert not result.ok and result.error_kind == "auth", result.error
    assert "authentication failed" in (result.error or "").lower()
    assert elapsed < TIMEOUT_S / 2
    for text in (repr(result), str(result), result.error or "", repr(sec), str(sec), " ".join(result.warnings)):
        assert wrong not in text and kafka4.scram_password not in text
    assert result.api_versions  # ApiVersions precedes SASL, so the fingerprint survives


def test_kafka4_ssl_without_the_ca_is_a_tls_error(kafka4: KafkaKraftCluster) -> None:
    host, port = kafka4.sasl_bootstrap.split(",")[0].rsplit(":", 1)
    sec = ProbeSecurity("SASL_SSL", "SCRAM-SHA-256", kafka4.scram_user, kafka4.scram_password)
    result = probe_broker(host, int(port), security=sec, timeout_s=TIMEOUT_S)
    assert result.error_kind == "tls" and kafka4.scram_password not in repr(result)


def test_kafka4_stopped_broker_is_a_status_not_an_exception(kafka4_all_up: KafkaKraftCluster) -> None:
    victim = kafka4_all_up.brokers[-1]
    kafka4_all_up.stop_broker(victim.node_id)
    results = probe_brokers([(b.host, b.port) for b in kafka4_all_up.brokers], timeout_s=5.0)
    assert [r.ok for r in results] == [True] * (len(results) - 1) + [False]
    assert results[-1].error_kind in ("refused", "timeout", "disconnected")


def test_probe_metadata_topic_ids_match_librdkafka(kafka4: KafkaKraftCluster) -> None:
    topic = "probe-ids-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap, "socket.timeout.ms": 10000})
    admin.create_topics([NewTopic(topic, 3, 2)], request_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    # Every broker must know the topic: librdkafka's DescribeTopics below may ask any of them, and
    # on a loaded machine a broker's metadata lags a moment behind the controller's.
    for node in reversed(kafka4.brokers):  # brokers[0] last: its answer is the one compared
        while True:
            result = probe_broker(node.host, node.port, timeout_s=TIMEOUT_S, with_metadata=True)
            assert result.ok and result.metadata is not None
            ours = {t["name"]: t for t in result.metadata["topics"]}
            if topic in ours and all(p["leader_id"] >= 0 for p in ours[topic]["partitions"]):
                break
            assert time.monotonic() < deadline, f"topic never appeared with leaders on {node.node_id}"
            time.sleep(0.5)
    described = admin.describe_topics(TopicCollection([topic]), request_timeout=15)[topic].result(timeout=30)
    # Same 128 bits; librdkafka's str() uses standard base64 (+/) where Kafka prints URL-safe (-_).
    rd = described.topic_id
    bits = ((rd.get_most_significant_bits() & (2**64 - 1)) << 64) | (rd.get_least_significant_bits() & (2**64 - 1))
    assert P.kafka_str_to_uuid(ours[topic]["topic_id"]).int == bits
    assert ours[topic]["topic_id"] == str(rd).replace("+", "-").replace("/", "_")
    assert ours[topic]["topic_id"] != P.ZERO_UUID and len(ours[topic]["topic_id"]) == 22
    assert len(ours[topic]["partitions"]) == 3
    assert all(len(p["replica_nodes"]) == 2 for p in ours[topic]["partitions"])
    assert result.metadata["cluster_id"] == kafka4.cluster_id


def test_probe_security_from_a_fleet_file_reaches_the_scram_listener(
        kafka4: KafkaKraftCluster, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from backend.config import parse_fleet

    monkeypatch.setenv("FLEETVIEW_TEST_SCRAM_PW", kafka4.scram_password)
    fleet = parse_fleet(f"""
[[clusters]]
name = "k4-sasl"
bootstrap_servers = ["{kafka4.sasl_bootstrap.split(",")[0]}"]
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
sasl_username = "{kafka4.scram_user}"
sasl_password_env = "FLEETVIEW_TEST_SCRAM_PW"
ssl_cafile = "{kafka4.ca_file}"
""", source="test", secrets_path=tmp_path / "none.toml")
    cluster = fleet.cluster("k4-sasl")
    sec = ProbeSecurity.from_cluster(cluster)
    assert sec.protocol == "SASL_SSL" and sec.sasl_mechanism == "SCRAM-SHA-512"
    assert kafka4.scram_password not in repr(sec)
    host, port = cluster.bootstrap_servers[0].rsplit(":", 1)
    result = probe_broker(host, int(port), security=sec, timeout_s=TIMEOUT_S)
    assert result.ok, result.error
    assert result.cluster_id == kafka4.cluster_id
