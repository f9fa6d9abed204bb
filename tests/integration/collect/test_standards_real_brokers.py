"""Policies against real Apache Kafka: 4.3 in KRaft mode and 3.9 in ZooKeeper mode, through the poller and `check`.

Broker configs, topic configs (an override and what a topic inherits), topic shape, the cluster's mode and the
brokers' version (real brokers do not answer KIP-885: their version is a guessed range, and a range across the floor
is `unknown`, never a pass). A config changed on the real broker (by the test, with the admin API) moves the result
and resolves the incident at the next poll.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.store import readers, standards_readers
from backend.store.model import FleetPoll
from tests.integration.collect.conftest import kafka4_toml, kafka39_toml
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer
from tests.rig.procs import REPO

pytestmark = pytest.mark.timeout(600)


def _policies(suffix: str) -> str:
    return f"""
[[policies]]
id = "min-isr"
title = "min.insync.replicas 2 on replicated topics"
severity = "critical"
check = "topic_config"
config = "min.insync.replicas"
require = {{ min = 2 }}
where = {{ replication_factor = {{ min = 3 }} }}
topics = ["std-*-{suffix}"]

[[policies]]
id = "retention"
title = "Retention at least a day"
check = "topic_config"
config = "retention.ms"
require = {{ min = 86400000 }}
topics = ["std-*-{suffix}"]

[[policies]]
id = "rf"
title = "Replicated topics"
check = "topic_shape"
replication_factor = {{ min = 2 }}
topics = ["std-*-{suffix}"]

[[policies]]
id = "unclean-off"
title = "Unclean leader election off"
check = "broker_config"
config = "unclean.leader.election.enable"
require = false

[[policies]]
id = "kraft"
title = "KRaft mode"
check = "cluster"
mode = "kraft"

[[policies]]
id = "floor-392"
title = "Brokers at 3.9.2 or later"
check = "cluster"
version_min = "3.9.2"

[[policies]]
id = "floor-39"
title = "Brokers on 3.9 or later"
check = "cluster"
version_min = "3.9"
"""


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def _create(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = _admin(bootstrap)
    for future in admin.create_topics(topics, request_timeout=30).values():
        future.result(timeout=60)
    deadline = time.monotonic() + 60
    while not {t.topic for t in topics} <= set(admin.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "topics never appeared"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def rig(kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, zookeeper: ZooKeeperServer,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Topics on both real clusters, a fleet file naming a policy file, and one poll into a lake."""
    suffix = uuid.uuid4().hex[:8]
    names = {"wide": f"std-wide-{suffix}", "single": f"std-single-{suffix}"}
    _create(kafka4.bootstrap, [NewTopic(names["wide"], 3, 3, config={"min.insync.replicas": "1",
                                                                       "retention.ms": "3600000"})])
    _create(kafka39.bootstrap, [NewTopic(names["single"], 2, 1)])
    root = tmp_path_factory.mktemp("standards-rig")
    (root / "policies.toml").write_text(_policies(suffix))
    fleet_file = root / "clusters.toml"
    fleet_file.write_text("[settings]\nrequest_timeout_s = 10\npoll_deadline_s = 60\nconfig_interval_s = 1\n"
                          'policies = "policies.toml"\n\n' + kafka4_toml(kafka4) + kafka39_toml(kafka39, zookeeper))
    lake = str(root / "lake")
    run_poller(load_fleet(fleet_file), lake, once=True)
    yield {"root": root, "lake": lake, "fleet": fleet_file, "names": names, "kafka4": kafka4}


def _results(lake: str) -> dict[tuple[str, str], dict[str, object]]:
    frame = standards_readers.policy_results(lake)
    return {(r["cluster_name"], r["policy_id"]): r for r in frame.to_dict("records")}


def _items(lake: str, cluster: str, policy: str) -> dict[str, tuple[str, str | None]]:
    frame = standards_readers.policy_items(lake, [cluster])
    frame = frame[frame["policy_id"] == policy]
    return {f"{k} {n}".strip(): (o, s) for k, n, o, s in zip(frame["kind"], frame["name"], frame["outcome"],
                                                                 frame["seen"], strict=True)}


def test_configs_shape_mode_and_guessed_versions_on_real_brokers(rig: dict[str, object]) -> None:
    lake, names = str(rig["lake"]), rig["names"]
    assert isinstance(names, dict)
    results = _results(lake)
    status = {k: v["status"] for k, v in results.items()}
    # topic configs: the override on 4.3, and what the 3.9 topic inherits from its broker (Kafka's defaults)
    assert status[("kafka4", "min-isr")] == "violation"
    assert _items(lake, "kafka4", "min-isr") == {f"topic {names['wide']}": ("violation", "1 (override)")}
    assert status[("kafka39", "min-isr")] == "pass" and results[("kafka39", "min-isr")]["checked"] == 0  # RF 1
    assert _items(lake, "kafka4", "retention") == {f"topic {names['wide']}": ("violation", "3600000 (override)")}
    assert status[("kafka39", "retention")] == "pass"  # inherits log.retention.hours = 168
    assert _items(lake, "kafka39", "rf") == {f"topic {names['single']}": ("violation", "replication_factor = 1")}
    assert status[("kafka4", "unclean-off")] == status[("kafka39", "unclean-off")] == "pass"
    assert results[("kafka4", "unclean-off")]["checked"] == 3
    # mode: process.roles on 4.3, zookeeper.connect on 3.9
    assert status[("kafka4", "kraft")] == "pass"
    assert _items(lake, "kafka39", "kraft") == {"cluster": ("violation", "ZooKeeper mode")}
    # versions: real brokers do not report KIP-885, so each version is a guessed range. 3.9.2's fingerprint is
    # the 3.9 line: across the 3.9.2 floor (unknown, never a pass) and above the 3.9 one.
    brokers = readers.latest_brokers(lake)
    assert set(brokers["version_provenance"]) == {"guessed"}
    assert status[("kafka39", "floor-392")] == "unknown"
    assert {o for o, _s in _items(lake, "kafka39", "floor-392").values()} == {"unknown"}
    assert "straddles the floor 3.9.2" in next(iter(standards_readers.policy_items(lake, ["kafka39"]).query(
        "policy_id == 'floor-392'")["reason"]))
    assert status[("kafka39", "floor-39")] == "pass"
    assert status[("kafka4", "floor-392")] == "pass"
    incidents = readers.incidents(lake, open_only=True)
    policy_incidents = set(zip(incidents["rule"], incidents["cluster_name"], strict=True))
    assert {("policy:min-isr", "kafka4"), ("policy:kraft", "kafka39"), ("policy:rf", "kafka39")} <= policy_incidents
    assert not {r for r, _c in policy_incidents if r in ("policy:floor-392", "policy:floor-39")}


