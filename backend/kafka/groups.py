"""Consumer groups of one cluster through the project's codec, read-only: who reads what and how far behind.

One connection per broker (TLS, SASL and ApiVersions as the probe does them), kept for the whole read:

1. ListGroups to every broker (each lists the groups it coordinates; v5 brokers say each group's type:
   classic, consumer (KIP-848), share (KIP-932), streams (KIP-1071); older brokers have classic groups only);
2. on each coordinator, its groups described in batches: DescribeGroups for classic groups (members with their
   assignment decoded from the consumer protocol), ConsumerGroupDescribe for consumer groups, ShareGroupDescribe
   for share groups, each where the broker offers it; then their committed offsets, OffsetFetch v8+ batched
   across groups (one group per request on older brokers), and share groups' start offsets and lag with
   DescribeShareGroupOffsets (KIP-932; v1 carries the lag the coordinator computes, KIP-1226);
3. a group whose coordinator moved (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS...) is looked up again with
   FindCoordinator and asked once more;
4. Metadata for the topics the groups read (leaders, topic ids, which topics exist), then ListOffsets (latest,
   read_uncommitted, as kafka-consumer-groups.sh asks) to each partition leader.

Answers are checked against the questions (backend.kafka.answers.only_requested): a group, topic or partition the
request did not ask for is dropped, and the read's errors say so.
A broker or group that fails is named in ``GroupsRead.errors``; the rest of the read goes on. Answers to a
describe or OffsetFetch batch identical to the last read's (same bytes) are not decoded again (``GroupsMemo``):
idle groups cost a digest per batch. OffsetFetch v8/v9 answers, the largest a read gets (one entry per committed
partition), are decoded straight into offsets (``decode_offset_fetch_groups``), not into a dict per partition.
"""

from __future__ import annotations

import hashlib
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from backend.kafka import probe
from backend.kafka import protocol as P
from backend.kafka.answers import only_requested
from backend.kafka.wire import Reader

CLIENT_ID = "fleetview-groups"
DESCRIBE_BATCH = 500  # groups per DescribeGroups / ConsumerGroupDescribe / ShareGroupDescribe request
OFFSET_FETCH_BATCH = 200  # groups per OffsetFetch v8+ request
LIST_OFFSETS_BATCH = 5_000  # partitions per ListOffsets request
METADATA_BATCH = 2_000  # topics per Metadata request
MAX_GROUPS_RESPONSE_BYTES = 64 * 1024 * 1024
MAX_GROUPS_ELEMENTS = MAX_GROUPS_RESPONSE_BYTES // 4
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
RETRIABLE = frozenset({P.NOT_COORDINATOR, P.COORDINATOR_LOAD_IN_PROGRESS, P.COORDINATOR_NOT_AVAILABLE})
MEMBER_TYPES = {0: "classic", 1: "consumer"}
API_LABELS = {P.API_DESCRIBE_GROUPS: "DescribeGroups", P.API_CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
              P.API_SHARE_GROUP_DESCRIBE: "ShareGroupDescribe"}
SHARE_OFFSETS_BATCH = 200  # share groups per DescribeShareGroupOffsets request  # ConsumerGroupDescribe v1 MemberType (-1: unknown)
GROUP_TYPES = ("classic", "consumer", "share", "streams")

# The versions this reader asks for: the codec's, capped where a newer version changes what it must send.
# OffsetFetch v10 names topics by id only (the answer too), so v9 is the highest that names them.
OUR_MAX = {P.API_OFFSET_FETCH: 9, P.API_METADATA: 12}


@dataclass(frozen=True, slots=True)
class Member:
    """One member of a group as its coordinator describes it."""

    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()  # (topic, partition), sorted
    subscribed: tuple[str, ...] = ()
    member_type: str | None = None  # classic / consumer for KIP-848 groups with classic members, else None
    subscribed_regex: str | None = None  # a KIP-848 member's subscription pattern (KIP-848 regular expressions)


@dataclass(slots=True)
class Group:
    """One group: what ListGroups said and, when described, its members and assignor."""

    group_id: str
    coordinator: int
    protocol_type: str = ""
    state: str = ""
    group_type: str = "unknown"  # classic / consumer / share / streams / unknown
    protocol: str = ""  # the assignor: a classic group's chosen protocol, a KIP-848 group's AssignorName
    members: tuple[Member, ...] = ()
    described: bool = False
    error: str | None = None


@dataclass
class GroupsRead:
    """Everything one read of a cluster's groups found; a failure is data (errors), never an exception."""

    groups: dict[str, Group] = field(default_factory=dict)
    # group -> (topic, p) -> offset; read-only: an unchanged answer hands back the last read's dicts. A share group's
    # are its share-partition start offsets (DescribeShareGroupOffsets), as kafka-share-groups.sh shows them.
    committed: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    # share group -> (topic, p) -> lag as its coordinator computes it (DescribeShareGroupOffsets v1, KIP-1226)
    share_lags: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    # the log start of partitions a group is assigned but has committed nothing on (its records wait uncounted)
    start_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)  # topics that exist now, with their ids
    missing_topics: set[str] = field(default_factory=set)  # topics offsets were committed to that do not exist
    errors: dict[str, str] = field(default_factory=dict)  # "broker 1", "group g", "end offsets" ...
    listed: int = 0  # groups the brokers listed
    skipped: list[str] = field(default_factory=list)  # listed beyond the budget: not described, no offsets
    brokers_answered: int = 0
    versions: dict[int, int] = field(default_factory=dict)  # api key -> version spoken (the lowest seen)
    requests: Counter[int] = field(default_factory=Counter)  # api key -> requests sent
    decoded: int = 0
    reused: int = 0
    duration_ms: float = 0.0


