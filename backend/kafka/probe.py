"""Per-broker probe: connect, ApiVersions, optional SASL, DescribeCluster (KIP-885 when offered).

One deadline bounds the whole probe; every connect, handshake, send and recv uses the time
left. A failed probe is a ProbeResult with ``ok=False`` and an ``error_kind``, never an
exception. The probe is read-only: it can only send READ_ONLY_API_KEYS.
"""

from __future__ import annotations

import hashlib
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from typing import Any

from backend.kafka import protocol as P
from backend.kafka import versions

# The consumer-group reads (backend.kafka.groups) only ask: they list, describe and fetch offsets, never join,
# commit or delete.
GROUP_READ_API_KEYS: frozenset[int] = frozenset({
    P.API_FIND_COORDINATOR, P.API_LIST_GROUPS, P.API_DESCRIBE_GROUPS, P.API_CONSUMER_GROUP_DESCRIBE,
    P.API_SHARE_GROUP_DESCRIBE, P.API_OFFSET_FETCH, P.API_LIST_OFFSETS, P.API_DESCRIBE_SHARE_GROUP_OFFSETS,
})
READ_ONLY_API_KEYS: frozenset[int] = frozenset({
    P.API_API_VERSIONS, P.API_SASL_HANDSHAKE, P.API_SASL_AUTHENTICATE,
    P.API_DESCRIBE_CLUSTER, P.API_METADATA, P.API_DESCRIBE_CONFIGS, *GROUP_READ_API_KEYS,
})

CLIENT_SOFTWARE_NAME = "fleetview-probe"
CLIENT_SOFTWARE_VERSION = "0.1.0"
DEFAULT_CLIENT_ID = "fleetview-probe"
# The highest ApiVersions request version the probe starts with (KIP-511 flow).
PROBE_API_VERSIONS_VERSION = 3
# Newest released DescribeCluster version (Kafka 4.x), used when KIP-885 is not offered.
DESCRIBE_CLUSTER_RELEASED_MAX = P.DESCRIBE_CLUSTER_KIP885_VERSION - 1

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class ReadOnlyViolation(RuntimeError):
    """Raised when code asks the probe to send an api key outside READ_ONLY_API_KEYS."""


