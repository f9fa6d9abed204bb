"""Policy results as the evaluator hands them to the lake writer, the checks, /metrics and the views.

One `PolicyResult` per (policy, cluster): its status, what was checked and how it came out, and the subjects that
did not pass (`PolicyItem`: a topic, broker, group, client value or instance, or the cluster) with their evidence:
the value seen, the value wanted, since when, and a waiver when one applies. Passing subjects are only counted. A
client finding (a client type's value of a key, a software version) names the instances behind it
(`ClientInstance`: who to chase), at most MAX_INSTANCES per (policy, cluster); its `count` stays exact.
A cluster's results of one evaluation are one `StandardsSnapshot` (a new object when anything changed, the same
object otherwise, so the writer skips an unchanged cluster by identity).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# pass: every subject seen and fine. violation: a subject breaks the policy (not waived). unknown: evidence missing
# for a subject or the whole cluster (never pass by omission). waived: only waived subjects break it. upcoming:
# subjects break it but the policy is not in force yet (its `effective` date lies ahead).
STATUSES = ("pass", "violation", "unknown", "waived", "upcoming")
STATUS_ORDER = {"violation": 0, "unknown": 1, "upcoming": 2, "waived": 3, "pass": 4}
ITEM_OUTCOMES = ("violation", "unknown", "waived", "upcoming")
SUBJECT_KINDS = ("cluster", "broker", "topic", "group", "clients", "instance")
MAX_ITEMS = 500  # non-passing subjects kept per (policy, cluster); the counts stay exact
MAX_INSTANCES = 1000  # client instances named per (policy, cluster), violations first; the counts stay exact


@dataclass(frozen=True, slots=True)
class ClientInstance:
    """A client instance behind a client finding, as its latest pushed configuration names it."""

    instance_id: str
    client_type: str | None = None
    client_id: str | None = None
    group_id: str | None = None  # a consumer's group.id
    software_name: str | None = None
    software_version: str | None = None
    principal: str | None = None
    client_address: str | None = None
    last_seen: datetime | None = None  # when its latest configuration snapshot was received

    @property
    def software(self) -> str | None:
        """'apache-kafka-java 3.9.1' (None when it sends no name)."""
        text = f"{self.software_name or ''} {self.software_version or ''}".strip()
        return text or None

    def label(self) -> str:
        """One line naming it: 'client.id app-3 (instance 7f.., group g, apache-kafka-java 3.9.1, User:x @ /10.0.0.1)'."""
        parts = [f"instance {self.instance_id}"]
        parts += [f"group {self.group_id}"] if self.group_id else []
        parts += [self.software] if self.software else []
        who = " @ ".join(p for p in (self.principal, self.client_address) if p)
        parts += [who] if who else []
        parts += [f"last seen {self.last_seen:%Y-%m-%d %H:%M} UTC"] if self.last_seen else []
        head = f"client.id {self.client_id}" if self.client_id else "no client.id"
        return f"{head} ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class PolicyItem:
    """One subject that did not pass: what was seen, what was wanted, why, and since when."""

    kind: str  # cluster / broker / topic / group / clients / instance
    name: str  # broker id, topic, group id, "<client type> <key>=<value>", instance id; "" for the cluster
    outcome: str  # violation / unknown / waived / upcoming
    seen: str | None  # the value seen (None: not seen)
    wanted: str
    reason: str
    count: int = 1  # client instances behind a client-config value
    since: datetime | None = None  # the first evaluation that found it so
    waiver: str | None = None  # the waiver that covers it, or the one that expired ("expired ...")
    instances: tuple[ClientInstance, ...] = ()  # the client instances behind a client finding (up to MAX_INSTANCES)

    @property
    def unnamed(self) -> int:
        """Instances behind a client finding that are counted but not named (beyond the bound, or no per-instance
        results for its key yet)."""
        return max(self.count - len(self.instances), 0) if self.kind == "clients" else 0

    @property
    def subject(self) -> str:
        """'topic orders', 'broker 1', 'cluster'."""
        return f"{self.kind} {self.name}".strip() if self.kind != "cluster" else "cluster"


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """One policy on one cluster."""

    policy_id: str
    cluster_name: str
    status: str
    severity: str
    checked: int = 0  # subjects judged (topics, brokers, groups, instances, or 1 for the cluster)
    passing: int = 0
    violating: int = 0
    unknown: int = 0
    waived: int = 0
    upcoming: int = 0
    reason: str = ""  # the status in a sentence (why unknown, how many violate)
    items: tuple[PolicyItem, ...] = ()
    items_omitted: int = 0  # non-passing subjects beyond MAX_ITEMS
    evaluated_at: datetime | None = None
    evidence_at: datetime | None = None  # when the evidence was read (the configs read, the analysis, the poll)
    since: datetime | None = None  # since when the status has held
    policy_digest: str = ""


@dataclass(slots=True)
class StandardsSnapshot:
    """Every policy's result on one cluster from one evaluation (see the module docstring)."""

    evaluated_at: datetime
    policy_set: str  # the policy file's digest
    results: dict[str, PolicyResult] = field(default_factory=dict)
