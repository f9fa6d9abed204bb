"""Misconfiguration rules over broker configs and topic overrides (DescribeConfigs), as fleet alerts.

Pure functions of one cluster snapshot whose configuration has been read (`snapshot.configs`):
broker-level findings have one subject per cluster ("brokers", or the config name), topic
overrides one subject per topic, and topics that inherit a risky broker value are one subject
("topics inheriting ..."), so a standing condition is one incident, not one per topic. Clusters
whose configuration was never read raise nothing here.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from backend.store.model import Alert, ClusterSnapshot, ConfigSnapshot, ConfigValue

DOC = "https://kafka.apache.org/documentation/"
SAMPLE = 20
PROD_ENVS = frozenset({"prod", "production", "prd"})
STATIC = "STATIC_BROKER_CONFIG"
OVERRIDE = "DYNAMIC_TOPIC_CONFIG"
# Configs that differ from broker to broker by design (identity, addresses, disks).
PER_HOST = frozenset({"broker.id", "node.id", "broker.rack", "listeners", "advertised.listeners", "log.dirs",
                      "log.dir", "early.start.listeners"})
PER_HOST_PREFIXES = ("listener.name.",)
SHORT_BROKER_RETENTION_MS = 24 * 3_600_000
SHORT_TOPIC_RETENTION_MS = 3_600_000


@dataclass(frozen=True)
class ConfigRule:
    """One rule of the catalog."""

    id: str
    severity: str
    title: str
    doc_url: str
    when: str
    rationale: str


RULES: tuple[ConfigRule, ...] = (
    ConfigRule("config_min_isr_above_rf", "critical", "min.insync.replicas above the replication factor",
               DOC + "#topicconfigs_min.insync.replicas",
               "a topic's min.insync.replicas (its override, else the brokers') is greater than its replication factor",
               "The in-sync replica set can never reach min.insync.replicas, so every produce with acks=all fails "
               "with NOT_ENOUGH_REPLICAS: the topic is unwritable for idempotent and transactional producers."),
    ConfigRule("config_min_isr_one", "warning", "min.insync.replicas = 1 with replication factor 3 or more",
               DOC + "#topicconfigs_min.insync.replicas",
               "a topic with replication factor >= 3 has min.insync.replicas = 1",
               "acks=all then means one copy: a write acknowledged by the leader alone is lost if that broker fails "
               "before a follower fetched it. Use min.insync.replicas = RF - 1 (2 for RF 3)."),
    ConfigRule("config_unclean_leader_election", "critical", "Unclean leader election enabled",
               DOC + "#brokerconfigs_unclean.leader.election.enable",
               "unclean.leader.election.enable = true on a broker, or as a topic override",
               "A replica that is not in sync may become leader when every in-sync replica is gone: the records it "
               "never fetched are lost, and consumers may see offsets go back."),
    ConfigRule("config_rf1_in_prod", "warning", "Topics with replication factor 1 in a production cluster",
               DOC + "#replication",
               "the cluster is tagged env = prod and has non-internal topics with replication factor 1",
               "A topic with one replica is offline whenever its broker is down (restart, upgrade) and its data is "
               "lost with that broker's disk."),
    ConfigRule("config_auto_create_in_prod", "warning", "Automatic topic creation in a production cluster",
               DOC + "#brokerconfigs_auto.create.topics.enable",
               "the cluster is tagged env = prod and a broker has auto.create.topics.enable = true (Kafka's default)",
               "A typo in a producer's or consumer's topic name creates a topic with the broker defaults "
               "(often replication factor 1) instead of failing, and data goes where nobody reads it."),
    ConfigRule("config_static_disagreement", "warning", "Brokers of one cluster disagree on a static config",
               DOC + "#dynamicbrokerconfigs",
               "brokers report different values for a config that at least one of them sets in server.properties "
               "(per-host configs such as broker.id, listeners, broker.rack and log.dirs excepted)",
               "server.properties differ between brokers: a rolling configuration change left half done, or a broker "
               "rebuilt from an old template. The cluster behaves differently depending on which broker leads."),
    ConfigRule("config_default_rf_below_3_in_prod", "warning", "default.replication.factor below 3 in production",
               DOC + "#brokerconfigs_default.replication.factor",
               "the cluster is tagged env = prod, has 3 or more brokers, and default.replication.factor < 3",
               "Topics created without an explicit replication factor (CreateTopics without one, auto-creation) get "
               "fewer than three replicas and cannot survive a broker loss during a restart of another."),
    ConfigRule("config_offsets_rf_below_3", "warning", "offsets.topic.replication.factor below 3",
               DOC + "#brokerconfigs_offsets.topic.replication.factor",
               "the cluster has 3 or more brokers and offsets.topic.replication.factor < 3 (or __consumer_offsets "
               "has fewer than 3 replicas)",
               "__consumer_offsets is created once with this factor. With fewer replicas, losing a broker makes "
               "consumer groups unable to commit or fetch offsets, and committed offsets can be lost."),
    ConfigRule("config_short_retention", "warning", "Very short retention",
               DOC + "#brokerconfigs_log.retention.ms",
               "the brokers' retention (log.retention.ms, else .minutes, else .hours) is under 24 hours, or a topic "
               "override retention.ms is under 1 hour",
               "Records are deleted before a consumer that was down over a night or a weekend catches up; a restart "
               "of a lagging consumer then resets to auto.offset.reset and skips data."),
)
RULES_BY_ID = {r.id: r for r in RULES}


def is_prod(snapshot: ClusterSnapshot) -> bool:
    """Whether the cluster is tagged as production (env = prod / production)."""
    return str(snapshot.tags.get("env", "")).strip().lower() in PROD_ENVS


def _alert(rule_id: str, snapshot: ClusterSnapshot, subject: str, evidence: dict[str, object], explanation: str,
           severity: str | None = None) -> Alert:
    rule = RULES_BY_ID[rule_id]
    return Alert(rule=rule.id, severity=severity or rule.severity, cluster_name=snapshot.cluster_name,
                 subject=subject, evidence=evidence, explanation=explanation, doc_url=rule.doc_url)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def broker_values(configs: ConfigSnapshot, name: str) -> dict[int, ConfigValue]:
    """Each broker's entry for a config (brokers that do not report it are left out)."""
    return {bid: entries[name] for bid, entries in sorted(configs.brokers.items()) if name in entries}


