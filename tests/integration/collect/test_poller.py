"""The poller against real Kafka 3.9 (ZooKeeper mode), a real 3-node Kafka 4.x KRaft cluster and the lab fleet."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import threading
import time
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from backend.collect.cli import run_poll_command
from backend.collect.poller import poll_fleet, run_poller
from backend.collect.topics import listing_from_metadata
from backend.kafka.probe import probe_broker
from backend.lab.fleet import LabFleet
from backend.store import readers
from backend.store.lake import Lake
from backend.store.state import read_manifest
from tests.integration.collect.conftest import (
    fleet_from,
    kafka4_toml,
    kafka39_toml,
    lab_toml,
    settings_toml,
)
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer

pytestmark = pytest.mark.timeout(300)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def _kafka_text(uuid: object) -> str:
    """Kafka's text form of a topic id, built from the two 64-bit halves the client returns."""
    msb = uuid.get_most_significant_bits() & (2**64 - 1)  # type: ignore[attr-defined]
    lsb = uuid.get_least_significant_bits() & (2**64 - 1)  # type: ignore[attr-defined]
    raw = msb.to_bytes(8, "big") + lsb.to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _broker_topic_ids(bootstrap: str, names: list[str]) -> dict[str, str]:
    admin = _admin(bootstrap)  # held until the futures resolve: a collected client cancels them
    futures = admin.describe_topics(TopicCollection(names), request_timeout=20)
    ids = {name: _kafka_text(f.result(timeout=30).topic_id) for name, f in futures.items()}
    del admin
    return ids


def _create_topic(bootstrap: str, name: str, partitions: int = 3, replication: int = 1) -> None:
    admin = _admin(bootstrap)
    admin.create_topics([NewTopic(name, partitions, replication)], request_timeout=20)[name].result(timeout=30)
    deadline = time.monotonic() + 30
    while name not in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"topic {name} never appeared"
        time.sleep(0.2)


def _delete_topic(bootstrap: str, name: str) -> None:
    admin = _admin(bootstrap)
    admin.delete_topics([name], request_timeout=20)[name].result(timeout=30)
    deadline = time.monotonic() + 30
    while name in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"topic {name} never went away"
        time.sleep(0.2)


def _wait_every_broker_sees(bootstrap: str, topic: str, topic_id: str | None) -> None:
    """Wait until each broker's own Metadata answer shows topic with topic_id (None: absent).

    The admin calls above ask one broker; the poller may ask another, whose metadata can lag a
    moment behind on a loaded machine.
    """
    deadline = time.monotonic() + 30
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        while True:
            result = probe_broker(host, int(port), timeout_s=10, with_metadata=True)
            seen = None
            if result.ok and result.metadata is not None:
                ids = {t.topic: t.topic_id for t in listing_from_metadata(result.metadata).topics}
                seen = ids.get(topic)
                if seen == topic_id:
                    break
            assert time.monotonic() < deadline, f"{address} still shows {topic} as {seen!r}"
            time.sleep(0.2)


def _zk_read(connect: str, chroot: str) -> tuple[str, list[int], dict[str, str]]:
    zk = KazooClient(hosts=connect + chroot, timeout=10)
    zk.start(timeout=15)
    try:
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        brokers = sorted(int(b) for b in zk.get_children("/brokers/ids"))
        topics = {t: json.loads(zk.get(f"/brokers/topics/{t}")[0]).get("topic_id") for t in zk.get_children("/brokers/topics")}
    finally:
        zk.stop()
        zk.close()
    return cluster_id, brokers, topics


