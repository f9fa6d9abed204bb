"""The probe against scripted in-test servers: every fault becomes an error ProbeResult in time."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from backend.kafka import probe as probe_mod
from backend.kafka import probe_cli
from backend.kafka import protocol as P
from backend.kafka.probe import ProbeSecurity, probe_broker, probe_brokers
from tests.rig.tls import make_tls_files
from tests.unit.kafka.scripted_broker import API_TABLE_43, ScriptedBroker, api_versions_body

TIMEOUT = 1.0
SLACK = 1.0  # scheduling slack on a shared 2-core box; the point is "bounded", not "fast"


def _answer(header: P.RequestHeader, body: dict[str, Any]) -> bytes:
    return P.encode_response(header.api_key, header.api_version, header.correlation_id, body)


def _healthy(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes | None:
    if header.api_key == P.API_API_VERSIONS:
        return _answer(header, api_versions_body(API_TABLE_43))
    if header.api_key == P.API_DESCRIBE_CLUSTER:
        return _answer(header, {"cluster_id": "scripted", "controller_id": 1,
                                "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": 1}]})
    return b""


def _timed(**kw: Any) -> tuple[probe_mod.ProbeResult, float]:
    start = time.monotonic()
    result = probe_broker("127.0.0.1", kw.pop("port"), timeout_s=kw.pop("timeout_s", TIMEOUT), **kw)
    return result, time.monotonic() - start


def test_healthy_scripted_broker_gives_guess_and_cluster_id() -> None:
    with ScriptedBroker(_healthy) as broker:
        result, _ = _timed(port=broker.port)
    assert result.ok, result.error
    assert result.cluster_id == "scripted" and result.controller_id == 1
    assert result.describe_cluster_version_used == 2  # the broker offers 0-2, no KIP-885
    assert result.provenance == "guessed" and result.software_version is None
    assert result.api_versions[18] == (0, 4)
    assert set(result.timings_ms) >= {"connect", "api_versions", "describe_cluster", "total"}


def test_delay_past_timeout_returns_timeout_within_the_deadline() -> None:
    with ScriptedBroker(lambda h, b, c: None) as broker:  # reads requests, never answers
        result, elapsed = _timed(port=broker.port)
    assert not result.ok and result.error_kind == "timeout"
    assert elapsed < TIMEOUT + SLACK


def test_connection_refused() -> None:
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    result, elapsed = _timed(port=port)
    assert not result.ok and result.error_kind == "refused"
    assert str(port) in (result.error or "")
    assert elapsed < TIMEOUT + SLACK


def test_connection_dropped_mid_response() -> None:
    def drop(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        conn.sendall(b"\x00\x00\x00\x64" + b"x" * 10)  # promises 100 bytes, sends 10
        return b""

    with ScriptedBroker(drop) as broker:
        result, elapsed = _timed(port=broker.port)
    assert not result.ok and result.error_kind == "disconnected"
    assert "10 of 100" in (result.error or "")
    assert elapsed < TIMEOUT + SLACK


@pytest.mark.parametrize(("frame", "message"), [
    (b"\xff\xff\xff\xfb", "negative frame length"),
    (b"\x00\x00\x00\x06" + b"\x00\x00\x00\x01\xff\xff", "truncated"),
])
def test_malformed_frame_is_a_protocol_error(frame: bytes, message: str) -> None:
    with ScriptedBroker(lambda h, b, c: frame) as broker:
        result, elapsed = _timed(port=broker.port)
    assert not result.ok and result.error_kind == "protocol"
    assert message in (result.error or "")
    assert elapsed < TIMEOUT + SLACK


def test_oversized_frame_is_refused_by_the_cap() -> None:
    with ScriptedBroker(lambda h, b, c: (50_000_000).to_bytes(4, "big")) as broker:
        result = probe_broker("127.0.0.1", broker.port, timeout_s=TIMEOUT, max_response_bytes=1_000_000)
    assert result.error_kind == "protocol" and "exceeds the cap" in (result.error or "")


def test_wrong_correlation_id_is_a_protocol_error() -> None:
    def wrong(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        return P.encode_response(header.api_key, header.api_version, header.correlation_id + 7,
                                 api_versions_body(API_TABLE_43))

    with ScriptedBroker(wrong) as broker:
        result, _ = _timed(port=broker.port)
    assert result.error_kind == "protocol" and "correlation id" in (result.error or "")


def test_kip511_fallback_retries_at_the_brokers_highest_version() -> None:
    def old_broker(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS and header.api_version > 2:
            # KIP-511: unsupported version -> v0 body, error 35, our own ApiVersions range.
            return P.encode_response(P.API_API_VERSIONS, 0, header.correlation_id,
                                     api_versions_body({18: (0, 2)}, P.UNSUPPORTED_VERSION))
        if header.api_key == P.API_API_VERSIONS:
            table = {0: (0, 7), 1: (0, 10), 3: (0, 7), 17: (0, 1), 18: (0, 2), 4: (0, 1), 5: (0, 0), 6: (0, 4)}
            return _answer(header, api_versions_body(table))
        return b""

    with ScriptedBroker(old_broker) as broker:
        result, _ = _timed(port=broker.port)
        received = list(broker.received)
    assert result.ok, result.error
    assert result.api_versions_request_version_used == 2
    assert received[:2] == [(18, 3), (18, 2)]
    assert result.describe_cluster is None  # no DescribeCluster before 2.8
    assert result.provenance == "guessed" and result.version_min is not None
    assert any("retried at v2" in w for w in result.warnings)


def test_kip885_answer_is_reported_not_guessed() -> None:
    table = dict(API_TABLE_43)
    table[60] = (0, P.DESCRIBE_CLUSTER_KIP885_VERSION)

    def kip885(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS:
            return _answer(header, api_versions_body(table))
        assert header.api_version == P.DESCRIBE_CLUSTER_KIP885_VERSION
        return _answer(header, {"cluster_id": "c", "broker_software_name": "Kafka",
                                "broker_software_version": "4.3.1"})

    with ScriptedBroker(kip885) as broker:
        result, _ = _timed(port=broker.port)
    assert result.ok and result.provenance == "reported"
    assert (result.software_name, result.software_version) == ("Kafka", "4.3.1")
    assert result.version_min == result.version_max == "4.3.1" and result.confidence == 1.0


def test_describe_cluster_v3_that_is_not_kip885_falls_back_to_v2() -> None:
    table = dict(API_TABLE_43)
    table[60] = (0, 3)

    def other_v3(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS:
            return _answer(header, api_versions_body(table))
        if header.api_version == 3:
            # Some other meaning of v3: one unexpected trailing int32 after the v2 body.
            return P.encode_response(60, 2, header.correlation_id, {"cluster_id": "c"})[:-1] + b"\x00\x00\x00\x07\x00"
        return _answer(header, {"cluster_id": "c"})

    with ScriptedBroker(other_v3) as broker:
        result, _ = _timed(port=broker.port, timeout_s=3)
    assert result.ok, result.error
    assert result.describe_cluster_version_used == 2 and result.provenance == "guessed"
    assert any("did not decode as KIP-885" in w for w in result.warnings)


SECRET = "s3cr3t-Pa55word!"


def _sasl_broker(echo_password: bool) -> Any:
    def handler(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS:
            return _answer(header, api_versions_body(API_TABLE_43))
        if header.api_key == P.API_SASL_HANDSHAKE:
            return _answer(header, {"error_code": 0, "mechanisms": ["PLAIN"]})
        if header.api_key == P.API_SASL_AUTHENTICATE:
            user_pass = body["auth_bytes"].split(b"\0")
            if user_pass[2].decode() == "right":
                return _answer(header, {"auth_bytes": b""})
            msg = f"bad credentials {user_pass[2].decode()}" if echo_password else "Authentication failed"
            return _answer(header, {"error_code": P.SASL_AUTHENTICATION_FAILED, "error_message": msg})
        if header.api_key == P.API_DESCRIBE_CLUSTER:
            return _answer(header, {"cluster_id": "sasl"})
        return b""
    return handler


def test_sasl_plain_success_sends_only_read_only_keys() -> None:
    sec = ProbeSecurity("SASL_PLAINTEXT", "PLAIN", "alice", "right")
    with ScriptedBroker(_sasl_broker(False)) as broker:
        result = probe_broker("127.0.0.1", broker.port, security=sec, timeout_s=TIMEOUT)
        received = {k for k, _v in broker.received}
    assert result.ok and result.cluster_id == "sasl" and "auth" in result.timings_ms
    assert received == {18, 17, 36, 60} and received <= probe_mod.READ_ONLY_API_KEYS


def test_auth_failure_never_carries_the_password() -> None:
    sec = ProbeSecurity("SASL_PLAINTEXT", "PLAIN", "alice", SECRET)
    with ScriptedBroker(_sasl_broker(echo_password=True)) as broker:
        result = probe_broker("127.0.0.1", broker.port, security=sec, timeout_s=TIMEOUT)
    assert not result.ok and result.error_kind == "auth"
    assert "bad credentials ***" in (result.error or "")
    for text in (repr(result), str(result), result.error or "", repr(sec), str(sec)):
        assert SECRET not in text
    # ApiVersions came before SASL, so the fingerprint is still there.
    assert result.api_versions and result.provenance == "guessed"


def test_unsupported_mechanism_is_an_auth_error_listing_enabled_ones() -> None:
    sec = ProbeSecurity("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice", SECRET)

    def handler(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS:
            return _answer(header, api_versions_body(API_TABLE_43))
        return _answer(header, {"error_code": P.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]})

    with ScriptedBroker(handler) as broker:
        result = probe_broker("127.0.0.1", broker.port, security=sec, timeout_s=TIMEOUT)
    assert result.error_kind == "auth" and "enabled: PLAIN" in (result.error or "")


def test_bad_security_config_fails_without_network() -> None:
    result = probe_broker("127.0.0.1", 9, security=ProbeSecurity("SASL_SSL", "PLAIN", "u", None), timeout_s=TIMEOUT)
    assert result.error_kind == "config" and "password" in (result.error or "")
    result = probe_broker("127.0.0.1", 9, security=ProbeSecurity("KERBEROS"), timeout_s=TIMEOUT)
    assert result.error_kind == "config"


def test_the_probe_refuses_to_send_a_non_read_only_request() -> None:
    # 32: DescribeConfigs; 10, 16, 15, 69, 77, 9, 2: FindCoordinator, ListGroups, DescribeGroups,
    # ConsumerGroupDescribe, ShareGroupDescribe, OffsetFetch, ListOffsets (consumer groups, read-only)
    assert probe_mod.READ_ONLY_API_KEYS == {18, 17, 36, 60, 3, 32, 10, 16, 15, 69, 77, 9, 2, 90}
    a, b = socket.socketpair()
    try:
        conn = probe_mod._Connection(a, time.monotonic() + 1, "c", 1024)
        for key in (0, 8, 11, 12, 13, 14, 19, 20, 33, 42, 44, 47, 68, 76, P.PUSH_CONFIG_API_KEY):
            with pytest.raises(probe_mod.ReadOnlyViolation):
                conn.request(key, 0, {})
        b.setblocking(False)
        with pytest.raises(BlockingIOError):
            b.recv(1)  # nothing was written
    finally:
        a.close()
        b.close()


def test_tls_probe_and_tls_failures(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.server_cert, files.server_key)
    with ScriptedBroker(_healthy, tls=server_ctx) as broker:
        good = probe_broker("localhost", broker.port, timeout_s=3,
                            security=ProbeSecurity("SSL", ssl_cafile=str(files.ca_cert)))
        untrusted = probe_broker("localhost", broker.port, timeout_s=3, security=ProbeSecurity("SSL"))
    assert good.ok and "tls" in good.timings_ms, good.error
    assert untrusted.error_kind == "tls" and "certificate" in (untrusted.error or "").lower()
    with ScriptedBroker(_healthy) as plain:
        result = probe_broker("localhost", plain.port, timeout_s=TIMEOUT,
                              security=ProbeSecurity("SSL", ssl_cafile=str(files.ca_cert)))
    assert not result.ok and result.error_kind in ("tls", "timeout", "disconnected")


def test_probe_brokers_keeps_order_and_isolates_failures() -> None:
    s = socket.create_server(("127.0.0.1", 0))
    dead_port = s.getsockname()[1]
    s.close()
    with ScriptedBroker(_healthy) as a, ScriptedBroker(lambda h, b, c: None) as silent:
        targets = [("127.0.0.1", a.port), ("127.0.0.1", dead_port), ("127.0.0.1", silent.port),
                   ("127.0.0.1", a.port)]
        start = time.monotonic()
        results = probe_brokers(targets, timeout_s=TIMEOUT, max_workers=4)
        elapsed = time.monotonic() - start
    assert [(r.host, r.port) for r in results] == targets
    assert [r.error_kind for r in results] == [None, "refused", "timeout", None]
    assert results[0].ok and results[3].ok
    assert elapsed < TIMEOUT + SLACK + 1.0  # concurrent: one timeout, not a sum of them


def test_mutual_tls_client_certificate(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.server_cert, files.server_key)
    server_ctx.load_verify_locations(files.ca_cert)
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # the broker demands a client certificate
    with ScriptedBroker(_healthy, tls=server_ctx) as broker:
        # The rig's CA-signed certificate doubles as a client certificate here.
        with_cert = probe_broker("localhost", broker.port, timeout_s=3, security=ProbeSecurity(
            "SSL", ssl_cafile=str(files.ca_cert), ssl_certfile=str(files.server_cert),
            ssl_keyfile=str(files.server_key)))
        without = probe_broker("localhost", broker.port, timeout_s=3,
                               security=ProbeSecurity("SSL", ssl_cafile=str(files.ca_cert)))
    assert with_cert.ok, with_cert.error
    assert not without.ok and without.error_kind in ("tls", "disconnected")
    missing = probe_broker("localhost", 9, timeout_s=1, security=ProbeSecurity(
        "SSL", ssl_cafile=str(tmp_path / "nope.pem")))
    assert missing.error_kind == "config"


def test_probe_cli_prints_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser()
    probe_cli.add_probe_arguments(parser)
    s = socket.create_server(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with ScriptedBroker(_healthy) as broker:
        code = probe_cli.run_probe_command(parser.parse_args([f"127.0.0.1:{broker.port}", "--json", "--timeout", "2"]))
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out[0]["ok"] and out[0]["cluster_id"] == "scripted"
        assert out[0]["provenance"] == "guessed"
        code = probe_cli.run_probe_command(parser.parse_args([f"127.0.0.1:{broker.port}", f"127.0.0.1:{dead}"]))
        lines = capsys.readouterr().out.splitlines()
    assert code == 1 and "ok  cluster=scripted" in lines[0] and "refused" in lines[1]
    assert probe_cli.run_probe_command(parser.parse_args(["nonsense"])) == 2
    assert "not a HOST:PORT" in capsys.readouterr().err


def test_probe_cli_reads_a_fleet_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser()
    probe_cli.add_probe_arguments(parser)
    with ScriptedBroker(_healthy) as broker:
        fleet = tmp_path / "clusters.toml"
        fleet.write_text(f'[[clusters]]\nname = "one"\nbootstrap_servers = ["127.0.0.1:{broker.port}"]\n')
        code = probe_cli.run_probe_command(parser.parse_args(["--fleet", str(fleet), "--cluster", "one", "--json"]))
    assert code == 0 and json.loads(capsys.readouterr().out)[0]["cluster_id"] == "scripted"
    assert probe_cli.run_probe_command(parser.parse_args(["--fleet", str(fleet), "--cluster", "nope"])) == 2


def test_unresolvable_host_is_a_dns_error() -> None:
    result = probe_broker("no-such-host.invalid", 9092, timeout_s=TIMEOUT)
    assert not result.ok and result.error_kind in ("dns", "timeout")
    assert "no-such-host.invalid" in (result.error or "")
    with ScriptedBroker(_healthy) as broker:
        by_name = probe_broker("localhost", broker.port, timeout_s=TIMEOUT)
    assert by_name.ok, by_name.error
