"""One policy on one cluster: pure functions from a cluster snapshot (and its clients' facts) to a result.

`judge` finds what does not pass (violations and unknowns, with the value seen and wanted); `finish` applies the
policy's effective date, the waivers in force (and says which expired), remembers since when each finding holds,
and sums it up into a `PolicyResult`. Missing evidence (configs not read, a broker not reached, no analysis, a
guessed version range across the floor) is `unknown` with its reason, never a pass.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from backend.kafka.client_floors import check as floor_family
from backend.kafka.versions import detect_family
from backend.standards.client_facts import ClientFacts, InstanceFacts
from backend.standards.policy import Policy, Waiver
from backend.standards.values import Requirement, against_ceiling, against_floor, version_bounds
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, TopicSnapshot
from backend.store.standards_model import MAX_INSTANCES, MAX_ITEMS, STATUS_ORDER, PolicyItem, PolicyResult

DEFAULT_SOURCE = "DEFAULT_CONFIG"
OVERRIDE = "DYNAMIC_TOPIC_CONFIG"
FACT_PROVENANCES = frozenset({"reported", "zookeeper"})
# A topic config and the broker configs it inherits from, in Kafka's order (value x factor); see the unit test that
# holds this to the catalog dumped from the real brokers (backend/lab/profiles/broker_configs.json).
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "message.format.version": (("log.message.format.version", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}
# Topic configs without a broker synonym: Kafka's topic default (3.x and 4.x agree).
TOPIC_DEFAULTS = {"remote.storage.enable": "false", "leader.replication.throttled.replicas": "",
                  "follower.replication.throttled.replicas": "", "remote.log.copy.disable": "false",
                  "remote.log.delete.on.disable": "false"}
SKIP = object()  # a topic or group the policy does not select
# Why a client finding counts its instances without naming them (counts from the distributions).
NOT_NAMED_YET = " (instances not named: no per-instance results yet; the next analysis writes them)"
NOT_WATCHED = (" (instances not named: the last analysis did not keep this key per instance; its next run does once "
               "the poller judges this policy file, or analyze --policies names it)")


@dataclass
class Raw:
    """What `judge` found on one cluster: subjects judged, passing, and the ones that did not pass."""

    checked: int = 0
    passing: int = 0
    items: list[PolicyItem] = field(default_factory=list)
    unknown_reason: str | None = None  # the whole cluster cannot be judged (nothing else is filled in)
    evidence_at: datetime | None = None


def no_data_reason(snapshot: ClusterSnapshot) -> str | None:
    """Why nothing of a cluster can be judged now (its latest poll reached nothing), or None."""
    if snapshot.has_data:
        return None
    return f"the cluster's latest poll reached nothing ({snapshot.status}: {snapshot.error or 'no answer'})"


def _item(kind: str, name: str, outcome: str, seen: object, wanted: str, reason: str, count: int = 1) -> PolicyItem:
    return PolicyItem(kind=kind, name=name, outcome=outcome, seen=None if seen is None else str(seen), wanted=wanted,
                      reason=reason, count=count)


# ------------------------------------------------------------------------------------------- broker configs


def broker_config(policy: Policy, snapshot: ClusterSnapshot) -> Raw:
    """Every live broker's value of one config against the requirement."""
    configs = snapshot.configs
    if configs is None:
        return Raw(unknown_reason="broker and topic configs not read yet (they are read every config_interval_s)")
    key, req = policy.params["config"], policy.params["require"]
    wanted = req.text(key)
    raw = Raw(evidence_at=configs.collected_at)
    for broker in sorted(snapshot.live_brokers, key=lambda b: b.broker_id):
        raw.checked += 1
        name = str(broker.broker_id)
        entries = configs.brokers.get(broker.broker_id)
        error = configs.errors.get(f"broker {broker.broker_id}")
        if entries is None:
            raw.items.append(_item("broker", name, "unknown", None, wanted,
                                   f"broker {name}'s configs were not read" + (f": {error}" if error else "")))
            continue
        entry = entries.get(key)
        if entry is None:
            raw.items.append(_item("broker", name, "unknown", None, wanted, f"broker {name} does not report {key}"))
            continue
        if entry.withheld:
            raw.items.append(_item("broker", name, "unknown", None, wanted,
                                   f"the value is withheld ({entry.withheld})"))
            continue
        ok, why = req.test(key, entry.value, is_set=entry.source != DEFAULT_SOURCE)
        if ok:
            raw.passing += 1
        else:
            raw.items.append(_item("broker", name, "violation", _value_text(entry), wanted,
                                   f"{key} = {_value_text(entry)} ({entry.source}): {why}"))
    if not raw.checked:
        raw.unknown_reason = "no live broker listed by the cluster"
    return raw


