"""Differential: the lab's DescribeConfigs catalog and answers against the rig's real Kafka 3.9 and 4.3 brokers.

The catalog (backend/lab/profiles/broker_configs.json) must list the live brokers' configs with their
types, read-only and sensitive flags and defaults; a lab cluster given the real broker's
server.properties (its STATIC_BROKER_CONFIG entries) answers with the same values and sources for
the broker and for topics, with and without overrides.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from backend.kafka import protocol as P
from backend.kafka.configs import ConfigEntry, describe_configs
from backend.lab.config_catalog import load_catalogs
from backend.lab.configs_build import DEPLOYMENT_PREFIXES, build_family
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster

pytestmark = pytest.mark.timeout(300)
# Per-host configs: the same source on both sides, values that name hosts, ports and directories.
PER_HOST = {"broker.id", "node.id", "listeners", "advertised.listeners", "log.dirs", "zookeeper.connect",
            "controller.quorum.voters"}
OVERRIDES = {"retention.ms": "3600000", "cleanup.policy": "compact", "min.insync.replicas": "1"}


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _fresh_topics(bootstrap: str) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    plain, overridden = f"diffcfg-plain-{suffix}", f"diffcfg-over-{suffix}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    futures = admin.create_topics([NewTopic(plain, 1, 1), NewTopic(overridden, 1, 1, config=OVERRIDES)],
                                  request_timeout=30)
    for future in futures.values():
        future.result(timeout=60)
    return plain, overridden


def _real(rig: KafkaKraftCluster | KafkaZkCluster, broker_id: int, topics: tuple[str, str]) -> dict[str, Any]:
    host, port = _address(rig.bootstrap)
    # CreateTopics returns once the controller has the topics; the broker asked may learn of them a moment later
    # (KRaft brokers apply the metadata log asynchronously), and answers UNKNOWN_TOPIC_OR_PARTITION until then.
    deadline = time.monotonic() + 30
    while True:
        answer = describe_configs(host, port,
                                  [(P.RESOURCE_BROKER, str(broker_id)), *((P.RESOURCE_TOPIC, t) for t in topics)],
                                  include_synonyms=True, timeout_s=20)
        assert answer.ok, answer.error
        errors = [r.error for r in answer.resources]
        if not any(e == "UNKNOWN_TOPIC_OR_PARTITION" for e in errors) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(e is None for e in errors), errors
    return {r.name: {e.name: e for e in r.entries} for r in answer.resources}


@pytest.fixture(scope="module", params=["kafka4", "kafka39"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real broker's answers and a lab cluster given that broker's server.properties, asked the same."""
    rig = request.getfixturevalue(request.param)
    family, profile = ("kafka-4.3", "apache-kafka-4.3-kraft") if request.param == "kafka4" else (
        "kafka-3.9", "apache-kafka-3.9-zk")
    broker_id = rig.brokers[0].node_id
    topics = _fresh_topics(rig.bootstrap)
    real = _real(rig, broker_id, topics)
    catalog = load_catalogs()[family]
    static = {n: e.value for n, e in real[str(broker_id)].items()
              if e.source == "STATIC_BROKER_CONFIG" and e.value is not None and n in catalog.broker and n not in PER_HOST}
    tmp: Path = tmp_path_factory.mktemp("diffcfg")
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [{
        "name": "twin", "profile": profile, "configs": static,
        "brokers": [{"id": broker_id, "rack": real[str(broker_id)]["broker.rack"].value}],
        "topics": [{"name": topics[0]}, {"name": topics[1], "configs": OVERRIDES}]}]}
    lab = LabFleet(parse_lab_config(raw, tmp))
    lab.start()
    try:
        b = lab.clusters["twin"].brokers[0]
        lab_answer = describe_configs(b.host, b.port, [(P.RESOURCE_BROKER, str(broker_id)),
                                                       *((P.RESOURCE_TOPIC, t) for t in topics)], include_synonyms=True)
        assert lab_answer.ok, lab_answer.error
        yield {"rig": rig, "family": family, "broker_id": broker_id, "topics": topics, "real": real,
               "lab": {r.name: {e.name: e for e in r.entries} for r in lab_answer.resources}}
    finally:
        lab.stop()


def _shape(e: ConfigEntry) -> tuple[Any, ...]:
    return (e.config_type, e.read_only, e.sensitive)


def test_the_catalog_is_what_the_live_broker_declares(pair: dict[str, Any]) -> None:
    rig, family, topics = pair["rig"], pair["family"], pair["topics"]
    live = build_family(rig.bootstrap.split(",")[0], pair["broker_id"], topics[0])
    committed = load_catalogs()[family]
    assert [row[0] for row in live["broker"]] == list(committed.broker)
    for name, default, config_type, read_only, sensitive in live["broker"]:
        d = committed.broker[name]
        assert (d.default, d.type, d.read_only, d.sensitive) == (default, config_type, read_only, sensitive), name
    assert live["dynamic_defaults"] == committed.dynamic_defaults
    assert [row[0] for row in live["topic"]] == list(committed.topic)
    for name, default, config_type, synonyms in live["topic"]:
        t = committed.topic[name]
        assert (t.type, t.synonyms) == (config_type, tuple(synonyms)), name
        if name not in ("segment.bytes",):  # the rig sets log.segment.bytes: its default comes from the synonym
            assert t.default == default, name


def test_a_lab_broker_with_the_same_server_properties_answers_like_the_real_one(pair: dict[str, Any]) -> None:
    broker = str(pair["broker_id"])
    real = {n: e for n, e in pair["real"][broker].items() if not n.startswith(DEPLOYMENT_PREFIXES)}
    lab = pair["lab"][broker]
    assert list(lab) == list(real)  # the same configs, in the real broker's order
    for name, e in real.items():
        mine = lab[name]
        assert _shape(mine) == _shape(e), name
        assert mine.source == e.source, (name, mine.source, e.source)
        if name not in PER_HOST:
            assert mine.value == e.value, (name, mine.value, e.value)
            assert [s[2] for s in mine.synonyms] == [s[2] for s in e.synonyms], (name, mine.synonyms, e.synonyms)


@pytest.mark.parametrize("which", [0, 1], ids=["no overrides", "overrides"])
def test_a_lab_topic_answers_like_the_real_one(pair: dict[str, Any], which: int) -> None:
    topic = pair["topics"][which]
    real, lab = pair["real"][topic], pair["lab"][topic]
    assert list(lab) == list(real)
    for name, e in real.items():
        mine = lab[name]
        assert (_shape(mine), mine.source, mine.value) == (_shape(e), e.source, e.value), name
        assert [(s[0], s[2]) for s in mine.synonyms] == [(s[0], s[2]) for s in e.synonyms], name
    assert {n for n, e in lab.items() if e.source == "DYNAMIC_TOPIC_CONFIG"} == (set(OVERRIDES) if which else set())