def cluster_value(configs: ConfigSnapshot, name: str) -> str | None:
    """The value most brokers report for a config (ties: the lowest broker id's)."""
    values = [v.value for v in broker_values(configs, name).values() if v.value is not None]
    return Counter(values).most_common(1)[0][0] if values else None


def _by_value(entries: dict[int, ConfigValue]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for bid, v in entries.items():
        out[str(v.value)].append(bid)
    return dict(sorted(out.items()))


def _topic_rule(snapshot: ClusterSnapshot, configs: ConfigSnapshot, rule_id: str, key: str,
                risky: Callable[[int | None, int], bool], describe: Callable[[int, int], str]) -> list[Alert]:
    """A per-topic rule on an integer config against the replication factor: overrides one by one, inherited as one."""
    inherited_value = _int(cluster_value(configs, key))
    alerts: list[Alert] = []
    inheriting: list[tuple[str, int]] = []
    for t in snapshot.topics:
        if t.replication_factor <= 0:
            continue
        override = configs.topics.get(t.topic, {}).get(key)
        if override is not None:
            value = _int(override.value)
            if value is not None and risky(value, t.replication_factor):
                alerts.append(_alert(rule_id, snapshot, f"topic {t.topic}",
                                     {"topic": t.topic, key: value, "replication_factor": t.replication_factor,
                                      "source": OVERRIDE},
                                     f"Topic {t.topic}: {describe(value, t.replication_factor)} (topic override)."))
        elif inherited_value is not None and risky(inherited_value, t.replication_factor):
            inheriting.append((t.topic, t.replication_factor))
    if inheriting and inherited_value is not None:
        sample = {name: rf for name, rf in inheriting[:SAMPLE]}
        alerts.append(_alert(rule_id, snapshot, f"topics inheriting {key}",
                             {key: inherited_value, "topics": len(inheriting), "sample": sample,
                              "brokers": _by_value(broker_values(configs, key))},
                             f"{len(inheriting)} topics inherit {key} = {inherited_value} from the brokers: "
                             f"{describe(inherited_value, inheriting[0][1])} for {inheriting[0][0]}"
                             + (" and others." if len(inheriting) > 1 else ".")))
    return alerts


def min_isr_above_rf(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """min.insync.replicas greater than a topic's replication factor: unwritable with acks=all."""
    return _topic_rule(snapshot, configs, "config_min_isr_above_rf", "min.insync.replicas",
                       lambda v, rf: v is not None and v > rf,
                       lambda v, rf: f"min.insync.replicas = {v} exceeds its replication factor {rf}, "
                                     "so every acks=all write fails")


def min_isr_one(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """min.insync.replicas = 1 on topics with replication factor 3 or more."""
    return _topic_rule(snapshot, configs, "config_min_isr_one", "min.insync.replicas",
                       lambda v, rf: v == 1 and rf >= 3,
                       lambda v, rf: f"replication factor {rf} but min.insync.replicas = 1: acks=all waits for one copy")


def unclean_leader_election(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """unclean.leader.election.enable = true on brokers or as a topic override."""
    key = "unclean.leader.election.enable"
    alerts = []
    entries = broker_values(configs, key)
    on = {bid: v for bid, v in entries.items() if str(v.value).lower() == "true"}
    if on:
        alerts.append(_alert("config_unclean_leader_election", snapshot, "brokers",
                             {"brokers": sorted(on), "sources": {str(b): v.source for b, v in on.items()},
                              "of_brokers": len(entries)},
                             f"{key} = true on broker(s) {', '.join(map(str, sorted(on)))} "
                             f"({', '.join(sorted({v.source for v in on.values()}))}): every topic without an override "
                             "may elect an out-of-sync leader and lose acknowledged records."))
    for topic, overrides in sorted(configs.topics.items()):
        v = overrides.get(key)
        if v is not None and str(v.value).lower() == "true":
            alerts.append(_alert("config_unclean_leader_election", snapshot, f"topic {topic}",
                                 {"topic": topic, key: True, "source": OVERRIDE},
                                 f"Topic {topic} overrides {key} = true: an out-of-sync replica may become leader."))
    return alerts


def rf1_in_prod(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """Non-internal topics with replication factor 1 in a cluster tagged env = prod."""
    if not is_prod(snapshot):
        return []
    single = [t.topic for t in snapshot.topics if t.replication_factor == 1 and not t.internal]
    if not single:
        return []
    return [_alert("config_rf1_in_prod", snapshot, "topics with replication factor 1",
                   {"topics": len(single), "sample": single[:SAMPLE], "env": snapshot.tags.get("env")},
                   f"{len(single)} topics have a single replica in a production cluster (e.g. {single[0]}).")]


def auto_create_in_prod(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """auto.create.topics.enable = true on brokers of a cluster tagged env = prod."""
    if not is_prod(snapshot):
        return []
    entries = broker_values(configs, "auto.create.topics.enable")
    on = sorted(bid for bid, v in entries.items() if str(v.value).lower() == "true")
    if not on:
        return []
    sources = sorted({entries[b].source for b in on})
    return [_alert("config_auto_create_in_prod", snapshot, "brokers",
                   {"brokers": on, "sources": sources, "env": snapshot.tags.get("env")},
                   f"auto.create.topics.enable = true on broker(s) {', '.join(map(str, on))} ({', '.join(sources)}) "
                   "in a production cluster.")]


def static_disagreement(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """Brokers that report different values for a config at least one of them sets statically."""
    if len(configs.brokers) < 2:
        return []
    names = sorted({n for entries in configs.brokers.values() for n in entries})
    alerts = []
    for name in names:
        if name in PER_HOST or name.startswith(PER_HOST_PREFIXES):
            continue
        entries = broker_values(configs, name)
        if not any(v.source == STATIC for v in entries.values()) or any(v.withheld for v in entries.values()):
            continue
        by_value = _by_value(entries)
        if len(by_value) < 2:
            continue
        alerts.append(_alert("config_static_disagreement", snapshot, name,
                             {"config": name, "brokers_by_value": by_value,
                              "sources": {str(b): v.source for b, v in entries.items()}},
                             f"Brokers disagree on {name}: " + "; ".join(
                                 f"{value} on broker(s) {', '.join(map(str, ids))}" for value, ids in by_value.items())
                             + "."))
    return alerts


def default_rf_below_3_in_prod(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """default.replication.factor < 3 in a production cluster of 3 or more brokers."""
    if not is_prod(snapshot) or len(snapshot.live_brokers) < 3:
        return []
    value = _int(cluster_value(configs, "default.replication.factor"))
    if value is None or value >= 3:
        return []
    return [_alert("config_default_rf_below_3_in_prod", snapshot, "brokers",
                   {"default.replication.factor": value, "brokers": len(snapshot.live_brokers)},
                   f"default.replication.factor = {value} in a production cluster of {len(snapshot.live_brokers)} "
                   "brokers: topics created without a replication factor get fewer than 3 replicas.")]


def offsets_rf_below_3(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """offsets.topic.replication.factor (or __consumer_offsets' replicas) below 3 with 3 or more brokers."""
    if len(snapshot.live_brokers) < 3:
        return []
    value = _int(cluster_value(configs, "offsets.topic.replication.factor"))
    actual = next((t.replication_factor for t in snapshot.topics if t.topic == "__consumer_offsets"), None)
    low = [x for x in (value, actual) if x is not None and 0 < x < 3]
    if not low:
        return []
    return [_alert("config_offsets_rf_below_3", snapshot, "__consumer_offsets",
                   {"offsets.topic.replication.factor": value, "__consumer_offsets_replication_factor": actual,
                    "brokers": len(snapshot.live_brokers)},
                   f"Consumer offsets are kept with {min(low)} replica(s) in a cluster of "
                   f"{len(snapshot.live_brokers)} brokers (offsets.topic.replication.factor = {value}, "
                   f"__consumer_offsets has {actual if actual is not None else 'not been created'}).")]


def broker_retention_ms(entries: dict[str, ConfigValue]) -> int | None:
    """A broker's log retention in ms as Kafka resolves it: .ms, else .minutes, else .hours (-1: unlimited)."""
    for name, factor in (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)):
        value = _int(entries[name].value) if name in entries else None
        if value is not None:
            return value if value < 0 else value * factor
    return None


def short_retention(snapshot: ClusterSnapshot, configs: ConfigSnapshot) -> list[Alert]:
    """Broker retention under 24 h, or topic overrides of retention.ms under 1 h."""
    alerts = []
    short = {bid: ms for bid, entries in sorted(configs.brokers.items())
             if (ms := broker_retention_ms(entries)) is not None and 0 <= ms < SHORT_BROKER_RETENTION_MS}
    if short:
        alerts.append(_alert("config_short_retention", snapshot, "brokers",
                             {"retention_ms_by_broker": {str(b): ms for b, ms in short.items()}},
                             f"Broker(s) {', '.join(map(str, short))} keep records for "
                             f"{min(short.values()) / 3_600_000:g} h or less by default (under 24 h)."))
    for topic, overrides in sorted(configs.topics.items()):
        ms = _int(overrides["retention.ms"].value) if "retention.ms" in overrides else None
        if ms is not None and 0 <= ms < SHORT_TOPIC_RETENTION_MS:
            alerts.append(_alert("config_short_retention", snapshot, f"topic {topic}",
                                 {"topic": topic, "retention.ms": ms, "source": OVERRIDE},
                                 f"Topic {topic} keeps records for {ms / 60_000:g} minutes (retention.ms override).",
                                 severity="info"))
    return alerts


CHECKS: tuple[Callable[[ClusterSnapshot, ConfigSnapshot], list[Alert]], ...] = (
    min_isr_above_rf, min_isr_one, unclean_leader_election, rf1_in_prod, auto_create_in_prod, static_disagreement,
    default_rf_below_3_in_prod, offsets_rf_below_3, short_retention,
)

# Per cluster: the inputs of the last evaluation (kept alive, compared by identity) and its alerts.
_MEMO: dict[str, tuple[tuple[object, ...], list[Alert]]] = {}
_MEMO_LOCK = threading.Lock()


def config_alerts(snapshot: ClusterSnapshot) -> list[Alert]:
    """Every config rule over one cluster; nothing when its configuration has not been read.

    An unchanged cluster (the same broker-config, override and topic objects, the same tags and broker
    count: the collector and the poller reuse unchanged objects) reuses the last evaluation.
    """
    configs = snapshot.configs
    if configs is None:
        return []
    refs = (configs.brokers, configs.topics, snapshot.topics)
    values = (tuple(sorted(snapshot.tags.items())), len(snapshot.live_brokers))
    with _MEMO_LOCK:
        cached = _MEMO.get(snapshot.cluster_name)
    if cached is not None and all(a is b for a, b in zip(cached[0][:3], refs, strict=True)) and cached[0][3:] == values:
        return list(cached[1])
    alerts = [alert for check in CHECKS for alert in check(snapshot, configs)]
    with _MEMO_LOCK:
        _MEMO[snapshot.cluster_name] = ((*refs, *values), alerts)
    return list(alerts)
