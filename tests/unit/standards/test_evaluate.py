"""One policy on one cluster: what passes, what violates, and what is unknown for want of evidence (never a pass)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from backend.standards import evaluate as ev
from backend.standards.client_facts import ClientFacts, facts_from_tables
from backend.standards.policy import Policy, parse_policies
from backend.store.group_model import GroupSnapshot, GroupState
from backend.store.inventory_model import InventorySnapshot, SoftwareConnections
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, TopicSnapshot

NOW = datetime.now(UTC)
BASE = {"min.insync.replicas": "2", "unclean.leader.election.enable": "false", "log.retention.ms": None,
        "log.retention.minutes": None, "log.retention.hours": "168", "auto.create.topics.enable": "true"}


def policy(body: str, *, head: str = "") -> Policy:
    return parse_policies(f'[[policies]]\nid = "p"\ntitle = "t"\n{head}{body}\n').policies[0]


def cluster(*, brokers: int = 3, configs: bool = True, broker_configs: dict[int, dict[str, ConfigValue]] | None = None,
            overrides: dict[str, dict[str, ConfigValue]] | None = None, topics: list[TopicSnapshot] | None = None,
            status: str = "ok", **fields: object) -> ClusterSnapshot:
    base = {b: {k: ConfigValue(v, "DEFAULT_CONFIG") for k, v in BASE.items()} for b in range(1, brokers + 1)}
    for b, entries in (broker_configs or {}).items():
        base.setdefault(b, {}).update(entries)
    snapshot = ClusterSnapshot(
        cluster_name="c1", status=status, polled_at=NOW, tags={"env": "prod"}, cluster_id="cid",
        brokers=[BrokerSnapshot(b, "h", 9092, reachable=True, software_name="Apache Kafka", software_version="4.3.1",
                                version_provenance="reported") for b in range(1, brokers + 1)],
        topics=topics if topics is not None else [TopicSnapshot("orders", "i1", partitions=6, replication_factor=3),
                                                  TopicSnapshot("events", "i2", partitions=3, replication_factor=1)],
        configs=ConfigSnapshot(NOW, base, overrides or {}) if configs else None)
    for name, value in fields.items():
        setattr(snapshot, name, value)
    return snapshot


def outcomes(raw: ev.Raw) -> dict[str, tuple[str, str | None]]:
    return {f"{i.kind} {i.name}".strip(): (i.outcome, i.seen) for i in raw.items}


def test_topic_config_reads_the_override_else_what_the_brokers_give_and_applies_where() -> None:
    p = policy('check = "topic_config"\nconfig = "min.insync.replicas"\nrequire = { min = 2 }\n'
               'where = { replication_factor = { min = 3 } }')
    raw = ev.judge(p, cluster(overrides={"orders": {"min.insync.replicas": ConfigValue("1", "DYNAMIC_TOPIC_CONFIG")}}))
    assert raw.checked == 1 and outcomes(raw) == {"topic orders": ("violation", "1 (override)")}  # events: RF 1
    assert ev.judge(p, cluster()).passing == 1
    raw = ev.judge(p, cluster(broker_configs={3: {"min.insync.replicas": ConfigValue("1", "STATIC_BROKER_CONFIG")}}))
    (item,) = raw.items
    assert item.outcome == "violation" and "on broker(s) 3" in item.reason  # brokers disagree: the leader decides
    assert ev.judge(p, cluster(configs=False)).unknown_reason.startswith("broker and topic configs not read yet")
    withheld = {"orders": {"min.insync.replicas": ConfigValue(None, "DYNAMIC_TOPIC_CONFIG", withheld="sensitive")}}
    assert outcomes(ev.judge(p, cluster(overrides=withheld)))["topic orders"][0] == "unknown"


def test_retention_goes_through_its_synonyms_and_minus_one_is_unlimited() -> None:
    at_most_week = policy('check = "topic_config"\nconfig = "retention.ms"\nrequire = { max = 604800000 }')
    assert ev.judge(at_most_week, cluster()).passing == 2  # log.retention.hours 168 = exactly a week
    unlimited = cluster(overrides={"orders": {"retention.ms": ConfigValue("-1", "DYNAMIC_TOPIC_CONFIG")}})
    assert outcomes(ev.judge(at_most_week, unlimited)) == {"topic orders": ("violation", "-1 (override)")}
    minutes = cluster(broker_configs={b: {"log.retention.minutes": ConfigValue("60", "STATIC_BROKER_CONFIG")}
                                      for b in (1, 2, 3)})
    at_least_day = policy('check = "topic_config"\nconfig = "retention.ms"\nrequire = { min = 86400000 }')
    assert outcomes(ev.judge(at_least_day, minutes))["topic orders"] == ("violation", "3600000 (inherited)")
    unknown_key = policy('check = "topic_config"\nconfig = "no.such.config"\nrequire = 1')
    assert {o for o, _ in outcomes(ev.judge(unknown_key, cluster())).values()} == {"unknown"}


def test_min_insync_against_the_topics_own_replication_factor() -> None:
    p = policy('check = "topic_config"\nconfig = "min.insync.replicas"\nrequire = { max = "replication_factor" }')
    raw = ev.judge(p, cluster())  # events has RF 1 and inherits 2
    assert outcomes(raw) == {"topic events": ("violation", "2 (inherited)")}


def test_topic_shape_with_name_patterns_and_internal_topics() -> None:
    p = policy('check = "topic_shape"\nreplication_factor = { min = 3 }\nexclude_topics = ["ev*"]')
    topics = [TopicSnapshot("orders", "i1", partitions=6, replication_factor=2),
              TopicSnapshot("events", "i2", partitions=3, replication_factor=1),
              TopicSnapshot("__consumer_offsets", "i3", partitions=50, replication_factor=1, internal=True)]
    raw = ev.judge(p, cluster(topics=topics, configs=False))
    assert raw.checked == 1 and outcomes(raw) == {"topic orders": ("violation", "replication_factor = 2")}


def test_broker_config_per_broker_with_unknowns_for_what_was_not_read() -> None:
    p = policy('check = "broker_config"\nconfig = "auto.create.topics.enable"\nrequire = false')
    snapshot = cluster(brokers=3)
    del snapshot.configs.brokers[2]
    snapshot.configs.errors["broker 2"] = "timed out"
    raw = ev.judge(p, snapshot)
    assert outcomes(raw) == {"broker 1": ("violation", "true"), "broker 2": ("unknown", None),
                             "broker 3": ("violation", "true")}
    assert "timed out" in next(i.reason for i in raw.items if i.name == "2")
    unset = policy('check = "broker_config"\nconfig = "unclean.leader.election.enable"\nrequire = { unset = true }')
    assert ev.judge(unset, cluster()).passing == 3
    static = cluster(broker_configs={1: {"unclean.leader.election.enable": ConfigValue("false", "STATIC_BROKER_CONFIG")}})
    assert outcomes(ev.judge(unset, static)) == {"broker 1": ("violation", "false")}


@pytest.mark.parametrize(("provenance", "version", "low", "high", "expected"), [
    ("reported", "3.9.2", None, None, "pass"),
    ("reported", "3.9.1", None, None, "violation"),
    ("guessed", None, "3.9", "3.9", "unknown"),  # 3.9.0-3.9.x straddles 3.9.2: it may be below
    ("guessed", None, "3.7", "3.8", "violation"),
    ("guessed", None, "4.0", None, "pass"),  # 4.0 or newer
    ("guessed", None, None, None, "unknown"),
    ("unknown", None, None, None, "unknown"),
])
def test_version_floor_judges_guessed_ranges_honestly(provenance: str, version: str | None, low: str | None,
                                                      high: str | None, expected: str) -> None:
    p = policy('check = "cluster"\nversion_min = "3.9.2"')
    broker = BrokerSnapshot(1, "h", 9092, reachable=True, software_name="Apache Kafka", software_version=version,
                            version_provenance=provenance, version_min=low, version_max=high)
    raw = ev.judge(p, _one(broker))
    assert (raw.items[0].outcome if raw.items else "pass") == expected


def _one(broker: BrokerSnapshot) -> ClusterSnapshot:
    s = cluster(brokers=1, configs=False)
    s.brokers = [broker]
    return s


def test_version_ceiling_unreachable_and_other_software() -> None:
    ceiling = policy('check = "cluster"\nversion_max = "4.2"')
    assert ev.judge(ceiling, cluster(brokers=1)).items[0].outcome == "violation"  # 4.3.1 is above 4.2.x
    floor = policy('check = "cluster"\nversion_min = "3.0"')
    down = _one(BrokerSnapshot(1, "h", 9092, reachable=False, error="connection refused"))
    assert "not reached: connection refused" in ev.judge(floor, down).items[0].reason
    other = _one(BrokerSnapshot(1, "h", 9092, reachable=True, software_name="Redpanda", software_version="24.1.1",
                                version_provenance="reported"))
    assert ev.judge(floor, other).items[0].outcome == "unknown"


def test_mode_from_configs_zookeeper_or_api_versions_else_unknown() -> None:
    kraft = policy('check = "cluster"\nmode = "kraft"')
    roles = cluster(broker_configs={1: {"process.roles": ConfigValue("broker", "STATIC_BROKER_CONFIG")}})
    assert ev.judge(kraft, roles).passing == 1
    zk = cluster(broker_configs={1: {"zookeeper.connect": ConfigValue("zk:2181", "STATIC_BROKER_CONFIG")}})
    assert outcomes(ev.judge(kraft, zk)) == {"cluster": ("violation", "ZooKeeper mode")}
    assert ev.judge(kraft, cluster(configs=False, zk_cluster_id="x")).items[0].outcome == "violation"
    assert ev.judge(kraft, cluster(configs=False)).items[0].outcome == "unknown"
    zk_apis = cluster(configs=False)
    for b in zk_apis.brokers:
        b.api_versions_json = json.dumps({"0": [0, 9], "4": [0, 7]})  # LeaderAndIsr: ZooKeeper-mode only
    assert ev.judge(kraft, zk_apis).items[0].seen == "ZooKeeper mode"


def test_consumer_groups_by_type_and_status() -> None:
    p = policy('check = "consumer_groups"\ngroup_type = { not_equals = "classic" }\n'
               'status = { not_one_of = ["stalled"] }\nexclude_groups = ["tmp-*"]')
    groups = GroupSnapshot(NOW, groups={
        "a": GroupState("a", group_type="consumer", status="ok"),
        "b": GroupState("b", group_type="classic", status="ok"),
        "c": GroupState("c", group_type="consumer", status="stalled"),
        "d": GroupState("d", group_type="consumer", status="unknown"),
        "tmp-1": GroupState("tmp-1", group_type="classic", status="stalled")})
    raw = ev.judge(p, cluster(configs=False, groups=groups))
    assert outcomes(raw) == {"group b": ("violation", "group_type = classic"),
                             "group c": ("violation", "status = stalled"), "group d": ("unknown", "unknown")}
    assert raw.checked == 4 and raw.passing == 1
    assert "not read yet" in (ev.judge(p, cluster(configs=False)).unknown_reason or "")


def facts(values: dict[tuple[str, str], dict[str | None, int]], types: dict[str, int],
          software: dict[tuple[str, str | None, str | None], int] | None = None) -> ClientFacts:
    return ClientFacts(NOW, types, values, {k: sum(v.values()) for k, v in values.items()}, software or {})


def test_client_config_counts_instances_per_value_and_the_unreported_ones() -> None:
    p = policy('check = "client_config"\nclient_type = "producer"\nkey = "acks"\nrequire = { not_equals = "0" }')
    found = facts({("producer", "acks"): {"all": 8, "0": 2}}, {"producer": 12, "consumer": 5})
    raw = ev.client_config(p, found, True)
    assert raw.checked == 12 and raw.passing == 8
    assert [(i.name, i.outcome, i.count) for i in raw.items] == [("producer acks=0", "violation", 2),
                                                                ("producer acks not reported", "unknown", 2)]
    unreported_pass = policy('check = "client_config"\nclient_type = "producer"\nkey = "acks"\nrequire = "all"\n'
                             'unreported = "pass"')
    assert ev.client_config(unreported_pass, found, True).passing == 10
    assert "no client-config results" in (ev.client_config(p, None, False).unknown_reason or "")
    assert "no client of this cluster" in (ev.client_config(p, None, True).unknown_reason or "")
    assert "no producer" in (ev.client_config(p, facts({}, {"consumer": 3}), True).unknown_reason or "")
    acks_minus_one = facts({("producer", "acks"): {"all": 3}}, {"producer": 3})  # the pipeline counts -1 as all
    assert ev.client_config(policy('check = "client_config"\nclient_type = "producer"\nkey = "acks"\n'
                                   'require = "-1"'), acks_minus_one, True).passing == 3


def test_client_software_floors_from_the_analysis_and_from_the_brokers() -> None:
    p = policy('check = "client_software"\nfloors = { "apache-kafka-java" = "3.0", librdkafka = "2.0" }')
    found = facts({}, {"producer": 6}, {("producer", "apache-kafka-java", "2.8.1"): 2,
                                        ("producer", "apache-kafka-java", "3.9.1"): 1,
                                        ("producer", "confluent-kafka-python", "1.9.2-rdkafka-1.9.2"): 1,
                                        ("producer", "confluent-kafka-go", "2.6.1-rdkafka-2.6.1"): 1,
                                        ("producer", "my-client", "0.1"): 1})
    raw = ev.client_software(p, cluster(configs=False), found, True)
    assert {i.name: (i.outcome, i.count) for i in raw.items} == {
        "apache-kafka-java 2.8.1": ("violation", 2), "confluent-kafka-python 1.9.2-rdkafka-1.9.2": ("violation", 1)}
    assert raw.checked == 6 and raw.passing == 3
    brokers = policy('check = "client_software"\nsource = "inventory"\nfloors = { "apache-kafka-java" = "2.4" }')
    assert "no client inventory" in (ev.client_software(brokers, cluster(configs=False), None, False).unknown_reason
                                     or "")
    inventory = InventorySnapshot(NOW, "metrics_url", "x", "ok", "none", 3600.0, connections=(
        SoftwareConnections(1, "e", "PLAINTEXT", "unknown", "unknown", 4),
        SoftwareConnections(1, "e", "PLAINTEXT", "apache-kafka-java", "3.9.1", 6)))
    raw = ev.client_software(brokers, cluster(configs=False, inventory=inventory), None, False)
    assert [(i.name, i.outcome, i.count) for i in raw.items] == [("unknown unknown", "unknown", 4)]


def test_facts_from_the_results_tables() -> None:
    at = NOW
    found = facts_from_tables(
        {"cluster_id": ["c", "c"], "client_type": ["producer", "producer"], "key": ["acks", "acks"],
         "value": ["all", "0"], "instance_count": [3, 1], "total_instances": [4, 4], "computed_at": [at, at]},
        {"cluster_id": ["c", "c"], "client_type": ["producer", "consumer"],
         "client_software_name": ["apache-kafka-java", "apache-kafka-java"], "client_software_version": ["3.9.1",
                                                                                                         "3.9.1"],
         "instances": [5, 2], "computed_at": [at, at]})
    assert found["c"].types == {"producer": 5, "consumer": 2}
    assert found["c"].values == {("producer", "acks"): {"all": 3, "0": 1}}
    assert found["c"].reporting == {("producer", "acks"): 4} and found["c"].computed_at == at


def test_a_cluster_without_data_is_unknown_for_every_policy() -> None:
    p = policy('check = "topic_shape"\npartitions = { max = 10 }')
    raw = ev.judge(p, cluster(status="down", error="connection refused"))
    assert raw.unknown_reason is not None and "down: connection refused" in raw.unknown_reason
    assert ev.finish(p, "c1", raw, (), NOW).status == "unknown"


def test_finish_applies_waivers_expired_waivers_and_the_effective_date() -> None:
    soon, past = (NOW + timedelta(days=10)).date(), (NOW - timedelta(days=3)).date()
    text = f"""