class GroupsMemo:
    """Per (broker, api, batch), the last answer's digest and what was parsed from it; per group, its last offsets.

    Groups whose committed offsets did not move at the last read are asked together ("quiet" batches first), so
    the answers of a fleet's idle groups repeat byte for byte even while other groups commit; and a group whose
    offsets are equal to the last read's gets the same dict back (compared by identity further on).
    """

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._memos: dict[bytes, tuple[probe.ResponseMemo, Any]] = {}
        self._used: set[bytes] = set()
        self._offsets: dict[str, dict[tuple[str, int], int]] = {}  # the last read's, per group
        self._quiet: set[str] = set()  # groups whose offsets did not move at the last read
        self._next_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self._next_quiet: set[str] = set()

    def is_quiet(self, group_id: str) -> bool:
        """Whether the group's committed offsets did not move at the last read."""
        return group_id in self._quiet

    def same_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The last read's dict when equal to these offsets (the group is quiet), else these (it moved)."""
        with self._lock:
            last = self._offsets.get(group_id)
            if last is not None and (last is offsets or last == offsets):
                offsets = last
                self._next_quiet.add(group_id)
            self._next_offsets[group_id] = offsets
            return offsets

    def get(self, key: bytes) -> tuple[probe.ResponseMemo, Any]:
        """The memo of one batch (created empty on first use)."""
        with self._lock:
            self._used.add(key)
            found = self._memos.get(key)
            if found is None:
                found = (probe.ResponseMemo(), None)
                self._memos[key] = found
            return found

    def put(self, key: bytes, memo: probe.ResponseMemo, parsed: Any) -> None:
        """Remember what a freshly decoded answer gave."""
        with self._lock:
            self._memos[key] = (memo, parsed)

    def sweep(self) -> None:
        """Forget the batches the last read did not ask (groups gone, batches moved); this read's offsets are next
        read's "last"."""
        with self._lock:
            for key in [k for k in self._memos if k not in self._used]:
                del self._memos[key]
            self._used = set()
            self._offsets, self._next_offsets = self._next_offsets, {}
            self._quiet, self._next_quiet = self._next_quiet, set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._memos)


