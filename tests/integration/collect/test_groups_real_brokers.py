"""Consumer groups read from the rig's real brokers equal what the real kafka-consumer-groups.sh prints.

One set of groups per cluster, made by real consumers and shared by the module: on 3.9.2 (ZooKeeper mode) classic
groups of confluent-kafka and of the 3.9.2 Java client; on 4.3.1 (KRaft) classic and consumer-protocol (KIP-848)
groups of both, and a share group (KIP-932). The producers stop before anything is compared, and the consumers
that stay in their group pause, so the numbers hold still. Then a consumer that stops while its producer keeps
writing goes lagging, then stalled, and resolves when it catches up; and a group switched from the classic to the
consumer protocol gives one `group_protocol_changed` change.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.collect.groups import GroupCollector
from backend.collect.poller import run_poller
from backend.config import ClusterConfig, Settings
from backend.kafka.admin import NodeInfo
from backend.store import group_readers, readers
from backend.store.group_model import GroupSnapshot
from tests.integration.collect.conftest import fleet_from, kafka4_toml, kafka39_toml, settings_toml
from tests.rig.group_tools import JavaConsumer, compile_group_consumer, consumer_groups, parse_tables
from tests.rig.kafka import KAFKA_KRAFT_VERSION, KAFKA_ZK_VERSION, KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer

RECORDS = 300
# Groups read at every poll (group_interval_s below the poll interval) and judged over 4 reads.
GROUP_SETTINGS = "group_interval_s = 0.1\ngroup_window = 4\n\n"


@dataclass
class PyConsumer:
    """A confluent-kafka consumer in a thread: reads `count` records, commits, then stays in its group (paused, so
    its numbers hold still, unless `running`: then it reads and commits whenever `paused` is clear) or closes."""

    bootstrap: str
    group: str
    topic: str
    count: int
    stay: bool = True
    running: bool = False
    configs: dict[str, str] = field(default_factory=dict)
    paused: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    committed: threading.Event = field(default_factory=threading.Event)
    consumed: int = 0
    thread: threading.Thread | None = None

    def start(self, timeout_s: float = 60.0) -> PyConsumer:
        """Start and wait until the first `count` records are committed."""
        if not self.running:
            self.paused.set()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"consumer-{self.group[:20]}")
        self.thread.start()
        assert self.committed.wait(timeout_s), f"consumer of {self.group} did not commit"
        return self

    def _run(self) -> None:
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "client.id": f"py-{self.group}"[:200], **self.configs}
        consumer = Consumer(conf)
        consumer.subscribe([self.topic])
        try:
            deadline = time.monotonic() + 60
            while self.consumed < self.count and time.monotonic() < deadline:
                for message in consumer.consume(num_messages=min(50, self.count - self.consumed), timeout=0.5):
                    if not message.error():
                        self.consumed += 1
            consumer.commit(asynchronous=False)
            self.committed.set()
            if not self.stay:
                return
            while not self.stop.is_set():  # stays in the group; reads and commits only while not paused
                assignment = consumer.assignment()
                if self.paused.is_set():
                    consumer.pause(assignment)
                    consumer.poll(0.2)
                    continue
                consumer.resume(assignment)
                batch = consumer.consume(num_messages=100, timeout=0.2)
                if any(not m.error() for m in batch):
                    self.consumed += sum(1 for m in batch if not m.error())
                    consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    def close(self) -> None:
        """Leave the group."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=30)


@dataclass
class Groups:
    """The groups made on one cluster, and how to reach it."""

    version: str
    bootstrap: str
    brokers: list[NodeInfo]
    names: set[str]
    prefix: str


def _topics(bootstrap: str, names: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in names.items()]).values():
        future.result(timeout=30)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 20)
    assert producer.flush(30) == 0


def _brokers(bootstrap: str) -> list[NodeInfo]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return [NodeInfo(b.id, b.host, b.port, None) for b in metadata.brokers.values()]


