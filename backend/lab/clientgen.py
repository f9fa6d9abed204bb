"""Deterministic generator of a realistic client fleet (producers, consumer groups, share consumers) with seeded misconfigurations."""

from __future__ import annotations

import random
import ssl
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.lab.clients import (
    ALLOWED_KEYS_CONFIG,
    DEFAULT_PUSH_KEYS,
    PushOutcome,
    SaslCredentials,
    SimulatedClient,
    push_client,
)
from backend.lab.fleet import LabFleet

JAVA = "apache-kafka-java"
PYTHON = "confluent-kafka-python"
GO = "confluent-kafka-go"
JAVA_VERSIONS = (("3.6.2", 1), ("3.7.1", 2), ("3.8.1", 3), ("3.9.1", 4), ("4.0.0", 3), ("4.1.1", 3), ("4.2.0", 2))
RDKAFKA_VERSIONS = (("2.3.0", 1), ("2.6.1", 3), ("2.8.0", 3), ("2.10.1", 2), ("2.12.0", 1))
OLD_CLIENTS = ((JAVA, "2.8.1"), (JAVA, "3.0.2"), (PYTHON, "1.9.2-rdkafka-1.9.2"))

# Per-cluster drift: the compression most producers of a cluster use (index by cluster order).
COMPRESSION_BY_CLUSTER = (
    (("lz4", 7), ("zstd", 1), ("none", 2)),
    (("zstd", 7), ("lz4", 1), ("none", 2)),
    (("snappy", 5), ("none", 3), ("gzip", 2)),
    (("none", 6), ("lz4", 2), ("zstd", 2)),
)
SERVICES = ("orders", "payments", "checkout", "inventory", "search-indexer", "fraud", "notifications",
            "billing", "shipping", "recommendations", "audit", "telemetry-ingest")
MISCONFIG_KINDS = ("idempotence_with_acks_1", "retries_zero", "acks_zero", "session_lt_3x_heartbeat",
                   "max_poll_records_extreme", "group_session_disagreement", "missing_client_id",
                   "shared_client_id", "old_client_on_4x")
SHARED_CLIENT_ID = "kafka-client"


def _java_producer_defaults(version: str) -> dict[str, Any]:
    major = int(version.split(".")[0])
    return {"acks": "all", "batch.size": 16384, "buffer.memory": 33554432, "client.id": "",
            "compression.type": "none", "delivery.timeout.ms": 120000, "enable.idempotence": major >= 3,
            "linger.ms": 5 if major >= 4 else 0, "max.in.flight.requests.per.connection": 5,
            "request.timeout.ms": 30000, "retries": 2147483647}


def _rdkafka_producer_defaults() -> dict[str, Any]:
    return {"acks": "all", "batch.size": 1000000, "buffer.memory": 1073741824, "client.id": "rdkafka",
            "compression.type": "none", "delivery.timeout.ms": 300000, "enable.idempotence": False,
            "linger.ms": 5, "max.in.flight.requests.per.connection": 1000000, "request.timeout.ms": 30000,
            "retries": 2147483647}


def _consumer_defaults(java: bool) -> dict[str, Any]:
    return {"auto.offset.reset": "latest", "client.id": "" if java else "rdkafka", "enable.auto.commit": True,
            "fetch.min.bytes": 1, "fetch.max.wait.ms": 500, "isolation.level": "read_uncommitted" if java else "read_committed",
            "max.poll.interval.ms": 300000, "max.poll.records": 500, "session.timeout.ms": 45000,
            "heartbeat.interval.ms": 3000}


def _share_defaults() -> dict[str, Any]:
    return {"client.id": "", "fetch.max.wait.ms": 500, "fetch.min.bytes": 1, "max.poll.interval.ms": 300000,
            "max.poll.records": 500, "share.acknowledgement.mode": "implicit", "share.acquire.mode": "batch_optimized"}


def _pick(rng: random.Random, weighted: Sequence[tuple[Any, int]]) -> Any:
    return rng.choices([v for v, _w in weighted], weights=[w for _v, w in weighted])[0]


@dataclass
class _Ctx:
    rng: random.Random
    cluster: str
    cluster_index: int
    broker_version: str
    misconfig_share: float


def _software(ctx: _Ctx) -> tuple[str, str]:
    if ctx.rng.random() < 0.35:
        v = _pick(ctx.rng, RDKAFKA_VERSIONS)
        return (PYTHON, f"{v}-rdkafka-{v}") if ctx.rng.random() < 0.7 else (GO, f"{v}-rdkafka-{v}")
    return JAVA, _pick(ctx.rng, JAVA_VERSIONS)