@dataclass(frozen=True)
class ProbeSecurity:
    """How to connect and authenticate; the secrets never appear in repr."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True

    @property
    def uses_tls(self) -> bool:
        """Whether the connection is wrapped in TLS."""
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        """Whether the connection authenticates with SASL."""
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def problems(self) -> list[str]:
        """What makes this configuration unusable (empty when fine)."""
        out: list[str] = []
        if self.protocol not in SECURITY_PROTOCOLS:
            out.append(f"unknown security protocol {self.protocol!r}")
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                out.append(f"unsupported SASL mechanism {self.sasl_mechanism!r}")
            if not self.username:
                out.append("SASL needs a username")
            if self.password is None:
                out.append("SASL needs a password (none resolved)")
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            out.append("ssl_certfile and ssl_keyfile go together")
        return out

    @classmethod
    def from_cluster(cls, cluster: Any) -> ProbeSecurity:
        """Build from backend.config.ClusterConfig (reads the resolved secret)."""
        sec = cluster.security
        key_password = getattr(cluster, "ssl_key_password", None)
        return cls(
            protocol=sec.protocol,
            sasl_mechanism=sec.sasl_mechanism,
            username=sec.username,
            password=cluster.password() if sec.protocol.startswith("SASL_") else None,
            ssl_cafile=sec.ssl_cafile,
            ssl_certfile=sec.ssl_certfile,
            ssl_keyfile=sec.ssl_keyfile,
            ssl_key_password=key_password() if callable(key_password) else None,
            ssl_check_hostname=bool(getattr(cluster, "ssl_check_hostname", True)),
        )


@dataclass
class ProbeResult:
    """Outcome of probing one broker; a failed probe is data, not an exception."""

    host: str
    port: int
    ok: bool = False
    error: str | None = None
    error_kind: str | None = None
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)
    api_versions_request_version_used: int | None = None
    describe_cluster: dict[str, Any] | None = None
    describe_cluster_version_used: int | None = None
    cluster_id: str | None = None
    controller_id: int | None = None
    software_name: str | None = None
    software_version: str | None = None
    provenance: str = "unknown"
    version_min: str | None = None
    version_max: str | None = None
    confidence: float = 0.0
    evidence: tuple[str, ...] = ()
    sasl_mechanisms: list[str] | None = None
    metadata: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class ResponseMemo:
    """The last decoded answer to one request; an answer with identical bytes is not decoded again.

    Metadata of a large, unchanged cluster is the same bytes poll after poll, and decoding it is
    the probe's main CPU cost. Treat ``body`` as read-only: it is handed out again on a match.
    """

    api_key: int = -1
    version: int = -1
    digest: bytes = b""
    body: dict[str, Any] = field(default_factory=dict)

    def matches(self, api_key: int, version: int, digest: bytes) -> bool:
        """True when this memo holds the answer for exactly these bytes."""
        return (api_key, version, digest) == (self.api_key, self.version, self.digest)

    def remember(self, api_key: int, version: int, digest: bytes, body: dict[str, Any]) -> None:
        """Keep a freshly decoded answer."""
        self.api_key, self.version, self.digest, self.body = api_key, version, digest, body


class _ProbeFailure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Connection:
    """A blocking socket that sends only read-only requests, bounded by a deadline."""

    def __init__(self, sock: socket.socket, deadline: float, client_id: str,
                 max_response_bytes: int, max_elements: int = P.DEFAULT_MAX_METADATA_ELEMENTS) -> None:
        self.sock = sock
        self.deadline = deadline
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes  # Metadata's cap; others are capped smaller
        self.max_elements = max_elements  # Metadata's decoded-element budget
        self.correlation_id = 0

    def _left(self, what: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _ProbeFailure("timeout", f"timed out before {what}")
        return left

    def _exchange(self, api_key: int, version: int, body: dict[str, Any], cap: int | None,
                  max_elements: int | None) -> tuple[bytes, int]:
        """Send one read-only request, return its answer's payload (undecoded) and the element budget."""
        if api_key not in READ_ONLY_API_KEYS:
            raise ReadOnlyViolation(f"api key {api_key} is not read-only; the probe refuses it")
        self.correlation_id += 1
        frame = P.encode_request(api_key, version, self.correlation_id, self.client_id, body)
        self.sock.settimeout(self._left("sending"))
        self.sock.sendall(frame)
        # Only Metadata grows with the cluster; every other answer the probe reads is small.
        if cap is not None and max_elements is not None:
            pass
        elif api_key == P.API_METADATA:
            cap, max_elements = self.max_response_bytes, self.max_elements
        else:
            cap = min(self.max_response_bytes, P.MAX_SMALL_RESPONSE_BYTES)
            max_elements = P.MAX_SMALL_RESPONSE_ELEMENTS
        return P.read_frame(self.sock, cap, self.deadline), max_elements

    def request_payload(self, api_key: int, version: int, body: dict[str, Any], *, cap: int,
                        max_elements: int) -> bytes:
        """Send one request and return its answer undecoded (correlation id checked), for a caller's own decoder."""
        payload, _budget = self._exchange(api_key, version, body, cap, max_elements)
        if len(payload) < 4:
            raise P.ProtocolError("answer shorter than its correlation id")
        correlation_id = P.CORRELATION_ID.unpack_from(payload)[0]
        if correlation_id != self.correlation_id:
            raise P.ProtocolError(
                f"correlation id {correlation_id} does not match the request's {self.correlation_id}"
            )
        return payload

    def request(self, api_key: int, version: int, body: dict[str, Any],
                memo: ResponseMemo | None = None, *, cap: int | None = None,
                max_elements: int | None = None) -> dict[str, Any]:
        """Send one request and return the decoded response body (memo: skip decoding a repeat).

        cap / max_elements override the answer's byte cap and element budget (DescribeConfigs of many topics).
        """
        payload, max_elements = self._exchange(api_key, version, body, cap, max_elements)
        if memo is not None:
            correlation_id = P.CORRELATION_ID.unpack_from(payload)[0]
            digest = hashlib.blake2b(payload[4:], digest_size=16).digest()
            if correlation_id == self.correlation_id and memo.matches(api_key, version, digest):
                return memo.body
        correlation_id, decoded = P.decode_response(
            api_key, version, payload,
            max_elements=max_elements,
            deadline=self.deadline,
        )
        if memo is not None and correlation_id == self.correlation_id:
            memo.remember(api_key, version, digest, decoded)
        if correlation_id != self.correlation_id:
            raise P.ProtocolError(
                f"correlation id {correlation_id} does not match the request's {self.correlation_id}"
            )
        return decoded