def _value_text(entry: ConfigValue) -> str:
    return "null" if entry.value is None else entry.value


# -------------------------------------------------------------------------------------------------- topics


class TopicContext:
    """What a cluster's topics inherit from its brokers, resolved once per broker configuration."""

    def __init__(self, configs: ConfigSnapshot | None) -> None:
        """Take the configuration last read (None: never read)."""
        self.configs = configs
        self._inherited: dict[str, tuple[dict[str, list[int]] | None, str]] = {}

    def inherited(self, key: str) -> tuple[dict[str, list[int]] | None, str]:
        """({value: broker ids}, '') for a topic config without override, or (None, why it is not known)."""
        found = self._inherited.get(key)
        if found is None:
            found = self._inherited[key] = self._resolve(key)
        return found

    def _resolve(self, key: str) -> tuple[dict[str, list[int]] | None, str]:
        if key in TOPIC_DEFAULTS:
            return {TOPIC_DEFAULTS[key]: []}, ""
        synonyms = TOPIC_SYNONYMS.get(key)
        if synonyms is None:
            return None, f"no broker config is known to give {key} its default"
        if self.configs is None or not self.configs.brokers:
            return None, "broker configs not read yet"
        out: dict[str, list[int]] = defaultdict(list)
        for broker_id, entries in sorted(self.configs.brokers.items()):
            value = None
            for name, factor in synonyms:
                entry = entries.get(name)
                if entry is None:
                    continue
                if entry.withheld:
                    return None, f"broker {broker_id} withholds {name}"
                if entry.value is None:
                    continue
                value = entry.value
                if factor != 1:
                    try:
                        number = int(entry.value)
                        value = str(number if number < 0 else number * factor)
                    except ValueError:
                        value = entry.value
                break
            if value is None:
                return None, f"broker {broker_id} reports none of {', '.join(n for n, _f in synonyms)}"
            out[value].append(broker_id)
        return dict(out), ""


def _topic_value(key: str, topic: str, overrides: Mapping[str, ConfigValue] | None, ctx: TopicContext
                 ) -> tuple[dict[str, list[int]] | None, bool, str]:
    """({value: brokers}, set as an override, why unknown) of one topic config."""
    entry = (overrides or {}).get(key)
    if entry is not None:
        if entry.withheld:
            return None, True, f"the override is withheld ({entry.withheld})"
        if entry.value is not None:
            return {entry.value: []}, True, ""
    values, why = ctx.inherited(key)
    return values, False, why


def _shown_values(values: Mapping[str, list[int]], override: bool) -> str:
    if override:
        return f"{next(iter(values))} (override)"
    if len(values) == 1:
        return f"{next(iter(values))} (inherited)"
    return "; ".join(f"{v} on broker(s) {', '.join(map(str, ids))}" for v, ids in values.items()) + " (inherited)"


@functools.lru_cache(maxsize=65_536)
def _passes(req: Requirement, key: str, value: str | None, is_set: bool, rf: int | None) -> tuple[bool, str]:
    """A requirement's verdict on one value (topics share few distinct values: judged once each)."""
    return req.test(key, value, is_set=is_set, rf=rf)


