"""Broker and topic configs against real Kafka 3.9 (ZooKeeper mode) and 4.3 (KRaft, also over SASL_SSL/SCRAM).

The ground truth is the real `kafka-configs --describe --all` (kafka.admin.ConfigCommand from the rig's
jars): what the lake stores equals what it prints. Config changes are made by the test with the same
real tool (`--alter`), never by the product.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from backend.collect.configs import ConfigCollector
from backend.collect.poller import run_poller
from backend.config import parse_fleet
from backend.store import config_readers, readers
from tests.integration.collect.conftest import kafka4_toml, kafka39_toml
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer, config_command

pytestmark = pytest.mark.timeout(600)

_LINE = re.compile(r"^  (?P<name>[^=\s]+)=(?P<value>.*) sensitive=(?P<sensitive>true|false) synonyms=\{(?P<syn>.*)\}$")
_HEADER = re.compile(r"^(All|Dynamic|Default) configs for (?P<what>.+) are:$")


def parse_describe(text: str) -> dict[str, dict[str, tuple[str | None, bool, str | None]]]:
    """kafka-configs --describe output: per header ("broker 1", "topic t"), name -> (value, sensitive, first source)."""
    out: dict[str, dict[str, tuple[str | None, bool, str | None]]] = {}
    current: dict[str, tuple[str | None, bool, str | None]] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            current = out.setdefault(header.group("what"), {})
            continue
        entry = _LINE.match(line)
        if entry and current is not None:
            first = re.match(r"([A-Z_]+):", entry.group("syn"))
            value = entry.group("value")
            current[entry.group("name")] = (None if value == "null" else value, entry.group("sensitive") == "true",
                                            first.group(1) if first else None)
    return out


def _fleet_text(kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, zookeeper: ZooKeeperServer) -> str:
    sasl = (f'[[clusters]]\nname = "kafka4-sasl"\nbootstrap_servers = {json.dumps(kafka4.sasl_bootstrap.split(","))}\n'
            f'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "{kafka4.scram_user}"\n'
            f'sasl_password_env = "FLEETVIEW_TEST_CONFIGS_PW"\nssl_cafile = "{kafka4.ca_file}"\n\n')
    return ("[settings]\nrequest_timeout_s = 10\npoll_deadline_s = 60\nconfig_interval_s = 1\n\n"
            + kafka4_toml(kafka4) + kafka39_toml(kafka39, zookeeper) + sasl)


def _create(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 30
    while not {t.topic for t in topics} <= set(admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "topics never appeared"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def polled(kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, zookeeper: ZooKeeperServer,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """One poll of both real clusters (and kafka4 over SASL_SSL) with configs read, after topics with overrides."""
    suffix = uuid.uuid4().hex[:8]
    names = {"kafka4": f"cfg-wide-{suffix}", "kafka39": f"cfg-single-{suffix}"}
    _create(kafka4.bootstrap, [NewTopic(names["kafka4"], 3, 3, config={"retention.ms": "86400000",
                                                                        "cleanup.policy": "compact"})])
    _create(kafka39.bootstrap, [NewTopic(names["kafka39"], 2, 1, config={"min.insync.replicas": "2"})])
    tmp = tmp_path_factory.mktemp("configs-real")
    os.environ["FLEETVIEW_TEST_CONFIGS_PW"] = kafka4.scram_password
    fleet = parse_fleet(_fleet_text(kafka4, kafka39, zookeeper), source=str(tmp / "clusters.toml"),
                        secrets_path=tmp / "none.toml")
    collector = ConfigCollector()
    lake = tmp / "lake"
    started = time.monotonic()
    poll = run_poller(fleet, lake, once=True, configs=collector)
    yield {"lake": lake, "fleet": fleet, "collector": collector, "topics": names, "poll": poll,
           "first_poll_s": time.monotonic() - started}
    os.environ.pop("FLEETVIEW_TEST_CONFIGS_PW", None)


def _stored(lake: Path, cluster: str) -> pd.DataFrame:
    return config_readers.latest_configs(lake, [cluster])


def _assert_broker_configs_equal_the_tool(stored: pd.DataFrame, tool: dict[str, tuple[str | None, bool, str | None]],
                                          broker_id: int) -> None:
    mine = stored[(stored["resource_type"] == "broker") & (stored["resource"] == str(broker_id))].set_index("config_name")
    assert set(mine.index) == set(tool), (sorted(set(mine.index) ^ set(tool)))[:20]
    for name, (value, sensitive, source) in tool.items():
        row = mine.loc[name]
        assert bool(row["is_sensitive"]) == sensitive, name
        assert row["source"] == (source or "DEFAULT_CONFIG"), (name, row["source"], source)
        if row["withheld"] is not None and not pd.isna(row["withheld"]):
            assert row["value"] is None or pd.isna(row["value"]), name  # withheld: never stored
        else:
            assert row["value"] == value, (name, row["value"], value)


@pytest.mark.parametrize("cluster", ["kafka4", "kafka39", "kafka4-sasl"])
def test_stored_broker_configs_equal_what_kafka_configs_prints(
    polled: dict[str, object], kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, cluster: str
) -> None:
    lake = polled["lake"]
    assert isinstance(lake, Path)
    rig = kafka39 if cluster == "kafka39" else kafka4
    printed = parse_describe(config_command(rig.version, rig.bootstrap, "--describe", "--all", "--entity-type", "brokers"))
    stored = _stored(lake, cluster)
    brokers = [b.node_id for b in rig.brokers]
    assert sorted(int(r) for r in set(stored.loc[stored["resource_type"] == "broker", "resource"])) == sorted(brokers)
    for broker_id in brokers:
        _assert_broker_configs_equal_the_tool(stored, printed[f"broker {broker_id}"], broker_id)
    # The cluster-wide dynamic defaults the tool lists are what every broker reports with that source.
    for name, (value, _s, _src) in printed.get("brokers in the cluster", {}).items():
        rows = stored[(stored["resource_type"] == "broker") & (stored["config_name"] == name)]
        assert set(rows["source"]) <= {"DYNAMIC_DEFAULT_BROKER_CONFIG", "DYNAMIC_BROKER_CONFIG"}, name
        assert value in set(rows["value"]), name
    runs = config_readers.config_runs(lake, [cluster])
    assert len(runs) == 1 and runs["error"].isna().all(), runs.to_dict("records")


@pytest.mark.parametrize("cluster", ["kafka4", "kafka39"])
def test_stored_topic_overrides_equal_what_kafka_configs_prints(
    polled: dict[str, object], kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, cluster: str
) -> None:
    lake = polled["lake"]
    assert isinstance(lake, Path)
    rig = kafka39 if cluster == "kafka39" else kafka4
    printed = parse_describe(config_command(rig.version, rig.bootstrap, "--describe", "--all", "--entity-type", "topics"))
    stored = _stored(lake, cluster)
    topics = set(readers.latest_topics(lake, cluster)["topic"])
    ours = polled["topics"][cluster]  # type: ignore[index]
    assert ours in topics and f"topic {ours}" in printed
    compared = 0
    for header, entries in printed.items():
        topic = header.removeprefix("topic ")
        if not header.startswith("topic ") or topic not in topics:
            continue  # created by another test after the poll
        overrides = {n: v for n, (v, _s, source) in entries.items() if source == "DYNAMIC_TOPIC_CONFIG"}
        mine = stored[(stored["resource_type"] == "topic") & (stored["resource"] == topic)]
        assert dict(zip(mine["config_name"], mine["value"], strict=True)) == overrides, topic
        assert set(mine["source"]) <= {"DYNAMIC_TOPIC_CONFIG"}
        compared += 1
    assert compared >= 1
    expected = {"kafka4": {"retention.ms": "86400000", "cleanup.policy": "compact"},
                "kafka39": {"min.insync.replicas": "2"}}[cluster]
    mine = stored[(stored["resource_type"] == "topic") & (stored["resource"] == ours)]
    assert dict(zip(mine["config_name"], mine["value"], strict=True)) == expected


def test_a_dynamic_change_by_the_real_tool_is_one_change_and_one_incident(
    polled: dict[str, object], kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster
) -> None:
    lake, fleet, collector = polled["lake"], polled["fleet"], polled["collector"]
    assert isinstance(lake, Path) and isinstance(collector, ConfigCollector)
    topic = polled["topics"]["kafka4"]  # type: ignore[index]
    # Topic override on kafka4: min.insync.replicas 4 on a topic of 3 replicas (Kafka accepts it).
    config_command(kafka4.version, kafka4.bootstrap, "--alter", "--entity-type", "topics", "--entity-name", topic,
                   "--add-config", "min.insync.replicas=4")
    # Per-broker dynamic config on kafka39: unclean leader election on broker 0.
    config_command(kafka39.version, kafka39.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                   "--add-config", "unclean.leader.election.enable=true")
    try:
        time.sleep(1.1)  # config_interval_s = 1
        poll = run_poller(fleet, lake, once=True, configs=collector)  # type: ignore[arg-type]
    finally:
        config_command(kafka39.version, kafka39.bootstrap, "--alter", "--entity-type", "brokers", "--entity-name",
                       "0", "--delete-config", "unclean.leader.election.enable")
    assert poll is not None
    changes = readers.changes(lake, entity="config")
    latest = changes[changes["poll_id"] == poll.poll_id]
    mine = latest[latest["cluster_name"].isin(["kafka4", "kafka39"])]
    assert sorted(zip(mine["cluster_name"], mine["kind"], mine["subject"], strict=True)) == [
        ("kafka39", "config_changed", "broker 0: unclean.leader.election.enable"),
        ("kafka4", "config_set", f"topic {topic}: min.insync.replicas"),
    ], mine.to_dict("records")
    row = mine[mine["cluster_name"] == "kafka39"].iloc[0]
    assert json.loads(row["before_json"])["source"] == "DEFAULT_CONFIG"
    after = json.loads(row["after_json"])
    assert (after["value"], after["source"]) == ("true", "DYNAMIC_BROKER_CONFIG")
    incidents = readers.incidents(lake, open_only=True)
    above = incidents[(incidents["rule"] == "config_min_isr_above_rf") & (incidents["cluster_name"] == "kafka4")
                      & (incidents["subject"] == f"topic {topic}")]
    unclean = incidents[(incidents["rule"] == "config_unclean_leader_election") & (incidents["cluster_name"] == "kafka39")]
    assert len(above) == 1 and len(unclean) == 1, incidents[["rule", "cluster_name", "subject"]].to_dict("records")
    assert above.iloc[0]["opened_poll_id"] == poll.poll_id and unclean.iloc[0]["opened_poll_id"] == poll.poll_id
    assert json.loads(unclean.iloc[0]["evidence_json"])["brokers"] == [0]

    # The next read sees the broker change undone: one more change, and the incident resolves.
    time.sleep(1.1)
    again = run_poller(fleet, lake, once=True, configs=collector)  # type: ignore[arg-type]
    assert again is not None
    changes = readers.changes(lake, entity="config")
    undone = changes[(changes["poll_id"] == again.poll_id) & (changes["cluster_name"] == "kafka39")]
    assert list(undone["subject"]) == ["broker 0: unclean.leader.election.enable"]
    still = readers.incidents(lake, open_only=True)
    assert still[(still["rule"] == "config_unclean_leader_election") & (still["cluster_name"] == "kafka39")].empty


def test_the_planted_listener_password_and_the_client_password_never_reach_the_lake(
    polled: dict[str, object], kafka4: KafkaKraftCluster
) -> None:
    lake = polled["lake"]
    assert isinstance(lake, Path)
    stored = _stored(lake, "kafka4")
    jaas = stored[stored["config_name"] == "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"]
    assert len(jaas) == len(kafka4.brokers) and set(jaas["withheld"]) == {"sensitive"} and jaas["value"].isna().all()
    files = [p for p in lake.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".parquet") for p in files)
    for path in files:
        # The bytes as written, and (Parquet pages are zstd-compressed) every value decoded.
        texts = [path.read_bytes().decode("latin-1")]
        if path.suffix == ".parquet":
            texts.append(pq.ParquetFile(path).read().to_pandas().astype(str).to_csv())
        for secret in (kafka4.listener_password, kafka4.scram_password):
            assert not any(secret in text for text in texts), f"a password reached {path.relative_to(lake)}"
