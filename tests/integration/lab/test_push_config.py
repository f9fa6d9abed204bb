"""KIP-1324 PushConfig end to end: the lab policy's size limit, sensitive-type rule and sink record format."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from backend.kafka import protocol as P
from backend.lab.clientgen import generate_clients, push_all
from backend.lab.clients import CollectedConfig, PushEntry, collect_config, push_config
from backend.lab.fleet import LabFleet
from backend.lab.sink import RECORD_FIELDS
from tests.integration.lab.conftest import PUSH_LIMIT, RawClient

Connect = Callable[..., RawClient]


def _sink_lines(lab: LabFleet, cluster: str) -> list[dict[str, object]]:
    sink = lab.clusters[cluster].sink_dir
    assert sink is not None
    return [json.loads(line) for f in sorted(Path(sink).glob("*.jsonl")) for line in f.read_text().splitlines()]


def _broker(lab: LabFleet, cluster: str) -> tuple[str, int, int]:
    b = lab.clusters[cluster].brokers[0]
    return b.host, b.port, b.id


def test_accepted_push_writes_exactly_one_line_in_the_record_format(lab: LabFleet) -> None:
    host, port, broker_id = _broker(lab, "k4")
    before = _sink_lines(lab, "k4")
    instance = str(uuid.uuid4())
    collected = collect_config("producer", {"client.id": "orders-svc", "acks": "1", "linger.ms": 20,
                                            "sasl.jaas.config": "secret!", "key.serializer": "x.Ser"},
                               {"retries": 2147483647})
    started = datetime.now(UTC)
    outcome = push_config(host, port, collected, client_instance_id=instance, client_id="orders-svc",
                          software_name="apache-kafka-java", software_version="4.2.0", timeout_s=5)
    assert (outcome.status, outcome.error_code) == ("accepted", 0)
    new = _sink_lines(lab, "k4")[len(before):]
    assert len(new) == 1
    rec = new[0]
    assert tuple(rec) == RECORD_FIELDS
    assert rec["cluster_id"] == lab.clusters["k4"].cluster_id and rec["broker_id"] == broker_id
    assert rec["client_instance_id"] == instance and rec["client_id"] == "orders-svc"
    assert rec["client_type"] is None and rec["principal"] == "User:ANONYMOUS"
    assert (rec["client_software_name"], rec["client_software_version"]) == ("apache-kafka-java", "4.2.0")
    assert str(rec["client_address"]).startswith("127.0.0.1:")
    uuid.UUID(str(rec["snapshot_id"]))
    received = datetime.fromisoformat(str(rec["received_at"]).replace("Z", "+00:00"))
    assert received.tzinfo is not None and abs((received - started).total_seconds()) < 10
    assert rec["configs"] == [
        {"key": "acks", "value": "1", "type": "STRING", "is_default": False},
        {"key": "client.id", "value": "orders-svc", "type": "STRING", "is_default": False},
        {"key": "linger.ms", "value": "20", "type": "LONG", "is_default": False},
        {"key": "retries", "value": "2147483647", "type": "INT", "is_default": True},
    ]
    assert "secret!" not in json.dumps(new)


def test_push_over_the_size_limit_gets_config_too_large_and_stores_nothing(lab: LabFleet) -> None:
    host, port, _ = _broker(lab, "k4")
    before = len(_sink_lines(lab, "k4"))
    big = CollectedConfig(tuple(PushEntry("client.id", "x" * 100, "STRING", False) for _ in range(PUSH_LIMIT // 100 + 5)), ())
    outcome = push_config(host, port, big, client_instance_id=str(uuid.uuid4()), client_id="big",
                          software_name="t", software_version="1", timeout_s=5)
    assert outcome.status == "rejected" and outcome.error_code == P.CONFIG_TOO_LARGE
    assert "client.config.max.bytes=2048" in (outcome.error_message or "")
    assert len(_sink_lines(lab, "k4")) == before


def test_password_and_class_types_are_refused_with_a_reason_and_never_stored(lab: LabFleet) -> None:
    host, port, _ = _broker(lab, "k4")
    before = len(_sink_lines(lab, "k4"))
    sneaky = CollectedConfig((PushEntry("linger.ms", "5", "LONG", False),
                              PushEntry("my.password", "hunter2", "PASSWORD", False),
                              PushEntry("my.plugin", "com.acme.Plugin", "CLASS", False)), ())
    outcome = push_config(host, port, sneaky, client_instance_id=str(uuid.uuid4()), client_id="sneaky",
                          software_name="t", software_version="1", timeout_s=5)
    assert outcome.status == "rejected" and outcome.error_code == P.INVALID_CONFIG
    assert "my.password (PASSWORD)" in (outcome.error_message or "")
    assert "my.plugin (CLASS)" in (outcome.error_message or "")
    new = _sink_lines(lab, "k4")[before:]
    assert len(new) == 1 and [c["key"] for c in new[0]["configs"]] == ["linger.ms"]  # type: ignore[index]
    assert "hunter2" not in json.dumps(new) and "com.acme.Plugin" not in json.dumps(new)


def test_cluster_without_policy_does_not_advertise_push_config(lab: LabFleet) -> None:
    host, port, _ = _broker(lab, "k43")
    collected = collect_config("consumer", {"group.id": "g"}, {})
    outcome = push_config(host, port, collected, client_instance_id=str(uuid.uuid4()), client_id="c",
                          software_name="t", software_version="1", timeout_s=5)
    assert outcome.status == "unsupported"
    assert outcome.advertised_api_versions_max == 4  # fell back from v5 through KIP-511


def test_push_without_client_instance_id_is_refused(lab: LabFleet, raw_client: Callable[..., RawClient]) -> None:
    host, port, _ = _broker(lab, "k4")
    c = raw_client(host, port)
    c.request(P.API_API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    out = c.request(P.PUSH_CONFIG_API_KEY, 0, {"configs": [{"config_key": "acks", "config_value": "all",
                                                            "config_type": 1, "is_default": True}]})
    assert out["error_code"] == P.INVALID_REQUEST and "ClientInstanceId" in out["error_message"]


def test_unreachable_broker_is_an_outcome_not_an_exception(lab: LabFleet) -> None:
    collected = collect_config("producer", {"acks": "all"}, {})
    host, port, _ = _broker(lab, "k4")
    lab.set_fault("k4", 1, refuse=True)
    try:
        outcome = push_config(host, port, collected, client_instance_id=str(uuid.uuid4()), client_id=None,
                              software_name="t", software_version="1", timeout_s=2)
    finally:
        lab.set_fault("k4", 1, refuse=False)
    assert outcome.status == "error" and "ConnectionRefused" in (outcome.error_message or "")


def test_generated_fleet_pushes_one_record_per_client_instance(lab: LabFleet) -> None:
    clusters = {"k4": "4.3.1", "rp": "v24.2.7"}
    before = {c: len(_sink_lines(lab, c)) for c in clusters}
    clients = generate_clients(clusters, 60, seed=11)
    brokers = {n: [(b.host, b.port) for b in lab.clusters[n].brokers] for n in clusters}
    outcomes = push_all(clients, brokers, seed=11)
    assert [o.status for o in outcomes] == ["accepted"] * 60
    records = [r for c in clusters for r in _sink_lines(lab, c)[before[c]:]]
    assert len(records) == 60
    assert {r["client_instance_id"] for r in records} == {c.client_instance_id for c in clients}
    by_instance = {c.client_instance_id: c for c in clients}
    for r in records:
        client = by_instance[str(r["client_instance_id"])]
        assert r["cluster_id"] == lab.clusters[client.cluster].cluster_id
        assert r["client_software_version"] == client.software_version
        assert "config.push.allowed.keys" not in {c["key"] for c in r["configs"]}  # type: ignore[union-attr]