def judge_topic(policy: Policy, topic: TopicSnapshot, overrides: Mapping[str, ConfigValue] | None,
                ctx: TopicContext) -> object:
    """SKIP (not selected), None (passes) or a PolicyItem for one topic of a topic_config / topic_shape policy."""
    p = policy.params
    if (topic.internal and not p["include_internal"]) or not p["topics"].matches(topic.topic):
        return SKIP
    for field_name, cond in p["where"]:
        outcome = _condition(field_name, cond, topic, overrides, ctx)
        if outcome is SKIP:
            return SKIP
        if isinstance(outcome, str):
            return _item("topic", topic.topic, "unknown", None, policy.wanted_text, outcome)
    if policy.check == "topic_shape":
        problems = []
        for field_name in ("replication_factor", "partitions"):
            req: Requirement | None = p.get(field_name)
            if req is None:
                continue
            seen = getattr(topic, field_name)
            if seen <= 0:
                return _item("topic", topic.topic, "unknown", None, policy.wanted_text, f"{field_name} not known")
            ok, why = _passes(req, field_name, str(seen), True, None)
            if not ok:
                problems.append((f"{field_name} = {seen}", f"{field_name} = {seen}: {why}"))
        if not problems:
            return None
        return _item("topic", topic.topic, "violation", "; ".join(s for s, _w in problems), policy.wanted_text,
                     "; ".join(w for _s, w in problems))
    key, req = p["config"], p["require"]
    values, override, why = _topic_value(key, topic.topic, overrides, ctx)
    if values is None:
        return _item("topic", topic.topic, "unknown", None, policy.wanted_text, why)
    rf = topic.replication_factor if topic.replication_factor > 0 else None
    failing = []
    for value, brokers in values.items():
        ok, reason = _passes(req, key, value, override, rf)
        if not ok:
            failing.append((value, brokers, reason))
    if not failing:
        return None
    value, brokers, reason = failing[0]
    where = "" if override or not brokers or len(values) == 1 else f" on broker(s) {', '.join(map(str, brokers))}"
    return _item("topic", topic.topic, "violation", _shown_values(values, override), policy.wanted_text,
                 f"{key} = {value}{where}: {reason}")


def _condition(field_name: str, cond: Requirement, topic: TopicSnapshot,
               overrides: Mapping[str, ConfigValue] | None, ctx: TopicContext) -> object:
    """True when a where-condition holds, SKIP when it does not, or a text saying why it cannot be told."""
    if field_name in ("replication_factor", "partitions"):
        seen = getattr(topic, field_name)
        if seen <= 0:
            return f"{field_name} not known"
        return True if _passes(cond, field_name, str(seen), True, None)[0] else SKIP
    values, override, why = _topic_value(field_name, topic.topic, overrides, ctx)
    if values is None:
        return f"cannot tell whether {field_name} applies: {why}"
    results = {_passes(cond, field_name, v, override, None)[0] for v in values}
    if results == {True}:
        return True
    if results == {False}:
        return SKIP
    return f"the brokers disagree on {field_name}, so whether the policy applies depends on the leader"


def topics(policy: Policy, snapshot: ClusterSnapshot, ctx: TopicContext | None = None) -> Raw:
    """A topic_config or topic_shape policy over every topic of the cluster."""
    configs = snapshot.configs
    if policy.check == "topic_config" and configs is None:
        return Raw(unknown_reason="broker and topic configs not read yet (they are read every config_interval_s)")
    ctx = ctx or TopicContext(configs)
    raw = Raw(evidence_at=configs.collected_at if configs is not None else snapshot.polled_at)
    overrides = configs.topics if configs is not None else {}
    for topic in snapshot.topics:
        add(raw, judge_topic(policy, topic, overrides.get(topic.topic), ctx))
    return raw


def add(raw: Raw, outcome: object) -> None:
    """Count one subject's outcome (SKIP, None = pass, or an item) into a Raw."""
    if outcome is SKIP:
        return
    raw.checked += 1
    if outcome is None:
        raw.passing += 1
    else:
        assert isinstance(outcome, PolicyItem)
        raw.items.append(outcome)


# ------------------------------------------------------------------------------------------------- cluster