def _scrub(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _ssl_context(sec: ProbeSecurity) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=sec.ssl_cafile) if sec.ssl_cafile else \
        ssl.create_default_context()
    ctx.check_hostname = sec.ssl_check_hostname
    if sec.ssl_certfile:
        ctx.load_cert_chain(sec.ssl_certfile, sec.ssl_keyfile, sec.ssl_key_password)
    return ctx


def _api_versions(conn: _Connection, result: ProbeResult, first_version: int) -> None:
    version = first_version
    body = {"client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION}
    for _attempt in range(3):
        resp = conn.request(P.API_API_VERSIONS, version, body)
        table = {int(a["api_key"]): (int(a["min_version"]), int(a["max_version"]))
                 for a in resp["api_keys"]}
        if resp["error_code"] == P.UNSUPPORTED_VERSION:
            # KIP-511: the broker answers with its own ApiVersions range; retry at the highest
            # version both sides support.
            broker_max = table.get(P.API_API_VERSIONS, (0, 0))[1]
            retry = min(broker_max, version - 1) if broker_max < version else version - 1
            if retry < 0:
                break
            result.warnings.append(f"ApiVersions v{version} unsupported, retried at v{retry}")
            version = retry
            continue
        if resp["error_code"] != P.ERROR_NONE:
            raise _ProbeFailure("protocol", f"ApiVersions failed: {P.error_name(resp['error_code'])}")
        result.api_versions = table
        result.api_versions_request_version_used = version
        return
    raise _ProbeFailure("unsupported", "broker accepts no ApiVersions version this probe speaks")


def _sasl(conn: _Connection, sec: ProbeSecurity, result: ProbeResult) -> None:
    handshake_max = result.api_versions.get(P.API_SASL_HANDSHAKE, (0, -1))[1]
    auth_range = result.api_versions.get(P.API_SASL_AUTHENTICATE)
    if handshake_max < 1 or auth_range is None:
        raise _ProbeFailure("unsupported",
                            "broker lacks SaslHandshake v1/SaslAuthenticate (Kafka < 1.0)")
    resp = conn.request(P.API_SASL_HANDSHAKE, 1, {"mechanism": sec.sasl_mechanism})
    result.sasl_mechanisms = list(resp["mechanisms"] or [])
    if resp["error_code"] != P.ERROR_NONE:
        raise _ProbeFailure("auth", f"SASL mechanism {sec.sasl_mechanism} not enabled on the "
                                    f"broker ({P.error_name(resp['error_code'])}; enabled: "
                                    f"{', '.join(result.sasl_mechanisms) or 'none'})")
    auth_version = min(2, auth_range[1])
    username, password = sec.username or "", sec.password or ""

    def step(token: bytes) -> bytes:
        r = conn.request(P.API_SASL_AUTHENTICATE, auth_version, {"auth_bytes": token})
        if r["error_code"] != P.ERROR_NONE:
            message = r["error_message"] or P.error_name(r["error_code"])
            raise _ProbeFailure("auth", f"authentication failed: {message}")
        return r["auth_bytes"] or b""

    if sec.sasl_mechanism == "PLAIN":
        step(b"\0" + username.encode() + b"\0" + password.encode())
        return
    import scramp

    try:
        client = scramp.ScramClient([sec.sasl_mechanism], username, password)
        server_first = step(client.get_client_first().encode())
        client.set_server_first(server_first.decode("utf-8", "replace"))
        server_final = step(client.get_client_final().encode())
        client.set_server_final(server_final.decode("utf-8", "replace"))
    except scramp.ScramException as exc:
        raise _ProbeFailure("auth", f"SCRAM exchange failed: {exc}") from None


def _describe_cluster(conn: _Connection, result: ProbeResult, cap: int) -> None:
    offered = result.api_versions.get(P.API_DESCRIBE_CLUSTER)
    if offered is None:
        result.warnings.append("broker does not offer DescribeCluster (Kafka < 2.8)")
        return
    version = min(offered[1], cap)
    if version < offered[0]:
        result.warnings.append(f"DescribeCluster v{offered[0]}+ only; this probe speaks up to v{cap}")
        return
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": True}
    try:
        resp = conn.request(P.API_DESCRIBE_CLUSTER, version, body)
    except P.ProtocolError as exc:
        if version == P.DESCRIBE_CLUSTER_KIP885_VERSION:
            # A broker whose DescribeCluster v3 is not KIP-885's: retry at the released max.
            result.warnings.append(f"DescribeCluster v{version} did not decode as KIP-885: {exc}")
            raise _RetryFresh(version) from None
        raise
    result.describe_cluster_version_used = version
    if resp["error_code"] != P.ERROR_NONE:
        result.warnings.append(
            f"DescribeCluster error {P.error_name(resp['error_code'])}: {resp['error_message']}"
        )
    result.describe_cluster = resp
    result.cluster_id = resp.get("cluster_id") or None
    result.controller_id = resp.get("controller_id")


class _RetryFresh(Exception):
    """The connection is unusable after a misparsed answer; retry on a new connection."""

    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


class Resolver:
    """Name lookups with a deadline: each runs in its own daemon thread, so a hung resolver costs
    the caller its deadline and nothing else (no shared pool whose queue other clusters wait in).

    getaddrinfo has no timeout of its own; a hung lookup's thread finishes on its own later. A
    lookup already running for the same name is shared, and at most ``max_in_flight`` lookups
    run at once (beyond that a lookup fails at once), so one resolver's threads stay bounded.
    The poller keeps one Resolver per cluster.
    """

    def __init__(self, max_in_flight: int = 64, lookup: Callable[..., list[Any]] = socket.getaddrinfo) -> None:
        """Allow at most max_in_flight unfinished lookups (lookup: the system resolver)."""
        self.max_in_flight = max_in_flight
        self._getaddrinfo = lookup
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], Future[list[Any]]] = {}

    def in_flight(self) -> int:
        """Lookups started and not finished yet."""
        with self._lock:
            return len(self._pending)

    def resolve(self, host: str, port: int, deadline: float) -> tuple[str, int]:
        """The first address of host, or _ProbeFailure (dns/timeout) by the deadline."""
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
            return host, port  # an IP literal needs no lookup
        except OSError:
            pass
        key = (host, port)
        with self._lock:
            future = self._pending.get(key)
            if future is None:
                if len(self._pending) >= self.max_in_flight:
                    raise _ProbeFailure("dns", f"cannot resolve {host}: {len(self._pending)} lookups "
                                               "of this cluster are still unanswered")
                future = Future()
                self._pending[key] = future
                threading.Thread(target=self._lookup, args=(key, future), daemon=True,
                                 name=f"probe-dns-{host[:40]}").start()
        try:
            infos = future.result(timeout=max(0.001, deadline - time.monotonic()))
        except FuturesTimeout:
            raise _ProbeFailure("timeout", f"resolving {host} took longer than the deadline") from None
        except socket.gaierror as exc:
            raise _ProbeFailure("dns", f"cannot resolve {host}: {exc.strerror or exc}") from None
        except OSError as exc:
            raise _ProbeFailure("dns", f"cannot resolve {host}: {exc}") from None
        if not infos:
            raise _ProbeFailure("dns", f"cannot resolve {host}: no addresses")
        return str(infos[0][4][0]), port

    def _lookup(self, key: tuple[str, int], future: Future[list[Any]]) -> None:
        try:
            future.set_result(self._getaddrinfo(key[0], key[1], 0, socket.SOCK_STREAM))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting probe
            future.set_exception(exc)
        finally:
            with self._lock:
                self._pending.pop(key, None)


