"""KIP-1324 client side: collect a client's non-sensitive configuration and push it once per client instance."""

from __future__ import annotations

import logging
import socket
import ssl
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scramp import ScramClient, ScramException

from backend.configs.known_keys import known_type
from backend.configs.sensitive import kip1324_rule
from backend.kafka import protocol as P

log = logging.getLogger(__name__)

PUSH_TIMEOUT_S = 5.0
ALLOWED_KEYS_CONFIG = "config.push.allowed.keys"

# KIP-1324 "Default Configuration for Apache Kafka Java Producer / Consumer / Share Consumer".
DEFAULT_PUSH_KEYS: dict[str, tuple[str, ...]] = {
    "producer": (
        "acks", "batch.size", "buffer.memory", "client.id", "compression.type", "delivery.timeout.ms",
        "enable.idempotence", "linger.ms", "max.in.flight.requests.per.connection", "request.timeout.ms",
        "retries",
    ),
    "consumer": (
        "auto.offset.reset", "client.id", "enable.auto.commit", "fetch.min.bytes", "fetch.max.wait.ms",
        "group.id", "isolation.level", "max.poll.interval.ms", "max.poll.records", "session.timeout.ms",
    ),
    "share_consumer": (
        "client.id", "fetch.max.wait.ms", "fetch.min.bytes", "group.id", "max.poll.interval.ms",
        "max.poll.records", "share.acknowledgement.mode", "share.acquire.mode",
    ),
}
TYPE_CODES = {name: code for code, name in P.CONFIG_TYPES.items()}
_RULE_LABELS = {"prefix": "security prefix", "segment": "security segment", "suffix": "class name"}


@dataclass(frozen=True)
class PushEntry:
    """One PushConfig Configs entry."""

    key: str
    value: str
    type: str
    is_default: bool

    def wire(self) -> dict[str, Any]:
        """The entry as the codec's PushConfig request item."""
        return {"config_key": self.key, "config_value": self.value, "config_type": TYPE_CODES[self.type],
                "is_default": self.is_default}


@dataclass(frozen=True)
class CollectedConfig:
    """What a client would push and which keys it held back (never their values)."""

    entries: tuple[PushEntry, ...]
    dropped: tuple[tuple[str, str], ...]  # (key, reason)


def sensitive_reason(key: str, config_type: str | None) -> str | None:
    """KIP-1324's client-side rule: why a key must not be sent, or None when it may.

    The type and name rules are the ingest filter's (backend.configs.sensitive); on the client,
    a key its own ConfigDef does not declare (no type) is a custom key and is not sent either.
    """
    rule = kip1324_rule(key, config_type)
    if rule == "type":
        return f"type {config_type}"
    if rule is not None:
        return _RULE_LABELS[rule]
    if config_type is None:
        return "custom key"
    return None


def to_config_string(value: Any) -> str:
    """Java's rendering of a config value: booleans lower-case, lists comma-separated."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(to_config_string(v) for v in value)
    return str(value)


def collect_config(client_type: str, user_config: Mapping[str, Any], defaults: Mapping[str, Any]) -> CollectedConfig:
    """Pick the keys to push (KIP defaults or config.push.allowed.keys) and drop sensitive ones."""
    if client_type not in DEFAULT_PUSH_KEYS:
        raise ValueError(f"unknown client type {client_type!r} (known: {', '.join(DEFAULT_PUSH_KEYS)})")
    override = user_config.get(ALLOWED_KEYS_CONFIG)
    if override is not None:
        items = override if isinstance(override, (list, tuple)) else str(override).split(",")
        keys = tuple(k.strip() for k in items if k.strip())
    else:
        keys = DEFAULT_PUSH_KEYS[client_type]
    entries: list[PushEntry] = []
    dropped: list[tuple[str, str]] = []
    for key in dict.fromkeys(keys):
        if key in user_config:
            value, is_default = user_config[key], False
        elif key in defaults:
            value, is_default = defaults[key], True
        else:
            continue
        config_type = known_type(key, client_type, librdkafka=False)
        reason = sensitive_reason(key, config_type)
        if reason is not None:
            log.warning("config push: not sending %s (%s)", key, reason)
            dropped.append((key, reason))
            continue
        assert config_type is not None
        entries.append(PushEntry(key, to_config_string(value), config_type, is_default))
    return CollectedConfig(tuple(entries), tuple(dropped))


@dataclass(frozen=True)
class PushOutcome:
    """How one client's handshake went; a failure is data, not an exception."""

    status: str  # "accepted", "rejected", "unsupported", "skipped", "auth_failed", "error"
    broker: str
    error_code: int | None = None
    error_message: str | None = None
    advertised_api_versions_max: int | None = None


@dataclass(frozen=True)
class SaslCredentials:
    """SASL login for the config handshake; the password never shows in repr."""

    mechanism: str
    username: str
    password: str = field(repr=False)


class _AuthFailed(Exception):
    pass