def cluster_mode(snapshot: ClusterSnapshot) -> tuple[str | None, str]:
    """('kraft' | 'zookeeper' | None, the evidence) of a cluster."""
    configs = snapshot.configs
    if configs is not None:
        for broker_id, entries in sorted(configs.brokers.items()):
            roles = entries.get("process.roles")
            if roles is not None and roles.value:
                return "kraft", f"broker {broker_id} has process.roles = {roles.value}"
            zk = entries.get("zookeeper.connect")
            if zk is not None and (zk.value or zk.withheld):
                return "zookeeper", f"broker {broker_id} has zookeeper.connect set"
    if snapshot.zk_cluster_id or snapshot.zk_nodes:
        return "zookeeper", "the brokers register in ZooKeeper"
    families = set()
    for broker in snapshot.live_brokers:
        if broker.reachable and broker.api_versions_json:
            try:
                table = {int(k): (int(v[0]), int(v[1])) for k, v in json.loads(broker.api_versions_json).items()}
            except (ValueError, TypeError, AttributeError, IndexError):
                continue
            families.add(detect_family(table))
    if families == {"zk"}:
        return "zookeeper", "the brokers advertise ZooKeeper-only inter-broker APIs"
    if families == {"kraft"} and all(_apache(b) for b in snapshot.live_brokers):
        return "kraft", "the brokers advertise no ZooKeeper-only API (Apache Kafka)"
    return None, "neither the configs (process.roles, zookeeper.connect), ZooKeeper nor ApiVersions tell"


def _apache(broker: BrokerSnapshot) -> bool:
    name = (broker.software_name or "").lower()
    return not name or "kafka" in name


def cluster(policy: Policy, snapshot: ClusterSnapshot) -> Raw:
    """Mode and the brokers' versions against the floor and ceiling (guessed ranges judged as ranges)."""
    p = policy.params
    wanted = policy.wanted_text
    raw = Raw(evidence_at=snapshot.polled_at)
    if p.get("mode"):
        raw.checked += 1
        mode, evidence = cluster_mode(snapshot)
        label = {"kraft": "KRaft", "zookeeper": "ZooKeeper"}
        if mode is None:
            raw.items.append(_item("cluster", "", "unknown", None, wanted, f"mode not known: {evidence}"))
        elif mode == p["mode"]:
            raw.passing += 1
        else:
            raw.items.append(_item("cluster", "", "violation", f"{label[mode]} mode", wanted,
                                   f"{label[mode]} mode ({evidence})"))
    if p.get("version_min") or p.get("version_max"):
        for broker in sorted(snapshot.live_brokers, key=lambda b: b.broker_id):
            raw.checked += 1
            item = _broker_version(broker, p, wanted)
            if item is None:
                raw.passing += 1
            else:
                raw.items.append(item)
        if not snapshot.live_brokers:
            raw.unknown_reason = "no live broker listed by the cluster"
    return raw


def _broker_version(broker: BrokerSnapshot, p: Mapping[str, Any], wanted: str) -> PolicyItem | None:
    name = str(broker.broker_id)
    if not broker.reachable:
        return _item("broker", name, "unknown", None, wanted,
                     f"broker {name} not reached" + (f": {broker.error}" if broker.error else ""))
    if not _apache(broker):
        return _item("broker", name, "unknown", broker.software_name, wanted,
                     f"broker {name} runs {broker.software_name}, not Apache Kafka: the floor names Apache releases")
    if broker.version_provenance in FACT_PROVENANCES:
        bounds = version_bounds(broker.software_version)
        label = f"{broker.software_version} ({broker.version_provenance})"
        high = bounds[1] if bounds else None
    elif broker.version_provenance == "guessed" and broker.version_min:
        bounds = version_bounds(broker.version_min)
        top = version_bounds(broker.version_max) if broker.version_max else None
        high = top[1] if top else None
        label = f"{broker.version_min}–{broker.version_max or 'newer'} (guessed)"
    else:
        return _item("broker", name, "unknown", None, wanted, f"broker {name}'s version is unknown")
    if bounds is None:
        return _item("broker", name, "unknown", label, wanted, f"broker {name}'s version {label} does not parse")
    low = bounds[0]
    for key, judge in (("version_min", against_floor), ("version_max", against_ceiling)):
        if p.get(key):
            verdict = judge(low, high, p[key][1], f"broker {name} at {label}")
            if verdict.outcome != "pass":
                return _item("broker", name, verdict.outcome, label, wanted, verdict.reason)
    return None