def _instance_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _producer(ctx: _Ctx, service: str, replica: int) -> SimulatedClient:
    rng = ctx.rng
    name, version = _software(ctx)
    java = name == JAVA
    defaults = _java_producer_defaults(version) if java else _rdkafka_producer_defaults()
    config: dict[str, Any] = {
        "client.id": f"{service}-producer-{replica}",
        "acks": _pick(rng, (("all", 8), ("1", 2))),
        "linger.ms": _pick(rng, ((0, 2), (5, 3), (10, 2), (20, 2), (100, 1))),
        "compression.type": _pick(rng, COMPRESSION_BY_CLUSTER[ctx.cluster_index % len(COMPRESSION_BY_CLUSTER)]),
        "batch.size": _pick(rng, ((16384, 5), (65536, 3), (131072, 2))),
    }
    if config["acks"] == "1":
        config["enable.idempotence"] = False
    if rng.random() < 0.3:
        config["delivery.timeout.ms"] = _pick(rng, ((60000, 1), (120000, 2), (300000, 1)))
    client = SimulatedClient(_instance_id(rng), ctx.cluster, "producer", name, version, config, defaults)
    return _maybe_misconfigure(ctx, client, ("idempotence_with_acks_1", "retries_zero", "acks_zero",
                                             "missing_client_id", "old_client_on_4x"))


def _group(ctx: _Ctx, service: str) -> list[SimulatedClient]:
    rng = ctx.rng
    name, version = _software(ctx)
    members = rng.randint(3, 6)
    group_id = f"{service}-consumers"
    shared = {
        "group.id": group_id,
        "auto.offset.reset": _pick(rng, (("earliest", 6), ("latest", 4))),
        "enable.auto.commit": _pick(rng, ((True, 4), (False, 6))),
        "session.timeout.ms": _pick(rng, ((45000, 6), (30000, 3), (10000, 1))),
        "max.poll.records": _pick(rng, ((500, 6), (100, 2), (1000, 2))),
        "fetch.max.wait.ms": _pick(rng, ((500, 8), (100, 2))),
        ALLOWED_KEYS_CONFIG: ",".join((*DEFAULT_PUSH_KEYS["consumer"], "heartbeat.interval.ms")),
    }
    if rng.random() < 0.25:
        shared["isolation.level"] = "read_committed"
    defaults = _consumer_defaults(name == JAVA)
    out = [
        SimulatedClient(_instance_id(rng), ctx.cluster, "consumer", name, version,
                        {**shared, "client.id": f"{service}-consumer-{i}"}, defaults)
        for i in range(members)
    ]
    if rng.random() < ctx.misconfig_share * 2:
        victim = out[rng.randrange(members)]
        other = 10000 if shared["session.timeout.ms"] != 10000 else 45000
        out = [_with(c, {"session.timeout.ms": other}, "group_session_disagreement") if c is victim else c for c in out]
    return [_maybe_misconfigure(ctx, c, ("session_lt_3x_heartbeat", "max_poll_records_extreme", "old_client_on_4x"))
            for c in out]



def _share_consumer(ctx: _Ctx, service: str, replica: int) -> SimulatedClient:
    rng = ctx.rng
    version = _pick(rng, (("4.1.1", 2), ("4.2.0", 3)))
    config = {"client.id": f"{service}-share-{replica}", "group.id": f"{service}-share",
              "share.acknowledgement.mode": _pick(rng, (("implicit", 6), ("explicit", 4))),
              "max.poll.records": _pick(rng, ((500, 6), (200, 4)))}
    return SimulatedClient(_instance_id(rng), ctx.cluster, "share_consumer", JAVA, version, config, _share_defaults())


def _with(client: SimulatedClient, changes: Mapping[str, Any], kind: str, drop: Sequence[str] = ()) -> SimulatedClient:
    config = {k: v for k, v in {**client.config, **changes}.items() if k not in drop}
    return SimulatedClient(client.client_instance_id, client.cluster, client.client_type, client.software_name,
                           client.software_version, config, client.defaults, (*client.misconfigs, kind))


