"""The lab brokers answer the group APIs faithfully: a real client (confluent-kafka's admin calls) and the product's
reader see exactly the lab's state, frozen at one instant; coordinator moves, old brokers and unasked answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from backend.kafka import protocol as P
from backend.kafka.groups import GroupsMemo, read_cluster_groups
from backend.lab.cluster import ClusterRuntime
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config

GROUPS = [
    {"name": "healthy", "topics": ["events"], "members": 2},
    {"name": "lagging", "topics": ["events", "orders"], "behaviour": "lagging", "type": "consumer", "members": 3},
    {"name": "stalled", "topics": ["orders"], "behaviour": "stalled", "client_id": "stuck-app"},
    {"name": "empty", "topics": ["orders"], "behaviour": "empty"},
    {"name": "shared", "topics": ["orders"], "type": "share"},
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """Two clusters: a 4.3 KRaft one with every kind of group, a 2.8 one (OffsetFetch one group per request)."""
    tmp = tmp_path_factory.mktemp("lab-groups")
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [
        {"name": "k43", "profile": "apache-kafka-4.3-kraft", "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
         "topics": [{"name": "events", "partitions": 4, "replication_factor": 2},
                    {"name": "orders", "partitions": 3, "replication_factor": 1}], "groups": GROUPS},
        {"name": "k28", "profile": "apache-kafka-2.8-zk", "brokers": [{"id": 101}, {"id": 102}],
         "topics": [{"name": "billing", "partitions": 2, "replication_factor": 2}],
         "groups": [{"name": f"billing-{i}", "topics": ["billing"], "members": 1} for i in range(4)]},
    ]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


def _partitions(rt: ClusterRuntime) -> dict[str, int]:
    return {t.name: t.partitions for t in rt.state.topics(rt.spec.name)}


@pytest.fixture
def frozen(lab: LabFleet) -> Iterator[dict[str, dict[str, Any]]]:
    """The k43 lab's groups pinned at one instant: their state as the lab holds it."""
    rt = lab.runtimes["k43"]
    rt.groups.freeze()
    try:
        yield rt.groups.snapshot(_partitions(rt))
    finally:
        rt.groups.unfreeze()


def _brokers(lab: LabFleet, name: str) -> list[tuple[int, str, int]]:
    return [(b.id, b.host, b.port) for b in lab.clusters[name].brokers]


def test_confluent_kafka_admin_calls_equal_the_lab_state(lab: LabFleet, frozen: dict[str, dict[str, Any]]) -> None:
    admin = AdminClient({"bootstrap.servers": lab.clusters["k43"].bootstrap})
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert not listed.errors
    consumer_groups = {g: s for g, s in frozen.items() if s["type"] != "share"}
    assert {g.group_id: (str(g.type).rsplit(".", 1)[-1].lower(), str(g.state).rsplit(".", 1)[-1].lower())
            for g in listed.valid} == {g: (s["type"], s["state"].lower()) for g, s in consumer_groups.items()}
    described = {g: f.result() for g, f in admin.describe_consumer_groups(list(consumer_groups),
                                                                          request_timeout=10).items()}
    for gid, lab_group in consumer_groups.items():
        d = described[gid]
        assert str(d.state).rsplit(".", 1)[-1].lower() == lab_group["state"].lower()
        assert d.partition_assignor == (lab_group["assignor"] if lab_group["members"] else "")
        assert sorted((m.client_id, m.host, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
                      for m in d.members) == sorted((m["client_id"], m["client_host"],
                                                     sorted(m["assignment"])) for m in lab_group["members"])
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(gid)])[gid].result()
        assert {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions} == lab_group["committed"]
        ends = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in lab_group["end"]},
                                  request_timeout=10)
        assert {(tp.topic, tp.partition): f.result().offset for tp, f in ends.items()} == lab_group["end"]


def test_the_product_reader_equals_the_lab_state_with_every_group_type(lab: LabFleet,
                                                                       frozen: dict[str, dict[str, Any]]) -> None:
    read = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10)
    assert not read.errors
    assert {g: (x.group_type, x.state, x.protocol) for g, x in read.groups.items()} == {
        g: (s["type"], s["state"], s["assignor"] if s["members"] or s["type"] != "classic" else "")
        for g, s in frozen.items()}
    for gid, lab_group in frozen.items():
        ours = read.groups[gid]
        assert sorted((m.client_id, m.client_host, m.assignment) for m in ours.members) == sorted(
            (m["client_id"], m["client_host"], tuple(sorted(m["assignment"]))) for m in lab_group["members"])
        assert read.committed.get(gid, {}) == lab_group["committed"]
    assert {tp: read.end_offsets[tp] for s in frozen.values() for tp in s["end"]} == \
           {tp: end for s in frozen.values() for tp, end in s["end"].items()}
    # batched: per coordinator one ListGroups, one describe per group kind, one OffsetFetch
    assert read.requests[P.API_OFFSET_FETCH] <= 3 and read.versions[P.API_OFFSET_FETCH] == 9
    assert read.requests[P.API_CONSUMER_GROUP_DESCRIBE] == 1 and read.requests[P.API_SHARE_GROUP_DESCRIBE] == 1