# ---------------------------------------------------------------------------------------------------- groups


def judge_group(policy: Policy, group: Any) -> object:
    """SKIP, None (passes) or a PolicyItem for one consumer group."""
    p = policy.params
    if not p["groups"].matches(group.group_id):
        return SKIP
    problems = []
    for field_name in ("group_type", "state", "status", "protocol_type"):
        req: Requirement | None = p.get(field_name)
        if req is None:
            continue
        seen = getattr(group, field_name)
        if field_name == "status" and seen == "unknown":
            return _item("group", group.group_id, "unknown", seen, policy.wanted_text,
                         "the group's status is unknown (nothing committed to judge)")
        if field_name == "group_type" and seen == "unknown":
            return _item("group", group.group_id, "unknown", seen, policy.wanted_text, "the group's type is not known")
        ok, why = req.test(field_name, seen)
        if not ok:
            problems.append((f"{field_name} = {seen}", f"{field_name} = {seen or '(empty)'}: {why}"))
    if not problems:
        return None
    return _item("group", group.group_id, "violation", "; ".join(s for s, _w in problems), policy.wanted_text,
                 "; ".join(w for _s, w in problems))


def groups(policy: Policy, snapshot: ClusterSnapshot) -> Raw:
    """Every consumer group of the cluster's last read."""
    read = snapshot.groups
    if read is None:
        return Raw(unknown_reason="consumer groups not read yet (they are read every group_interval_s)")
    raw = Raw(evidence_at=read.collected_at)
    for group in read.groups.values():
        add(raw, judge_group(policy, group))
    return raw


# --------------------------------------------------------------------------------------------------- clients


def client_config(policy: Policy, facts: ClientFacts | None, results: bool) -> Raw:
    """Instances per client type and value of one key (the last analysis) against the requirement; each finding
    names the instances behind it when the analysis kept the key per instance (results/client_instances)."""
    if not results:
        return Raw(unknown_reason="no client-config results yet (a config source and an analysis run fill them)")
    if facts is None:
        return Raw(unknown_reason="no client of this cluster reported its configuration")
    p = policy.params
    key, req, unreported = p["key"], p["require"], p["unreported"]
    wanted = req.text(key)
    per_instance = facts.instances is not None and key in facts.instances.watched
    if per_instance:
        assert facts.instances is not None
        return _client_config_per_instance(policy, facts.instances)
    raw = Raw(evidence_at=facts.computed_at)
    seen_types = [t for t in p["client_type"] if facts.types.get(t, 0) > 0]
    if not seen_types:
        return Raw(unknown_reason=f"no {' or '.join(p['client_type'])} of this cluster reported its configuration",
                   evidence_at=facts.computed_at)
    note = NOT_WATCHED if facts.instances is not None else NOT_NAMED_YET
    for ctype in seen_types:
        total = facts.types[ctype]
        raw.checked += total
        values = facts.values.get((ctype, key), {})
        for value, n in sorted(values.items(), key=lambda kv: (-kv[1], str(kv[0]))):
            ok, why = req.test(key, value) if value is not None else (False, "reported without a value")
            if ok:
                raw.passing += n
            else:
                raw.items.append(_item("clients", f"{ctype} {key}={value}", "violation", value, wanted,
                                       f"{n} {ctype} instance(s) report {key} = {value}: {why}{note}", count=n))
        missing = max(total - sum(values.values()), 0)
        if missing:
            if unreported == "pass":
                raw.passing += missing
            else:
                raw.items.append(_item("clients", f"{ctype} {key} not reported", unreported, None, wanted,
                                       f"{missing} {ctype} instance(s) do not report {key}{note}", count=missing))
    return raw


