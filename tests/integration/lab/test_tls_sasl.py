"""Lab clusters with TLS and SASL (PLAIN, SCRAM-SHA-256/512): librdkafka authenticates; bad passwords fail."""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from backend.lab.clients import SaslCredentials, collect_config, push_config
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.rig.tls import make_tls_files

PASSWORD = "lab-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def secure_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabFleet, Path]]:
    """One SASL_SSL cluster (SCRAM + PLAIN), one SSL-only cluster with PushConfig."""
    tmp = tmp_path_factory.mktemp("securelab")
    tls = make_tls_files(tmp / "tls")
    tls_table = {"certfile": str(tls.server_cert), "keyfile": str(tls.server_key), "cafile": str(tls.ca_cert)}
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [
        {"name": "sasl", "profile": "apache-kafka-4-kraft-kip885", "tls": tls_table,
         "sasl": {"mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"],
                  "users": [{"name": "alice", "password": PASSWORD}]},
         "policy": {"push_config": True},
         "brokers": [{"id": 1}, {"id": 2}], "topics": [{"name": "secure", "partitions": 2, "replication_factor": 2}]},
        {"name": "tls", "profile": "apache-kafka-4-kraft-kip885", "tls": tls_table,
         "policy": {"push_config": True}, "brokers": [{"id": 1}]},
    ]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    yield fleet, tls.ca_cert
    fleet.stop()


def _admin(fleet: LabFleet, ca: Path, mechanism: str, password: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": fleet.clusters["sasl"].bootstrap, "security.protocol": "SASL_SSL",
                        "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": password,
                        "ssl.ca.location": str(ca), "socket.timeout.ms": 5000})


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_sasl_ssl_clients_authenticate_and_read_metadata(secure_lab: tuple[LabFleet, Path], mechanism: str) -> None:
    fleet, ca = secure_lab
    admin = _admin(fleet, ca, mechanism, PASSWORD)
    described = admin.describe_cluster(request_timeout=10).result(timeout=15)
    assert described.cluster_id == fleet.clusters["sasl"].cluster_id
    assert "secure" in admin.list_topics(timeout=10).topics


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_wrong_password_is_an_authentication_failure(secure_lab: tuple[LabFleet, Path], mechanism: str) -> None:
    fleet, ca = secure_lab
    admin = _admin(fleet, ca, mechanism, "wrong")
    with pytest.raises(KafkaException) as err:
        admin.list_topics(timeout=5)
    assert PASSWORD not in str(err.value)


def test_fleet_file_names_the_password_env_not_the_password(secure_lab: tuple[LabFleet, Path], tmp_path: Path) -> None:
    fleet, ca = secure_lab
    text = fleet.write_fleet_file(tmp_path / "clusters.toml").read_text()
    assert PASSWORD not in text
    assert 'sasl_password_env = "LAB_SASL_PASSWORD"' in text and f"ssl_cafile = {json.dumps(str(ca))}" in text