def test_lake_ids_equal_what_brokers_and_zookeeper_report(
    kafka39: KafkaZkCluster,
    kafka4: KafkaKraftCluster,
    zookeeper: ZooKeeperServer,
    lab_fleet: LabFleet,
    tmp_path: Path,
) -> None:
    _create_topic(kafka39.bootstrap, "ids-zk")
    _create_topic(kafka4.bootstrap, "ids-kraft", replication=3)
    text = settings_toml() + kafka39_toml(kafka39, zookeeper) + kafka4_toml(kafka4) + lab_toml(lab_fleet, tmp_path)
    fleet = fleet_from(text, tmp_path)
    lake = tmp_path / "lake"
    run_poller(fleet, lake, once=True)
    state = readers.latest_fleet_state(lake)
    clusters = state.clusters.set_index("cluster_name")

    # Kafka 3.9 in ZooKeeper mode: Metadata, ZooKeeper and the lake agree on every id.
    zk_cluster_id, zk_brokers, zk_topics = _zk_read(zookeeper.connect, kafka39.zk_chroot)
    row = clusters.loc["kafka39"]
    assert row.status == "ok", row.error
    assert row.cluster_id == kafka39.cluster_id == zk_cluster_id
    assert row.zk_cluster_id == zk_cluster_id
    brokers39 = state.brokers[state.brokers.cluster_name == "kafka39"]
    assert sorted(brokers39.broker_id) == zk_brokers == [b.node_id for b in kafka39.brokers]
    topics39 = state.topics[state.topics.cluster_name == "kafka39"].set_index("topic")
    assert "ids-zk" in topics39.index
    assert topics39.loc["ids-zk", "topic_id"] == zk_topics["ids-zk"]
    assert topics39.loc["ids-zk", "zk_topic_id"] == zk_topics["ids-zk"]
    broker_ids39 = _broker_topic_ids(kafka39.bootstrap, ["ids-zk"])
    assert topics39.loc["ids-zk", "topic_id"] == broker_ids39["ids-zk"]
    nodes = state.zk_nodes[state.zk_nodes.cluster_name == "kafka39"]
    assert "/cluster/id" in set(nodes.path) and "/brokers/ids/0" in set(nodes.path)

    # Kafka 4.x KRaft: three brokers, ids as formatted, topic ids as DescribeTopics reports them.
    row = clusters.loc["kafka4"]
    assert row.status == "ok", row.error
    assert row.cluster_id == kafka4.cluster_id
    assert row.zk_cluster_id is None
    brokers4 = state.brokers[state.brokers.cluster_name == "kafka4"]
    assert sorted(brokers4.broker_id) == sorted(b.node_id for b in kafka4.brokers)
    assert set(brokers4.port) == {b.port for b in kafka4.brokers}
    assert brokers4.reachable.all()
    # Apache Kafka has no KIP-885: never "reported", and a guess carries its range.
    assert set(brokers4.version_provenance) <= {"guessed", "unknown"}
    guessed = brokers4[brokers4.version_provenance == "guessed"]
    assert guessed.version_min.notna().all()
    topics4 = state.topics[state.topics.cluster_name == "kafka4"].set_index("topic")
    truth4 = _broker_topic_ids(kafka4.bootstrap, sorted(topics4.index))
    assert topics4.topic_id.to_dict() == truth4
    assert topics4.loc["ids-kraft", "replication_factor"] == 3
    assert topics4.loc["ids-kraft", "partitions"] == 3

    # Lab clusters: KIP-885 answers are "reported" with exactly the software each broker runs.
    for name, info in lab_fleet.clusters.items():
        row = clusters.loc[name]
        assert row.cluster_id == info.cluster_id, name
        lab_brokers = state.brokers[state.brokers.cluster_name == name].set_index("broker_id")
        assert sorted(lab_brokers.index) == sorted(b.id for b in info.brokers), name
        lab_topics = state.topics[state.topics.cluster_name == name].set_index("topic")
        for topic in lab_topics.index:
            if not topic.startswith("__"):
                assert lab_topics.loc[topic, "topic_id"] == lab_fleet.topic_id(name, topic), (name, topic)
    kip885 = [n for n, i in lab_fleet.clusters.items() if "kip885" in i.profile]
    assert kip885, "lab.toml should hold KIP-885 clusters"
    for name in kip885:
        lab_brokers = state.brokers[state.brokers.cluster_name == name].set_index("broker_id")
        for broker in lab_fleet.clusters[name].brokers:
            assert lab_brokers.loc[broker.id, "version_provenance"] == "reported", name
            assert lab_brokers.loc[broker.id, "software_version"] == broker.software_version, name