def _client_config_per_instance(policy: Policy, instances: InstanceFacts) -> Raw:
    """client_config over every instance of the analysis: the same findings as the counts give, each naming the
    instances behind it (an instance that does not report the key is 'not reported', never passing by omission)."""
    p = policy.params
    key, req, unreported = p["key"], p["require"], p["unreported"]
    wanted = req.text(key)
    types = instances.types()
    by_type: dict[str, list[int]] = defaultdict(list)
    chosen = set(p["client_type"])
    for row, ctype in enumerate(types):
        if ctype in chosen:
            by_type[ctype].append(row)
    seen_types = [t for t in p["client_type"] if by_type.get(t)]
    if not seen_types:
        return Raw(unknown_reason=f"no {' or '.join(p['client_type'])} of this cluster reported its configuration",
                   evidence_at=instances.computed_at)
    raw = Raw(evidence_at=instances.computed_at)
    reported = instances.values(key)
    found: list[tuple[PolicyItem, list[int]]] = []
    for ctype in seen_types:
        rows = by_type[ctype]
        raw.checked += len(rows)
        by_value: dict[str | None, list[int]] = defaultdict(list)
        missing: list[int] = []
        for row in rows:
            if row in reported:
                by_value[reported[row]].append(row)
            else:
                missing.append(row)
        for value, members in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), str(kv[0]))):
            ok, why = req.test(key, value) if value is not None else (False, "reported without a value")
            if ok:
                raw.passing += len(members)
            else:
                n = len(members)
                found.append((_item("clients", f"{ctype} {key}={value}", "violation", value, wanted,
                                    f"{n} {ctype} instance(s) report {key} = {value}: {why}", count=n), members))
        if missing:
            if unreported == "pass":
                raw.passing += len(missing)
            else:
                found.append((_item("clients", f"{ctype} {key} not reported", unreported, None, wanted,
                                    f"{len(missing)} {ctype} instance(s) do not report {key}", count=len(missing)),
                              missing))
    raw.items = named_instances(found, instances)
    return raw


def named_instances(found: list[tuple[PolicyItem, list[int]]], instances: InstanceFacts,
                    budget: int = MAX_INSTANCES) -> list[PolicyItem]:
    """Each client finding with the instances behind it named, violations first, at most ``budget`` in all (the
    rows come in client.id order; a finding's count stays exact whatever is named)."""
    order = sorted(range(len(found)), key=lambda i: STATUS_ORDER.get(found[i][0].outcome, 9))
    take: dict[int, list[int]] = {}
    for i in order:
        rows = found[i][1][:budget]
        take[i] = rows
        budget -= len(rows)
    named = iter(instances.instances([r for i in range(len(found)) for r in take[i]]))
    return [replace(item, instances=tuple(next(named) for _ in take[i])) for i, (item, _rows) in enumerate(found)]


def _floor_of(floors: Mapping[str, tuple[str, tuple[int, int, int]]], name: str | None, version: str | None
              ) -> tuple[str, tuple[int, int, int], str | None] | None:
    """(floor text, floor, the version compared) for a software, or None when no floor names it."""
    if name is not None and name in floors:
        return floors[name][0], floors[name][1], version
    family = floor_family(name, version)
    if family.family == "librdkafka" and "librdkafka" in floors:
        text, floor = floors["librdkafka"]
        return text, floor, ".".join(map(str, family.version)) if family.version else None
    if family.family == "java" and "java" in floors:
        text, floor = floors["java"]
        return text, floor, version
    return None


