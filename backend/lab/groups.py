"""Consumer groups of a lab cluster: synthetic groups whose offsets move with the clock, answered faithfully.

Each partition of a lab topic has a log end offset that grows at its own rate (records per second), continuous
across lab restarts (it counts from a fixed epoch). A group reads some topics with a behaviour:

- ``healthy``: commits keep up (its lag is 0, one second in four 1);
- ``lagging``: its members consume at 60 % of the produce rate, so the lag grows steadily;
- ``stalled``: members, and a committed offset that never moves while the log grows;
- ``empty``: no members, offsets committed some time ago (an empty group with lag);
- ``caught_up``: like healthy, for a group that was lagging or stalled and caught up (tests switch to it).

The brokers answer FindCoordinator, ListGroups, DescribeGroups (classic groups: the consumer protocol's
subscription and assignment bytes), ConsumerGroupDescribe (consumer groups, KIP-848), ShareGroupDescribe (share
groups, KIP-932), DescribeShareGroupOffsets (a share group's start offsets and lag), OffsetFetch (v1-v10, batched
from v8) and ListOffsets (latest, earliest, max timestamp; only on
the partition's leader) the way Apache Kafka 4.x does, so real clients (confluent-kafka's admin calls) accept them.
``clock`` can be pinned (``freeze``) so a test compares a client's answers with the lab's state at one instant.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.kafka import protocol as P
from backend.kafka.wire import Writer

EPOCH = 1_704_067_200.0  # 2024-01-01T00:00:00Z: log end offsets count from here, so they survive restarts
IDLE_SINCE = EPOCH + 86_400.0  # an idle topic (lab.toml `idle = true`) got no records after this instant
BEHAVIOURS = ("healthy", "lagging", "stalled", "empty", "caught_up")
GROUP_TYPES = ("classic", "consumer", "share")
LAGGING_SHARE = 0.6
STALLED_BEHIND_S = 60.0  # a stalled or empty group's commit is this many seconds of production behind at start
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


@dataclass(frozen=True)
class GroupSpec:
    """One synthetic group of a lab cluster (lab.toml `[[clusters.groups]]`)."""

    name: str
    topics: tuple[str, ...]
    type: str = "classic"
    behaviour: str = "healthy"
    members: int = 2
    client_id: str | None = None  # default: the group name
    assignor: str | None = None  # default: range (classic), uniform (consumer), simple (share)
    host_prefix: str = "10.0.0."


@dataclass
class LabGroup:
    """A group at run time."""

    spec: GroupSpec
    behaviour: str
    started: float  # wall clock when this behaviour began
    frozen_commit: dict[tuple[str, int], int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The group id."""
        return self.spec.name


def _rate(cluster: str, topic: str, partition: int) -> float:
    """Records per second of one partition (2-9, stable per partition)."""
    digest = hashlib.blake2b(f"{cluster}\x1f{topic}\x1f{partition}".encode(), digest_size=2).digest()
    return 2.0 + digest[0] % 8


def _member_id(group: str, client_id: str, i: int) -> str:
    return f"{client_id}-{uuid.uuid5(uuid.NAMESPACE_URL, f'{group}/{i}')}"


def encode_subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the member's topics, no user data."""
    w = Writer()
    w.int16(0)
    w.array_len(len(topics), False, False)
    for t in topics:
        w.string(t)
    w.bytes_(None, nullable=True)
    return w.getvalue()


def encode_assignment(parts: Sequence[tuple[str, int]]) -> bytes:
    """ConsumerProtocolAssignment v0: the member's partitions by topic, no user data."""
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    w = Writer()
    w.int16(0)
    w.array_len(len(by_topic), False, False)
    for t, ps in by_topic.items():
        w.string(t)
        w.array_len(len(ps), False, False)
        for p in ps:
            w.int32(p)
    w.bytes_(None, nullable=True)
    return w.getvalue()