@pytest.fixture(scope="module")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GroupConsumer.java compiled once for the module."""
    return compile_group_consumer(tmp_path_factory.mktemp("group-consumer"))


@pytest.fixture(scope="module")
def groups39(kafka39: KafkaZkCluster, java_classes: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Groups]:
    """Classic groups on the 3.9.2 broker: two that stay (confluent-kafka, Java) and an empty one with lag."""
    p = f"g39-{uuid.uuid4().hex[:6]}"
    bootstrap = kafka39.bootstrap
    _topics(bootstrap, {f"{p}-orders": 3, f"{p}-pay": 1})
    _produce(bootstrap, f"{p}-orders", RECORDS)
    _produce(bootstrap, f"{p}-pay", RECORDS)
    py = PyConsumer(bootstrap, f"{p}-py", f"{p}-orders", 120).start()
    java = JavaConsumer(java_classes, KAFKA_ZK_VERSION, bootstrap, f"{p}-java", f"{p}-orders", 50,
                        tmp_path_factory.mktemp("java39"), configs={"client.id": f"java-{p}"}).start()
    empty = PyConsumer(bootstrap, f"{p}-empty", f"{p}-pay", 40, stay=False).start()
    try:
        yield Groups(KAFKA_ZK_VERSION, bootstrap, _brokers(bootstrap), {py.group, java.group, empty.group}, p)
    finally:
        py.close()
        java.close()
        empty.close()


@pytest.fixture(scope="module")
def groups4(kafka4: KafkaKraftCluster, java_classes: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Groups]:
    """On 4.3.1: classic and consumer-protocol groups of confluent-kafka and of the 4.3.1 Java client, an empty
    classic group, and a share group."""
    p = f"g4-{uuid.uuid4().hex[:6]}"
    bootstrap = kafka4.bootstrap
    _topics(bootstrap, {f"{p}-orders": 3, f"{p}-pay": 2})
    _produce(bootstrap, f"{p}-orders", RECORDS)
    _produce(bootstrap, f"{p}-pay", RECORDS)
    work = tmp_path_factory.mktemp("java4")
    consumers: list[PyConsumer | JavaConsumer] = []
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"{p}-share", "client.id": f"share-{p}"})
    stop_share = threading.Event()

    def keep_polling() -> None:
        share.subscribe([f"{p}-pay"])
        while not stop_share.is_set():
            share.poll(0.2)
        share.close()

    share_thread = threading.Thread(target=keep_polling, daemon=True)
    try:
        consumers.append(PyConsumer(bootstrap, f"{p}-py-classic", f"{p}-orders", 90).start())
        consumers.append(PyConsumer(bootstrap, f"{p}-py-new", f"{p}-orders", 70,
                                    configs={"group.protocol": "consumer"}).start())
        consumers.append(JavaConsumer(java_classes, KAFKA_KRAFT_VERSION, bootstrap, f"{p}-java-new", f"{p}-pay", 60,
                                      work, configs={"group.protocol": "consumer", "client.id": f"java-{p}"}).start())
        consumers.append(JavaConsumer(java_classes, KAFKA_KRAFT_VERSION, bootstrap, f"{p}-java-classic",
                                      f"{p}-pay", 30, work, stay=False).start())
        share_thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the share group exists once its member joined
            if f"{p}-share" in consumer_groups(KAFKA_KRAFT_VERSION, bootstrap, "--list"):
                break
            time.sleep(0.5)
        yield Groups(KAFKA_KRAFT_VERSION, bootstrap, _brokers(bootstrap), {c.group for c in consumers} | {f"{p}-share"},
                     p)
    finally:
        for c in consumers:
            c.close()
        stop_share.set()
        if share_thread.is_alive():
            share_thread.join(timeout=30)


def _read(groups: Groups, settings: Settings | None = None) -> GroupSnapshot:
    cluster = ClusterConfig(name=groups.version, bootstrap_servers=groups.bootstrap.split(","))
    return GroupCollector().collect(cluster, settings or Settings(), groups.brokers, time.monotonic() + 30)


def _product_offsets(snap: GroupSnapshot, names: set[str]) -> set[tuple[str, ...]]:
    rows = set()
    for gid in names & set(snap.offsets):
        members = {m.member_id: m for m in snap.members.get(gid, ())}
        for p in snap.offsets[gid]:
            m = members.get(p.member_id or "")
            rows.add((gid, p.topic, str(p.partition), "-" if p.committed is None else str(p.committed),
                      "-" if p.end is None else str(p.end), "-" if p.lag is None else str(p.lag),
                      m.member_id if m else "-", m.client_host if m else "-", m.client_id if m else "-"))
    return rows


def _tool_offsets(text: str, names: set[str]) -> set[tuple[str, ...]]:
    keys = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
            "CLIENT-ID")
    return {tuple(r[k] for k in keys) for r in parse_tables(text) if r.get("GROUP") in names and "TOPIC" in r}


@pytest.mark.parametrize("cluster", ["groups39", "groups4"])
def test_every_group_member_and_partition_lag_equals_kafka_consumer_groups(cluster: str,
                                                                           request: pytest.FixtureRequest) -> None:
    groups: Groups = request.getfixturevalue(cluster)
    snap = _read(groups)
    described = consumer_groups(groups.version, groups.bootstrap, "--describe", "--all-groups")
    members = consumer_groups(groups.version, groups.bootstrap, "--describe", "--all-groups", "--members")
    states = consumer_groups(groups.version, groups.bootstrap, "--describe", "--all-groups", "--state")
    consumer_names = {g for g in groups.names if not g.endswith("-share")}

    assert consumer_names <= set(snap.groups), sorted(snap.groups)
    ours = _product_offsets(snap, consumer_names)
    theirs = _tool_offsets(described, consumer_names)
    assert ours == theirs
    assert len(ours) >= 6 and any(row[5] not in ("0", "-") for row in ours)  # there is lag to compare

    their_members = {(r["GROUP"], r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"], r["#PARTITIONS"])
                     for r in parse_tables(members) if r.get("GROUP") in consumer_names and "CONSUMER-ID" in r}
    our_members = {(g, m.member_id, m.client_host, m.client_id, str(len(m.assignment)))
                   for g in consumer_names for m in snap.members.get(g, ())}
    assert our_members == their_members and len(our_members) >= 2

    their_states = {r["GROUP"]: (r["STATE"], r["#MEMBERS"], r["ASSIGNMENT-STRATEGY"])
                    for r in parse_tables(states) if r.get("GROUP") in consumer_names and "STATE" in r}
    our_states = {g: (snap.groups[g].state, str(snap.groups[g].members), snap.groups[g].protocol or "-")
                  for g in consumer_names}
    assert our_states == their_states
    types = dict(r.split()[:2] for r in consumer_groups(groups.version, groups.bootstrap, "--list", "--type")
                 .splitlines()[1:] if r.split() and r.split()[0] in consumer_names)
    assert {g: snap.groups[g].group_type for g in consumer_names} == {g: t.lower() for g, t in types.items()}
    if groups.version == KAFKA_KRAFT_VERSION:
        assert {snap.groups[g].group_type for g in consumer_names} == {"classic", "consumer"}
        share = snap.groups[f"{groups.prefix}-share"]
        assert (share.group_type, share.protocol_type, share.members) == ("share", "share", 1)
        assert snap.versions["ConsumerGroupDescribe"] >= 0 and snap.versions["ShareGroupDescribe"] >= 1
    assert snap.requests["OffsetFetch"] <= snap.brokers_answered  # batched: one request per coordinator


def test_a_stopped_consumer_goes_lagging_then_stalled_and_resolves_when_it_catches_up(
        groups4: Groups, kafka4: KafkaKraftCluster, tmp_path: Path) -> None:
    p = groups4.prefix
    topic, group = f"{p}-stream", f"{p}-stopper"
    _topics(groups4.bootstrap, {topic: 1})
    _produce(groups4.bootstrap, topic, 20)
    consumer = PyConsumer(groups4.bootstrap, group, topic, 20, running=True).start()
    writing = threading.Event()
    writing.set()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": groups4.bootstrap, "linger.ms": 5})
        while writing.is_set():
            for _ in range(10):
                producer.produce(topic, value=b"y")
            producer.poll(0)
            time.sleep(0.1)
        producer.flush(10)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    fleet = fleet_from(settings_toml() + GROUP_SETTINGS + kafka4_toml(kafka4), tmp_path)
    seen: list[str] = []
    stop = threading.Event()
    phase = {"name": "running"}

    def on_poll(poll: Any) -> None:
        snap = poll.cluster("kafka4").groups
        status = snap.groups[group].status if snap is not None and group in snap.groups else "absent"
        seen.append(f"{phase['name']}:{status}")
        if phase["name"] == "running" and len(seen) >= 3:
            phase["name"] = "paused"
            consumer.paused.set()
        elif phase["name"] == "paused" and status == "stalled":
            phase["name"] = "caught_up"
            writing.clear()
            consumer.paused.clear()
        elif phase["name"] == "caught_up" and status == "ok" and seen[-2].endswith(":ok"):
            stop.set()
        if len(seen) > 60:
            stop.set()

    try:
        run_poller(fleet, tmp_path / "lake", interval_s=1.0, on_poll=on_poll, stop=stop, groups=GroupCollector())
    finally:
        writing.clear()
        consumer.close()
    paused = [s.split(":")[1] for s in seen if s.startswith("paused")]
    assert "lagging" in paused and paused[-1] == "stalled", seen
    assert paused.index("lagging") < paused.index("stalled"), seen
    assert seen[-1] == "caught_up:ok", seen
    incidents = readers.incidents(str(tmp_path / "lake"))
    mine = incidents[incidents["subject"] == f"group {group}"]
    by_rule = {r: s for r, s in zip(mine["rule"], mine["status"], strict=True)}
    assert by_rule.get("group_lagging") == "resolved" and by_rule.get("group_stalled") == "resolved", by_rule


def test_a_group_switched_from_classic_to_consumer_protocol_gives_one_protocol_change(
        groups4: Groups, kafka4: KafkaKraftCluster, tmp_path: Path) -> None:
    p = groups4.prefix
    group, topic = f"{p}-switch", f"{p}-pay"
    fleet = fleet_from(settings_toml() + GROUP_SETTINGS + kafka4_toml(kafka4), tmp_path)
    collector = GroupCollector()
    lake = tmp_path / "lake"
    PyConsumer(groups4.bootstrap, group, topic, 10, stay=False).start()
    run_poller(fleet, lake, once=True, groups=collector)
    classic = group_readers.read_groups(lake, ["kafka4"])
    assert classic.set_index("group_id").loc[group, "group_type"] == "classic"
    switched = PyConsumer(groups4.bootstrap, group, topic, 20, configs={"group.protocol": "consumer"}).start()
    try:
        run_poller(fleet, lake, once=True, groups=collector)
        run_poller(fleet, lake, once=True, groups=collector)
    finally:
        switched.close()
    now = group_readers.read_groups(lake, ["kafka4"]).set_index("group_id")
    assert now.loc[group, "group_type"] == "consumer"
    changes = readers.changes(str(lake), "kafka4", since=datetime(2000, 1, 1, tzinfo=UTC))
    mine = changes[(changes["entity"] == "group") & (changes["kind"] == "group_protocol_changed")
                   & (changes["subject"] == group)]
    assert len(mine) == 1
    assert '"group_type": "classic"' in mine.iloc[0]["before_json"]
    assert '"group_type": "consumer"' in mine.iloc[0]["after_json"]


def test_the_fleet_file_reads_both_rig_clusters_into_the_lake(groups39: Groups, groups4: Groups,
                                                              kafka39: KafkaZkCluster, kafka4: KafkaKraftCluster,
                                                              zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    fleet = fleet_from(settings_toml() + kafka4_toml(kafka4) + kafka39_toml(kafka39, zookeeper), tmp_path)
    run_poller(fleet, tmp_path / "lake", once=True, groups=GroupCollector())
    frame = group_readers.read_groups(tmp_path / "lake")
    for name, groups in (("kafka39", groups39), ("kafka4", groups4)):
        mine = set(frame.loc[frame["cluster_name"] == name, "group_id"])
        assert groups.names <= mine, (name, sorted(groups.names - mine))
    runs = group_readers.group_runs(tmp_path / "lake").set_index("cluster_name")
    assert runs.loc["kafka4", "brokers_answered"] == 3 and runs.loc["kafka39", "brokers_answered"] == 1


HOSTILE_GROUPS = (
    "**bold** [click](https://evil.example) :red[x]",
    "<script>alert('g')</script><img src=x onerror=alert(1)>",
    '=HYPERLINK("https://evil.example","x")',
    "L" * 10_000,
)
HOSTILE_CLIENT = "<b>client</b> =1+1 [x](javascript:alert(1))"


def test_hostile_group_and_client_ids_from_a_real_broker_stay_plain_text_everywhere(
        groups4: Groups, kafka4: KafkaKraftCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import csv
    import io

    from prometheus_client import generate_latest
    from prometheus_client.core import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families
    from streamlit.testing.v1 import AppTest

    from backend.collect.group_metrics import group_label
    from backend.collect.metrics import FleetMetrics
    from backend.export import report
    from backend.views import group_views
    from tests.unit.dashboard.conftest import APP
    from tests.unit.dashboard.test_group_pages import _plain_only

    topic = f"{groups4.prefix}-hostile"
    _topics(groups4.bootstrap, {topic: 1})
    _produce(groups4.bootstrap, topic, 20)
    consumers = [PyConsumer(groups4.bootstrap, g, topic, 5, configs={"client.id": HOSTILE_CLIENT}).start()
                 for g in HOSTILE_GROUPS]
    try:
        fleet = fleet_from(settings_toml() + GROUP_SETTINGS + kafka4_toml(kafka4), tmp_path)
        lake = tmp_path / "lake"
        last = run_poller(fleet, lake, once=True, groups=GroupCollector())
    finally:
        for c in consumers:
            c.close()
    assert last is not None
    stored = group_readers.read_groups(lake, ["kafka4"]).set_index("group_id")
    assert set(HOSTILE_GROUPS) <= set(stored.index)  # every id whole, the 10 KB one too

    cells = list(csv.reader(io.StringIO(report.build_groups_csv(str(lake), ["kafka4"]))))
    flat = [cell for row in cells for cell in row]
    assert "'" + HOSTILE_GROUPS[2] in flat and "'=1+1" not in flat  # the formula neutralised
    assert not any(cell.startswith(("=", "+", "@")) for cell in flat)
    html = "\n".join(report._groups_section(group_readers.read_groups(lake, ["kafka4"]), ["kafka4"]))
    assert "<script>alert" not in html and "<img src=x" not in html

    metrics = FleetMetrics(str(lake))
    metrics.update(last)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    exposition = generate_latest(registry).decode("utf-8")
    labels = {s.labels.get("group") for f in text_string_to_metric_families(exposition) for s in f.samples
              if f.name == "kafka_fleet_group_members"}
    assert {group_label(g) for g in HOSTILE_GROUPS} <= labels  # parsed back intact; the long one cut with a hash
    assert all(len(v) <= 128 for v in labels if v)

    monkeypatch.setenv("FLEETVIEW_LAKE", str(lake))
    monkeypatch.setenv("FLEETVIEW_FLEET", str(tmp_path / "no-fleet.toml"))
    for query in ({}, *({"cluster": "kafka4", "group": group_views.group_key("kafka4", g)} for g in HOSTILE_GROUPS)):
        app = AppTest.from_file(str(APP), default_timeout=60)
        for key, value in query.items():
            app.query_params[key] = value
        app.run()
        app.switch_page("../pages/consumer_groups.py")
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        _plain_only(app, (*HOSTILE_GROUPS, HOSTILE_CLIENT))
        if query:
            assert HOSTILE_CLIENT in set(next(d.value for d in app.dataframe if "client_id" in d.value)["client_id"])


class PartialReader:
    """A KIP-848 consumer (confluent-kafka, group.protocol=consumer) subscribed by regex to two topics: it reads and
    commits `count` records of the first only and leaves the other partition assigned with nothing committed."""

    def __init__(self, bootstrap: str, group: str, pattern: str, read_topic: str, count: int) -> None:
        self.bootstrap, self.group, self.pattern, self.read_topic, self.count = bootstrap, group, pattern, read_topic, count
        self.assigned: set[str] = set()
        self.committed = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"partial-{group[:20]}")

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "client.id": f"py-{self.group}"})
        consumer.subscribe([self.pattern])
        read = 0
        try:
            while not self.stop.is_set():
                assignment = consumer.assignment()
                self.assigned = {tp.topic for tp in assignment}
                others = [tp for tp in assignment if tp.topic != self.read_topic or read >= self.count]
                if others:
                    consumer.pause(others)
                message = consumer.poll(0.2)
                if message is None or message.error() or message.topic() != self.read_topic or read >= self.count:
                    continue
                read += 1
                if read == self.count:
                    consumer.commit(offsets=[TopicPartition(self.read_topic, 0, self.count)], asynchronous=False)
                    self.committed.set()
        finally:
            consumer.close()

    def start(self, wait_for: set[str], timeout_s: float = 90.0) -> PartialReader:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not (self.committed.is_set() and wait_for <= self.assigned):
            assert time.monotonic() < deadline, (self.assigned, self.committed.is_set())
            time.sleep(0.2)
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def _metric_samples(metrics: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    from prometheus_client import generate_latest
    from prometheus_client.core import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families

    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode("utf-8")):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_share_group_lag_offsets_past_the_end_and_uncommitted_partitions_against_the_real_tools(
        groups4: Groups, kafka4: KafkaKraftCluster, tmp_path: Path) -> None:
    """On 4.3.1: a share group's start offset and lag equal kafka-share-groups.sh --describe (read one after the
    other, nothing moving in between); a committed offset set
    past the end (AdminClient) is `offset_ahead` with an incident, never ok; a lag that is not known (a group whose
    only topic was deleted) has no /metrics series, never 0; a KIP-848 regex group shows the records on its
    uncommitted partition beside its lag (kafka-consumer-groups.sh prints "-" there) and its status sees them."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    from backend.collect.metrics import FleetMetrics
    from tests.rig.group_tools import SHARE_COMMAND_CLASS
    from tests.rig.kafka import config_command

    p, bootstrap = groups4.prefix, groups4.bootstrap
    share_topic, share_group = f"{p}-sq", f"{p}-sq-share"
    ahead_topic, ahead_group = f"{p}-ahead", f"{p}-ahead-g"
    gone_topic, gone_group = f"{p}-gone", f"{p}-gone-g"
    rx_a, rx_b, rx_group = f"{p}-rx-a", f"{p}-rx-b", f"{p}-rx-g"
    _topics(bootstrap, {share_topic: 1, ahead_topic: 1, gone_topic: 1, rx_a: 1, rx_b: 1})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # the share group: 35 records read and acknowledged, then 15 more written (kafka-share-groups.sh: LAG 15)
    config_command(KAFKA_KRAFT_VERSION, bootstrap, "--alter", "--entity-type", "groups", "--entity-name", share_group,
                   "--add-config", "share.auto.offset.reset=earliest")
    _produce(bootstrap, share_topic, 35)
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": share_group, "client.id": f"share-{p}"})
    share.subscribe([share_topic])
    got, deadline = 0, time.monotonic() + 60
    while got < 35 and time.monotonic() < deadline:
        got += sum(1 for m in share.poll(0.5) if not m.error())
    share.poll(0.5)  # acknowledges the last batch
    share.close()
    assert got == 35
    _produce(bootstrap, share_topic, 15)
    # a committed offset past the end of the log: 10 records, the empty group's offset set to 500
    _produce(bootstrap, ahead_topic, 10)
    reader = PyConsumer(bootstrap, ahead_group, ahead_topic, 10, stay=False).start()
    assert reader.thread is not None
    reader.thread.join(timeout=60)  # closed: the group is empty before its offset is altered
    wanted = [ConsumerGroupTopicPartitions(ahead_group, [TopicPartition(ahead_topic, 0, 500)])]
    listed = [ConsumerGroupTopicPartitions(ahead_group, [TopicPartition(ahead_topic, 0)])]
    deadline = time.monotonic() + 60
    while True:  # set, then read back (a member still leaving refuses the change): 500 before the product reads
        try:
            admin.alter_consumer_group_offsets(wanted)[ahead_group].result(timeout=30)
        except KafkaException:
            pass
        stored = admin.list_consumer_group_offsets(listed)[ahead_group].result(timeout=30).topic_partitions[0].offset
        if stored == 500:
            break
        assert time.monotonic() < deadline, f"the offset of {ahead_group} stays at {stored}"
        time.sleep(0.5)
    # a group whose only topic is deleted: its lag is not known
    _produce(bootstrap, gone_topic, 5)
    PyConsumer(bootstrap, gone_group, gone_topic, 5, stay=False).start()
    for future in admin.delete_topics([gone_topic]).values():
        future.result(timeout=30)
    # a KIP-848 regex group: 20 of 50 committed on rx-a (lag 30), 80 records on rx-b assigned, nothing committed
    _produce(bootstrap, rx_a, 50)
    _produce(bootstrap, rx_b, 80)
    partial = PartialReader(bootstrap, rx_group, f"^{p}-rx-.*", rx_a, 20).start({rx_a, rx_b})

    fleet = fleet_from(settings_toml() + GROUP_SETTINGS + kafka4_toml(kafka4), tmp_path)
    lake = tmp_path / "lake"
    metrics = FleetMetrics(str(lake))
    polls: list[Any] = []
    stop = threading.Event()
    give_up = time.monotonic() + 180  # a bound, not a wait: the broker persists share acknowledgements when it can

    def on_poll(poll: Any) -> None:
        polls.append(poll)
        snap = poll.cluster("kafka4").groups
        shared = snap.offsets.get(share_group, ()) if snap is not None else ()
        # four reads for the window, and the share group's acknowledgements persisted (15 records unread)
        if len(polls) >= 5 and [x.lag for x in shared] == [15] or time.monotonic() > give_up:
            stop.set()

    try:
        run_poller(fleet, lake, interval_s=0.5, on_poll=on_poll, stop=stop, groups=GroupCollector())
        shares = consumer_groups(KAFKA_KRAFT_VERSION, bootstrap, "--describe", "--group", share_group,
                                 command=SHARE_COMMAND_CLASS)
        described = consumer_groups(KAFKA_KRAFT_VERSION, bootstrap, "--describe", "--group", ahead_group,
                                    "--group", rx_group)
    finally:
        partial.close()
    last = polls[-1]
    snap = last.cluster("kafka4").groups
    assert snap is not None

    # the share group, as kafka-share-groups.sh shows it (the broker may still move the start offset as it archives
    # acknowledged records: the tool and a read right after it are compared until they agree)
    agreed = 0
    for _ in range(10):
        theirs = {(r["TOPIC"], r["PARTITION"], r["START-OFFSET"], r["LAG"]) for r in parse_tables(shares)
                  if r.get("GROUP") == share_group and "START-OFFSET" in r}
        fresh = _read(groups4)
        ours = {(x.topic, str(x.partition), str(x.committed), str(x.lag)) for x in fresh.offsets[share_group]}
        agreed = int(ours == theirs)
        if agreed:
            break
        time.sleep(1)
        shares = consumer_groups(KAFKA_KRAFT_VERSION, bootstrap, "--describe", "--group", share_group,
                                 command=SHARE_COMMAND_CLASS)
    assert agreed, (ours, shares)
    assert {(t, p, lag) for t, p, _start, lag in theirs} == {(share_topic, "0", "15")}, shares
    assert snap.groups[share_group].lag == 15 and snap.versions["DescribeShareGroupOffsets"] == 1

    # the offset past the end, as kafka-consumer-groups.sh shows it: never ok, an incident with its evidence
    rows = {(r["GROUP"], r["TOPIC"], r["PARTITION"]): r for r in parse_tables(described) if "TOPIC" in r}
    assert rows[(ahead_group, ahead_topic, "0")]["LAG"] == "-490"
    ahead = snap.groups[ahead_group]
    assert (ahead.status, ahead.lag, ahead.partitions_ahead) == ("offset_ahead", None, 1)
    assert ahead.evidence["sample"][f"{ahead_topic}[0]"] == {"committed": 500, "end": 10, "lag": -490}
    incidents = readers.incidents(str(lake))
    mine = incidents[(incidents["subject"] == f"group {ahead_group}") & (incidents["rule"] == "group_offset_ahead")]
    assert len(mine) == 1 and mine.iloc[0]["status"] == "open"

    # the regex group: the lag the tool shows, the uncommitted records beside it, the status sees them
    assert rows[(rx_group, rx_a, "0")]["LAG"] == "30"
    assert rows[(rx_group, rx_b, "0")]["CURRENT-OFFSET"] == "-" and rows[(rx_group, rx_b, "0")]["LAG"] == "-"
    rx = snap.groups[rx_group]
    assert (rx.lag, rx.uncommitted_records, rx.uncommitted_partitions) == (30, 80, 1)
    assert rx.status == "stalled" and rx.window_lag[-1] == 110, (rx.status, rx.evidence, rx.window_lag)
    regexes = {m.subscribed_regex for m in snap.members[rx_group]}  # as the coordinator reports it (librdkafka
    assert len(regexes) == 1 and f"^{p}-rx-.*" in str(next(iter(regexes)))  # sends "(^...)")
    stored = group_readers.group_members(lake, ["kafka4"])
    assert set(stored.loc[stored["group_id"] == rx_group, "subscribed_regex"]) == regexes

    # /metrics: a known lag is a series, an unknown one none (never 0); the uncommitted records have their own
    assert snap.groups[gone_group].lag is None and snap.groups[gone_group].status == "unknown"
    metrics.update(last)
    samples = _metric_samples(metrics)
    lag = {s[0]["group"]: s[1] for s in samples["kafka_fleet_group_lag_records"] if s[0]["cluster"] == "kafka4"}
    assert lag[share_group] == 15 and lag[rx_group] == 30
    assert gone_group not in lag and ahead_group not in lag
    statuses = {s[0]["group"]: s[0]["status"] for s in samples["kafka_fleet_group_status"]}
    assert statuses[ahead_group] == "offset_ahead" and statuses[gone_group] == "unknown"
    uncommitted = {s[0]["group"]: s[1] for s in samples["kafka_fleet_group_uncommitted_records"]}
    assert uncommitted[rx_group] == 80.0 and share_group not in uncommitted and f"{p}-share" not in uncommitted