def client_software(policy: Policy, snapshot: ClusterSnapshot, facts: ClientFacts | None, results: bool) -> Raw:
    """Client software (from the analysis, or the brokers' connection counts) against the floors; from the analysis,
    each finding names the instances behind it (results/client_instances)."""
    p = policy.params
    wanted = policy.wanted_text
    counted: list[tuple[str | None, str | None, int, list[int]]]
    instances: InstanceFacts | None = None
    note = ""
    if p["source"] == "inventory":
        inventory = snapshot.inventory
        if inventory is None:
            return Raw(unknown_reason="no client inventory (the cluster's broker_metrics are not configured or not "
                                      "read yet)")
        if inventory.status == "error":
            return Raw(unknown_reason=f"the client inventory could not be read: {inventory.message or 'error'}")
        counted = [(n, v, c, []) for (n, v), c in sorted(inventory.software().items())]
        raw = Raw(evidence_at=inventory.collected_at)
        unit = "connection(s)"
    else:
        if not results:
            return Raw(unknown_reason="no client-config results yet (a config source and an analysis run fill them)")
        types = set(p["client_type"] or ())
        instances = facts.instances if facts is not None and facts.instances is not None and len(facts.instances) \
            else None
        if instances is not None:
            rows_of: dict[tuple[str | None, str | None], list[int]] = defaultdict(list)
            for row, (ctype, software) in enumerate(zip(instances.types(), instances.software(), strict=True)):
                if not types or ctype in types:
                    rows_of[software].append(row)
            counted = [(n, v, len(rows), rows) for (n, v), rows in sorted(rows_of.items(), key=lambda kv: str(kv[0]))]
            raw = Raw(evidence_at=instances.computed_at)
        else:
            if facts is None or not facts.software:
                return Raw(unknown_reason="no client of this cluster reported its software")
            merged: dict[tuple[str | None, str | None], int] = defaultdict(int)
            for (ctype, name, version), n in facts.software.items():
                if not types or ctype in types:
                    merged[(name, version)] += n
            counted = [(n, v, c, []) for (n, v), c in sorted(merged.items(), key=lambda kv: str(kv[0]))]
            raw = Raw(evidence_at=facts.computed_at)
            note = NOT_NAMED_YET
        unit = "instance(s)"
    found: list[tuple[PolicyItem, list[int]]] = []
    for name, version, count, rows in counted:
        raw.checked += count
        label = f"{name or 'unknown'} {version or ''}".strip()
        item: PolicyItem | None = None
        if not name or name.lower() == "unknown":
            if p["unnamed"] == "pass":
                raw.passing += count
            else:
                item = _item("clients", label, p["unnamed"], label, wanted,
                             f"{count} {unit} of software that sends no name (clients before 2.4){note}", count=count)
        else:
            floor = _floor_of(p["floors"], name, version)
            bounds = version_bounds(floor[2]) if floor is not None else None
            if floor is None:
                raw.passing += count
            elif bounds is None:
                item = _item("clients", label, "unknown", label, wanted,
                             f"{count} {unit} of {label}: the version does not parse{note}", count=count)
            elif bounds[0] < floor[1]:
                item = _item("clients", label, "violation", label, wanted,
                             f"{count} {unit} of {label}, below the floor {floor[0]}{note}", count=count)
            else:
                raw.passing += count
        if item is not None:
            found.append((item, rows))
    raw.items = named_instances(found, instances) if instances is not None else [item for item, _rows in found]
    if not raw.checked:
        raw.unknown_reason = "no client software seen"
    return raw


# ---------------------------------------------------------------------------------------------- dispatching


def judge(policy: Policy, snapshot: ClusterSnapshot, facts: ClientFacts | None = None, *, results: bool = False,
          topic_context: TopicContext | None = None) -> Raw:
    """What does not pass of one policy on one cluster (see the module docstring)."""
    reason = no_data_reason(snapshot)
    if reason is not None:
        return Raw(unknown_reason=reason)
    if policy.check == "broker_config":
        return broker_config(policy, snapshot)
    if policy.check in ("topic_config", "topic_shape"):
        return topics(policy, snapshot, topic_context)
    if policy.check == "cluster":
        return cluster(policy, snapshot)
    if policy.check == "consumer_groups":
        return groups(policy, snapshot)
    if policy.check == "client_config":
        return client_config(policy, facts, results)
    return client_software(policy, snapshot, facts, results)