class LabGroups:
    """The groups of one lab cluster and the offsets of its topics, as functions of the clock."""

    def __init__(self, cluster: str, specs: Sequence[GroupSpec], *, clock: Callable[[], float] = time.time,
                 idle_topics: frozenset[str] = frozenset()) -> None:
        """Start every group's behaviour now (idle_topics: topics whose log end offsets no longer grow)."""
        self.cluster = cluster
        self.idle_topics = idle_topics
        self.clock = clock
        self._lock = threading.RLock()
        now = clock()
        self.groups: dict[str, LabGroup] = {s.name: LabGroup(s, s.behaviour, now) for s in specs}
        self.started = now

    # ------------------------------------------------------------------ the model

    def freeze(self, at: float | None = None) -> float:
        """Pin the clock (tests): every answer then describes one instant. Returns it."""
        pinned = self.clock() if at is None else at
        self.clock = lambda: pinned
        return pinned

    def unfreeze(self) -> None:
        """Follow the wall clock again."""
        self.clock = time.time

    def set_behaviour(self, group: str, behaviour: str) -> None:
        """Switch a group's behaviour from now on (a stalled group that catches up, a consumer that stops)."""
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; known: {', '.join(BEHAVIOURS)}")
        with self._lock:
            g = self.groups[group]
            g.frozen_commit = {}
            g.behaviour, g.started = behaviour, self.clock()

    def end_offset(self, topic: str, partition: int, at: float | None = None) -> int:
        """The log end offset of a partition at a time (now by default)."""
        t = self.clock() if at is None else at
        if topic in self.idle_topics:
            t = min(t, IDLE_SINCE)
        return int(_rate(self.cluster, topic, partition) * max(0.0, t - EPOCH))

    def committed(self, g: LabGroup, topic: str, partition: int, now: float) -> int:
        """A group's committed offset of one partition at `now`."""
        end = self.end_offset(topic, partition, now)
        if g.behaviour in ("healthy", "caught_up"):
            if topic in self.idle_topics:
                return end  # nothing new to read: committed at the end, and it stays there
            return max(0, end - (1 if int(now) % 4 == 0 else 0))  # at the end, one record behind one second in four
        start = self.end_offset(topic, partition, g.started)
        if g.behaviour == "lagging":
            consumed = int(LAGGING_SHARE * _rate(self.cluster, topic, partition) * max(0.0, now - g.started))
            return min(end, max(0, start + consumed - int(_rate(self.cluster, topic, partition) * 5)))
        key = (topic, partition)
        if key not in g.frozen_commit:
            behind = int(_rate(self.cluster, topic, partition) * STALLED_BEHIND_S)
            g.frozen_commit[key] = max(0, start - behind)
        return g.frozen_commit[key]

    def has_members(self, g: LabGroup) -> bool:
        """Whether the group has members now (empty groups have none)."""
        return g.behaviour != "empty" and g.spec.members > 0

    def state(self, g: LabGroup) -> str:
        """The group's state as its coordinator names it."""
        return "Stable" if self.has_members(g) else "Empty"

    def partitions(self, g: LabGroup, topic_partitions: dict[str, int]) -> list[tuple[str, int]]:
        """The partitions a group reads (of its topics that exist)."""
        return [(t, p) for t in g.spec.topics for p in range(topic_partitions.get(t, 0))]

    def members(self, g: LabGroup, topic_partitions: dict[str, int]) -> list[dict[str, Any]]:
        """The members with their assignment (round robin over the group's partitions)."""
        if not self.has_members(g):
            return []
        client = g.spec.client_id or g.name
        parts = self.partitions(g, topic_partitions)
        n = g.spec.members
        return [{"member_id": _member_id(g.name, client, i), "client_id": client,
                 "client_host": f"/{g.spec.host_prefix}{10 + i}", "instance_id": None,
                 "assignment": [tp for j, tp in enumerate(parts) if j % n == i],
                 "topics": list(g.spec.topics)} for i in range(n)]

    def assignor(self, g: LabGroup) -> str:
        """The group's assignor (classic protocol name or server assignor)."""
        return g.spec.assignor or {"classic": "range", "consumer": "uniform", "share": "simple"}[g.spec.type]

    # ------------------------------------------------------------------ answers

    def coordinator(self, group: str, broker_ids: Sequence[int]) -> int:
        """The broker that coordinates a group (a stable hash of its id over the alive brokers)."""
        ids = sorted(broker_ids)
        digest = hashlib.blake2b(group.encode("utf-8", "surrogatepass"), digest_size=4).digest()
        return ids[int.from_bytes(digest, "big") % len(ids)] if ids else -1

    def find_coordinator(self, body: dict[str, Any], version: int, alive: dict[int, tuple[str, int]]
                         ) -> dict[str, Any]:
        """FindCoordinator for group keys (key type 0); other key types get COORDINATOR_NOT_AVAILABLE."""
        keys = body.get("coordinator_keys") or [] if version >= 4 else [body.get("key") or ""]
        group_type = body.get("key_type", 0) == 0
        rows = []
        for key in keys:
            node = self.coordinator(key, list(alive)) if group_type and alive else -1
            host, port = alive.get(node, ("", -1))
            code = P.ERROR_NONE if node >= 0 else P.COORDINATOR_NOT_AVAILABLE
            rows.append({"key": key, "node_id": node, "host": host, "port": port, "error_code": code,
                         "error_message": None if code == P.ERROR_NONE else "not a group key"})
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": rows}
        row = rows[0]
        return {"throttle_time_ms": 0, "error_code": row["error_code"], "error_message": row["error_message"],
                "node_id": row["node_id"], "host": row["host"], "port": row["port"]}

    def list_groups(self, body: dict[str, Any], version: int, broker_id: int, alive: Sequence[int]
                    ) -> dict[str, Any]:
        """ListGroups: the groups this broker coordinates (with state from v4, type from v5), filters honoured."""
        states = {s.lower() for s in body.get("states_filter") or ()}
        types = {t.lower() for t in body.get("types_filter") or ()}
        rows = []
        with self._lock:
            for g in sorted(self.groups.values(), key=lambda g: g.name):
                if self.coordinator(g.name, alive) != broker_id:
                    continue
                if version < 5 and g.spec.type != "classic":
                    continue  # a broker answering an old ListGroups lists the groups that version can name
                state = self.state(g)
                if states and state.lower() not in states:
                    continue
                if types and g.spec.type not in types:
                    continue
                rows.append({"group_id": g.name, "protocol_type": "share" if g.spec.type == "share" else "consumer",
                             "group_state": state, "group_type": g.spec.type})
        return {"throttle_time_ms": 0, "error_code": P.ERROR_NONE, "groups": rows}

    def _not_coordinator(self, group: str, broker_id: int, alive: Sequence[int]) -> bool:
        return self.coordinator(group, alive) != broker_id

    def describe_groups(self, body: dict[str, Any], broker_id: int, alive: Sequence[int],
                        topic_partitions: dict[str, int]) -> dict[str, Any]:
        """DescribeGroups: classic groups in full; a KIP-848 or share group is 'not a classic group', as 4.x says."""
        out = []
        with self._lock:
            for name in body.get("groups") or ():
                g = self.groups.get(name)
                base = {"group_id": name, "group_state": "", "protocol_type": "", "protocol_data": "", "members": [],
                        "error_message": None}
                if self._not_coordinator(name, broker_id, alive):
                    out.append({**base, "error_code": P.NOT_COORDINATOR})
                elif g is None:
                    out.append({**base, "error_code": P.ERROR_NONE, "group_state": "Dead"})
                elif g.spec.type != "classic":
                    out.append({**base, "error_code": P.GROUP_ID_NOT_FOUND,
                                "error_message": f"Group {name} is not a classic group."})
                else:
                    members = [{"member_id": m["member_id"], "group_instance_id": None, "client_id": m["client_id"],
                                "client_host": m["client_host"],
                                "member_metadata": encode_subscription(m["topics"]),
                                "member_assignment": encode_assignment(m["assignment"])}
                               for m in self.members(g, topic_partitions)]
                    out.append({**base, "error_code": P.ERROR_NONE, "group_state": self.state(g),
                                "protocol_type": "consumer", "protocol_data": self.assignor(g) if members else "",
                                "members": members})
        return {"throttle_time_ms": 0, "groups": out}

    def describe_new_groups(self, body: dict[str, Any], broker_id: int, alive: Sequence[int],
                            topic_partitions: dict[str, int], topic_ids: dict[str, str], kind: str,
                            version: int) -> dict[str, Any]:
        """ConsumerGroupDescribe (kind consumer) or ShareGroupDescribe (kind share)."""
        out = []
        with self._lock:
            for name in body.get("group_ids") or ():
                g = self.groups.get(name)
                base: dict[str, Any] = {"group_id": name, "error_message": None, "group_state": "", "group_epoch": 0,
                                        "assignment_epoch": 0, "assignor_name": "", "members": []}
                if self._not_coordinator(name, broker_id, alive):
                    out.append({**base, "error_code": P.NOT_COORDINATOR})
                    continue
                if g is None or g.spec.type != kind:
                    out.append({**base, "error_code": P.GROUP_ID_NOT_FOUND,
                                "error_message": f"Group {name} not found." if g is None
                                else f"Group {name} is not a {kind} group."})
                    continue
                members = []
                for m in self.members(g, topic_partitions):
                    by_topic: dict[str, list[int]] = {}
                    for t, p in m["assignment"]:
                        by_topic.setdefault(t, []).append(p)
                    assignment = {"topic_partitions": [{"topic_id": topic_ids.get(t, P.ZERO_UUID), "topic_name": t,
                                                        "partitions": ps} for t, ps in by_topic.items()]}
                    members.append({"member_id": m["member_id"], "instance_id": None, "rack_id": None,
                                    "member_epoch": 1, "client_id": m["client_id"], "client_host": m["client_host"],
                                    "subscribed_topic_names": m["topics"], "subscribed_topic_regex": None,
                                    "assignment": assignment, "target_assignment": assignment, "member_type": 1})
                state = "Stable" if members else "Empty"
                out.append({**base, "error_code": P.ERROR_NONE, "group_state": state, "group_epoch": 1,
                            "assignment_epoch": 1, "assignor_name": self.assignor(g), "members": members})
        return {"throttle_time_ms": 0, "groups": out}

    def _fetch_one(self, name: str, topics: list[dict[str, Any]] | None, broker_id: int, alive: Sequence[int],
                   topic_partitions: dict[str, int], id_to_name: dict[str, str], version: int
                   ) -> tuple[int, list[dict[str, Any]]]:
        if self._not_coordinator(name, broker_id, alive):
            return P.NOT_COORDINATOR, []
        g = self.groups.get(name)
        now = self.clock()
        committed: dict[str, dict[int, int]] = {}
        if g is not None and g.spec.type != "share":
            for t, p in self.partitions(g, topic_partitions):
                committed.setdefault(t, {})[p] = self.committed(g, t, p, now)
        by_id = version >= 10
        rows = []
        if topics is None:
            asked = [(t, sorted(ps)) for t, ps in sorted(committed.items())]
        else:
            asked = []
            for item in topics:
                name_t = id_to_name.get(item.get("topic_id", ""), "") if by_id else (item.get("name") or "")
                asked.append((name_t, list(item.get("partition_indexes") or ())))
        for topic, parts in asked:
            known = committed.get(topic, {})
            prows = [{"partition_index": p, "committed_offset": known.get(p, -1), "committed_leader_epoch": -1,
                      "metadata": "" if p in known else None, "error_code": P.ERROR_NONE} for p in parts]
            row: dict[str, Any] = {"name": topic, "partitions": prows}
            if by_id:
                row["topic_id"] = next((i for i, n in id_to_name.items() if n == topic), P.ZERO_UUID)
            rows.append(row)
        return P.ERROR_NONE, rows

    def offset_fetch(self, body: dict[str, Any], version: int, broker_id: int, alive: Sequence[int],
                     topic_partitions: dict[str, int], topic_ids: dict[str, str]) -> dict[str, Any]:
        """OffsetFetch: one group (v1-v7) or many (v8+); topics null = every committed partition."""
        id_to_name = {i: n for n, i in topic_ids.items()}
        with self._lock:
            if version < 8:
                code, rows = self._fetch_one(body.get("group_id") or "", body.get("topics"), broker_id, alive,
                                             topic_partitions, id_to_name, version)
                return {"throttle_time_ms": 0, "topics": rows, "error_code": code}
            groups = []
            for item in body.get("groups") or ():
                code, rows = self._fetch_one(item.get("group_id") or "", item.get("topics"), broker_id, alive,
                                             topic_partitions, id_to_name, version)
                groups.append({"group_id": item.get("group_id") or "", "topics": rows, "error_code": code})
            return {"throttle_time_ms": 0, "groups": groups}

    def share_offsets(self, body: dict[str, Any], version: int, broker_id: int, alive: Sequence[int],
                      topic_partitions: dict[str, int], topic_ids: dict[str, str]) -> dict[str, Any]:
        """DescribeShareGroupOffsets (KIP-932): a share group's start offset per partition, with (v1) its lag; the
        start offset follows the group's behaviour as a committed offset would."""
        now = self.clock()
        out = []
        with self._lock:
            for item in body.get("groups") or ():
                name = item.get("group_id") or ""
                base: dict[str, Any] = {"group_id": name, "topics": [], "error_message": None}
                if self._not_coordinator(name, broker_id, alive):
                    out.append({**base, "error_code": P.NOT_COORDINATOR})
                    continue
                g = self.groups.get(name)
                if g is None or g.spec.type != "share":
                    out.append({**base, "error_code": P.GROUP_ID_NOT_FOUND,
                                "error_message": f"Group {name} is not a share group."})
                    continue
                by_topic: dict[str, list[dict[str, Any]]] = {}
                for (t, p), (start, lag) in self._share_offsets(g, topic_partitions, now).items():
                    by_topic.setdefault(t, []).append({"partition_index": p, "start_offset": start, "leader_epoch": 0,
                                                       "lag": lag if version >= 1 else -1,
                                                       "error_code": P.ERROR_NONE, "error_message": None})
                out.append({**base, "error_code": P.ERROR_NONE, "topics": [
                    {"topic_name": t, "topic_id": topic_ids.get(t, P.ZERO_UUID), "partitions": ps}
                    for t, ps in sorted(by_topic.items())]})
        return {"throttle_time_ms": 0, "groups": out}

    def _share_offsets(self, g: LabGroup, topic_partitions: dict[str, int], now: float
                       ) -> dict[tuple[str, int], tuple[int, int]]:
        out = {}
        for t, p in self.partitions(g, topic_partitions):
            start = self.committed(g, t, p, now)
            out[(t, p)] = (start, max(0, self.end_offset(t, p, now) - start))
        return out

    def list_offsets(self, body: dict[str, Any], version: int, leaders: dict[tuple[str, int], int],
                     broker_id: int) -> dict[str, Any]:
        """ListOffsets on the partitions this broker leads (others: NOT_LEADER_OR_FOLLOWER)."""
        now = self.clock()
        topics = []
        for t in body.get("topics") or ():
            name = t.get("name") or ""
            rows = []
            for p in t.get("partitions") or ():
                index = int(p.get("partition_index", 0))
                leader = leaders.get((name, index))
                row: dict[str, Any] = {"partition_index": index, "timestamp": -1, "offset": -1, "leader_epoch": 0,
                                       "old_style_offsets": []}
                if leader is None:
                    row["error_code"] = P.UNKNOWN_TOPIC_OR_PARTITION
                elif leader != broker_id:
                    row["error_code"] = P.NOT_LEADER_OR_FOLLOWER
                else:
                    row["error_code"] = P.ERROR_NONE
                    end = self.end_offset(name, index, now)
                    stamp = p.get("timestamp", LATEST)
                    if stamp == EARLIEST:
                        row["offset"] = 0
                    elif stamp == MAX_TIMESTAMP:
                        row.update(offset=max(0, end - 1), timestamp=int(now * 1000))
                    elif stamp == LATEST:
                        row["offset"] = end
                    else:  # a time: the first offset written at or after it
                        at = max(EPOCH, stamp / 1000)
                        row.update(offset=min(end, self.end_offset(name, index, at)), timestamp=stamp)
                    row["old_style_offsets"] = [row["offset"]]
                rows.append(row)
            topics.append({"name": name, "partitions": rows})
        return {"throttle_time_ms": 0, "topics": topics}

    def snapshot(self, topic_partitions: dict[str, int]) -> dict[str, dict[str, Any]]:
        """What the lab holds right now, per group: type, state, assignor, members, committed and end offsets."""
        now = self.clock()
        out = {}
        with self._lock:
            for g in self.groups.values():
                parts = self.partitions(g, topic_partitions)
                out[g.name] = {
                    "type": g.spec.type, "state": self.state(g), "assignor": self.assignor(g),
                    "members": self.members(g, topic_partitions),
                    "committed": {tp: start for tp, (start, _lag) in self._share_offsets(g, topic_partitions,
                                                                                          now).items()}
                    if g.spec.type == "share" else {tp: self.committed(g, tp[0], tp[1], now) for tp in parts},
                    "end": {tp: self.end_offset(tp[0], tp[1], now) for tp in parts},
                }
        return out


def synthetic_specs(n: int, topics: Sequence[str], *, prefix: str = "svc") -> list[GroupSpec]:
    """n healthy groups (benchmarks): each reads one topic, one member, every 4th on the consumer protocol."""
    if not topics:
        return []
    return [GroupSpec(name=f"{prefix}-{i:05d}", topics=(topics[i % len(topics)],),
                      type="consumer" if i % 4 == 3 else "classic", behaviour="healthy", members=1,
                      client_id=f"{prefix}-{i:05d}-client") for i in range(n)]
