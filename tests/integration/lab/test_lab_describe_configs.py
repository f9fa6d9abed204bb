"""DescribeConfigs on the lab brokers: a real client (librdkafka through confluent-kafka) reads what the lab holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from backend.kafka import protocol as P
from backend.kafka.configs import describe_configs
from backend.lab.broker_configs import ClusterConfigs, LabConfigChangeError
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A KRaft and a ZooKeeper-mode lab cluster with configs at every level."""
    tmp: Path = tmp_path_factory.mktemp("lab-configs")
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [
        {"name": "k", "profile": "apache-kafka-4-kraft-kip885",
         "configs": {"log.retention.hours": 72, "auto.create.topics.enable": False},
         "dynamic_configs": {"min.insync.replicas": 2},
         "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b", "configs": {"log.retention.hours": 24}},
                     {"id": 3, "rack": "c", "dynamic_configs": {"log.cleaner.threads": 4}}],
         "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3,
                     "configs": {"min.insync.replicas": 3, "cleanup.policy": "compact"}},
                    {"name": "plain", "partitions": 1, "replication_factor": 1}]},
        {"name": "z", "profile": "apache-kafka-3.9-zk", "configs": {"unclean.leader.election.enable": True},
         "brokers": [{"id": 7}], "topics": [{"name": "reports", "partitions": 2, "replication_factor": 1,
                                             "configs": {"retention.ms": 600000}}]},
    ]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    yield fleet
    fleet.stop()


def _librdkafka(bootstrap: str, resources: list[ConfigResource]) -> dict[str, dict[str, Any]]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    futures = admin.describe_configs(resources, request_timeout=20)
    out = {}
    for resource, future in futures.items():
        entries = future.result(timeout=30)
        out[resource.name] = {name: (e.value, ConfigSource(e.source).name, e.is_sensitive, e.is_read_only)
                              for name, e in entries.items()}
    del admin
    return out


def _expected_broker(configs: ClusterConfigs, broker_id: int) -> dict[str, Any]:
    out = {}
    for name, d in configs.catalog.broker.items():
        source, value = configs.broker_value(broker_id, name)
        out[name] = (None if d.sensitive else value, source, d.sensitive, d.read_only)
    return out


def _expected_topic(configs: ClusterConfigs, broker_id: int, topic: str) -> dict[str, Any]:
    out = {}
    for name in configs.catalog.topic:
        source, value, _synonyms = configs.topic_value(broker_id, topic, name)
        out[name] = (value, source, False, False)
    return out


@pytest.mark.parametrize("cluster", ["k", "z"])
def test_librdkafka_reads_each_brokers_configs_as_the_lab_holds_them(lab: LabFleet, cluster: str) -> None:
    rt = lab.runtimes[cluster]
    for broker in lab.clusters[cluster].brokers:
        got = _librdkafka(f"{broker.host}:{broker.port}", [ConfigResource(ResourceType.BROKER, str(broker.id))])
        assert got[str(broker.id)] == _expected_broker(rt.configs, broker.id)
    if cluster == "k":
        got = _librdkafka(lab.clusters["k"].bootstrap, [ConfigResource(ResourceType.BROKER, "1")])["1"]
        assert got["log.retention.hours"] == ("72", "STATIC_BROKER_CONFIG", False, True)
        assert got["min.insync.replicas"][:2] == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")


@pytest.mark.parametrize("cluster", ["k", "z"])
def test_librdkafka_reads_topic_configs_as_the_lab_holds_them(lab: LabFleet, cluster: str) -> None:
    rt = lab.runtimes[cluster]
    topics = [t.name for t in lab.state.topics(cluster)]
    first = lab.clusters[cluster].brokers[0]
    got = _librdkafka(f"{first.host}:{first.port}", [ConfigResource(ResourceType.TOPIC, t) for t in topics])
    assert set(got) == set(topics)
    for topic in topics:
        assert got[topic] == _expected_topic(rt.configs, first.id, topic), topic
    if cluster == "k":
        assert got["orders"]["min.insync.replicas"][:2] == ("3", "DYNAMIC_TOPIC_CONFIG")
        assert got["plain"]["min.insync.replicas"][:2] == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert got["plain"]["retention.ms"][:2] == (str(72 * 3_600_000), "STATIC_BROKER_CONFIG")
        assert got["__consumer_offsets"]["cleanup.policy"][:2] == ("compact", "DYNAMIC_TOPIC_CONFIG")


def test_run_time_changes_are_what_librdkafka_reads_next(lab: LabFleet) -> None:
    rt = lab.runtimes["k"]
    broker = lab.clusters["k"].brokers[1]
    address = f"{broker.host}:{broker.port}"
    lab.set_broker_config("k", broker.id, "log.cleaner.threads", 6)
    lab.set_broker_config("k", None, "unclean.leader.election.enable", True)
    lab.set_topic_config("k", "plain", "retention.ms", 3_600_000)
    try:
        brokers = _librdkafka(address, [ConfigResource(ResourceType.BROKER, str(broker.id))])[str(broker.id)]
        topics = _librdkafka(address, [ConfigResource(ResourceType.TOPIC, "plain")])["plain"]
        assert brokers == _expected_broker(rt.configs, broker.id)
        assert brokers["log.cleaner.threads"][:2] == ("6", "DYNAMIC_BROKER_CONFIG")
        assert brokers["unclean.leader.election.enable"][:2] == ("true", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert topics["retention.ms"][:2] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
        assert topics["unclean.leader.election.enable"][:2] == ("true", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    finally:
        lab.set_broker_config("k", broker.id, "log.cleaner.threads", None)
        lab.set_broker_config("k", None, "unclean.leader.election.enable", None)
        lab.set_topic_config("k", "plain", "retention.ms", None)
    after = _librdkafka(address, [ConfigResource(ResourceType.BROKER, str(broker.id))])[str(broker.id)]
    assert after["log.cleaner.threads"][:2] == ("1", "DEFAULT_CONFIG")
    with pytest.raises(LabConfigChangeError, match="read-only"):
        lab.set_broker_config("k", 1, "log.retention.hours", 1)
    with pytest.raises(LabConfigChangeError, match="unknown"):
        lab.set_topic_config("k", "plain", "no.such.config", 1)


def test_another_brokers_id_unknown_topics_and_cluster_defaults_answer_as_kafka_does(lab: LabFleet) -> None:
    broker = lab.clusters["k"].brokers[0]
    answer = describe_configs(broker.host, broker.port, [
        (P.RESOURCE_BROKER, "2"), (P.RESOURCE_TOPIC, "missing"), (P.RESOURCE_BROKER, ""), (8, "1")])
    assert answer.ok, answer.error
    by_name = {r.name: r for r in answer.resources}
    assert by_name["2"].error == "INVALID_REQUEST: Unexpected broker id, expected 1 or empty string, but received 2"
    assert by_name["missing"].error == "UNKNOWN_TOPIC_OR_PARTITION"
    assert {(e.name, e.value, e.source) for e in by_name[""].entries} == {
        ("min.insync.replicas", "2", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    assert by_name["1"].error is not None and by_name["1"].entries == ()