def test_misrouted_lab_cluster(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["staging-zk", "analytics-zk"]), tmp_path)
    poll = poll_fleet(fleet)
    staging, analytics = poll.cluster("staging-zk"), poll.cluster("analytics-zk")
    assert staging.status == "misrouted"
    assert staging.cluster_id == lab_fleet.clusters["staging-zk"].cluster_id
    assert staging.zk_cluster_id == lab_fleet.clusters["analytics-zk"].cluster_id
    assert analytics.status == "ok", analytics.error
    mismatch = [a for a in poll.alerts if a.rule == "zk_cluster_id_mismatch"]
    assert [a.cluster_name for a in mismatch] == ["staging-zk"]
    assert mismatch[0].evidence["zk_cluster_id"] == staging.zk_cluster_id
    assert staging.error and staging.zk_cluster_id in staging.error


def test_mid_upgrade_lab_cluster_raises_version_skew_from_reported_versions(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-us", "prod-eu"]), tmp_path)
    poll = poll_fleet(fleet)
    expected: dict[str, list[int]] = {}
    for broker in lab_fleet.clusters["prod-us"].brokers:
        expected.setdefault(broker.software_version, []).append(broker.id)
    assert len(expected) == 2, "lab.toml's prod-us should run two versions"
    skew = [a for a in poll.alerts if a.rule == "version_skew"]
    assert [a.cluster_name for a in skew] == ["prod-us"]
    by_version = {label.split(" ", 1)[1]: ids for label, ids in skew[0].evidence["brokers_by_version"].items()}
    assert by_version == {v: sorted(ids) for v, ids in expected.items()}
    assert all(b.version_provenance == "reported" for b in poll.cluster("prod-us").brokers)


def test_unreachable_zookeeper_degrades_only_that_cluster(
    kafka39: KafkaZkCluster, kafka4: KafkaKraftCluster, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_zk = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    text = settings_toml(request_timeout_s=3, poll_deadline_s=8) + kafka4_toml(kafka4) + kafka39_toml(kafka39, zookeeper)
    text += (
        f'[[clusters]]\nname = "kafka39-dead-zk"\nbootstrap_servers = ["{kafka39.bootstrap}"]\n'
        f'zookeeper = {{ connect = "{dead_zk}", chroot = "{kafka39.zk_chroot}", timeout_s = 2 }}\n\n'
    )
    poll = poll_fleet(fleet_from(text, tmp_path))
    broken = poll.cluster("kafka39-dead-zk")
    assert broken.status == "degraded"
    assert "ZooKeeper" in (broken.error or "")
    assert broken.cluster_id == kafka39.cluster_id and broken.zk_cluster_id is None
    assert poll.cluster("kafka39").status == "ok", poll.cluster("kafka39").error
    assert poll.cluster("kafka4").status == "ok", poll.cluster("kafka4").error
    # Both names report one cluster id: the fleet file lists the same cluster twice.
    duplicate = {a.cluster_name for a in poll.alerts if a.rule == "duplicate_cluster_id"}
    assert duplicate == {"kafka39", "kafka39-dead-zk"}


def test_topic_recreated_between_polls_raises_exactly_one_alert(kafka4: KafkaKraftCluster, tmp_path: Path) -> None:
    topic = f"recreate-{time.time_ns()}"
    _create_topic(kafka4.bootstrap, topic)
    old_id = _broker_topic_ids(kafka4.bootstrap, [topic])[topic]
    _wait_every_broker_sees(kafka4.bootstrap, topic, old_id)
    fleet = fleet_from(settings_toml() + kafka4_toml(kafka4), tmp_path)
    lake = tmp_path / "lake"
    run_poller(fleet, lake, once=True)
    _delete_topic(kafka4.bootstrap, topic)
    _create_topic(kafka4.bootstrap, topic)
    new_id = _broker_topic_ids(kafka4.bootstrap, [topic])[topic]
    assert new_id != old_id
    _wait_every_broker_sees(kafka4.bootstrap, topic, new_id)
    # A new process: the previous snapshot comes from the lake, not from memory.
    run_poller(fleet, lake, once=True)
    recreated = readers.alerts(lake, rule="topic_recreated")
    assert len(recreated) == 1
    evidence = json.loads(recreated.evidence_json.iloc[0])
    assert evidence == {"topic": topic, "old_topic_id": old_id, "new_topic_id": new_id}
    assert recreated.cluster_name.iloc[0] == "kafka4"
    changes = readers.topic_id_changes(lake, "kafka4")
    assert changes[changes.topic == topic][["old_topic_id", "new_topic_id"]].values.tolist() == [[old_id, new_id]]
    created = readers.alerts(lake, rule=["topic_created", "topic_deleted"])
    assert topic not in set(created.subject)


class _SilentServer:
    """A TCP port that accepts connections into its backlog and never answers: a hung broker."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def silent_server() -> Iterator[_SilentServer]:
    server = _SilentServer()
    try:
        yield server
    finally:
        server.close()


def test_hung_and_unreachable_clusters_finish_within_the_deadline(
    kafka4: KafkaKraftCluster, silent_server: _SilentServer, tmp_path: Path
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    text = (
        settings_toml(request_timeout_s=20, poll_deadline_s=4)
        + kafka4_toml(kafka4)
        + f'[[clusters]]\nname = "hung"\nbootstrap_servers = ["{silent_server.address}"]\n\n'
        + f'[[clusters]]\nname = "refused"\nbootstrap_servers = ["{refused}"]\n\n'
    )
    fleet = fleet_from(text, tmp_path)
    started = time.monotonic()
    poll = poll_fleet(fleet)
    elapsed = time.monotonic() - started
    assert elapsed < 4 + 2.0, f"poll took {elapsed:.1f}s with poll_deadline_s=4"
    assert poll.cluster("hung").status == "down"
    assert poll.cluster("refused").status == "down"
    assert "refused" in (poll.cluster("refused").error or "").lower() or "timed out" in (poll.cluster("refused").error or "").lower()
    assert poll.cluster("kafka4").status == "ok", poll.cluster("kafka4").error
    assert poll.cluster("kafka4").duration_ms < 4000


def _every_lake_string(lake: Path) -> str:
    parts = []
    for path in lake.rglob("*"):
        if path.is_file():
            parts.append(path.read_bytes().decode("latin-1"))
            if path.suffix == ".parquet":
                frame = pq.ParquetFile(path).read().to_pandas()
                parts.append(frame.astype(str).to_csv())
    return "\n".join(parts)


def test_wrong_sasl_password_is_auth_failed_and_never_leaks(
    kafka4: KafkaKraftCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    wrong = "Wr0ng-" + kafka4.scram_password[::-1] + "-pw"
    monkeypatch.setenv("FLEETVIEW_TEST_WRONG_PW", wrong)
    monkeypatch.setenv("FLEETVIEW_TEST_RIGHT_PW", kafka4.scram_password)
    servers = json.dumps(kafka4.sasl_bootstrap.split(","))

    def sasl_entry(name: str, env: str) -> str:
        return (
            f'[[clusters]]\nname = "{name}"\nbootstrap_servers = {servers}\nsecurity_protocol = "SASL_SSL"\n'
            f'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "{kafka4.scram_user}"\n'
            f'sasl_password_env = "{env}"\nssl_cafile = "{kafka4.ca_file}"\n\n'
        )

    text = settings_toml(request_timeout_s=8, poll_deadline_s=15)
    text += sasl_entry("sasl-wrong", "FLEETVIEW_TEST_WRONG_PW") + sasl_entry("sasl-right", "FLEETVIEW_TEST_RIGHT_PW")
    (tmp_path / "clusters.toml").write_text(text, encoding="utf-8")
    lake = tmp_path / "lake"
    caplog.set_level(logging.DEBUG)
    out = io.StringIO()
    args = Namespace(
        config=str(tmp_path / "clusters.toml"), lake=str(lake), secrets=str(tmp_path / "none.toml"),
        once=True, interval=None,
    )  # fmt: skip
    code = run_poll_command(args, out=out)
    printed = out.getvalue()
    captured = capsys.readouterr()

    clusters = readers.latest_clusters(lake).set_index("cluster_name")
    assert clusters.loc["sasl-wrong", "status"] == "auth_failed", clusters.loc["sasl-wrong", "error"]
    assert clusters.loc["sasl-right", "status"] == "ok", clusters.loc["sasl-right", "error"]
    assert clusters.loc["sasl-right", "cluster_id"] == kafka4.cluster_id
    assert code == 1  # --once with a cluster that could not be read
    assert "sasl-wrong status=auth_failed" in printed
    for haystack, where in (
        (_every_lake_string(lake), "lake"),
        (caplog.text, "logs"),
        (printed + captured.out + captured.err, "CLI output"),
    ):
        assert wrong not in haystack, f"wrong password found in {where}"
        assert kafka4.scram_password not in haystack, f"real password found in {where}"


def test_reader_never_sees_a_partial_poll_while_the_poller_writes(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + lab_toml(lab_fleet, tmp_path, ["prod-eu", "prod-us", "batch-43"]), tmp_path)
    lake = tmp_path / "lake"
    stop = threading.Event()
    polls: list[str] = []
    errors: list[BaseException] = []

    def poller() -> None:
        try:
            run_poller(fleet, lake, interval_s=0.05, stop=stop, on_poll=lambda p: polls.append(p.poll_id))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    checked = 0
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            state = readers.latest_fleet_state(lake)
            for row in state.clusters.itertuples():
                topics = state.topics[state.topics.cluster_name == row.cluster_name]
                brokers = state.brokers[state.brokers.cluster_name == row.cluster_name]
                assert len(topics) == row.topic_count
                assert (topics.poll_id == row.poll_id).all()
                assert len(brokers) >= row.broker_count
                checked += 1
            manifest = read_manifest(Lake(lake)) or {"clusters": {}}
            for entry in manifest["clusters"].values():
                for path in entry.values():
                    try:
                        pq.ParquetFile(path).read()  # a half-written state file would not parse
                    except FileNotFoundError:
                        pass  # replaced by a newer generation after we read the manifest
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors
    assert len(polls) >= 3, polls
    assert checked > 0
    assert len(readers.poll_history(lake, "prod-eu")) == len(polls)


def _poll_until(fleet: object, cluster: str, status: str, timeout_s: float) -> pd.Series:
    deadline = time.monotonic() + timeout_s
    seen = []
    while True:
        poll = poll_fleet(fleet)  # type: ignore[arg-type]
        seen.append(poll.cluster(cluster).status)
        if poll.cluster(cluster).status == status:
            return pd.Series({s.cluster_name: s.status for s in poll.clusters})
        assert time.monotonic() < deadline, f"{cluster} never became {status}: {seen}"
        time.sleep(1.0)


def test_stopped_broker_degrades_the_cluster_and_it_recovers(
    kafka4: KafkaKraftCluster,
    kafka39: KafkaZkCluster,
    zookeeper: ZooKeeperServer,
    lab_fleet: LabFleet,
    tmp_path: Path,
) -> None:
    _create_topic(kafka4.bootstrap, f"replicated-{time.time_ns()}", partitions=3, replication=3)
    text = settings_toml(request_timeout_s=5, poll_deadline_s=15) + kafka4_toml(kafka4)
    text += kafka39_toml(kafka39, zookeeper) + lab_toml(lab_fleet, tmp_path, ["prod-eu"])
    fleet = fleet_from(text, tmp_path)
    before = poll_fleet(fleet)
    assert {s.cluster_name: s.status for s in before.clusters} == {"kafka4": "ok", "kafka39": "ok", "prod-eu": "ok"}
    victim = kafka4.brokers[-1].node_id
    kafka4.stop_broker(victim)
    try:
        statuses = _poll_until(fleet, "kafka4", "degraded", 60)
        assert statuses["kafka39"] == "ok" and statuses["prod-eu"] == "ok"
        poll = poll_fleet(fleet)
        snapshot = poll.cluster("kafka4")
        assert snapshot.status == "degraded"
        assert victim in snapshot.missing_broker_ids
    finally:
        kafka4.start_broker(victim)
    statuses = _poll_until(fleet, "kafka4", "ok", 90)
    assert statuses["kafka39"] == "ok" and statuses["prod-eu"] == "ok"