def test_an_old_broker_is_asked_one_group_per_offset_fetch(lab: LabFleet) -> None:
    read = read_cluster_groups(_brokers(lab, "k28"), timeout_s=10)
    assert not read.errors and len(read.groups) == 4
    assert read.versions[P.API_OFFSET_FETCH] < 8 and read.requests[P.API_OFFSET_FETCH] == 4
    assert read.versions[P.API_LIST_GROUPS] < 5 and {g.group_type for g in read.groups.values()} == {"classic"}
    assert all(read.committed[g] for g in read.groups)


def test_a_coordinator_that_moved_is_found_again_with_find_coordinator(lab: LabFleet,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    groups = lab.runtimes["k43"].groups
    listing = groups.list_groups
    real = groups.coordinator
    calls = {"list": 0}

    def count_lists(*args: Any, **kw: Any) -> dict[str, Any]:
        # counted when the answer is made: a broker still listing must see the group at home, or the new
        # coordinator could list it too and be asked directly, with no FindCoordinator
        out = listing(*args, **kw)
        calls["list"] += 1
        return out

    def moved(group: str, broker_ids: Any) -> int:
        # once every broker has listed its groups, "stalled" moves to the next broker
        home = real(group, broker_ids)
        if group == "stalled" and calls["list"] >= 3:
            ids = sorted(broker_ids)
            return ids[(ids.index(home) + 1) % len(ids)]
        return home

    monkeypatch.setattr(groups, "list_groups", count_lists)
    monkeypatch.setattr(groups, "coordinator", moved)
    read = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10)
    assert read.requests[P.API_FIND_COORDINATOR] == 1
    stalled = read.groups["stalled"]
    assert stalled.described and stalled.error is None and len(stalled.members) == 2
    assert stalled.coordinator == moved("stalled", [1, 2, 3]) and read.committed["stalled"]


def test_answers_to_questions_not_asked_are_dropped(lab: LabFleet, monkeypatch: pytest.MonkeyPatch) -> None:
    groups = lab.runtimes["k43"].groups
    describe = groups.describe_groups
    list_offsets = groups.list_offsets

    def with_extra_group(body: dict[str, Any], *args: Any) -> dict[str, Any]:
        out = describe(body, *args)
        out["groups"].append({**out["groups"][0], "group_id": "never-asked", "error_code": 0})
        return out

    def with_extra_partition(body: dict[str, Any], *args: Any) -> dict[str, Any]:
        out = list_offsets(body, *args)
        if out["topics"]:
            out["topics"][0]["partitions"].append({"partition_index": 999, "error_code": 0, "timestamp": -1,
                                                   "offset": 7, "leader_epoch": 0, "old_style_offsets": [7]})
        return out

    monkeypatch.setattr(groups, "describe_groups", with_extra_group)
    monkeypatch.setattr(groups, "list_offsets", with_extra_partition)
    read = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10)
    assert "never-asked" not in read.groups
    assert not any(p == 999 for _t, p in read.end_offsets)


def test_a_stopped_broker_is_a_broker_error_and_its_groups_move(lab: LabFleet, tmp_path: Path) -> None:
    assert tmp_path.exists()
    lab.stop_broker("k43", 3)
    try:
        read = read_cluster_groups(_brokers(lab, "k43"), timeout_s=3)
        assert "broker 3" in read.errors
        assert set(read.groups) == {g["name"] for g in GROUPS}  # every group has a live coordinator again
    finally:
        lab.start_broker("k43", 3)


def test_an_unchanged_offset_fetch_answer_is_reused_and_a_changed_one_is_decoded_again(lab: LabFleet) -> None:
    rt = lab.runtimes["k43"]
    memo = GroupsMemo()
    at = rt.groups.freeze()
    try:
        first = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10, memo=memo)
        again = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10, memo=memo)
        assert not first.errors and first.committed == again.committed
        # the same bytes: every ListGroups, OffsetFetch and describe answer taken from the memo, the same objects
        asked = sum(again.requests[k] for k in (P.API_LIST_GROUPS, P.API_OFFSET_FETCH, P.API_DESCRIBE_GROUPS,
                                                P.API_CONSUMER_GROUP_DESCRIBE, P.API_SHARE_GROUP_DESCRIBE))
        assert first.reused == 0 and again.reused == asked
        assert all(again.committed[g] is first.committed[g] for g in again.committed)
        rt.groups.freeze(at + 30)  # 30 s later: the healthy and lagging groups committed further
        later = read_cluster_groups(_brokers(lab, "k43"), timeout_s=10, memo=memo)
        state = rt.groups.snapshot(_partitions(rt))
        assert {g: later.committed.get(g, {}) for g in state} == {g: s["committed"] for g, s in state.items()}
        assert later.committed["healthy"] != first.committed["healthy"]  # decoded again, not hidden by the memo
        assert later.committed["stalled"] == first.committed["stalled"]
    finally:
        rt.groups.unfreeze()
