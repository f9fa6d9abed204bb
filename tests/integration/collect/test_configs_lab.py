"""Reading configs in the poll, against the lab: the interval, unanswered brokers, the memo of unchanged batches, seeds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.collect.configs import ConfigCollector
from backend.collect.poller import run_poller
from backend.kafka import protocol as P
from backend.kafka.admin_helpers import AdminHelpers
from backend.kafka.configs import describe_configs
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from backend.store import config_readers, readers
from tests.integration.collect.conftest import fleet_from, lab_toml

pytestmark = pytest.mark.timeout(300)
TOPICS = 1000


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A KRaft cluster of 3 brokers and 1,000 topics (every 10th with an override)."""
    tmp: Path = tmp_path_factory.mktemp("configs-lab")
    topics = [{"name": f"t{i:04d}", "partitions": 1, "replication_factor": 3,
               **({"configs": {"retention.ms": 86_400_000 + i}} if i % 10 == 0 else {})} for i in range(TOPICS)]
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [
        {"name": "big", "profile": "apache-kafka-4-kraft-kip885", "tags": {"env": "prod"},
         "dynamic_configs": {"min.insync.replicas": 2},
         "brokers": [{"id": 1}, {"id": 2}, {"id": 3}], "topics": topics}]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    yield fleet
    fleet.stop()


def _describe_configs_requests(lab: LabFleet) -> list[int]:
    return [broker for broker, key, _v, _c in lab.runtimes["big"].requests_seen if key == P.API_DESCRIBE_CONFIGS]