_DEFAULT_RESOLVER = Resolver()


def _connect(host: str, port: int, ctx: ssl.SSLContext | None, deadline: float,
             result: ProbeResult, resolver: Resolver) -> socket.socket:
    t0 = time.monotonic()
    left = deadline - t0
    if left <= 0:
        raise _ProbeFailure("timeout", "no time left to connect")
    address = resolver.resolve(host, port, deadline)
    try:
        raw = socket.create_connection(address, timeout=max(0.001, deadline - time.monotonic()))
    except socket.gaierror as exc:
        raise _ProbeFailure("dns", f"cannot resolve {host}: {exc.strerror or exc}") from None
    result.timings_ms["connect"] = _ms(t0)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if ctx is None:
        return raw
    t1 = time.monotonic()
    try:
        raw.settimeout(max(0.001, deadline - time.monotonic()))
        tls = ctx.wrap_socket(raw, server_hostname=host)
    except TimeoutError:
        raw.close()
        raise
    except (ssl.SSLError, ssl.CertificateError, ConnectionError, OSError) as exc:
        raw.close()
        raise _ProbeFailure("tls", f"TLS handshake failed: {exc}") from None
    result.timings_ms["tls"] = _ms(t1)
    return tls


def _ms(since: float) -> float:
    return round((time.monotonic() - since) * 1000, 3)


