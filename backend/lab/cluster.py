"""One emulated cluster at run time: the answers its brokers give (ApiVersions, Metadata, DescribeCluster, PushConfig)."""

from __future__ import annotations

import ssl
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.configs.sensitive import broker_refuses_type
from backend.kafka import protocol as P
from backend.lab.broker_configs import ClusterConfigs
from backend.lab.faults import BrokerFaults
from backend.lab.groups import LabGroups, synthetic_specs
from backend.lab.model import BrokerSpec, ClusterSpec
from backend.lab.sink import SinkWriter, iso_utc
from backend.lab.state import LabState, TopicState, partition_assignment

LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_ID = 100
ENDPOINT_TYPE_BROKER = 1


@dataclass
class BrokerRuntime:
    """A lab broker's live settings; port is the bound port once started."""

    spec: BrokerSpec
    host: str
    port: int
    faults: BrokerFaults = field(default_factory=BrokerFaults)

    @property
    def id(self) -> int:
        """The broker id."""
        return self.spec.id

    @property
    def alive(self) -> bool:
        """False while the broker is stopped."""
        return not self.faults.stopped


@dataclass
class ConnectionInfo:
    """What the broker knows about one client connection (KIP-511 and KIP-1324 fields, SASL principal)."""

    peer: str | None
    client_software_name: str | None = None
    client_software_version: str | None = None
    client_instance_id: str | None = None
    principal: str = "User:ANONYMOUS"


@dataclass(frozen=True)
class PushResult:
    """The PushConfig answer and, when a record was stored, where."""

    error_code: int
    error_message: str | None
    sink_path: Path | None = None


REQUESTS_SEEN_MAX = 100_000
METADATA_CACHE_MAX = 64  # distinct (state, request) answers kept per cluster