[[policies]]
id = "rf"
title = "RF 3"
check = "topic_shape"
replication_factor = {{ min = 3 }}

[[policies]]
id = "later"
title = "later"
effective = {(NOW + timedelta(days=30)).date()}
check = "topic_shape"
replication_factor = {{ min = 3 }}

[[waivers]]
policy = "rf"
cluster = "c1"
topic = "events"
owner = "team-a"
reason = "migrating"
expires = {soon}

[[waivers]]
policy = "rf"
cluster = "c1"
topic = "ord*"
owner = "team-b"
reason = "old exception"
expires = {past}
"""
    policies = parse_policies(text)
    rf, later = policies.policies
    topics = [TopicSnapshot("orders", "i1", partitions=6, replication_factor=2),
              TopicSnapshot("events", "i2", partitions=3, replication_factor=1)]
    snapshot = cluster(topics=topics, configs=False)
    result = ev.finish(rf, "c1", ev.judge(rf, snapshot), policies.waivers, NOW)
    by_name = {i.name: i for i in result.items}
    assert result.status == "violation" and result.violating == 1 and result.waived == 1
    assert by_name["events"].outcome == "waived" and by_name["events"].waiver.startswith("team-a: migrating")
    assert by_name["orders"].outcome == "violation" and "expired on" in by_name["orders"].reason
    assert by_name["orders"].waiver.startswith(f"expired {past:%Y-%m-%d}")
    after = ev.finish(rf, "c1", ev.judge(rf, snapshot), policies.waivers, NOW + timedelta(days=11))
    assert {i.outcome for i in after.items} == {"violation"} and after.violating == 2  # events' waiver ran out
    upcoming = ev.finish(later, "c1", ev.judge(later, snapshot), policies.waivers, NOW)
    assert upcoming.status == "upcoming" and upcoming.upcoming == 2
    assert ev.finish(later, "c1", ev.judge(later, snapshot), (), NOW + timedelta(days=31)).status == "violation"


def test_topic_synonyms_agree_with_the_real_brokers_catalog() -> None:
    """Each topic config a real broker names a broker synonym for inherits from that synonym first here."""
    catalog = json.loads((Path(__file__).resolve().parents[3] / "backend" / "lab" / "profiles" /
                          "broker_configs.json").read_text())
    checked = 0
    for family in ("kafka-3.9", "kafka-4.3"):
        for name, _default, _type, synonyms in catalog[family]["topic"]:
            if synonyms:
                assert ev.TOPIC_SYNONYMS[name][0][0] == synonyms[0], (family, name)
                checked += 1
    assert checked >= 20
