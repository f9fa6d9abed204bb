"""Declarative catalog of client misconfiguration rules, and the client-too-old rule (CC018).

Instance rules are SQL conditions over one client instance's latest config, written with
placeholders: ``{num:k}`` = the value of key k as a number, ``{str:k}`` = the lower-cased
string value, ``{has:k}`` = the key was reported. A rule whose keys are absent never fires
(an unreported value is unknown, not wrong). Fleet rules look across instances and are
evaluated by the function named in ``fleet``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

DOC = "https://kafka.apache.org/documentation/"
SHARED_CLIENT_ID_THRESHOLD = 10
# A consumer of the KIP-848 protocol takes its session timeout and heartbeat interval from the broker.
CLASSIC_GROUP = "coalesce({str:group.protocol}, 'classic') <> 'consumer'"
# Real Java clients 2.8-4.4 refuse to start (ConfigException) with what the rule describes: a running
# Java client never reports it, other clients' pushed configs and .properties files still can.
JAVA_REFUSES = "Java 2.8–4.4 refuse to start with it (ConfigException), so only other clients and files report it"
# KIP-896: Kafka 4.0 keeps only protocol versions of Kafka 2.1 and later (Java clients >= 2.1)
# and the versions librdkafka 1.8.2 (the client release KIP-896 analysed) uses.
MIN_JAVA_FOR_KAFKA4 = (2, 1, 0)
MIN_LIBRDKAFKA_FOR_KAFKA4 = (1, 8, 2)
# Kafka Streams names its own consumers <client.id>-StreamThread-N-consumer, ...-StreamThread-N-restore-consumer,
# ...-StateUpdater-N-restore-consumer (3.8+) and ...-global-consumer (client.id lower-cased by {str:}).
STREAMS_OWN_CONSUMER = ("coalesce({str:client.id}, '') NOT LIKE '%-streamthread-%consumer' "
                        "AND coalesce({str:client.id}, '') NOT LIKE '%-stateupdater-%-restore-consumer' "
                        "AND coalesce({str:client.id}, '') NOT LIKE '%-global-consumer'")
JMX_CLIENT_TYPES = ("admin", "consumer", "producer", "streams")
GROUP_CONSISTENCY_KEYS = ("session.timeout.ms", "max.poll.interval.ms", "heartbeat.interval.ms",
                          "group.protocol", "partition.assignment.strategy")


@dataclass(frozen=True)
class Rule:
    """One misconfiguration rule."""

    id: str
    severity: str
    title: str
    rationale: str
    doc_url: str
    keys: tuple[str, ...]
    client_types: tuple[str, ...] = ()
    condition: str | None = None
    fleet: str | None = None
    # Which client versions can report it, checked against real Java clients 2.8-4.4 (tests/clients).
    versions: str = ""


RULES: tuple[Rule, ...] = (
    Rule("CC001", "critical", "Idempotent producer without acks=all",
         "Idempotence requires acks=all. The Java producer refuses to start when enable.idempotence=true "
         "is set with other acks, and since 3.0 turns its default idempotence off, logging "
         "enable.idempotence=false, when acks is not all; other clients may silently weaken or disable "
         "idempotence.",
         DOC + "#producerconfigs_enable.idempotence", ("enable.idempotence", "acks"),
         ("producer", "streams"),
         "{str:enable.idempotence} = 'true' AND {str:acks} NOT IN ('all', '-1')",
         versions=JAVA_REFUSES),
    Rule("CC002", "critical", "Idempotent producer with more than 5 in-flight requests",
         "Ordering and deduplication are only guaranteed with "
         "max.in.flight.requests.per.connection <= 5 when idempotence is on. The Java producer refuses "
         "to start with enable.idempotence=true and more; 3.x turns its default idempotence off instead "
         "(with a warning) and 4.x refuses that too.",
         DOC + "#producerconfigs_max.in.flight.requests.per.connection",
         ("enable.idempotence", "max.in.flight.requests.per.connection"), ("producer", "streams"),
         "{str:enable.idempotence} = 'true' AND {num:max.in.flight.requests.per.connection} > 5",
         versions=JAVA_REFUSES + " (2.8 logs its config first)"),
    Rule("CC003", "warning", "Producer retries disabled",
         "retries=0 turns every transient error (leader change, timeout) into a lost send; since 3.0 it "
         "also turns the Java producer's default idempotence off. Producers only: the `retries` a Streams "
         "app logs in its StreamsConfig block (2.8–3.9, default 0, deprecated by KIP-572) is not its "
         "producer's, which logs a block of its own.",
         DOC + "#producerconfigs_retries", ("retries",), ("producer",),
         "{num:retries} = 0", versions="all producers; Java 2.8–4.4 start with it"),
    Rule("CC004", "warning", "acks=0: fire and forget",
         "With acks=0 the producer never learns whether a record was written; records are lost "
         "silently on any broker problem.",
         DOC + "#producerconfigs_acks", ("acks",), ("producer", "streams"), "{str:acks} = '0'",
         versions="all clients; Java 2.8–4.4 start with it (and turn default idempotence off since 3.0)"),
    Rule("CC005", "warning", "delivery.timeout.ms shorter than linger.ms + request.timeout.ms",
         "delivery.timeout.ms must be at least linger.ms + request.timeout.ms, otherwise records "
         "expire before a single request can complete. The Java producer refuses to start when "
         "delivery.timeout.ms is set that low (after logging its config), and raises a default one to "
         "the sum.",
         DOC + "#producerconfigs_delivery.timeout.ms",
         ("delivery.timeout.ms", "linger.ms", "request.timeout.ms"), ("producer", "streams"),
         "{num:delivery.timeout.ms} < {num:linger.ms} + {num:request.timeout.ms}",
         versions="Java 2.8–4.4 log their config, then refuse to start (ConfigException): their logs show "
                  "it, a running Java client never pushes it"),
    Rule("CC006", "warning", "Batching disabled (batch.size=0)",
         "batch.size=0 sends every record in its own request, multiplying broker load.",
         DOC + "#producerconfigs_batch.size", ("batch.size",), ("producer", "streams"),
         "{num:batch.size} = 0", versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC007", "warning", "Retries without idempotence can reorder records",
         "With idempotence off, retries > 0 and more than one in-flight request, a retried "
         "batch can land after a later one. Every Java producer before 3.0 does this by default, and "
         "since 3.0 one with acks=1 does too: acks other than all silently turn idempotence off. With "
         "acks=0 nothing is retried.",
         DOC + "#producerconfigs_max.in.flight.requests.per.connection",
         ("enable.idempotence", "retries", "max.in.flight.requests.per.connection"),
         ("producer", "streams"),
         "{str:enable.idempotence} = 'false' AND {num:retries} > 0 "
         "AND {num:max.in.flight.requests.per.connection} > 1 AND coalesce({str:acks}, '') <> '0'",
         versions="all clients; Java 2.8 by default, 3.0–4.4 with acks=1 (or, in 3.x, more than 5 in flight)"),
    Rule("CC008", "warning", "buffer.memory smaller than batch.size",
         "A single batch cannot fit in the producer's buffer; send() blocks until max.block.ms.",
         DOC + "#producerconfigs_buffer.memory", ("buffer.memory", "batch.size"),
         ("producer", "streams"), "{num:buffer.memory} < {num:batch.size}",
         versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC009", "warning", "session.timeout.ms below 3 x heartbeat.interval.ms",
         "The heartbeat interval should be at most a third of the session timeout so a member "
         "survives a missed heartbeat. The Java consumer refuses to start when the heartbeat interval "
         "reaches the session timeout. Consumers of the KIP-848 protocol (group.protocol=consumer) "
         "take both from the broker: 3.7–3.9 ignore them, 4.x refuse them.",
         DOC + "#consumerconfigs_heartbeat.interval.ms",
         ("session.timeout.ms", "heartbeat.interval.ms"), ("consumer", "streams"),
         f"{{num:session.timeout.ms}} < 3 * {{num:heartbeat.interval.ms}} AND {CLASSIC_GROUP}",
         versions="classic-protocol consumers; Java 2.8–4.4 start with it below the session timeout (at or "
                  "above it they log their config, then refuse to start)"),
    Rule("CC010", "warning", "fetch.max.wait.ms not below request.timeout.ms",
         "A fetch may legitimately wait fetch.max.wait.ms; if that reaches request.timeout.ms "
         "idle fetches time out and reconnect.",
         DOC + "#consumerconfigs_fetch.max.wait.ms", ("fetch.max.wait.ms", "request.timeout.ms"),
         ("consumer", "share_consumer", "streams"),
         "{num:fetch.max.wait.ms} >= {num:request.timeout.ms}",
         versions="all clients; Java 2.8–4.4 start with it"),
    Rule("CC011", "info", "auto.offset.reset=none in a consumer group",
         "A group member without committed offsets throws NoOffsetForPartitionException instead of "
         "starting; fine when deliberate, surprising otherwise. A consumer outside any group that "
         "positions itself is fine: Kafka Streams gives its restore and global consumers "
         "auto.offset.reset=none and no group.id. Share consumers refuse the key (the group's "
         "share.auto.offset.reset decides).",
         DOC + "#consumerconfigs_auto.offset.reset", ("auto.offset.reset",),
         ("consumer", "streams"), "{str:auto.offset.reset} = 'none' AND {str:group.id} IS NOT NULL",
         versions="group consumers; Java 2.8–4.4 start with it"),
    Rule("CC012", "warning", "Extreme max.poll.records",
         "max.poll.records above 10000 risks exceeding max.poll.interval.ms while processing; "
         "1 makes every poll a round trip.",
         DOC + "#consumerconfigs_max.poll.records", ("max.poll.records",),
         ("consumer", "share_consumer", "streams"),
         "{num:max.poll.records} > 10000 OR {num:max.poll.records} = 1",
         versions="consumers and share consumers; Java 2.8–4.4 start with it"),
    Rule("CC013", "warning", "Extreme max.poll.interval.ms",
         "Below 10 s members are evicted during ordinary processing pauses; above 1 h a stuck "
         "consumer holds its partitions for too long.",
         DOC + "#consumerconfigs_max.poll.interval.ms", ("max.poll.interval.ms",),
         ("consumer", "share_consumer", "streams"),
         "{num:max.poll.interval.ms} < 10000 OR {num:max.poll.interval.ms} > 3600000",
         versions="consumers and share consumers; Java 2.8–4.4 start with it"),
    Rule("CC014", "warning", "session.timeout.ms outside the broker's default bounds",
         "Brokers reject JoinGroup when session.timeout.ms is outside group.min.session.timeout.ms "
         "(6 s) .. group.max.session.timeout.ms (30 min) by default. Consumers of the KIP-848 "
         "protocol (group.protocol=consumer) take their session timeout from the broker.",
         DOC + "#brokerconfigs_group.min.session.timeout.ms", ("session.timeout.ms",),
         ("consumer", "streams"),
         f"({{num:session.timeout.ms}} < 6000 OR {{num:session.timeout.ms}} > 1800000) AND {CLASSIC_GROUP}",
         versions="classic-protocol consumers; Java 2.8–4.4 start with it (the broker refuses the join)"),
    Rule("CC015", "info", "Missing or generated client.id",
         "Without a stable client.id, quotas, request logs and broker metrics cannot name the "
         "application.",
         DOC + "#producerconfigs_client.id", ("client.id",), (), fleet="missing_client_id",
         versions="all clients; Java producers and consumers log their generated id, admin clients an empty one"),
    Rule("CC016", "warning", f"One client.id shared by more than {SHARED_CLIENT_ID_THRESHOLD} "
         "instances",
         "Quotas and metrics are per client.id; many instances sharing one id share one quota "
         "and become indistinguishable.",
         DOC + "#design_quotas", ("client.id",), (), fleet="shared_client_id", versions="all clients"),
    Rule("CC017", "warning", "Members of one consumer group disagree on group settings",
         "Members of a group with different session/poll/heartbeat settings or assignors "
         "rebalance unpredictably; the group behaves like its weakest member.",
         DOC + "#consumerconfigs_session.timeout.ms", GROUP_CONSISTENCY_KEYS, (),
         fleet="group_disagreement", versions="consumers (classic and KIP-848 groups alike)"),
    Rule("CC018", "critical", "Client too old for the cluster's Kafka 4.x brokers",
         "Kafka 4.0 removed protocol versions older than Kafka 2.1 (KIP-896): Java clients "
         "below 2.1 and librdkafka below 1.8.2 get UNSUPPORTED_VERSION.",
         "https://cwiki.apache.org/confluence/display/KAFKA/KIP-896%3A+Remove+old+client+protocol+API+versions+in+Kafka+4.0",
         ("client_software_version",), (), fleet="client_too_old",
         versions="Java below 2.1, librdkafka below 1.8.2, on clusters of Kafka 4.x brokers"),
    # Keys Kafka 4.x Java clients no longer define (readiness names the instances through these rules,
    # REMOVED_KEY_RULES): a value other than the key's old default is a setting the new clients ignore.
    Rule("CC019", "info", "auto.include.jmx.reporter set: Kafka 4.0 clients ignore it",
         "KIP-830 (3.4) added auto.include.jmx.reporter (default true, deprecated from the start); Kafka 4.0 "
         "clients no longer define it and instead default metric.reporters to JmxReporter. An instance that "
         "sets it to false to turn its JMX metrics off gets them back on 4.x unless metric.reporters is set "
         "to a list without JmxReporter; drop the key and set metric.reporters instead.",
         DOC + "#producerconfigs_metric.reporters", ("auto.include.jmx.reporter",), JMX_CLIENT_TYPES,
         "{str:auto.include.jmx.reporter} <> 'true'",
         versions="Java 3.4–3.9 define it and start with it; 2.8–3.3 and 4.x start too, without it in their "
                  "config block (4.x list JmxReporter in metric.reporters instead)"),
    Rule("CC020", "warning", "metric.reporters without JmxReporter: JMX metrics lost on Kafka 4.x clients",
         "Java clients before 4.0 add JmxReporter to metric.reporters by themselves (always before 3.4, "
         "then unless auto.include.jmx.reporter=false). Kafka 4.0 clients run only the reporters "
         "metric.reporters names, and its default became JmxReporter: an instance that sets metric.reporters "
         "to a list without org.apache.kafka.common.metrics.JmxReporter silently loses its JMX metrics, and "
         "what monitors them, when it moves to 4.x. Add JmxReporter to the list to keep them.",
         DOC + "#producerconfigs_metric.reporters", ("metric.reporters",), JMX_CLIENT_TYPES,
         "{str:metric.reporters} <> '' AND instr({str:metric.reporters}, "
         "'org.apache.kafka.common.metrics.jmxreporter') = 0 "
         "AND coalesce({str:auto.include.jmx.reporter}, 'true') = 'true'",
         versions="Java 2.8–4.4 start with it; 2.8–3.9 still expose JMX metrics, 4.x do not"),
    Rule("CC021", "info", "Kafka Streams retries set: Kafka 4.0 Streams no longer define it",
         "StreamsConfig's own retries (default 0) was deprecated in 2.7 by KIP-572, which replaced Streams' "
         "retry loops with task.timeout.ms, and Kafka 4.0 Streams no longer define it. The value still "
         "reaches the app's producer (retries is a producer key); what it did for Streams itself is gone: "
         "use task.timeout.ms.",
         "https://cwiki.apache.org/confluence/display/KAFKA/KIP-572%3A+Improve+timeouts+and+retries+in+Kafka+Streams",
         ("retries",), ("streams",), "{num:retries} <> 0",
         versions="Kafka Streams 2.8–3.9 log it in their StreamsConfig block; 4.x Streams start with it and "
                  "log it only in their producer's and admin client's blocks (as 2.8–3.9 do too)"),
    Rule("CC022", "info", "internal.leave.group.on.close=false: Kafka 4.2 consumers ignore it",
         "An internal consumer key (default true): false keeps a closing member in its group until its "
         "session times out, so a restart does not rebalance. Kafka 4.2 consumers no longer define it "
         "(Kafka Streams, which set it on its own consumers, closes them with CloseOptions, KIP-1092): a "
         "consumer that sets it leaves its group on close after the upgrade. Use static membership "
         "(group.instance.id), or the consumer's close options, instead. Streams' own consumers are left out.",
         DOC + "#consumerconfigs_group.instance.id", ("internal.leave.group.on.close",),
         ("consumer", "share_consumer"),
         "{str:internal.leave.group.on.close} = 'false' AND " + STREAMS_OWN_CONSUMER,
         versions="Java 2.8–4.1 consumers define it and start with it (Kafka Streams 2.8–4.1 log false for "
                  "their own consumers); 4.2+ start too, without it in their config block"),
)

# Removed key -> the rule naming the instances that set it (backend.views.readiness lists them).
REMOVED_KEY_RULES = {"auto.include.jmx.reporter": "CC019", "retries": "CC021",
                     "internal.leave.group.on.close": "CC022"}
# metric.reporters changed its default in 4.0: the instances at risk set it (CC020), not those on the default.
JMX_REPORTERS_RULE = "CC020"

_PLACEHOLDER = re.compile(r"\{(num|str|has):([A-Za-z0-9_.\-]+)\}")


def rule_by_id(rule_id: str) -> Rule:
    """Look a rule up by id."""
    for rule in RULES:
        if rule.id == rule_id:
            return rule
    raise KeyError(rule_id)


# CC015: a client.id the client generated itself (or none). Evaluated with Python's re.search, as Spark's
# rlike (Java's find) would evaluate it.
GENERATED_ID = r"^(?:producer-[0-9]+|consumer-.*-?[0-9]+|adminclient-[0-9]+|rdkafka|)$"
_INT_MAX = 2**31 - 1


def _version_number(version: str) -> int | None:
    """'2.0.1' -> 20001 (major*10000 + minor*100 + patch); None when unparsable."""
    match = re.match(r"v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?", version)
    if match is None:
        return None
    parts = [int(p) if p else 0 for p in match.groups()]
    if max(parts) > _INT_MAX:
        return None
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


def too_old(software_name: str | None, software_version: str | None) -> bool:
    """The client software predates what Kafka 4.x serves: Java < 2.1, librdkafka < 1.8.2 (KIP-896)."""
    name, version = (software_name or "").lower(), software_version or ""
    rd_match = re.search(r"rdkafka[-_ ]?v?([0-9]+\.[0-9]+(?:\.[0-9]+)?)", version)
    rd_version = rd_match.group(1) if rd_match else ""
    java_min = MIN_JAVA_FOR_KAFKA4[0] * 10000 + MIN_JAVA_FOR_KAFKA4[1] * 100 + MIN_JAVA_FOR_KAFKA4[2]
    rd_min = (MIN_LIBRDKAFKA_FOR_KAFKA4[0] * 10000 + MIN_LIBRDKAFKA_FOR_KAFKA4[1] * 100
              + MIN_LIBRDKAFKA_FOR_KAFKA4[2])
    if "java" in name:
        number = _version_number(version)
        return number is not None and number < java_min
    if "rdkafka" in name or rd_version:
        number = _version_number(rd_version or version)
        return number is not None and number < rd_min
    return False


def broker_majors(brokers: Iterable[tuple[str, str | None, str | None, str | None]]) -> dict[str, tuple[int, str]]:
    """Per cluster: (highest broker major version, highest version) of its current brokers.

    ``brokers``: (cluster_id, software_version, version_min, version_provenance) rows; a reported (or
    ZooKeeper) version counts as is, a guessed one by its lower bound.
    """
    out: dict[str, tuple[int, str]] = {}
    for cluster, software, minimum, provenance in brokers:
        version = software if provenance in ("reported", "zookeeper") else minimum if provenance == "guessed" else None
        match = re.match(r"([0-9]+)\.", version or "")
        if version is None or match is None:
            continue
        major, best = out.get(cluster, (int(match.group(1)), version))
        out[cluster] = (max(major, int(match.group(1))), max(best, version))
    return out


# Rules whose alerts depend only on one instance's own latest snapshot (and name it): a refresh evaluates
# them for the changed instances only. CC018 is per instance too but also depends on the brokers, so it is
# evaluated on every run from the heads.
PER_INSTANCE_RULE_IDS = tuple(r.id for r in RULES if r.condition is not None) + ("CC015",)