class ClusterRuntime:
    """Holds one cluster's brokers and answers requests from its current state."""

    def __init__(self, spec: ClusterSpec, state: LabState, host: str, sink_dir: Path) -> None:
        self.spec = spec
        self.state = state
        self.host = host
        self.cluster_id = state.ensure_cluster(spec).cluster_id
        known_ports = state.clusters[spec.name].ports
        self.brokers: dict[int, BrokerRuntime] = {
            b.id: BrokerRuntime(b, host, b.port or known_ports.get(b.id, 0)) for b in spec.brokers
        }
        policy_dir = Path(spec.policy.sink_dir) if spec.policy.sink_dir else sink_dir
        self.sink = SinkWriter(policy_dir, spec.name) if spec.policy.push_config else None
        self.ssl_context: ssl.SSLContext | None = None
        if spec.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(spec.tls.certfile, spec.tls.keyfile)
            self.ssl_context = ctx
        self._lock = threading.RLock()
        # Every request header received, bounded: (broker id, api key, api version, client id).
        self.requests_seen: deque[tuple[int, int, int, str | None]] = deque(maxlen=REQUESTS_SEEN_MAX)
        self._metadata_cache: dict[tuple[Any, ...], bytes] = {}
        self._configs_cache: dict[tuple[Any, ...], bytes] = {}
        self.zookeeper_connect: str | None = spec.zookeeper.connect if spec.zookeeper else None
        self.configs = ClusterConfigs(spec, self.identity_configs)
        names = [t.name for t in state.topics(spec.name) if not t.internal]
        self.groups = LabGroups(spec.name, [*spec.groups, *synthetic_specs(spec.synthetic_groups, names)],
                                idle_topics=frozenset(t.name for t in spec.topics if t.idle))

    # ----------------------------------------------------------------- views

    @property
    def bootstrap(self) -> str:
        """host:port of every broker, comma separated."""
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers.values())

    @property
    def security_protocol(self) -> str:
        """The Kafka security protocol of the cluster's listener."""
        if self.spec.sasl is not None:
            return "SASL_SSL" if self.spec.tls else "SASL_PLAINTEXT"
        return "SSL" if self.spec.tls else "PLAINTEXT"

    def alive_brokers(self) -> list[BrokerRuntime]:
        """Brokers that are not stopped, by id."""
        return [b for _id, b in sorted(self.brokers.items()) if b.alive]

    def controller_id(self) -> int:
        """The configured controller while alive, else the lowest alive broker, else -1."""
        preferred = self.spec.effective_controller
        if self.brokers[preferred].alive:
            return preferred
        alive = self.alive_brokers()
        return alive[0].id if alive else -1

    def software_version(self, broker_id: int) -> str:
        """The broker's version: its override, else the profile's."""
        return self.brokers[broker_id].spec.software_version or self.spec.profile.software_version

    def advertised_versions(self) -> dict[int, tuple[int, int]]:
        """The ApiVersions table the brokers advertise: the profile's, adjusted for KIP-885 and KIP-1324."""
        table = {k: (lo, hi) for k, lo, hi in self.spec.profile.api_versions}
        if P.API_DESCRIBE_CLUSTER in table:
            lo, hi = table[P.API_DESCRIBE_CLUSTER]
            if self.spec.profile.kip885:
                table[P.API_DESCRIBE_CLUSTER] = (lo, P.DESCRIBE_CLUSTER_KIP885_VERSION)
            else:
                table[P.API_DESCRIBE_CLUSTER] = (lo, min(hi, P.DESCRIBE_CLUSTER_KIP885_VERSION - 1))
        if self.spec.policy.push_config:
            lo, hi = table[P.API_API_VERSIONS]
            table[P.API_API_VERSIONS] = (lo, max(hi, P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION))
            table[P.PUSH_CONFIG_API_KEY] = (0, 0)
        return table

    def identity_configs(self, broker_id: int) -> dict[str, str]:
        """The per-host lines of a broker's server.properties (STATIC_BROKER_CONFIG), as the real broker reports them."""
        b = self.brokers[broker_id]
        listener = f"{self.security_protocol}://{b.host}:{b.port}"
        out = {"broker.id": str(broker_id), "node.id": str(broker_id), "listeners": listener,
               "advertised.listeners": listener, "log.dirs": f"/var/lib/kafka/{self.spec.name}/broker-{broker_id}"}
        if b.spec.rack:
            out["broker.rack"] = b.spec.rack
        if self.spec.profile.mode == "zookeeper":
            chroot = self.spec.zookeeper.chroot if self.spec.zookeeper else ""
            out["zookeeper.connect"] = f"{self.zookeeper_connect or 'localhost:2181'}{chroot}"
        else:  # combined broker + controller nodes; the lab has no controller listener, the brokers stand in
            voters = ",".join(f"{x.id}@{x.host}:{x.port}" for x in self.brokers.values())
            out.update({"process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
                        "controller.quorum.voters": voters})
        known = self.configs.catalog.broker
        return {k: v for k, v in out.items() if k in known}

    # ------------------------------------------------------------- responses

    def api_versions_body(self) -> dict[str, Any]:
        """A successful ApiVersions response body."""
        return {
            "error_code": P.ERROR_NONE,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.advertised_versions().items())
            ],
            "throttle_time_ms": 0,
        }

    def api_versions_fallback_body(self) -> dict[str, Any]:
        """KIP-511: the v0 body sent with UNSUPPORTED_VERSION, listing the ApiVersions range."""
        lo, hi = self.advertised_versions()[P.API_API_VERSIONS]
        return {
            "error_code": P.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": P.API_API_VERSIONS, "min_version": lo, "max_version": hi}],
        }

    def _broker_rows(self) -> list[dict[str, Any]]:
        return [
            {"node_id": b.id, "broker_id": b.id, "host": b.host, "port": b.port, "rack": b.spec.rack}
            for b in self.alive_brokers()
        ]

    def _topic_row(self, t: TopicState) -> dict[str, Any]:
        alive = {b.id for b in self.alive_brokers()}
        partitions = []
        for p, replicas in partition_assignment(t, list(self.brokers)).items():
            isr = [r for r in replicas if r in alive]
            leader = isr[0] if isr else -1
            partitions.append({
                "error_code": P.ERROR_NONE if isr else LEADER_NOT_AVAILABLE,
                "partition_index": p,
                "leader_id": leader,
                "leader_epoch": 0,
                "replica_nodes": replicas,
                "isr_nodes": isr,
                "offline_replicas": [r for r in replicas if r not in alive],
            })
        return {
            "error_code": P.ERROR_NONE, "name": t.name, "topic_id": t.topic_id,
            "is_internal": t.internal, "partitions": partitions,
        }

    def metadata_response(self, request: dict[str, Any], version: int, request_body: bytes) -> bytes:
        """The encoded Metadata response body, reused while topics, brokers and the request are unchanged.

        A real broker answers from its metadata cache; re-encoding thousands of topics per
        request would make the lab, not the poller, the cost a fleet benchmark measures.
        """
        key = (self.state.generation, self.cluster_id, self.controller_id(),
               tuple(b.id for b in self.alive_brokers()), version, request_body)
        with self._lock:
            cached = self._metadata_cache.get(key)
        if cached is not None:
            return cached
        encoded = P.encode_response_body(P.API_METADATA, version, self.metadata_body(request, version))
        with self._lock:
            if len(self._metadata_cache) >= METADATA_CACHE_MAX:
                self._metadata_cache.pop(next(iter(self._metadata_cache)))
            self._metadata_cache[key] = encoded
        return encoded

    def describe_configs_response(self, request: dict[str, Any], version: int, broker_id: int,
                                  request_body: bytes) -> bytes:
        """The encoded DescribeConfigs response body, reused while topics, configs and the request are unchanged."""
        key = (self.state.generation, self.configs.generation, broker_id, version, request_body)
        with self._lock:
            cached = self._configs_cache.get(key)
        if cached is not None:
            return cached
        topics = {t.name for t in self.state.topics(self.spec.name)}
        encoded = P.encode_response_body(P.API_DESCRIBE_CONFIGS, version,
                                         self.configs.describe(broker_id, request, version, topics))
        with self._lock:
            if len(self._configs_cache) >= METADATA_CACHE_MAX * 4:
                self._configs_cache.pop(next(iter(self._configs_cache)))
            self._configs_cache[key] = encoded
        return encoded

    def metadata_body(self, request: dict[str, Any], version: int) -> dict[str, Any]:
        """Metadata response: alive brokers, cluster id, controller, requested (or all) topics."""
        topics = {t.name: t for t in self.state.topics(self.spec.name)}
        wanted = request.get("topics")
        rows: list[dict[str, Any]] = []
        if wanted is None or (version == 0 and not wanted):
            rows = [self._topic_row(t) for t in topics.values()]
        else:
            by_id = {t.topic_id: t for t in topics.values()}
            for item in wanted:
                name, topic_id = item.get("name"), item.get("topic_id") or P.ZERO_UUID
                if name is None and topic_id != P.ZERO_UUID:
                    found = by_id.get(topic_id)
                    if found is None:
                        rows.append({"error_code": UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id,
                                     "is_internal": False, "partitions": []})
                        continue
                    rows.append(self._topic_row(found))
                elif name in topics:
                    rows.append(self._topic_row(topics[name]))
                else:
                    rows.append({"error_code": P.UNKNOWN_TOPIC_OR_PARTITION, "name": name or "",
                                 "topic_id": P.ZERO_UUID, "is_internal": False, "partitions": []})
        return {
            "throttle_time_ms": 0,
            "brokers": self._broker_rows(),
            "cluster_id": self.cluster_id,
            "controller_id": self.controller_id(),
            "topics": rows,
            "error_code": P.ERROR_NONE,
        }

    def describe_cluster_body(self, request: dict[str, Any], version: int, broker_id: int) -> dict[str, Any]:
        """DescribeCluster response; the KIP-885 version carries this broker's software name and version."""
        body: dict[str, Any] = {
            "throttle_time_ms": 0, "error_code": P.ERROR_NONE, "error_message": None,
            "endpoint_type": ENDPOINT_TYPE_BROKER, "cluster_id": self.cluster_id,
            "controller_id": self.controller_id(), "brokers": self._broker_rows(),
        }
        if version >= 1 and request.get("endpoint_type", ENDPOINT_TYPE_BROKER) != ENDPOINT_TYPE_BROKER:
            body.update(error_code=P.MISMATCHED_ENDPOINT_TYPE, brokers=[],
                        error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
        if version >= 2 and request.get("include_fenced_brokers"):
            for b in self.brokers.values():
                if not b.alive:
                    body["brokers"].append({"broker_id": b.id, "host": b.host, "port": b.port,
                                            "rack": b.spec.rack, "is_fenced": True})
        if version >= P.DESCRIBE_CLUSTER_KIP885_VERSION:
            body["broker_software_name"] = self.spec.profile.software_name
            body["broker_software_version"] = self.software_version(broker_id)
        return body

    def group_body(self, api_key: int, request: dict[str, Any], version: int, broker_id: int) -> dict[str, Any]:
        """The answer to a consumer-group request (backend/lab/groups.py), from this cluster's topics and brokers."""
        alive = [b.id for b in self.alive_brokers()]
        topics = {t.name: t for t in self.state.topics(self.spec.name)}
        partitions = {name: t.partitions for name, t in topics.items()}
        if api_key == P.API_FIND_COORDINATOR:
            return self.groups.find_coordinator(request, version, {b.id: (b.host, b.port) for b in self.alive_brokers()})
        if api_key == P.API_LIST_GROUPS:
            return self.groups.list_groups(request, version, broker_id, alive)
        if api_key == P.API_DESCRIBE_GROUPS:
            return self.groups.describe_groups(request, broker_id, alive, partitions)
        ids = {name: t.topic_id for name, t in topics.items()}
        if api_key in (P.API_CONSUMER_GROUP_DESCRIBE, P.API_SHARE_GROUP_DESCRIBE):
            kind = "consumer" if api_key == P.API_CONSUMER_GROUP_DESCRIBE else "share"
            return self.groups.describe_new_groups(request, broker_id, alive, partitions, ids, kind, version)
        if api_key == P.API_OFFSET_FETCH:
            return self.groups.offset_fetch(request, version, broker_id, alive, partitions, ids)
        if api_key == P.API_DESCRIBE_SHARE_GROUP_OFFSETS:
            return self.groups.share_offsets(request, version, broker_id, alive, partitions, ids)
        if api_key == P.API_LIST_OFFSETS:
            leaders = {}
            for name, t in topics.items():
                for p, replicas in partition_assignment(t, list(self.brokers)).items():
                    isr = [r for r in replicas if r in alive]
                    if isr:
                        leaders[(name, p)] = isr[0]
            return self.groups.list_offsets(request, version, leaders, broker_id)
        raise ValueError(f"api key {api_key} is not a group request")

    def push_config(self, request: dict[str, Any], raw_body_size: int, broker_id: int,
                    conn: ConnectionInfo, client_id: str | None) -> PushResult:
        """KIP-1324 policy: size check, sensitive-type check, then one sink line per accepted push."""
        limit = self.spec.policy.max_config_bytes
        if raw_body_size > limit:
            return PushResult(P.CONFIG_TOO_LARGE,
                              f"PushConfig of {raw_body_size} bytes exceeds client.config.max.bytes={limit}")
        if conn.client_instance_id is None:
            return PushResult(P.INVALID_REQUEST,
                              f"PushConfig needs the ClientInstanceId sent in ApiVersions v{P.API_VERSIONS_CLIENT_INSTANCE_ID_VERSION}+ on this connection")
        kept: list[dict[str, Any]] = []
        violations: list[str] = []
        for c in request.get("configs", []):
            type_code = c["config_type"]
            if broker_refuses_type(P.CONFIG_TYPES.get(type_code)):
                violations.append(f"{c['config_key']} ({P.CONFIG_TYPES[type_code]})")
                continue
            if type_code not in P.CONFIG_TYPES:
                violations.append(f"{c['config_key']} (unknown ConfigType {type_code})")
                continue
            kept.append({"key": c["config_key"], "value": c["config_value"],
                         "type": P.CONFIG_TYPES[type_code], "is_default": bool(c["is_default"])})
        path = None
        if kept and self.sink is not None:
            received = datetime.now(UTC)
            record = {
                "snapshot_id": str(uuid.uuid4()),
                "received_at": iso_utc(received),
                "cluster_id": self.cluster_id,
                "broker_id": broker_id,
                "client_instance_id": conn.client_instance_id,
                "client_id": client_id,
                "client_type": None,
                "client_software_name": conn.client_software_name,
                "client_software_version": conn.client_software_version,
                "principal": conn.principal,
                "client_address": conn.peer,
                "configs": kept,
            }
            path = self.sink.write(record, received)
        if violations:
            return PushResult(P.INVALID_CONFIG,
                              "sensitive configuration not accepted, values dropped: " + ", ".join(violations), path)
        return PushResult(P.ERROR_NONE, None, path)


def kafka_uuid_to_std(text: str) -> str | None:
    """Kafka's 22-char UUID text -> canonical dashed form; None for the zero UUID."""
    if not text or text == P.ZERO_UUID:
        return None
    return str(P.kafka_str_to_uuid(text))
