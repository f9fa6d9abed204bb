"""Differential: the lab answers Metadata v12 and ApiVersions like the real Apache Kafka brokers of the rig."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from backend.kafka import protocol as P
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.integration.lab.conftest import RawClient

KAFKA_ID = re.compile(r"^[A-Za-z0-9_-]{22}$")
TOPICS = (("diff-wide", 6, 3), ("diff-pair", 2, 2), ("diff-single", 1, 1))


def _first(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _metadata(bootstrap: str, names: list[str]) -> dict[str, Any]:
    c = RawClient(*_first(bootstrap))
    try:
        return c.request(P.API_METADATA, 12, {"topics": [{"name": n, "topic_id": None} for n in names],
                                              "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False})
    finally:
        c.close()


def _shape(md: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    """Every field the product reads, with ids replaced by their format."""
    topics = {}
    for t in md["topics"]:
        name = rename.get(t["name"], t["name"])
        topics[name] = {
            "error_code": t["error_code"],
            "is_internal": t["is_internal"],
            "has_topic_id": bool(KAFKA_ID.match(t["topic_id"])) and t["topic_id"] != P.ZERO_UUID,
            "partitions": sorted(
                (p["partition_index"], p["error_code"], len(p["replica_nodes"]), len(p["isr_nodes"]),
                 p["leader_id"] in p["replica_nodes"], p["leader_id"] in p["isr_nodes"])
                for p in t["partitions"]),
        }
    return {
        "brokers": sorted((sorted(b), b["rack"]) for b in md["brokers"]),
        "broker_count": len(md["brokers"]),
        "cluster_id_format": bool(KAFKA_ID.match(md["cluster_id"] or "")),
        "controller_is_a_broker": md["controller_id"] in {b["node_id"] for b in md["brokers"]},
        "topics": topics,
    }


@pytest.fixture(scope="module")
def diff_lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A lab cluster built like the rig's KRaft cluster: three brokers in racks rack-a..c, the 4.3 profile."""
    tmp: Path = tmp_path_factory.mktemp("difflab")
    raw = {"lab": {"state_dir": str(tmp / "state")},
           "clusters": [{"name": "twin", "profile": "apache-kafka-4.3-kraft",
                         "brokers": [{"id": 1, "rack": "rack-a"}, {"id": 2, "rack": "rack-b"},
                                     {"id": 3, "rack": "rack-c"}]}]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    yield fleet
    fleet.stop()


def test_metadata_v12_matches_real_kafka4(kafka4: Any, diff_lab: LabFleet) -> None:
    suffix = uuid.uuid4().hex[:8]
    real_names = [f"{n}-{suffix}" for n, _p, _rf in TOPICS]
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap, "socket.timeout.ms": 10000})
    futures = admin.create_topics([NewTopic(f"{n}-{suffix}", p, rf) for n, p, rf in TOPICS], request_timeout=30)
    for f in futures.values():
        f.result(timeout=60)
    for n, p, rf in TOPICS:
        diff_lab.create_topic("twin", n, partitions=p, replication_factor=rf)

    rename = {f"{n}-{suffix}": n for n, _p, _rf in TOPICS}
    lab_md = _metadata(diff_lab.clusters["twin"].bootstrap, [n for n, _p, _rf in TOPICS] + ["no-such-topic"])
    deadline = time.monotonic() + 60
    while True:  # a new topic's leaders take a moment to show in every broker's metadata cache
        real_md = _metadata(kafka4.bootstrap, real_names + ["no-such-topic"])
        ready = all(t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"])
                    for t in real_md["topics"] if t["name"] != "no-such-topic")
        if ready or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    real, lab = _shape(real_md, rename), _shape(lab_md, {})
    assert lab["topics"] == real["topics"]
    assert lab["brokers"] == real["brokers"]
    assert lab["broker_count"] == real["broker_count"] == 3
    assert lab["cluster_id_format"] and real["cluster_id_format"]
    assert lab["controller_is_a_broker"] and real["controller_is_a_broker"]
    assert real["topics"]["no-such-topic"]["error_code"] == P.UNKNOWN_TOPIC_OR_PARTITION


def _api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    c = RawClient(*_first(bootstrap))
    try:
        out = c.request(P.API_API_VERSIONS, 3, {"client_software_name": "fleetview-test", "client_software_version": "1"})
    finally:
        c.close()
    assert out["error_code"] == 0
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in out["api_keys"]}


def test_kafka43_profile_advertises_what_real_kafka_4_3_does(kafka4: Any, diff_lab: LabFleet) -> None:
    real = _api_versions(kafka4.bootstrap)
    lab = _api_versions(diff_lab.clusters["twin"].bootstrap)
    differences = {k: (lab.get(k), real.get(k)) for k in set(real) | set(lab) if lab.get(k) != real.get(k)}
    assert differences == {}


def test_kafka39_profile_advertises_what_real_kafka_3_9_does(kafka39: Any, tmp_path: Path) -> None:
    raw = {"lab": {"state_dir": str(tmp_path / "state")},
           "clusters": [{"name": "twin39", "profile": "apache-kafka-3.9-zk", "brokers": [{"id": 1}]}]}
    with LabFleet(parse_lab_config(raw, tmp_path)) as fleet:
        lab = _api_versions(fleet.clusters["twin39"].bootstrap)
    real = _api_versions(kafka39.bootstrap)
    differences = {k: (lab.get(k), real.get(k)) for k in set(real) | set(lab) if lab.get(k) != real.get(k)}
    assert differences == {}
