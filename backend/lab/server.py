"""The lab broker's asyncio listener: frames in, answers out, with SASL and fault injection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any

from backend.kafka import protocol as P
from backend.lab.cluster import (
    BrokerRuntime,
    ClusterRuntime,
    ConnectionInfo,
    kafka_uuid_to_std,
)
from backend.lab.sasl import SaslFailure, SaslSession

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 600.0  # a silent client is disconnected after this long
STOP_TIMEOUT_S = 5.0  # stop() waits at most this long for the listener to close
WRITE_TIMEOUT_S = 30.0  # a client that stops reading is disconnected after this long
MAX_REQUEST_BYTES = 1024 * 1024
_PRE_AUTH_KEYS = {P.API_API_VERSIONS, P.API_SASL_HANDSHAKE, P.API_SASL_AUTHENTICATE}
# Consumer groups (backend/lab/groups.py): every read the product and admin clients send.
_GROUP_KEYS = frozenset({P.API_FIND_COORDINATOR, P.API_LIST_GROUPS, P.API_DESCRIBE_GROUPS, P.API_CONSUMER_GROUP_DESCRIBE,
                         P.API_SHARE_GROUP_DESCRIBE, P.API_OFFSET_FETCH, P.API_LIST_OFFSETS,
                         P.API_DESCRIBE_SHARE_GROUP_OFFSETS})


class _Close(Exception):
    """Close the connection (what Kafka does with a request it cannot serve)."""


class BrokerServer:
    """One listening socket for one lab broker; start/stop can be repeated (refuse/stop faults)."""

    def __init__(self, cluster: ClusterRuntime, broker: BrokerRuntime) -> None:
        self.cluster = cluster
        self.broker = broker
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        # Open connections (their KIP-511 software name/version), for the lab's metrics endpoint.
        self.connections: dict[int, ConnectionInfo] = {}

    @property
    def listening(self) -> bool:
        """True while the socket accepts connections."""
        return self._server is not None

    async def start(self) -> None:
        """Bind (the remembered port, or a free one when it is 0 or taken) and listen."""
        if self._server is not None:
            return
        try:
            self._server = await asyncio.start_server(
                self._handle, self.broker.host, self.broker.port, ssl=self.cluster.ssl_context,
                reuse_address=True)
        except OSError:
            if self.broker.port == 0 or self.broker.spec.port != 0:
                raise
            self._server = await asyncio.start_server(
                self._handle, self.broker.host, 0, ssl=self.cluster.ssl_context, reuse_address=True)
        self.broker.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop every open connection."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for w in list(self._writers):
            w.transport.abort()  # now, not after a pending write drains: a client may never read
        if server is not None:
            # wait_closed also waits for connections still being accepted; never past a bound
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), STOP_TIMEOUT_S)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        peer = writer.get_extra_info("peername")
        conn = ConnectionInfo(peer=f"{peer[0]}:{peer[1]}" if peer else None)
        handler = _Connection(self.cluster, self.broker, conn)
        self.connections[id(conn)] = conn
        try:
            while True:
                payload = await asyncio.wait_for(P.read_frame_async(reader, MAX_REQUEST_BYTES), IDLE_TIMEOUT_S)
                faults = self.broker.faults
                if faults.latency_ms:
                    await asyncio.sleep(faults.latency_ms / 1000)
                response = handler.handle(payload)
                faults = self.broker.faults
                if faults.malformed:
                    writer.write(_malformed(payload))
                elif faults.drop_mid_response:
                    writer.write(response[: max(1, len(response) // 2)])
                    await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
                    break
                else:
                    writer.write(response)
                await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT_S)
        except (_Close, P.ProtocolError, TimeoutError, ConnectionError, OSError) as exc:
            log.debug("lab broker %s/%s closes %s: %s", self.cluster.spec.name, self.broker.id, conn.peer, exc)
        except asyncio.CancelledError:
            # The lab is stopping: end quietly (asyncio would print the cancelled connection task).
            pass
        except Exception:  # a bug in one connection must not take down the broker
            log.exception("lab broker %s/%s: unexpected error", self.cluster.spec.name, self.broker.id)
        finally:
            self._writers.discard(writer)
            self.connections.pop(id(conn), None)
            writer.close()


def decode_request_lenient(payload: bytes) -> tuple[P.RequestHeader, dict[str, Any]]:
    """decode_request, but ignore bytes after the body as Kafka's broker does.

    librdkafka 2.16 sends 3 bytes after the tagged fields of Metadata v13; Kafka's
    RequestContext parses the schema's fields and never checks the rest of the buffer.
    """
    try:
        return P.decode_request(payload)
    except P.UnsupportedVersionError:
        raise
    except P.ProtocolError as exc:
        if "unexpected trailing bytes" not in str(exc):
            raise
        header, pos = P.decode_request_header(payload)
        body = P._message_codec(header.api_key, header.api_version, True).decode(P.Reader(payload, pos))
        return header, body


def _malformed(request: bytes) -> bytes:
    """A frame with the right correlation id but a body no decoder accepts (negative array length)."""
    correlation = request[4:8] if len(request) >= 8 else b"\x00\x00\x00\x00"
    body = correlation + b"\x00\x00" + b"\x80\x00\x00\x01" + b"\xff\xff"
    return struct.pack(">i", len(body)) + body


class _Connection:
    """Per-connection protocol state machine."""

    def __init__(self, cluster: ClusterRuntime, broker: BrokerRuntime, conn: ConnectionInfo) -> None:
        self.cluster = cluster
        self.broker = broker
        self.conn = conn
        self.authenticated = cluster.spec.sasl is None
        self.sasl: SaslSession | None = None
        self.raw_sasl = False  # SaslHandshake v0: tokens follow as bare frames

    def handle(self, payload: bytes) -> bytes:
        """Answer one request frame (payload without length) with a full response frame."""
        if self.raw_sasl:
            return self._raw_sasl_token(payload)
        try:
            header, _pos = P.decode_request_header(payload)
        except P.ProtocolError as exc:
            raise _Close(f"unparseable request header: {exc}") from None
        self.cluster.requests_seen.append((self.broker.id, header.api_key, header.api_version, header.client_id))
        if header.api_key == P.API_API_VERSIONS:
            return self._api_versions(payload, header)
        if not self.authenticated and header.api_key not in _PRE_AUTH_KEYS:
            raise _Close(f"api key {header.api_key} before SASL authentication")
        advertised = self.cluster.advertised_versions()
        rng = advertised.get(header.api_key)
        if rng is None or not rng[0] <= header.api_version <= rng[1]:
            raise _Close(f"unsupported api key {header.api_key} v{header.api_version}")
        try:
            header, body = decode_request_lenient(payload)
        except P.UnsupportedVersionError as exc:
            raise _Close(str(exc)) from None
        except P.ProtocolError as exc:
            log.debug("undecodable request %s v%s: %s", header.api_key, header.api_version, payload.hex())
            raise _Close(f"undecodable request: {exc}") from None
        key, version = header.api_key, header.api_version
        if key == P.API_METADATA:
            encoded = self.cluster.metadata_response(body, version, payload[_pos:])
            return P.response_frame(key, version, header.correlation_id, encoded)
        if key == P.API_DESCRIBE_CONFIGS:
            encoded = self.cluster.describe_configs_response(body, version, self.broker.id, payload[_pos:])
            return P.response_frame(key, version, header.correlation_id, encoded)
        if key == P.API_DESCRIBE_CLUSTER:
            out = self.cluster.describe_cluster_body(body, version, self.broker.id)
        elif key == P.PUSH_CONFIG_API_KEY:
            body_size = len(payload) - _pos
            result = self.cluster.push_config(body, body_size, self.broker.id, self.conn, header.client_id)
            out = {"throttle_time_ms": 0, "error_code": result.error_code, "error_message": result.error_message}
        elif key in _GROUP_KEYS:
            out = self.cluster.group_body(key, body, version, self.broker.id)
        elif key == P.API_SASL_HANDSHAKE:
            out = self._sasl_handshake(body, version)
        elif key == P.API_SASL_AUTHENTICATE:
            out = self._sasl_authenticate(body)
        else:
            raise _Close(f"api key {key} is advertised but not served by the lab")
        return P.encode_response(key, version, header.correlation_id, out)

    def _api_versions(self, payload: bytes, header: P.RequestHeader) -> bytes:
        lo, hi = self.cluster.advertised_versions()[P.API_API_VERSIONS]
        if not lo <= header.api_version <= hi:
            return P.encode_response(P.API_API_VERSIONS, 0, header.correlation_id,
                                     self.cluster.api_versions_fallback_body())
        try:
            _header, body = P.decode_request(payload)
        except P.UnsupportedVersionError:
            return P.encode_response(P.API_API_VERSIONS, 0, header.correlation_id,
                                     self.cluster.api_versions_fallback_body())
        except P.ProtocolError as exc:
            raise _Close(f"bad ApiVersions request: {exc}") from None
        if header.api_version >= 3:
            self.conn.client_software_name = body.get("client_software_name") or None
            self.conn.client_software_version = body.get("client_software_version") or None
        if header.api_version >= P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION:
            self.conn.client_instance_id = kafka_uuid_to_std(body.get("client_instance_id", ""))
        return P.encode_response(P.API_API_VERSIONS, header.api_version, header.correlation_id,
                                 self.cluster.api_versions_body())

    def _sasl_handshake(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        spec = self.cluster.spec.sasl
        mechanisms = list(spec.mechanisms) if spec else []
        mechanism = body.get("mechanism", "")
        if spec is None or mechanism not in mechanisms or self.authenticated:
            return {"error_code": P.UNSUPPORTED_SASL_MECHANISM if spec else P.ILLEGAL_SASL_STATE,
                    "mechanisms": mechanisms}
        self.sasl = SaslSession(spec, mechanism)
        self.raw_sasl = version == 0
        return {"error_code": P.ERROR_NONE, "mechanisms": mechanisms}

    def _sasl_authenticate(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.sasl is None or self.authenticated:
            return {"error_code": P.ILLEGAL_SASL_STATE, "error_message": "SaslAuthenticate without SaslHandshake",
                    "auth_bytes": b""}
        try:
            reply = self.sasl.step(body.get("auth_bytes") or b"")
        except SaslFailure as exc:
            self.sasl = None
            return {"error_code": P.SASL_AUTHENTICATION_FAILED, "error_message": str(exc), "auth_bytes": b""}
        if self.sasl.done:
            self._authenticated()
        return {"error_code": P.ERROR_NONE, "error_message": None, "auth_bytes": reply, "session_lifetime_ms": 0}

    def _raw_sasl_token(self, token: bytes) -> bytes:
        assert self.sasl is not None
        try:
            reply = self.sasl.step(token)
        except SaslFailure as exc:
            raise _Close(str(exc)) from None
        if self.sasl.done:
            self._authenticated()
            self.raw_sasl = False
        return struct.pack(">i", len(reply)) + reply

    def _authenticated(self) -> None:
        assert self.sasl is not None
        self.authenticated = True
        self.conn.principal = f"User:{self.sasl.username}"