def batch_key(broker_id: int, api_key: int, version: int, names: Sequence[str]) -> bytes:
    """The memo key of one request: broker, api, version and the names asked."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{broker_id}|{api_key}|{version}".encode())
    for name in names:
        digest.update(b"\x1f" + name.encode("utf-8", "surrogatepass"))
    return digest.digest()


# ------------------------------------------------------------------- consumer protocol (classic groups)


def _topic_partitions(r: Reader) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    n = r.array_len(False, False, 6) or 0
    for _ in range(n):
        topic = r.string() or ""
        m = r.array_len(False, False, 4) or 0
        out.extend((topic, r.int32()) for _ in range(m))
    return out


def decode_assignment(data: bytes | None) -> tuple[tuple[str, int], ...]:
    """ConsumerProtocolAssignment (any version; later versions' extra bytes ignored, as Kafka does) -> partitions."""
    if not data:
        return ()
    r = Reader(data, max_elements=P.MAX_SMALL_RESPONSE_ELEMENTS)
    r.int16()  # version: v0-v3 share the partitions' layout
    return tuple(sorted(_topic_partitions(r)))


def decode_subscription(data: bytes | None) -> tuple[tuple[str, ...], str | None]:
    """ConsumerProtocolSubscription -> (subscribed topics, rack id (v3+) or None)."""
    if not data:
        return (), None
    r = Reader(data, max_elements=P.MAX_SMALL_RESPONSE_ELEMENTS)
    version = r.int16()
    n = r.array_len(False, False, 2) or 0
    topics = tuple(r.string() or "" for _ in range(n))
    rack = None
    if version >= 1:
        r.bytes_(nullable=True)  # user data
        _topic_partitions(r)  # owned partitions
        if version >= 2:
            r.int32()  # generation
        if version >= 3:
            rack = r.string(nullable=True)
    return topics, rack


# ------------------------------------------------------------------ OffsetFetch v8/v9 answers, decoded directly

_PARTITION_HEAD = struct.Struct(">iqi")  # partition_index, committed_offset, committed_leader_epoch
_INT16 = struct.Struct(">h")
OffsetsOfGroup = tuple[int, dict[tuple[str, int], int], int]  # error code, (topic, partition) -> offset, failed


def _struct_array(r: Reader, min_size: int, extra_fields: int) -> int:
    """A compact array of structs' count; its elements weigh on the budget as the generic codec weighs them."""
    n = r.array_len(True, False, min_size) or 0
    if extra_fields and r.budget is not None:
        r.spend(n * extra_fields, r.pos)
    return n


def decode_offset_fetch_groups(payload: bytes, version: int, *, max_elements: int | None = None,
                               deadline: float | None = None) -> list[tuple[str, OffsetsOfGroup]]:
    """An OffsetFetch v8/v9 answer (the frame's payload: correlation id first) -> [(group id, offsets of it)].

    The same bytes as the generic codec reads (and the same checks: bounds, element budget, deadline, UTF-8, every
    byte consumed), without building a dict per partition: a group's offsets are the partitions answered without an
    error and with an offset >= 0; ``failed`` counts the partitions answered with an error.
    """
    if version not in (8, 9):
        raise P.ProtocolError(f"OffsetFetch v{version} is not decoded here")
    r = Reader(payload, max_elements=max_elements, deadline=deadline)
    r.int32()  # correlation id (the connection checked it)
    r.tagged_fields()  # response header v1
    r.int32()  # throttle_time_ms
    buf, head, int16 = payload, _PARTITION_HEAD, _INT16
    out: list[tuple[str, OffsetsOfGroup]] = []
    for _g in range(_struct_array(r, 5, 2)):
        group_id = r.compact_string() or ""
        offsets: dict[tuple[str, int], int] = {}
        failed = 0
        for _t in range(_struct_array(r, 3, 1)):
            topic = r.compact_string() or ""
            for _p in range(_struct_array(r, 20, 4)):
                index, committed, _epoch = head.unpack_from(buf, r.take(16, "partition"))
                r.compact_string(nullable=True)  # metadata
                code = int16.unpack_from(buf, r.take(2, "error_code"))[0]
                r.tagged_fields()
                if code:
                    failed += 1
                elif committed >= 0:
                    offsets[(topic, index)] = committed
            r.tagged_fields()
        code = r.int16()
        r.tagged_fields()
        out.append((group_id, (code, offsets, failed)))
    r.tagged_fields()
    if r.remaining():
        raise P.ProtocolError(f"{r.remaining()} bytes left after OffsetFetch v{version}")
    return out


def _classic_member(raw: dict[str, Any], protocol_type: str) -> Member:
    assignment: tuple[tuple[str, int], ...] = ()
    subscribed: tuple[str, ...] = ()
    rack = None
    if protocol_type == "consumer":  # other protocol types (connect, ...) carry their own formats
        try:
            assignment = decode_assignment(raw.get("member_assignment"))
            subscribed, rack = decode_subscription(raw.get("member_metadata"))
        except P.ProtocolError:
            assignment, subscribed = (), ()
    return Member(member_id=raw.get("member_id") or "", client_id=raw.get("client_id") or "",
                  client_host=raw.get("client_host") or "", instance_id=raw.get("group_instance_id"),
                  rack=rack, assignment=assignment, subscribed=subscribed)


def _new_member(raw: dict[str, Any]) -> Member:
    parts = [(tp.get("topic_name") or "", p) for tp in (raw.get("assignment") or {}).get("topic_partitions") or ()
             for p in tp.get("partitions") or ()]
    return Member(member_id=raw.get("member_id") or "", client_id=raw.get("client_id") or "",
                  client_host=raw.get("client_host") or "", instance_id=raw.get("instance_id"),
                  rack=raw.get("rack_id"), assignment=tuple(sorted(parts)),
                  subscribed=tuple(raw.get("subscribed_topic_names") or ()),
                  member_type=MEMBER_TYPES.get(raw.get("member_type", -1)),
                  subscribed_regex=raw.get("subscribed_topic_regex") or None)


def _error(code: int, message: str | None = None) -> str:
    return P.error_name(code) + (f": {message}" if message else "")


# ------------------------------------------------------------------------------- one broker's session


class _Broker:
    """One broker's read-only connection for the whole read (its requests run one after the other)."""

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        self.id, self.host, self.port = broker_id, host, port
        self.sock: socket.socket | None = None
        self.conn: Any = None
        self.offered: dict[int, tuple[int, int]] = {}
        self.error: str | None = None
        self.lock = threading.Lock()

    def version(self, api_key: int) -> int | None:
        """The highest version both sides speak, or None."""
        offered = self.offered.get(api_key)
        if offered is None:
            return None
        lo, hi = P.supported_versions(api_key)
        hi = min(hi, OUR_MAX.get(api_key, hi))
        version = min(offered[1], hi)
        return version if version >= max(lo, offered[0]) else None

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None


class _Reader:
    def __init__(self, security: probe.ProbeSecurity, deadline: float, timeout_s: float, client_id: str,
                 resolver: probe.Resolver | None, memo: GroupsMemo | None) -> None:
        self.security = security
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.client_id = client_id
        self.resolver = resolver
        self.memo = memo
        self.lock = threading.Lock()
        self.out = GroupsRead()
        self.ctx, self.problems = probe.tls_context(security)

    # -- plumbing

    def connect(self, b: _Broker) -> bool:
        if b.conn is not None:
            return True
        if self.problems:
            b.error = "; ".join(self.problems)
            return False
        session = probe.ProbeResult(host=b.host, port=b.port)
        deadline = min(self.deadline, time.monotonic() + self.timeout_s)
        try:
            b.sock, b.conn = probe.open_connection(b.host, b.port, self.security, self.ctx, deadline, self.client_id,
                                                   session, resolver=self.resolver)
            b.conn.deadline = self.deadline  # the session then serves the whole read
            b.offered = session.api_versions
            return True
        except probe.ReadOnlyViolation:
            raise
        except Exception as exc:  # noqa: BLE001 - any broker trouble is this broker's error, not the read's
            b.error = self.failure(exc, b)
            return False

    def failure(self, exc: BaseException, b: _Broker) -> str:
        _kind, message = probe.failure_of(exc, b.host, b.port, self.timeout_s)
        return probe.scrub_secrets(message, (self.security.password, self.security.ssl_key_password))

    def request(self, b: _Broker, api_key: int, version: int, body: dict[str, Any],
                memo_key: bytes | None = None) -> tuple[dict[str, Any], bool, bytes | None]:
        """Send one request on b's connection: (decoded body, whether it is the memo's unchanged answer, memo key)."""
        response_memo = None
        if memo_key is not None and self.memo is not None:
            response_memo, _parsed = self.memo.get(memo_key)
        before = response_memo.body if response_memo is not None else None
        with self.lock:
            self.out.requests[api_key] += 1
            known = self.out.versions.get(api_key)
            self.out.versions[api_key] = version if known is None else min(known, version)
        body_out = b.conn.request(api_key, version, body, memo=response_memo, cap=MAX_GROUPS_RESPONSE_BYTES,
                                  max_elements=MAX_GROUPS_ELEMENTS)
        reused = response_memo is not None and before is not None and body_out is before
        if response_memo is not None and memo_key is not None and self.memo is not None and not reused:
            self.memo.put(memo_key, response_memo, None)  # a new answer: nothing parsed from it yet
        with self.lock:
            if reused:
                self.out.reused += 1
            else:
                self.out.decoded += 1
        return body_out, reused, memo_key

    def parsed(self, key: bytes | None, reused: bool) -> Any:
        if key is None or self.memo is None or not reused:
            return None
        return self.memo.get(key)[1]

    def remember(self, key: bytes | None, parsed: Any) -> None:
        if key is not None and self.memo is not None:
            memo = self.memo.get(key)[0]
            # what was parsed is kept: the decoded body only needs its top-level scalars (error code) from now on,
            # and dropping its per-group and per-member dicts spares the garbage collector thousands of objects
            memo.body = {k: v for k, v in memo.body.items() if not isinstance(v, list | dict)}
            self.memo.put(key, memo, parsed)

    def broker_error(self, b: _Broker, what: str) -> None:
        with self.lock:
            self.out.errors[f"broker {b.id}"] = what

    # -- ListGroups

    def list_groups(self, b: _Broker) -> list[Group]:
        version = b.version(P.API_LIST_GROUPS)
        if version is None:
            self.broker_error(b, "the broker offers no ListGroups version this reader speaks")
            return []
        body, reused, key = self.request(b, P.API_LIST_GROUPS, version, {"states_filter": [], "types_filter": []},
                                         batch_key(b.id, P.API_LIST_GROUPS, version, ()))
        if body.get("error_code"):
            self.broker_error(b, "ListGroups: " + _error(body["error_code"]))
            return []
        listed: list[tuple[str, str, str, str]] | None = self.parsed(key, reused)
        if listed is None:  # (an unchanged listing, same bytes: its tuples from the memo)
            listed = []
            for raw in body.get("groups") or ():
                group_type = (raw.get("group_type") or "").lower() if version >= 5 else "classic"
                listed.append((raw.get("group_id") or "", raw.get("protocol_type") or "",
                               raw.get("group_state") or "", group_type if group_type in GROUP_TYPES else "unknown"))
            self.remember(key, listed)
        # fresh Group objects every read: describing fills them in
        return [Group(group_id=gid, coordinator=b.id, protocol_type=protocol_type, state=state, group_type=group_type)
                for gid, protocol_type, state, group_type in listed]

    # -- describing

    def describe(self, b: _Broker, groups: list[Group]) -> list[Group]:
        """Describe groups on their coordinator; returns those that must be asked again elsewhere."""
        retry: list[Group] = []
        by_api: dict[int, list[Group]] = {}
        for g in groups:
            if g.group_type == "consumer" and b.version(P.API_CONSUMER_GROUP_DESCRIBE) is not None:
                by_api.setdefault(P.API_CONSUMER_GROUP_DESCRIBE, []).append(g)
            elif g.group_type == "share":
                if b.version(P.API_SHARE_GROUP_DESCRIBE) is not None:
                    by_api.setdefault(P.API_SHARE_GROUP_DESCRIBE, []).append(g)
                else:
                    g.error = "not described: the broker offers no ShareGroupDescribe"
            elif g.group_type == "streams":
                g.error = None  # StreamsGroupDescribe is not spoken: listed with its offsets, members unknown
            elif b.version(P.API_DESCRIBE_GROUPS) is not None:
                by_api.setdefault(P.API_DESCRIBE_GROUPS, []).append(g)
            else:
                g.error = "not described: the broker offers no DescribeGroups version this reader speaks"
        for api_key, todo in by_api.items():
            version = b.version(api_key)
            assert version is not None
            for first in range(0, len(todo), DESCRIBE_BATCH):
                batch = todo[first:first + DESCRIBE_BATCH]
                names = [g.group_id for g in batch]
                request = {"groups": names} if api_key == P.API_DESCRIBE_GROUPS else {"group_ids": names}
                body, reused, key = self.request(b, api_key, version, request,
                                                 batch_key(b.id, api_key, version, names))
                parsed = self.parsed(key, reused)
                if parsed is None:
                    parsed, problem = self._parse_described(api_key, body, names)
                    if problem:
                        self.broker_error(b, f"{API_LABELS.get(api_key, api_key)}: {problem}")
                    self.remember(key, parsed)
                by_name = {g.group_id: g for g in batch}
                for name, (code, message, state, protocol_type, protocol, members) in parsed.items():
                    g = by_name[name]
                    if code in RETRIABLE:
                        retry.append(g)
                        continue
                    if code:
                        g.error = _error(code, message)
                        continue
                    g.state = state or g.state
                    g.protocol_type = protocol_type if protocol_type is not None else g.protocol_type
                    g.protocol, g.members, g.described, g.error = protocol, members, True, None
                for name in set(by_name) - set(parsed):
                    by_name[name].error = "the coordinator's answer left this group out"
        return retry

    @staticmethod
    def _parse_described(api_key: int, body: dict[str, Any], asked: list[str]
                         ) -> tuple[dict[str, tuple[int, str | None, str, str | None, str, tuple[Member, ...]]],
                                    str | None]:
        out = {}
        checked = only_requested(asked, body.get("groups") or (), lambda raw: raw.get("group_id") or "")
        for raw in checked.kept:  # never take an answer to a question that was not asked
            name = raw.get("group_id") or ""
            code = raw.get("error_code") or 0
            message = raw.get("error_message")
            if api_key == P.API_DESCRIBE_GROUPS:
                protocol_type = raw.get("protocol_type") or ""
                members = tuple(_classic_member(m, protocol_type) for m in raw.get("members") or ())
                out[name] = (code, message, raw.get("group_state") or "", protocol_type,
                             raw.get("protocol_data") or "", members)
            else:
                members = tuple(_new_member(m) for m in raw.get("members") or ())
                out[name] = (code, message, raw.get("group_state") or "", None, raw.get("assignor_name") or "",
                             members)
        return out, checked.problem("groups")

    # -- committed offsets

    def fetch_offsets(self, b: _Broker, groups: list[Group]) -> list[Group]:
        """Committed offsets of groups on their coordinator; returns the groups to ask again elsewhere."""
        todo = [g for g in groups if g.group_type != "share"]  # share groups commit no offsets
        version = b.version(P.API_OFFSET_FETCH)
        if not todo:
            return []
        if version is None or version < 2:
            for g in todo:
                g.error = g.error or "committed offsets not read: the broker offers no OffsetFetch v2+"
            return []
        retry: list[Group] = []
        if version >= 8:
            version = min(version, 9)  # (OUR_MAX caps it already: v10 names topics by id only)
            if self.memo is not None:  # quiet groups first, in their own batches: their answers repeat
                memo = self.memo
                todo = sorted(todo, key=lambda g: (not memo.is_quiet(g.group_id), g.group_id))
            for first in range(0, len(todo), OFFSET_FETCH_BATCH):
                batch = todo[first:first + OFFSET_FETCH_BATCH]
                names = [g.group_id for g in batch]
                answer = self.offsets_answer(b, version, names)
                checked = only_requested(names, answer, lambda item: item[0])
                if checked.problem("groups"):
                    self.broker_error(b, f"OffsetFetch: {checked.problem('groups')}")
                answered = dict(checked.kept)
                for g in batch:
                    found = answered.get(g.group_id)
                    if found is None:
                        g.error = g.error or "committed offsets: the coordinator's answer left this group out"
                        continue
                    retry += self._offsets_found(g, *found)
        else:
            for g in todo:
                body, _reused, _key = self.request(b, P.API_OFFSET_FETCH, version, {
                    "group_id": g.group_id, "topics": None, "require_stable": False})
                retry += self._offsets_of(g, body.get("error_code") or 0, body.get("topics") or ())
        return retry

    def offsets_answer(self, b: _Broker, version: int, names: list[str]) -> list[tuple[str, OffsetsOfGroup]]:
        """One OffsetFetch v8/v9 batch: its answer, decoded only when its bytes differ from the last read's."""
        key = batch_key(b.id, P.API_OFFSET_FETCH, version, names)
        with self.lock:
            self.out.requests[P.API_OFFSET_FETCH] += 1
            known = self.out.versions.get(P.API_OFFSET_FETCH)
            self.out.versions[P.API_OFFSET_FETCH] = version if known is None else min(known, version)
        payload = b.conn.request_payload(P.API_OFFSET_FETCH, version, {
            "groups": [{"group_id": name, "member_id": None, "member_epoch": -1, "topics": None} for name in names],
            "require_stable": False}, cap=MAX_GROUPS_RESPONSE_BYTES, max_elements=MAX_GROUPS_ELEMENTS)
        digest = hashlib.blake2b(payload[4:], digest_size=16).digest()  # the answer without its correlation id
        if self.memo is not None:
            last, parsed = self.memo.get(key)
            if parsed is not None and last.matches(P.API_OFFSET_FETCH, version, digest):
                with self.lock:
                    self.out.reused += 1
                return parsed  # the same bytes: the same offsets (shared, never changed by a reader)
        decoded = decode_offset_fetch_groups(payload, version, max_elements=MAX_GROUPS_ELEMENTS,
                                             deadline=self.deadline)
        with self.lock:
            self.out.decoded += 1
        if self.memo is not None:
            memo = probe.ResponseMemo()
            memo.remember(P.API_OFFSET_FETCH, version, digest, {})
            self.memo.put(key, memo, decoded)
        return decoded

    def _offsets_of(self, g: Group, code: int, topics: Iterable[dict[str, Any]]) -> list[Group]:
        offsets: dict[tuple[str, int], int] = {}
        failed = 0
        for topic in topics:
            name = topic.get("name") or ""
            for p in topic.get("partitions") or ():
                if p.get("error_code"):
                    failed += 1
                    continue
                offset = p.get("committed_offset", -1)
                if isinstance(offset, int) and offset >= 0:
                    offsets[(name, int(p.get("partition_index", 0)))] = offset
        return self._offsets_found(g, code, offsets, failed)

    def _offsets_found(self, g: Group, code: int, offsets: dict[tuple[str, int], int], failed: int) -> list[Group]:
        if code in RETRIABLE:
            return [g]
        if code:
            g.error = g.error or "committed offsets: " + _error(code)
            return []
        if failed:
            g.error = g.error or f"committed offsets: {failed} partitions answered with an error"
        if self.memo is not None:
            offsets = self.memo.same_offsets(g.group_id, offsets)
        with self.lock:
            self.out.committed[g.group_id] = offsets
        return []

    def share_offsets(self, b: _Broker, groups: list[Group]) -> list[Group]:
        """Share groups' start offsets (and, v1, lag) on their coordinator; returns the groups to ask again elsewhere."""
        todo = [g for g in groups if g.group_type == "share"]
        if not todo:
            return []
        version = b.version(P.API_DESCRIBE_SHARE_GROUP_OFFSETS)
        if version is None:
            for g in todo:
                g.error = g.error or "start offsets not read: the broker offers no DescribeShareGroupOffsets"
            return []
        retry: list[Group] = []
        for first in range(0, len(todo), SHARE_OFFSETS_BATCH):
            batch = todo[first:first + SHARE_OFFSETS_BATCH]
            names = [g.group_id for g in batch]
            body, _r, _k = self.request(b, P.API_DESCRIBE_SHARE_GROUP_OFFSETS, version,
                                        {"groups": [{"group_id": name, "topics": None} for name in names]})
            checked = only_requested(names, body.get("groups") or (), lambda raw: raw.get("group_id") or "")
            if checked.problem("groups"):
                self.broker_error(b, f"DescribeShareGroupOffsets: {checked.problem('groups')}")
            answered = {raw.get("group_id") or "": raw for raw in checked.kept}
            for g in batch:
                raw = answered.get(g.group_id)
                if raw is None:
                    g.error = g.error or "start offsets: the coordinator's answer left this group out"
                    continue
                code = raw.get("error_code") or 0
                if code in RETRIABLE:
                    retry.append(g)
                    continue
                if code:
                    g.error = g.error or "start offsets: " + _error(code, raw.get("error_message"))
                    continue
                offsets: dict[tuple[str, int], int] = {}
                lags: dict[tuple[str, int], int] = {}
                failed = 0
                for topic in raw.get("topics") or ():
                    name = topic.get("topic_name") or ""
                    for part in topic.get("partitions") or ():
                        if part.get("error_code"):
                            failed += 1
                            continue
                        key = (name, int(part.get("partition_index", 0)))
                        start = part.get("start_offset", -1)
                        if isinstance(start, int) and start >= 0:
                            offsets[key] = start
                            lag = part.get("lag", -1)
                            if version >= 1 and isinstance(lag, int) and lag >= 0:
                                lags[key] = lag
                with self.lock:
                    self.out.share_lags[g.group_id] = lags
                self._offsets_found(g, 0, offsets, failed)
        return retry

    # -- coordinators that moved

    def find_coordinators(self, via: _Broker, names: list[str]) -> dict[str, int]:
        version = via.version(P.API_FIND_COORDINATOR)
        if version is None or not names:
            return {}
        found: dict[str, int] = {}
        if version >= 4:
            body, _r, _k = self.request(via, P.API_FIND_COORDINATOR, version,
                                        {"key_type": 0, "coordinator_keys": names})
            for c in body.get("coordinators") or ():
                if not c.get("error_code") and c.get("key") in names:
                    found[c["key"]] = int(c.get("node_id", -1))
        else:
            for name in names:
                body, _r, _k = self.request(via, P.API_FIND_COORDINATOR, version, {"key": name, "key_type": 0})
                if not body.get("error_code"):
                    found[name] = int(body.get("node_id", -1))
        return found

    # -- end offsets

    def leaders(self, via: _Broker, topics: list[str]) -> dict[tuple[str, int], int]:
        version = via.version(P.API_METADATA)
        out: dict[tuple[str, int], int] = {}
        if version is None or version < 1:
            return out
        for first in range(0, len(topics), METADATA_BATCH):
            batch = topics[first:first + METADATA_BATCH]
            body, _r, _k = self.request(via, P.API_METADATA, version, {
                "topics": [{"name": t, "topic_id": P.ZERO_UUID} for t in batch], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False})
            checked = only_requested(batch, body.get("topics") or (), lambda t: t.get("name"))
            if checked.problem("topics"):
                self.out.errors["end offsets"] = f"Metadata: {checked.problem('topics')}"
            for t in checked.kept:
                name = t.get("name")
                code = t.get("error_code") or 0
                if code == P.UNKNOWN_TOPIC_OR_PARTITION:
                    self.out.missing_topics.add(name)
                    continue
                if code:
                    self.out.errors[f"topic {name}"] = "Metadata: " + _error(code)
                    continue
                topic_id = t.get("topic_id")
                if topic_id and topic_id != P.ZERO_UUID:
                    self.out.topic_ids[name] = topic_id
                for p in t.get("partitions") or ():
                    out[(name, int(p.get("partition_index", 0)))] = int(p.get("leader_id", -1))
        return out

    def end_offsets(self, b: _Broker, partitions: list[tuple[str, int]], earliest: frozenset[tuple[str, int]] = frozenset()
                    ) -> None:
        """The latest offset of every partition, and the earliest too of those in `earliest` (own requests)."""
        self._list_offsets(b, partitions, LATEST_TIMESTAMP, self.out.end_offsets)
        starts = [tp for tp in partitions if tp in earliest]
        if starts:
            self._list_offsets(b, starts, EARLIEST_TIMESTAMP, self.out.start_offsets)

    def _list_offsets(self, b: _Broker, partitions: list[tuple[str, int]], timestamp: int,
                      into: dict[tuple[str, int], int]) -> None:
        version = b.version(P.API_LIST_OFFSETS)
        if version is None:
            self.broker_error(b, "the broker offers no ListOffsets version this reader speaks")
            return
        failed = 0
        for first in range(0, len(partitions), LIST_OFFSETS_BATCH):
            batch = partitions[first:first + LIST_OFFSETS_BATCH]
            by_topic: dict[str, list[int]] = {}
            for topic, p in batch:
                by_topic.setdefault(topic, []).append(p)
            body, _r, _k = self.request(b, P.API_LIST_OFFSETS, version, {
                "replica_id": -1, "isolation_level": 0, "timeout_ms": int(self.timeout_s * 1000),
                "topics": [{"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                                       "timestamp": timestamp, "max_num_offsets": 1}
                                                      for p in ps]} for t, ps in by_topic.items()]})
            found: dict[tuple[str, int], int] = {}
            answered = [((t.get("name") or "", int(p.get("partition_index", 0))), p)
                        for t in body.get("topics") or () for p in t.get("partitions") or ()]
            checked = only_requested(batch, answered, lambda item: item[0])
            if checked.problem("partitions"):
                self.broker_error(b, f"ListOffsets: {checked.problem('partitions')}")
            for key, p in checked.kept:
                if p.get("error_code"):
                    failed += 1
                    continue
                offset = p.get("offset", -1) if version >= 1 else (p.get("old_style_offsets") or [-1])[0]
                if isinstance(offset, int) and offset >= 0:
                    found[key] = offset
            with self.lock:
                into.update(found)
        if failed:
            self.broker_error(b, f"ListOffsets: {failed} partitions answered with an error")