def _maybe_misconfigure(ctx: _Ctx, client: SimulatedClient, kinds: Sequence[str]) -> SimulatedClient:
    rng = ctx.rng
    if rng.random() >= ctx.misconfig_share:
        return client
    kind = rng.choice(list(kinds))
    if kind == "old_client_on_4x" and not ctx.broker_version.startswith("4."):
        kind = "missing_client_id"
    if kind == "idempotence_with_acks_1":
        return _with(client, {"enable.idempotence": True, "acks": "1"}, kind)
    if kind == "retries_zero":
        return _with(client, {"retries": 0}, kind)
    if kind == "acks_zero":
        return _with(client, {"acks": "0", "enable.idempotence": False}, kind)
    if kind == "session_lt_3x_heartbeat":
        return _with(client, {"session.timeout.ms": 10000, "heartbeat.interval.ms": 5000}, kind)
    if kind == "max_poll_records_extreme":
        return _with(client, {"max.poll.records": rng.choice((1, 100000))}, kind)
    if kind == "missing_client_id":
        return _with(client, {}, kind, drop=("client.id",))
    name, version = rng.choice(OLD_CLIENTS)
    old = _with(client, {}, kind)
    return SimulatedClient(old.client_instance_id, old.cluster, old.client_type, name, version, old.config,
                           old.defaults, old.misconfigs)


def generate_clients(clusters: Mapping[str, str], n: int, seed: int = 1324,
                     misconfig_share: float = 0.12) -> list[SimulatedClient]:
    """N client instances spread over `clusters` ({name: broker software version}), deterministic for a seed."""
    if not clusters:
        raise ValueError("no clusters to generate clients for")
    if n < 0:
        raise ValueError("the number of clients cannot be negative")
    rng = random.Random(seed)
    names = list(clusters)
    out: list[SimulatedClient] = []
    while len(out) < n:
        index = len(out) % len(names) if rng.random() < 0.5 else rng.randrange(len(names))
        ctx = _Ctx(rng, names[index], index, clusters[names[index]], misconfig_share)
        service = rng.choice(SERVICES)
        roll = rng.random()
        if roll < 0.5:
            batch = [_producer(ctx, service, r) for r in range(rng.randint(1, 3))]
        elif roll < 0.9:
            batch = _group(ctx, service)
        else:
            batch = [_share_consumer(ctx, service, r) for r in range(rng.randint(1, 2))]
        out.extend(batch)
    out = out[:n]
    # A handful of unrelated producers that all call themselves "kafka-client".
    producers = [i for i, c in enumerate(out) if c.client_type == "producer" and not c.misconfigs]
    for i in rng.sample(producers, min(len(producers), max(3, n // 20)) if len(producers) >= 3 else 0):
        out[i] = _with(out[i], {"client.id": SHARED_CLIENT_ID}, "shared_client_id")
    return out


def push_all(clients: Sequence[SimulatedClient], brokers: Mapping[str, Sequence[tuple[str, int]]],
             seed: int = 1324, timeout_s: float = 5.0,
             security: Mapping[str, tuple[ssl.SSLContext | None, SaslCredentials | None]] | None = None) -> list[PushOutcome]:
    """Each client pushes once to a randomly chosen broker of its cluster (as KIP-1324 clients do)."""
    rng = random.Random(seed)
    outcomes = []
    for client in clients:
        host, port = rng.choice(list(brokers[client.cluster]))
        ctx, sasl = (security or {}).get(client.cluster, (None, None))
        outcomes.append(push_client(client, host, port, timeout_s, ssl_context=ctx, sasl=sasl))
    return outcomes


def push_client_fleet(fleet: LabFleet, n: int, seed: int = 1324) -> tuple[list[SimulatedClient], list[PushOutcome]]:
    """Generate n clients over the fleet's PushConfig-enabled clusters and push each one's config once."""
    enabled = {name: rt for name, rt in fleet.runtimes.items() if rt.spec.policy.push_config}
    if not enabled:
        return [], []
    versions = {name: rt.spec.profile.software_version for name, rt in enabled.items()}
    clients = generate_clients(versions, n, seed=seed)
    info = fleet.clusters
    brokers = {name: [(b.host, b.port) for b in info[name].brokers] for name in enabled}
    security: dict[str, tuple[ssl.SSLContext | None, SaslCredentials | None]] = {}
    for name, rt in enabled.items():
        ctx = None
        if rt.spec.tls is not None:
            ctx = ssl.create_default_context(cafile=rt.spec.tls.cafile) if rt.spec.tls.cafile else ssl.create_default_context()
        creds = None
        if rt.spec.sasl is not None and rt.spec.sasl.users:
            user = rt.spec.sasl.users[0]
            creds = SaslCredentials(rt.spec.sasl.mechanisms[0], user.name, user.secret())
        security[name] = (ctx, creds)
    return clients, push_all(clients, brokers, seed=seed, security=security)