def test_configs_are_read_at_their_own_interval_not_every_poll(lab: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from("[settings]\nconfig_interval_s = 3600\n\n" + lab_toml(lab, tmp_path), tmp_path)
    collector = ConfigCollector()
    lab.runtimes["big"].requests_seen.clear()
    first = run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    asked = _describe_configs_requests(lab)
    assert first is not None and sorted(set(asked)) == [1, 2, 3]
    second = run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    assert second is not None
    assert _describe_configs_requests(lab) == asked  # not due: nothing asked
    assert second.cluster("big").configs is first.cluster("big").configs
    stored = config_readers.latest_configs(tmp_path / "lake", ["big"], resource_type="topic")
    assert sorted(set(stored["resource"])) == ["__consumer_offsets"] + [f"t{i:04d}" for i in range(0, TOPICS, 10)]
    assert list(readers.changes(tmp_path / "lake", entity="config")["kind"]) == ["configs_first_seen"]


def test_an_unchanged_cluster_of_a_thousand_topics_is_not_decoded_again(lab: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from("[settings]\nconfig_interval_s = 0.001\nconfig_batch_topics = 100\n\n"
                       + lab_toml(lab, tmp_path), tmp_path)
    collector = ConfigCollector()
    run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    decoded = collector.stats["answers_decoded"]
    assert decoded == 11 and collector.stats["answers_reused"] == 0  # 1,001 topics (one internal) in batches of 100
    lab.set_topic_config("big", "t0005", "cleanup.policy", "compact")
    try:
        again = run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    finally:
        lab.set_topic_config("big", "t0005", "cleanup.policy", None)
    assert collector.stats["answers_decoded"] - decoded == 1  # only the batch holding t0005
    assert collector.stats["answers_reused"] == 10
    assert again is not None and again.cluster("big").configs.topics["t0005"]["cleanup.policy"].value == "compact"
    changes = readers.changes(tmp_path / "lake", entity="config")
    assert list(changes["subject"])[-1] == "topic t0005: cleanup.policy"


def test_a_stopped_broker_keeps_its_last_known_configs_and_says_so(lab: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from("[settings]\nconfig_interval_s = 0.001\nrequest_timeout_s = 3\n\n" + lab_toml(lab, tmp_path),
                       tmp_path)
    collector = ConfigCollector()
    run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    lab.stop_broker("big", 2)
    try:
        poll = run_poller(fleet, tmp_path / "lake", once=True, configs=collector)
    finally:
        lab.start_broker("big", 2)
    assert poll is not None
    configs = poll.cluster("big").configs
    assert configs is not None and sorted(configs.brokers) == [1, 2, 3]
    assert "broker 2" in configs.errors
    runs = config_readers.config_runs(tmp_path / "lake", ["big"])
    assert "broker 2" in runs["error"].iloc[0]
    assert not [k for k in readers.changes(tmp_path / "lake", entity="config")["kind"] if k != "configs_first_seen"]


def test_the_demo_seeds_raise_their_incidents(lab_fleet: LabFleet, tmp_path: Path) -> None:
    text = "[settings]\nrequest_timeout_s = 10\n\n" + lab_toml(lab_fleet, tmp_path, ["prod-us", "legacy-zk", "prod-eu"])
    fleet = fleet_from(text, tmp_path)
    run_poller(fleet, tmp_path / "lake", once=True, configs=ConfigCollector())
    incidents = readers.incidents(tmp_path / "lake", open_only=True)
    found = set(zip(incidents["cluster_name"], incidents["rule"], incidents["subject"], strict=True))
    assert {("prod-us", "config_min_isr_above_rf", "topic payments"),
            ("prod-us", "config_static_disagreement", "log.retention.hours"),
            ("legacy-zk", "config_unclean_leader_election", "brokers")} <= found
    assert not [f for f in found if f[0] == "prod-eu" and f[1].startswith("config_")]  # a well-configured cluster
    stored = config_readers.latest_configs(tmp_path / "lake", ["prod-us"], resource_type="broker")
    retention = stored[stored["config_name"] == "log.retention.hours"].set_index("resource")["value"].to_dict()
    assert retention == {"1": "168", "2": "168", "3": "72"}


def test_a_broker_answering_garbage_is_an_error_on_its_row_and_the_others_are_read(lab: LabFleet, tmp_path: Path) -> None:
    """librdkafka abort()s on the garbage when it happens to ask that broker (about 2 runs in 3): its helper process
    dies, not the test's, and the poll goes on from the direct Metadata answer of the sane brokers."""
    broker = lab.clusters["big"].brokers[2]
    lab.set_fault("big", broker.id, malformed=True)
    helpers = AdminHelpers()  # its own helpers: a pause of "big" must not reach the module's other tests
    try:
        # Generous timeouts: the broker answers garbage at once, and a loaded machine must not turn it into a timeout.
        answer = describe_configs(broker.host, broker.port, [(P.RESOURCE_BROKER, str(broker.id))], timeout_s=10)
        collector = ConfigCollector()
        fleet = fleet_from("[settings]\nconfig_interval_s = 0.001\nrequest_timeout_s = 10\npoll_deadline_s = 60\n\n"
                           + lab_toml(lab, tmp_path), tmp_path)
        poll = run_poller(fleet, tmp_path / "lake", once=True, configs=collector, clients=helpers)
    finally:
        lab.set_fault("big", broker.id, malformed=False)
        helpers.close()
    assert not answer.ok and answer.error_kind == "protocol", (answer.error_kind, answer.error)
    assert poll is not None
    row = poll.cluster("big")
    assert row.status == "degraded" and len(row.topics) == TOPICS + 1, (row.status, row.error)
    bad = next(b for b in row.brokers if b.broker_id == broker.id)
    assert not bad.reachable and bad.error, bad
    # librdkafka asked the garbage broker and its retry on a helper of its own did too: the row says so.
    if any(death.convicted == ("big",) for death in helpers.deaths):
        assert "librdkafka is off for this cluster" in (row.error or ""), row.error
    configs = collector.last("big")
    assert configs is not None and sorted(configs.brokers) == [1, 2]  # no last known configs for broker 3 yet
    assert set(configs.errors) == {f"broker {broker.id}"}
    assert len(configs.topics) == TOPICS // 10 + 1  # the topics came from broker 1


def test_a_poller_never_takes_another_pollers_reading_of_a_same_named_cluster(lab: LabFleet, tmp_path: Path) -> None:
    """Two pollers in one process, two lakes, two clusters both named "big" on other ports: each lake's first state is
    its own cluster's answer (a process-wide collector once stored the other cluster's, then "changed" it when due)."""
    settings = "[settings]\nconfig_interval_s = 3600\n\n"
    run_poller(fleet_from(settings + lab_toml(lab, tmp_path / "a"), tmp_path / "a"), tmp_path / "a" / "lake", once=True)
    twin_root = tmp_path / "twin"
    raw = {"lab": {"state_dir": str(twin_root / "state")}, "clusters": [
        {"name": "big", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
         "topics": [{"name": "t0000", "partitions": 1, "replication_factor": 3}]}]}
    with LabFleet(parse_lab_config(raw, twin_root)) as twin:
        run_poller(fleet_from(settings + lab_toml(twin, tmp_path / "b"), tmp_path / "b"), tmp_path / "b" / "lake",
                   once=True)
        stored = config_readers.latest_configs(tmp_path / "b" / "lake", ["big"], resource_type="broker")
        listeners = dict(zip(stored[stored["config_name"] == "advertised.listeners"]["resource"],
                             stored[stored["config_name"] == "advertised.listeners"]["value"], strict=True))
        assert listeners == {str(b.id): f"PLAINTEXT://{b.host}:{b.port}" for b in twin.runtimes["big"].brokers.values()}