def test_push_config_over_tls(secure_lab: tuple[LabFleet, Path]) -> None:
    fleet, ca = secure_lab
    b = fleet.clusters["tls"].brokers[0]
    ctx = ssl.create_default_context(cafile=str(ca))
    outcome = push_config(b.host, b.port, collect_config("consumer", {"group.id": "g1"}, {}),
                          client_instance_id=str(uuid.uuid4()), client_id="c1", software_name="t",
                          software_version="1", timeout_s=5, ssl_context=ctx)
    assert outcome.status == "accepted"
    sink = fleet.clusters["tls"].sink_dir
    assert sink is not None and len(list(Path(sink).glob("*.jsonl"))) == 1


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_push_config_after_sasl_records_the_principal(secure_lab: tuple[LabFleet, Path], mechanism: str) -> None:
    fleet, ca = secure_lab
    b = fleet.clusters["sasl"].brokers[0]
    ctx = ssl.create_default_context(cafile=str(ca))
    sink = Path(str(fleet.clusters["sasl"].sink_dir))
    before = sum(len(f.read_text().splitlines()) for f in sink.glob("*.jsonl"))
    common = {"client_id": "p1", "software_name": "t", "software_version": "1", "timeout_s": 5, "ssl_context": ctx}
    collected = collect_config("producer", {"acks": "all"}, {})

    denied = push_config(b.host, b.port, collected, client_instance_id=str(uuid.uuid4()),
                         sasl=SaslCredentials(mechanism, "alice", "wrong"), **common)  # type: ignore[arg-type]
    assert denied.status == "auth_failed" and "SASL_AUTHENTICATION_FAILED" in (denied.error_message or "")
    assert "wrong" not in repr(SaslCredentials(mechanism, "alice", "wrong"))

    instance = str(uuid.uuid4())
    ok = push_config(b.host, b.port, collected, client_instance_id=instance,
                     sasl=SaslCredentials(mechanism, "alice", PASSWORD), **common)  # type: ignore[arg-type]
    assert ok.status == "accepted"
    lines = [json.loads(x) for f in sink.glob("*.jsonl") for x in f.read_text().splitlines()]
    assert len(lines) == before + 1
    rec = next(r for r in lines if r["client_instance_id"] == instance)
    assert rec["principal"] == "User:alice"
    assert PASSWORD not in json.dumps(lines)


def test_generated_fleet_authenticates_where_the_cluster_needs_it(secure_lab: tuple[LabFleet, Path]) -> None:
    from backend.lab.clientgen import push_client_fleet

    fleet, _ca = secure_lab
    clients, outcomes = push_client_fleet(fleet, 12, seed=21)
    assert len(clients) == 12 and [o.status for o in outcomes] == ["accepted"] * 12
    sink = Path(str(fleet.clusters["sasl"].sink_dir))
    by_instance = {json.loads(x)["client_instance_id"]: json.loads(x)
                   for f in sink.glob("*.jsonl") for x in f.read_text().splitlines()}
    on_sasl = [c for c in clients if c.cluster == "sasl"]
    assert on_sasl and all(by_instance[c.client_instance_id]["principal"] == "User:alice" for c in on_sasl)


def _tls_raw(fleet: LabFleet, ca: Path) -> tuple[ssl.SSLSocket, str]:
    import socket

    b = fleet.clusters["sasl"].brokers[0]
    ctx = ssl.create_default_context(cafile=str(ca))
    sock = ctx.wrap_socket(socket.create_connection((b.host, b.port), timeout=5), server_hostname=b.host)
    return sock, b.host


def test_requests_before_authentication_close_the_connection(secure_lab: tuple[LabFleet, Path]) -> None:
    import time

    from backend.kafka import protocol as P

    fleet, ca = secure_lab
    sock, _host = _tls_raw(fleet, ca)
    with sock:
        sock.sendall(P.encode_request(P.API_METADATA, 12, 1, "t", {"topics": None}))
        with pytest.raises(P.ProtocolError, match="connection closed"):
            P.read_frame(sock, deadline=time.monotonic() + 5)


def test_sasl_handshake_v0_takes_raw_tokens(secure_lab: tuple[LabFleet, Path]) -> None:
    import struct
    import time

    from backend.kafka import protocol as P

    fleet, ca = secure_lab
    sock, _host = _tls_raw(fleet, ca)
    deadline = time.monotonic() + 5
    with sock:
        sock.sendall(P.encode_request(P.API_SASL_HANDSHAKE, 0, 1, "t", {"mechanism": "PLAIN"}))
        _corr, hs = P.decode_response(P.API_SASL_HANDSHAKE, 0, P.read_frame(sock, deadline=deadline))
        assert hs["error_code"] == 0 and "PLAIN" in hs["mechanisms"]
        token = b"\x00alice\x00" + PASSWORD.encode()
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert P.read_frame(sock, deadline=deadline) == b""  # empty server token = success
        sock.sendall(P.encode_request(P.API_METADATA, 12, 2, "t", {"topics": None}))
        _corr, md = P.decode_response(P.API_METADATA, 12, P.read_frame(sock, deadline=deadline))
        assert md["cluster_id"] == fleet.clusters["sasl"].cluster_id