SinceKey = tuple[str, str, str]  # (subject kind, name, outcome)


def finish_item(policy: Policy, cluster_name: str, item: PolicyItem, waivers: Iterable[Waiver], now: datetime,
                first_seen: datetime | None = None) -> PolicyItem:
    """One finding with the policy's effective date and the waivers applied (``waivers``: this pair's)."""
    outcome, note, reason = item.outcome, None, item.reason
    if outcome == "violation":
        covering = [w for w in waivers if w.covers(cluster_name, item.kind, item.name)]
        active = [w for w in covering if w.active(now)]
        if active:
            outcome, note = "waived", active[0].text()
        else:
            if covering:
                expired = max(covering, key=lambda w: w.expires)
                note = f"expired {expired.expires:%Y-%m-%d %H:%M} UTC: {expired.owner}: {expired.reason}"
                reason = f"{reason} (the waiver of {expired.scope_text} expired on {expired.expires:%Y-%m-%d})"
            if policy.effective is not None and now < policy.effective:
                outcome = "upcoming"
                reason = f"{reason} (in force from {policy.effective:%Y-%m-%d})"
    return PolicyItem(item.kind, item.name, outcome, item.seen, item.wanted, reason, item.count, first_seen or now,
                      note, item.instances)


def finish(policy: Policy, cluster_name: str, raw: Raw, waivers: Iterable[Waiver], now: datetime,
           since: Callable[[SinceKey], datetime | None] | None = None,
           status_since: datetime | None = None,
           one: Callable[[PolicyItem], PolicyItem] | None = None) -> PolicyResult:
    """Apply the effective date and the waivers in force, date each finding, and sum up (see the module docstring).

    ``since`` gives the first time a finding was seen (None: now); ``status_since`` when the previous status began
    (kept when the status is the same); ``one`` finishes one finding (a caller's cache of `finish_item`).
    """
    pair = [w for w in waivers if w.policy == policy.id and w.cluster == cluster_name]

    def finished(item: PolicyItem) -> PolicyItem:
        done = finish_item(policy, cluster_name, item, pair, now)
        first = since((done.kind, done.name, done.outcome)) if since is not None else None
        return done if first is None else replace(done, since=first)

    items = [(one or finished)(item) for item in raw.items]
    counts = {"violation": 0, "unknown": 0, "waived": 0, "upcoming": 0}
    for item in items:
        counts[item.outcome] += item.count
    if raw.unknown_reason is not None:
        status = "unknown"
    elif counts["violation"]:
        status = "violation"
    elif counts["unknown"]:
        status = "unknown"
    elif counts["upcoming"]:
        status = "upcoming"
    elif counts["waived"]:
        status = "waived"
    else:
        status = "pass"
    items.sort(key=_item_order)
    return PolicyResult(
        policy_id=policy.id, cluster_name=cluster_name, status=status, severity=policy.severity,
        checked=raw.checked, passing=raw.passing, violating=counts["violation"], unknown=counts["unknown"],
        waived=counts["waived"], upcoming=counts["upcoming"],
        reason=raw.unknown_reason or _summary(status, raw, counts),
        items=tuple(items[:MAX_ITEMS]), items_omitted=max(len(items) - MAX_ITEMS, 0), evaluated_at=now,
        evidence_at=raw.evidence_at, since=status_since or now, policy_digest=policy.digest)


def _item_order(item: PolicyItem) -> tuple[int, str, str]:
    return STATUS_ORDER.get(item.outcome, 9), item.kind, item.name


def _summary(status: str, raw: Raw, counts: Mapping[str, int]) -> str:
    parts = [f"{raw.passing} of {raw.checked} pass"]
    for outcome in ("violation", "unknown", "upcoming", "waived"):
        if counts[outcome]:
            word = {"violation": "violate", "unknown": "unknown", "upcoming": "violate once in force",
                    "waived": "waived"}[outcome]
            parts.append(f"{counts[outcome]} {word}")
    if status == "pass" and not raw.checked:
        return "nothing to check"
    return ", ".join(parts)