def failure_of(exc: BaseException, host: str, port: int, timeout_s: float) -> tuple[str, str]:
    """(error kind, message) of an exception raised while talking to one broker."""
    if isinstance(exc, _ProbeFailure):
        return exc.kind, str(exc)
    if isinstance(exc, TimeoutError):
        return "timeout", f"no answer within {timeout_s:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "refused", f"connection refused by {host}:{port}"
    if isinstance(exc, ssl.SSLError):
        return "tls", f"TLS error: {exc}"
    if isinstance(exc, P.ProtocolError):
        kind = "disconnected" if "connection closed" in str(exc) else "protocol"
        return ("timeout" if "passed the deadline" in str(exc) else kind), str(exc)
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "disconnected", f"connection dropped: {exc}"
    if isinstance(exc, OSError):
        return "network", f"{type(exc).__name__}: {exc.strerror or exc}"
    # A broker answer we did not foresee must never break the caller's poll.
    return "protocol", f"unexpected answer ({type(exc).__name__}: {exc})"


def tls_context(sec: ProbeSecurity) -> tuple[ssl.SSLContext | None, list[str]]:
    """The TLS context a security configuration needs (None without TLS) and its problems (empty when usable)."""
    problems = sec.problems()
    if not sec.uses_tls or problems:
        return None, problems
    try:
        return _ssl_context(sec), []
    except (OSError, ssl.SSLError) as exc:
        return None, [f"cannot load TLS files: {_scrub(str(exc), (sec.password, sec.ssl_key_password))}"]


def open_connection(host: str, port: int, sec: ProbeSecurity, ctx: ssl.SSLContext | None, deadline: float,
                    client_id: str, result: ProbeResult, *, resolver: Resolver | None = None,
                    max_response_bytes: int = P.MAX_SMALL_RESPONSE_BYTES) -> tuple[socket.socket, _Connection]:
    """Connect, ApiVersions and SASL: a read-only connection ready for requests (the caller closes the socket)."""
    sock = _connect(host, port, ctx, deadline, result, resolver or _DEFAULT_RESOLVER)
    try:
        conn = _Connection(sock, deadline, client_id, max_response_bytes)
        _api_versions(conn, result, PROBE_API_VERSIONS_VERSION)
        if sec.uses_sasl:
            _sasl(conn, sec, result)
    except BaseException:
        sock.close()
        raise
    return sock, conn


def probe_broker(host: str, port: int, *, security: ProbeSecurity | None = None,
                 timeout_s: float = 10.0, client_id: str = DEFAULT_CLIENT_ID,
                 first_api_versions_version: int = PROBE_API_VERSIONS_VERSION,
                 with_metadata: bool = False,
                 max_response_bytes: int = P.DEFAULT_MAX_METADATA_RESPONSE_BYTES,
                 metadata_memo: ResponseMemo | None = None,
                 max_metadata_elements: int = P.DEFAULT_MAX_METADATA_ELEMENTS,
                 resolver: Resolver | None = None) -> ProbeResult:
    """Probe one broker within timeout_s: ApiVersions, SASL if configured, DescribeCluster.

    max_response_bytes caps a Metadata answer (every other answer is capped at
    MAX_SMALL_RESPONSE_BYTES); max_metadata_elements bounds the array elements decoded from it.
    resolver: whose lookup threads to use (the poller passes one per cluster).
    """
    sec = security or ProbeSecurity()
    start = time.monotonic()
    deadline = start + timeout_s
    result = ProbeResult(host=host, port=port)
    secrets = (sec.password, sec.ssl_key_password)
    ctx, problems = tls_context(sec)
    if problems:
        result.error, result.error_kind = "; ".join(problems), "config"
        result.timings_ms["total"] = _ms(start)
        return result
    try:
        try:
            _run(host, port, sec, ctx, deadline, client_id, first_api_versions_version,
                 with_metadata, max_response_bytes, result, metadata_memo=metadata_memo,
                 max_elements=max_metadata_elements, resolver=resolver or _DEFAULT_RESOLVER)
        except _RetryFresh:
            _run(host, port, sec, ctx, deadline, client_id, first_api_versions_version,
                 with_metadata, max_response_bytes, result,
                 describe_cap=DESCRIBE_CLUSTER_RELEASED_MAX, metadata_memo=metadata_memo,
                 max_elements=max_metadata_elements, resolver=resolver or _DEFAULT_RESOLVER)
        result.ok = True
    except ReadOnlyViolation:
        raise
    except (_ProbeFailure, OSError, P.ProtocolError, ValueError, TypeError, KeyError, IndexError,
            AttributeError) as exc:
        result.error_kind, result.error = failure_of(exc, host, port, timeout_s)
    if result.error:
        result.error = _scrub(result.error, secrets)
        result.ok = False
    result.warnings = [_scrub(w, secrets) for w in result.warnings]
    _attach_version(result)
    result.timings_ms["total"] = _ms(start)
    return result