def read_cluster_groups(brokers: Sequence[tuple[int, str, int]], *, security: probe.ProbeSecurity | None = None,
                timeout_s: float = 10.0, deadline: float | None = None, max_groups: int = 20_000,
                concurrency: int = 8, client_id: str = CLIENT_ID, resolver: probe.Resolver | None = None,
                memo: GroupsMemo | None = None) -> GroupsRead:
    """Read every group of one cluster from its live brokers ((id, host, port), ...), within the deadline.

    max_groups: groups described and fetched at most (the first by group id); the others are listed in
    ``skipped``. timeout_s bounds each connection set-up; the whole read stops at ``deadline``.
    """
    started = time.monotonic()
    deadline = deadline if deadline is not None else started + timeout_s
    reader = _Reader(security or probe.ProbeSecurity(), deadline, timeout_s, client_id, resolver, memo)
    out = reader.out
    nodes = {bid: _Broker(bid, host, port) for bid, host, port in sorted(brokers)}
    workers = max(1, min(len(nodes), concurrency))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="groups")
    try:
        listed: dict[int, list[Group]] = {}

        def listing(b: _Broker) -> None:
            if not reader.connect(b):
                reader.broker_error(b, b.error or "no connection")
                return
            try:
                listed[b.id] = reader.list_groups(b)
            except probe.ReadOnlyViolation:
                raise
            except Exception as exc:  # noqa: BLE001 - one broker's trouble stays its own
                reader.broker_error(b, reader.failure(exc, b))
                b.close()
                b.conn = None

        list(pool.map(listing, nodes.values()))
        out.brokers_answered = len(listed)
        everything = sorted((g for gs in listed.values() for g in gs), key=lambda g: g.group_id)
        seen: dict[str, Group] = {}
        for g in everything:
            seen.setdefault(g.group_id, g)  # a group two brokers list (a coordinator move) counts once
        out.listed = len(seen)
        ordered = list(seen.values())
        kept, out.skipped = ordered[:max_groups], [g.group_id for g in ordered[max_groups:]]
        out.groups = {g.group_id: g for g in kept}

        def per_coordinator(gs: Iterable[Group]) -> dict[int, list[Group]]:
            by: dict[int, list[Group]] = {}
            for g in gs:
                by.setdefault(g.coordinator, []).append(g)
            return by

        def describe_and_fetch(item: tuple[int, list[Group]]) -> list[Group]:
            bid, gs = item
            b = nodes.get(bid)
            if b is None or b.conn is None:
                for g in gs:
                    g.error = f"coordinator {bid} not reachable"
                return []
            try:
                with b.lock:
                    again = reader.describe(b, gs)
                    again_ids = {g.group_id for g in again}
                    again += reader.fetch_offsets(b, [g for g in gs if g.group_id not in again_ids])
                    again_ids = {g.group_id for g in again}
                    again += reader.share_offsets(b, [g for g in gs if g.group_id not in again_ids])
                return again
            except probe.ReadOnlyViolation:
                raise
            except Exception as exc:  # noqa: BLE001
                message = reader.failure(exc, b)
                reader.broker_error(b, message)
                for g in gs:
                    g.error = g.error or f"coordinator {bid}: {message}"
                b.close()
                b.conn = None
                return []

        retry = [g for gs in pool.map(describe_and_fetch, per_coordinator(kept).items()) for g in gs]
        if retry:
            via = next((b for b in nodes.values() if b.conn is not None), None)
            moved: dict[str, int] = {}
            if via is not None:
                try:
                    with via.lock:
                        moved = reader.find_coordinators(via, sorted({g.group_id for g in retry}))
                except probe.ReadOnlyViolation:
                    raise
                except Exception as exc:  # noqa: BLE001
                    reader.broker_error(via, "FindCoordinator: " + reader.failure(exc, via))
            again: dict[str, Group] = {}
            for g in retry:
                new = moved.get(g.group_id)
                if new is None or new not in nodes:
                    g.error = "the group's coordinator moved and was not found again"
                    continue
                g.coordinator = new
                again[g.group_id] = g
            for twice in pool.map(describe_and_fetch, per_coordinator(again.values()).items()):
                for left in twice:
                    left.error = "the group's coordinator moved twice during the read"

        wanted: set[tuple[str, int]] = set()
        for name, offsets in out.committed.items():
            if name in out.groups:
                wanted.update(offsets)
        uncommitted: set[tuple[str, int]] = set()
        for g in out.groups.values():
            done = out.committed.get(g.group_id) or {}
            for m in g.members:
                wanted.update(m.assignment)
                if g.group_type != "share":  # a share partition not yet initialized starts where
                    # share.auto.offset.reset says (latest by default): its records are not known to wait
                    uncommitted.update(tp for tp in m.assignment if tp not in done)
        topics = sorted({t for t, _p in wanted})
        via = next((b for b in nodes.values() if b.conn is not None), None)
        leaders: dict[tuple[str, int], int] = {}
        if topics and via is not None:
            try:
                with via.lock:
                    leaders = reader.leaders(via, topics)
            except probe.ReadOnlyViolation:
                raise
            except Exception as exc:  # noqa: BLE001
                out.errors["end offsets"] = "Metadata: " + reader.failure(exc, via)
        by_leader: dict[int, list[tuple[str, int]]] = {}
        no_leader = 0
        for tp in sorted(wanted):
            leader = leaders.get(tp)
            if leader is None or leader < 0:
                if tp[0] not in out.missing_topics and leaders:
                    no_leader += 1
                continue
            by_leader.setdefault(leader, []).append(tp)
        if no_leader:
            out.errors["end offsets"] = f"{no_leader} partitions without a known leader"

        def ask_ends(item: tuple[int, list[tuple[str, int]]]) -> None:
            bid, parts = item
            b = nodes.get(bid)
            if b is None or not reader.connect(b):
                reader.broker_error(nodes[bid] if bid in nodes else _Broker(bid, "?", 0),
                                    f"end offsets of {len(parts)} partitions not read (leader not reachable)")
                return
            try:
                with b.lock:
                    reader.end_offsets(b, parts, frozenset(uncommitted))
            except probe.ReadOnlyViolation:
                raise
            except Exception as exc:  # noqa: BLE001
                reader.broker_error(b, "ListOffsets: " + reader.failure(exc, b))

        list(pool.map(ask_ends, by_leader.items()))
    finally:
        pool.shutdown(wait=True)
        for b in nodes.values():
            b.close()
        if memo is not None:
            memo.sweep()
    out.duration_ms = (time.monotonic() - started) * 1000
    return out