def _authenticate(sock: socket.socket, creds: SaslCredentials, client_id: str | None, deadline: float) -> None:
    """SaslHandshake v1 + SaslAuthenticate v2 rounds (PLAIN or SCRAM); raises _AuthFailed."""
    hs = _exchange(sock, P.encode_request(P.API_SASL_HANDSHAKE, 1, 10, client_id, {"mechanism": creds.mechanism}),
                   P.API_SASL_HANDSHAKE, 1, deadline)
    if hs["error_code"] != P.ERROR_NONE:
        raise _AuthFailed(f"SaslHandshake: {P.error_name(hs['error_code'])} (broker offers {hs['mechanisms']})")

    def step(token: bytes, corr: int) -> bytes:
        out = _exchange(sock, P.encode_request(P.API_SASL_AUTHENTICATE, 2, corr, client_id, {"auth_bytes": token}),
                        P.API_SASL_AUTHENTICATE, 2, deadline)
        if out["error_code"] != P.ERROR_NONE:
            raise _AuthFailed(f"SaslAuthenticate: {P.error_name(out['error_code'])}: {out['error_message']}")
        return bytes(out["auth_bytes"] or b"")

    if creds.mechanism == "PLAIN":
        step(b"\x00" + creds.username.encode() + b"\x00" + creds.password.encode(), 11)
        return
    scram = ScramClient([creds.mechanism], creds.username, creds.password)
    try:
        scram.set_server_first(step(scram.get_client_first().encode(), 11).decode())
        scram.set_server_final(step(scram.get_client_final().encode(), 12).decode())
    except ScramException as exc:
        raise _AuthFailed(f"SCRAM: {exc}") from None


def _exchange(sock: socket.socket, frame: bytes, api_key: int, version: int, deadline: float) -> dict[str, Any]:
    sock.sendall(frame)
    _corr, body = P.decode_response(api_key, version, P.read_frame(sock, deadline=deadline))
    return body


def push_config(host: str, port: int, collected: CollectedConfig, *, client_instance_id: str,
                client_id: str | None, software_name: str, software_version: str,
                timeout_s: float = PUSH_TIMEOUT_S, ssl_context: ssl.SSLContext | None = None,
                sasl: SaslCredentials | None = None) -> PushOutcome:
    """Connect, ApiVersions (ClientInstanceId version, KIP-511 fallback), SASL if given, then PushConfig if advertised."""
    broker = f"{host}:{port}"
    if not collected.entries:
        return PushOutcome("skipped", broker, error_message="every configured key is sensitive; nothing sent")
    deadline = time.monotonic() + timeout_s
    instance = P.uuid_to_kafka_str(uuid.UUID(client_instance_id))
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            sock = ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context else raw
            version = P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION
            request = {"client_software_name": software_name, "client_software_version": software_version,
                       "client_instance_id": instance}
            body = _exchange(sock, P.encode_request(P.API_API_VERSIONS, version, 1, client_id, request),
                             P.API_API_VERSIONS, version, deadline)
            if body["error_code"] == P.UNSUPPORTED_VERSION:
                advertised = {k["api_key"]: k["max_version"] for k in body["api_keys"]}
                version = min(advertised.get(P.API_API_VERSIONS, 0), P.supported_versions(P.API_API_VERSIONS)[1])
                body = _exchange(sock, P.encode_request(P.API_API_VERSIONS, version, 2, client_id, request),
                                 P.API_API_VERSIONS, version, deadline)
            if body["error_code"] != P.ERROR_NONE:
                return PushOutcome("error", broker, body["error_code"], "ApiVersions failed")
            apis = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
            api_max = apis.get(P.API_API_VERSIONS, (0, 0))[1]
            if P.PUSH_CONFIG_API_KEY not in apis or version < P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION:
                return PushOutcome("unsupported", broker, advertised_api_versions_max=api_max)
            if sasl is not None:
                _authenticate(sock, sasl, client_id, deadline)
            frame = P.encode_request(P.PUSH_CONFIG_API_KEY, 0, 3, client_id,
                                     {"configs": [e.wire() for e in collected.entries]})
            resp = _exchange(sock, frame, P.PUSH_CONFIG_API_KEY, 0, deadline)
            status = "accepted" if resp["error_code"] == P.ERROR_NONE else "rejected"
            return PushOutcome(status, broker, resp["error_code"], resp["error_message"], api_max)
    except _AuthFailed as exc:
        return PushOutcome("auth_failed", broker, error_message=str(exc))
    except (OSError, TimeoutError, P.ProtocolError) as exc:
        return PushOutcome("error", broker, error_message=f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class SimulatedClient:
    """One client instance of the generated fleet, with the misconfigurations seeded into it."""

    client_instance_id: str
    cluster: str
    client_type: str
    software_name: str
    software_version: str
    config: dict[str, Any]
    defaults: dict[str, Any]
    misconfigs: tuple[str, ...] = field(default=())

    @property
    def client_id(self) -> str | None:
        """The client.id the client puts in request headers (None when unset)."""
        value = self.config.get("client.id")
        return str(value) if value else None

    def collect(self) -> CollectedConfig:
        """The configuration this client would push."""
        return collect_config(self.client_type, self.config, self.defaults)


def push_client(client: SimulatedClient, host: str, port: int, timeout_s: float = PUSH_TIMEOUT_S, *,
                ssl_context: ssl.SSLContext | None = None, sasl: SaslCredentials | None = None) -> PushOutcome:
    """Run one simulated client's config handshake against one broker."""
    return push_config(host, port, client.collect(), client_instance_id=client.client_instance_id,
                       client_id=client.client_id, software_name=client.software_name,
                       software_version=client.software_version, timeout_s=timeout_s,
                       ssl_context=ssl_context, sasl=sasl)

