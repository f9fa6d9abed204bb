"""Allow-list of known client configuration keys and their ConfigDef types, per client type.

Taken from the Apache Kafka client configuration reference (producer, consumer, share consumer,
admin, streams; https://kafka.apache.org/documentation/#configuration) and librdkafka's
CONFIGURATION.md for keys only librdkafka knows. A key outside these lists is a custom key and
is treated as sensitive (KIP-1324: Kafka cannot tell what an application's own key holds).
"""

from __future__ import annotations

import re


def _parse(spec: str) -> dict[str, str]:
    """Parse 'TYPE: key key key' lines into {key: TYPE}."""
    out: dict[str, str] = {}
    for line in spec.strip().splitlines():
        typ, _, keys = line.partition(":")
        for key in keys.split():
            out[key] = typ.strip()
    return out


COMMON = _parse("""
LIST: bootstrap.servers metric.reporters config.push.allowed.keys
STRING: client.dns.lookup client.id client.rack metrics.recording.level metadata.recovery.strategy
LONG: connections.max.idle.ms metadata.max.age.ms reconnect.backoff.ms reconnect.backoff.max.ms
LONG: retry.backoff.ms retry.backoff.max.ms socket.connection.setup.timeout.ms
LONG: socket.connection.setup.timeout.max.ms metrics.sample.window.ms
LONG: metadata.recovery.rebootstrap.trigger.ms
INT: receive.buffer.bytes send.buffer.bytes request.timeout.ms metrics.num.samples
INT: default.api.timeout.ms
BOOLEAN: auto.include.jmx.reporter enable.metrics.push enable.config.push
""")

PRODUCER = _parse("""
STRING: acks compression.type transactional.id
INT: batch.size compression.gzip.level compression.lz4.level compression.zstd.level
INT: delivery.timeout.ms max.in.flight.requests.per.connection max.request.size retries
INT: transaction.timeout.ms
LONG: buffer.memory linger.ms max.block.ms metadata.max.idle.ms partitioner.availability.timeout.ms
BOOLEAN: enable.idempotence partitioner.adaptive.partitioning.enable partitioner.ignore.keys
BOOLEAN: transaction.two.phase.commit.enable
CLASS: key.serializer value.serializer partitioner.class
LIST: interceptor.classes
""")

CONSUMER = _parse("""
BOOLEAN: allow.auto.create.topics check.crcs enable.auto.commit exclude.internal.topics
INT: auto.commit.interval.ms fetch.max.bytes fetch.max.wait.ms fetch.min.bytes
INT: heartbeat.interval.ms max.partition.fetch.bytes max.poll.interval.ms max.poll.records
INT: session.timeout.ms
STRING: auto.offset.reset group.id group.instance.id group.protocol group.remote.assignor
STRING: isolation.level
LIST: partition.assignment.strategy interceptor.classes
CLASS: key.deserializer value.deserializer
""")

SHARE_CONSUMER = _parse("""
STRING: group.id share.acknowledgement.mode share.acquire.mode isolation.level
INT: fetch.max.bytes fetch.max.wait.ms fetch.min.bytes max.partition.fetch.bytes
INT: max.poll.interval.ms max.poll.records
BOOLEAN: check.crcs
LIST: interceptor.classes
CLASS: key.deserializer value.deserializer
""")

ADMIN: dict[str, str] = {}

STREAMS = _parse("""
STRING: application.id application.server processing.guarantee topology.optimization
STRING: rack.aware.assignment.strategy upgrade.from state.dir built.in.metrics.version
STRING: dsl.store.format
INT: num.stream.threads replication.factor num.standby.replicas buffered.records.per.partition
INT: max.warmup.replicas rack.aware.assignment.non_overlap_cost rack.aware.assignment.traffic_cost
LONG: commit.interval.ms cache.max.bytes.buffering statestore.cache.max.bytes max.task.idle.ms
LONG: acceptable.recovery.lag probing.rebalance.interval.ms poll.ms task.timeout.ms
LONG: window.size.ms repartition.purge.interval.ms state.cleanup.delay.ms
BOOLEAN: enable.metrics.push
LIST: rack.aware.assignment.tags
CLASS: default.key.serde default.value.serde default.deserialization.exception.handler
CLASS: default.production.exception.handler default.timestamp.extractor
""")

# Streams forwards configs to its embedded clients under these prefixes.
STREAMS_CLIENT_PREFIXES = (
    "producer.",
    "consumer.",
    "main.consumer.",
    "restore.consumer.",
    "global.consumer.",
    "admin.",
)

# Keys only librdkafka (and clients built on it) knows; types are the nearest ConfigDef type.
LIBRDKAFKA = _parse("""
STRING: request.required.acks compression.codec partitioner debug broker.version.fallback
STRING: client.software.name client.software.version
INT: queue.buffering.max.messages queue.buffering.max.kbytes batch.num.messages
INT: message.send.max.retries message.timeout.ms socket.timeout.ms message.max.bytes
INT: receive.message.max.bytes max.in.flight topic.metadata.refresh.interval.ms
INT: statistics.interval.ms queued.min.messages queued.max.messages.kbytes fetch.wait.max.ms
INT: fetch.message.max.bytes fetch.error.backoff.ms coordinator.query.interval.ms log_level
INT: sticky.partitioning.linger.ms api.version.request.timeout.ms topic.metadata.propagation.max.ms
INT: fetch.queue.backoff.ms
DOUBLE: queue.buffering.max.ms
BOOLEAN: socket.keepalive.enable enable.auto.offset.store enable.partition.eof api.version.request
BOOLEAN: enable.gapless.guarantee topic.metadata.refresh.sparse log.connection.close
""")

KNOWN_BY_CLIENT_TYPE: dict[str, dict[str, str]] = {
    "producer": {**COMMON, **PRODUCER},
    "consumer": {**COMMON, **CONSUMER},
    "share_consumer": {**COMMON, **SHARE_CONSUMER},
    "admin": {**COMMON, **ADMIN},
    "streams": {**COMMON, **STREAMS, **PRODUCER, **CONSUMER},
}
ALL_KNOWN: dict[str, str] = {
    **COMMON, **PRODUCER, **CONSUMER, **SHARE_CONSUMER, **ADMIN, **STREAMS, **LIBRDKAFKA,
}

_RDKAFKA_NAME = re.compile(r"rdkafka|confluent-kafka|kcat", re.IGNORECASE)


def is_librdkafka(software_name: str | None, software_version: str | None = None) -> bool:
    """True when the client software is librdkafka or a client built on it."""
    text = f"{software_name or ''} {software_version or ''}"
    return bool(_RDKAFKA_NAME.search(text))


def known_type(key: str, client_type: str | None = None, librdkafka: bool = True) -> str | None:
    """The ConfigDef type of a known key for this client type, or None for an unknown key."""
    if client_type == "streams":
        for prefix in STREAMS_CLIENT_PREFIXES:
            if key.startswith(prefix) and len(key) > len(prefix):
                return known_type(key[len(prefix):], None, librdkafka)
    table = KNOWN_BY_CLIENT_TYPE.get(client_type or "", ALL_KNOWN)
    typ = table.get(key)
    if typ is None and librdkafka:
        typ = LIBRDKAFKA.get(key)
    return typ