def test_a_fixed_config_passes_at_the_next_poll_and_check_agrees(rig: dict[str, object]) -> None:
    lake, names, fleet_file, root = str(rig["lake"]), rig["names"], rig["fleet"], rig["root"]
    kafka4 = rig["kafka4"]
    assert isinstance(names, dict) and isinstance(kafka4, KafkaKraftCluster) and isinstance(root, Path)
    resource = ConfigResource("TOPIC", names["wide"], incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
    admin = _admin(kafka4.bootstrap)  # kept alive until its futures are done
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=60)
    time.sleep(1.2)  # config_interval_s = 1: the next poll reads the configs again
    deadline = time.monotonic() + 90
    while _results(lake)[("kafka4", "min-isr")]["status"] != "pass":
        assert time.monotonic() < deadline, "the fixed config never passed"
        run_poller(load_fleet(str(fleet_file)), lake, once=True)
    open_rules = set(zip(*(readers.incidents(lake, open_only=True)[c] for c in ("rule", "cluster_name")),
                         strict=True))
    assert ("policy:min-isr", "kafka4") not in open_rules and ("policy:kraft", "kafka39") in open_rules

    out = root / "check.sarif"
    done = subprocess.run([sys.executable, "-m", "backend", "check", "--config", str(fleet_file), "--lake", lake,
                           "--format", "sarif", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    results = json.loads(out.read_text())["runs"][0]["results"]
    failing = {(r["ruleId"], r["properties"]["cluster"]) for r in results if r["kind"] == "fail"}
    assert failing == {("kraft", "kafka39"), ("rf", "kafka39"), ("retention", "kafka4")}
    assert any(r["ruleId"] == "floor-392" and r["kind"] == "open" for r in results)
    polled = subprocess.run([sys.executable, "-m", "backend", "check", "--config", str(fleet_file), "--poll",
                             "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=180)
    assert polled.returncode == 1, polled.stderr
    doc = json.loads(polled.stdout)
    assert doc["source"].startswith("one poll of") and {(r["policy_id"], r["cluster"]) for r in doc["results"]
                                                        if r["status"] == "violation"} == failing


def test_while_the_poller_runs_a_waiver_expires_and_a_broken_file_keeps_the_last_good(rig: dict[str, object]) -> None:
    """The poller's own loop: a waiver that runs out turns the violation back on, and a file broken while it runs is
    refused (line and key) while the last good one keeps judging."""
    lake, names, fleet_file, root = str(rig["lake"]), rig["names"], rig["fleet"], rig["root"]
    assert isinstance(names, dict) and isinstance(root, Path)
    policies = root / "policies.toml"
    good = policies.read_text()
    expires = datetime.now(UTC) + timedelta(seconds=12)
    policies.write_text(good + f'\n[[waivers]]\npolicy = "rf"\ncluster = "kafka39"\ntopic = "{names["single"]}"\n'
                               f'owner = "sre"\nreason = "moving to RF 3"\nexpires = {expires.isoformat()}\n')
    seen: list[tuple[str, str | None]] = []
    stop = threading.Event()

    def on_poll(poll: FleetPoll) -> None:
        snapshot = poll.cluster("kafka39")
        if snapshot.standards is not None and "rf" in snapshot.standards.results:
            result = snapshot.standards.results["rf"]
            seen.append((result.status, next((i.waiver for i in result.items), None)))

    runner = threading.Thread(target=run_poller, args=(load_fleet(str(fleet_file)), lake), kwargs={
        "interval_s": 1.0, "stop": stop, "on_poll": on_poll}, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while not any(status == "waived" for status, _w in seen):
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
        policies.write_text(good.replace('severity = "critical"', 'severity = "red"', 1))  # broken while running
        while "error" not in (state := standards_readers.policy_file_state(lake)) or not state["error"]:
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
        assert f"{policies}:5: policy 'min-isr' (#1): key 'severity'" in state["error"]
        count = len(seen)
        while not any(status == "violation" and waiver and waiver.startswith("expired") for status, waiver in
                      seen[count:]):
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=120)
        policies.write_text(good)
    assert not runner.is_alive()
    items = standards_readers.policy_items(lake, ["kafka39"])
    expired = items[(items["policy_id"] == "rf")].iloc[0]
    assert expired["outcome"] == "violation" and "expired on" in expired["reason"]