def _run(host: str, port: int, sec: ProbeSecurity, ctx: ssl.SSLContext | None,
         deadline: float, client_id: str,
         first_version: int, with_metadata: bool, max_response_bytes: int,
         result: ProbeResult, describe_cap: int = P.DESCRIBE_CLUSTER_KIP885_VERSION,
         metadata_memo: ResponseMemo | None = None,
         max_elements: int = P.DEFAULT_MAX_METADATA_ELEMENTS,
         resolver: Resolver = _DEFAULT_RESOLVER) -> None:
    sock = _connect(host, port, ctx, deadline, result, resolver)
    try:
        conn = _Connection(sock, deadline, client_id, max_response_bytes, max_elements)
        t = time.monotonic()
        _api_versions(conn, result, first_version)
        result.timings_ms["api_versions"] = _ms(t)
        if sec.uses_sasl:
            t = time.monotonic()
            _sasl(conn, sec, result)
            result.timings_ms["auth"] = _ms(t)
        t = time.monotonic()
        _describe_cluster(conn, result, describe_cap)
        result.timings_ms["describe_cluster"] = _ms(t)
        if with_metadata and P.API_METADATA in result.api_versions:
            t = time.monotonic()
            version = min(result.api_versions[P.API_METADATA][1], P.supported_versions(P.API_METADATA)[1])
            # topics=None asks for all topics without creating any (v1+).
            result.metadata = conn.request(P.API_METADATA, version, {
                "topics": None if version >= 1 else [], "allow_auto_topic_creation": False,
            }, memo=metadata_memo)
            result.timings_ms["metadata"] = _ms(t)
            if result.metadata.get("error_code"):  # top-level error, Metadata v13+
                result.warnings.append(f"Metadata error {P.error_name(result.metadata['error_code'])}")
    finally:
        sock.close()


def _attach_version(result: ProbeResult) -> None:
    dc = result.describe_cluster or {}
    name, version = dc.get("broker_software_name"), dc.get("broker_software_version")
    if name or version:
        result.software_name, result.software_version = name, version
        result.provenance = "reported"
        result.version_min = result.version_max = version
        result.confidence = 1.0
        result.evidence = (f"DescribeCluster v{result.describe_cluster_version_used} (KIP-885) "
                           f"reported {name} {version}",)
        return
    g = versions.guess(result.api_versions)
    result.provenance = g.provenance
    result.software_name = g.software if g.provenance == "guessed" else None
    result.software_version = None
    result.version_min, result.version_max = g.version_min, g.version_max
    result.confidence = g.confidence
    result.evidence = g.evidence


def probe_brokers(brokers: Sequence[tuple[str, int]], *, security: ProbeSecurity | None = None,
                  timeout_s: float = 10.0, client_id: str = DEFAULT_CLIENT_ID,
                  max_workers: int = 8, with_metadata: bool = False) -> list[ProbeResult]:
    """Probe many brokers concurrently; results come back in the input order."""
    if not brokers:
        return []
    workers = max(1, min(max_workers, len(brokers), (os.cpu_count() or 2) * 8))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="probe") as pool:
        return list(pool.map(
            lambda hp: probe_broker(hp[0], hp[1], security=security, timeout_s=timeout_s,
                                    client_id=client_id, with_metadata=with_metadata),
            brokers,
        ))



# For sibling modules that talk over open_connection (backend.kafka.configs).
ProbeFailure = _ProbeFailure
scrub_secrets = _scrub
