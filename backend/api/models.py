"""The API's typed models: the OpenAPI 3.1 document is generated from these (never written by hand)."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Page(_Model, Generic[T]):
    """One page of a list, in a stable order; `next_cursor` fetches the next one (null: this is the last)."""

    items: list[T]
    total: int = Field(description="items matching the filters, over every page (only clusters the caller may view)")
    limit: int
    next_cursor: str | None = None


class Problem(_Model):
    """An error, as RFC 9457 problem details (application/problem+json)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str | None = None
    instance: str | None = None


class Cluster(_Model):
    """One cluster as its latest poll saw it."""

    name: str
    cluster_id: str | None = Field(None, description="KIP-78 cluster id from Metadata")
    zk_cluster_id: str | None = Field(None, description="the cluster id registered in ZooKeeper (ZooKeeper mode)")
    status: str = Field(description="ok, degraded, down, auth_failed, misrouted")
    mode: Literal["kraft", "zookeeper", "unknown"]
    tags: dict[str, str]
    broker_count: int | None = None
    brokers_reachable: int | None = None
    controller_id: int | None = None
    topic_count: int | None = None
    partition_count: int | None = None
    under_replicated: int | None = None
    offline_partitions: int | None = None
    versions: str = Field(description="the brokers' software and versions, e.g. 'Apache Kafka 3.9.1 ×3'")
    error: str | None = None
    polled_at: datetime | None = None


class Broker(_Model):
    """One broker of a cluster, its software and version with where the version comes from."""

    cluster: str
    broker_id: int
    host: str | None = None
    port: int | None = None
    rack: str | None = None
    is_controller: bool = False
    reachable: bool = False
    software_name: str | None = None
    software_version: str | None = None
    version_provenance: str = Field(description="reported (KIP-885), zookeeper, guessed (ApiVersions), unknown")
    version_min: str | None = Field(None, description="guessed: the oldest release the broker fits")
    version_max: str | None = Field(None, description="guessed: the newest release it fits (null: open-ended)")
    version_label: str = Field(description="as the pages show it, e.g. '3.7–3.9 (guessed)'")
    error: str | None = None


class Topic(_Model):
    """One topic of a cluster (KIP-516 topic id)."""

    cluster: str
    name: str
    topic_id: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    internal: bool = False
    under_replicated: int | None = None
    offline_partitions: int | None = None


class TopicIdChange(_Model):
    """The topic was deleted and created again under the same name: a new topic id."""

    old_topic_id: str | None = None
    new_topic_id: str | None = None
    seen_at: datetime | None = None


class ConfigValue(_Model):
    """A config as stored: values the broker marks sensitive (or that look like a secret) are withheld."""

    name: str
    value: str | None = None
    source: str | None = None
    withheld: str | None = Field(None, description="why the value is not stored (null: it is)")


class TopicDetail(Topic):
    """A topic with its config overrides and its recreations in the retained history."""

    overrides: list[ConfigValue]
    recreated: list[TopicIdChange]


class BrokerConfig(_Model):
    """A broker config of a cluster: its value per broker where they disagree."""

    cluster: str
    config: str
    value: str
    source: str
    non_default: bool
    brokers_disagree: bool
    read_only: bool


class ConfigComparison(_Model):
    """One broker config side by side over the clusters asked for ('differs within the cluster' where brokers do)."""

    config: str
    differs: bool
    values: dict[str, str]


class Group(_Model):
    """A consumer group: type, state, members, lag, and its status (ok, lagging, stalled, ...) with evidence."""

    cluster: str
    group_id: str
    group_type: str
    protocol_type: str | None = None
    protocol: str | None = None
    state: str | None = None
    members: int | None = None
    topics: int | None = None
    partitions: int | None = None
    lag: int | None = Field(None, description="sum of positive partition lags (a share group's: its coordinator's); "
                                              "null when unknown, never 0 for unknown")
    max_partition_lag: int | None = None
    uncommitted_records: int | None = Field(None, description="records on partitions the group is assigned but has "
                                                              "committed nothing on (log end - log start), beside "
                                                              "the lag; null when none")
    partitions_ahead: int | None = Field(None, description="partitions whose committed offset is past the end of the "
                                                           "log (status offset_ahead)")
    status: str = Field(description="ok, lagging, stalled, stopped, empty_with_lag, offset_ahead, unknown")
    status_since: datetime | None = None
    evidence: dict[str, object] = Field(default_factory=dict)
    error: str | None = None


class PartitionLag(_Model):
    """A group's partition as kafka-consumer-groups.sh --describe shows it (a share group's as kafka-share-groups.sh:
    committed_offset is its start offset)."""

    topic: str
    partition: int
    committed_offset: int | None = None
    end_offset: int | None = None
    lag: int | None = None
    uncommitted_records: int | None = Field(None, description="an assigned partition without a commit: its records")
    client_id: str | None = None
    host: str | None = None
    member_id: str | None = None


class TopicLag(_Model):
    """A group's lag on one topic (null: no partition's lag is known), and the records on its uncommitted partitions."""

    topic: str
    partitions: int
    lag: int | None = None
    uncommitted_records: int | None = None


class Member(_Model):
    """A member of a group."""

    client_id: str | None = None
    host: str | None = None
    member_id: str | None = None
    instance_id: str | None = None
    member_type: str | None = None
    partitions: int | None = None
    assignment: str = ""
    subscribed: str = Field("", description="the subscribed topics, and a KIP-848 member's regex")


class GroupDetail(Group):
    """A group with its members and its lag per topic and per partition."""

    members_detail: list[Member]
    lag_by_topic: list[TopicLag]
    lag_by_partition: list[PartitionLag]


class ClientSoftware(_Model):
    """Connections of one client software and version to a cluster (the brokers' KIP-511 metrics)."""

    cluster: str
    software_name: str | None = None
    software_version: str | None = None
    connections: int
    brokers: str
    floor: str = Field(description="what Kafka 4.x says of this client (KIP-896 floors)")


class Distribution(_Model):
    """How one client config key's values are distributed over a cluster's client instances (KIP-1324)."""

    cluster: str
    cluster_id: str
    client_type: str
    key: str
    value: str | None = None
    instance_count: int
    total_instances: int
    share: float


class Drift(_Model):
    """How far two clusters' distributions of one key are apart (total variation distance, 0..1)."""

    client_type: str
    key: str
    cluster_a: str
    cluster_b: str
    tvd: float


class Incident(_Model):
    """A fleet incident or client-config alert: open, or resolved, with its latest evidence."""

    state: str
    severity: str
    source: str
    rule: str
    title: str
    cluster: str | None = None
    subject: str
    since: datetime | None = None
    last_seen: datetime | None = None
    resolved: datetime | None = None
    evidence: str
    doc_url: str | None = None


class ReadinessItem(_Model):
    """One line of a cluster's checklist: pass, fail (blocks), warn, unknown (never 'ready' by omission)."""

    item: str
    status: Literal["pass", "fail", "warn", "unknown"]
    detail: str


class ReadinessInstance(_Model):
    """A client instance to chase: it sets a key the target release removed or changed."""

    item: str
    client_type: str | None = None
    key: str | None = None
    value: str | None = None
    client_id: str | None = None
    group_id: str | None = None
    client_instance_id: str | None = None
    rule_id: str | None = None


class ClusterReadiness(_Model):
    """Whether one cluster is ready for the target release, and why."""

    cluster: str
    target: str
    verdict: Literal["ready", "blocked", "unverified"]
    reasons: str
    checklist: list[ReadinessItem]
    instances: list[ReadinessInstance]


class AuditEntry(_Model):
    """One audit record: who did or read what, through which door, from where, and the outcome."""

    record_id: str
    at: datetime
    kind: str
    door: str
    action: str
    subject: str
    groups: list[str]
    client_address: str
    user_agent: str
    clusters: list[str]
    params: dict[str, str]
    outcome: str
    status: int | None = None
    duration_ms: float | None = None
    detail: str


class Me(_Model):
    """Who the API takes the caller for, and what it may read."""

    login: bool = Field(description="false: login is off and the API serves loopback only")
    subject: str
    groups: list[str]
    clusters: int = Field(description="clusters of the fleet this caller may view")
    audit: bool = Field(description="whether the caller holds the audit grant")


class Index(_Model):
    """The API's entry point."""

    version: str
    openapi: str
    docs: str
    mcp: str


# ------------------------------------------------------------------ standards (issue 39: policies per tag, waivers)

StandardsStatus = Literal["violation", "unknown", "upcoming", "waived", "pass"]


class PolicyFile(_Model):
    """Where the policy file stands: the one the poller judges with, and its last refusal."""

    name: str | None = Field(None, description="the policy file's name (its directory is the server's business)")
    digest: str | None = Field(None, description="digest of the policy set the results were judged with")
    loaded_at: str | None = None
    using: str | None = Field(None, description="file, or what the poller fell back to")
    error: str | None = Field(None, description="why the file's latest version was refused (the last good one "
                                                "stays in force)")
    error_at: str | None = None


class Compliance(_Model):
    """Policy/cluster pairs judged, the share passing (pass, waived and upcoming pass; violation and unknown do
    not) and the count of each status."""

    pairs: int
    passing: int
    percent_passing: float | None = Field(None, description="null when nothing was judged")
    statuses: dict[StandardsStatus, int]


class StandardsOverview(_Model):
    """Compliance over the clusters the caller may view (and the filters), with the policy file's state."""

    file: PolicyFile
    policies: int
    clusters: int
    compliance: Compliance


class ClusterCompliance(_Model):
    """One cluster: the policies that apply to it and how many pass."""

    cluster: str
    policies: int
    compliance: Compliance


class PolicyCompliance(_Model):
    """One policy of the policy file: what it asks, and how many of the (visible) clusters it applies to pass."""

    policy_id: str
    title: str | None = None
    severity: str | None = None
    check: str | None = None
    selector: str | None = Field(None, description="the cluster tags it applies to ('every cluster')")
    wanted: str | None = None
    clusters: int = Field(description="visible clusters the policy applies to")
    compliance: Compliance


class PolicyResult(_Model):
    """The current result of one policy on one cluster."""

    cluster: str
    policy_id: str
    title: str | None = None
    severity: str | None = None
    status: StandardsStatus
    checked: int | None = Field(None, description="subjects checked (topics, brokers, groups, client values)")
    passing: int | None = None
    violating: int | None = None
    unknown: int | None = None
    waived: int | None = None
    upcoming: int | None = None
    reason: str = ""
    since: datetime | None = Field(None, description="in this status since")
    evaluated_at: datetime | None = None
    evidence_at: datetime | None = Field(None, description="when the evidence judged was read")
    stale: bool = Field(False, description="judged with an earlier version of the policy file")


class FindingClient(_Model):
    """A client instance behind a client finding, as its latest pushed configuration names it: who to chase."""

    instance_id: str = Field(description="the client instance id (KIP-714/KIP-1324)")
    client_type: str | None = None
    client_id: str | None = Field(None, description="client.id")
    group_id: str | None = Field(None, description="group.id (consumers)")
    software_name: str | None = None
    software_version: str | None = None
    principal: str | None = None
    client_address: str | None = None
    last_seen: datetime | None = Field(None, description="when its latest configuration snapshot was received")


class Finding(_Model):
    """A subject of one policy on one cluster that does not pass (or is waived, or not yet in force); or, of kind
    `instance`, a client instance behind a `clients` finding."""

    cluster: str
    policy_id: str
    kind: str = Field(description="topic, broker, group, clients (a client type's value of a key, or a client "
                                  "software), instance (a client instance behind a clients finding), cluster")
    name: str = Field(description="the topic, broker id, group id, client value or software, or the instance id")
    outcome: StandardsStatus
    seen: str | None = None
    wanted: str | None = None
    reason: str = ""
    count: int | None = Field(None, description="instances behind a clients finding (1 for an instance)")
    since: datetime | None = None
    waiver: str | None = Field(None, description="the waiver that covers it, if any")
    named: int | None = Field(None, description="clients findings: how many of `count` instances are named (as rows "
                                                "of kind instance); the rest are counted only")
    finding: str | None = Field(None, description="instance rows: the name of the clients finding it is behind")
    client: FindingClient | None = Field(None, description="instance rows: who the instance is")


class StandardsTrendPoint(_Model):
    """% passing on one day, fleet-wide, for one cluster or for one policy."""

    day: datetime
    scope: Literal["fleet", "cluster", "policy"]
    name: str = Field(description="'fleet', a cluster or a policy id")
    pairs: int
    passing: int
    violation: int
    unknown: int
    percent_passing: float | None = None


# ------------------------------------------------------------------ search and across the fleet (issue 38)
SearchKind = Literal["topic", "group", "client", "broker", "cluster", "config"]
SearchMode = Literal["substring", "prefix", "regex"]


class SearchHit(_Model):
    """One entity found: what it is, where, why it matched (the field and its value), and its page in the UI."""

    kind: SearchKind
    cluster: str
    name: str
    field: str = Field(description="the field the text matched: name, topic_id, group_id, client_id, "
                                   "client_instance_id, principal, software, broker_id, host, rack, cluster_id, tag, "
                                   "key, value")
    value: str
    match: Literal["exact", "prefix", "substring", "regex"]
    state: Literal["current", "deleted"]
    cluster_id: str | None = None
    id: str | None = Field(None, description="topic id, client instance id or cluster id, where the kind has one")
    detail: str | None = None
    group: str | None = None
    resource: str | None = Field(None, description="a config's resource: 'broker 1', 'topic payments'")
    deleted_at: datetime | None = None
    source: str = Field(description="the index table: topic, group, member, software, instance, broker, cluster, "
                                    "config")
    link: str | None = Field(None, description="relative URL of its page in the UI")


class SearchResult(_Model):
    """The best hits of a query (exact, prefix, substring; current before deleted) and how many matched in all."""

    query: str
    mode: SearchMode
    kinds: list[SearchKind]
    total: int = Field(description="entities matching, over the clusters the caller may view")
    counts: dict[str, int] = Field(description="matches per kind")
    clusters: int = Field(description="clusters the matches are on")
    truncated: bool = Field(description="true when total is more than the hits returned")
    notes: list[str]
    hits: list[SearchHit]


class GroupOnTopic(_Model):
    """A consumer group reading one copy of a topic: its lag on that topic, state and Burrow-style status."""

    cluster: str
    topic: str
    group_id: str
    group_type: str | None = None
    state: str | None = None
    status: str | None = None
    lag: int | None = None
    partitions: int
    members: int | None = None
    link: str


class TopicCopy(_Model):
    """One cluster's topic of the name (or a MirrorMaker 2 copy of it)."""

    cluster: str
    topic: str
    relation: str
    topic_id: str | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    min_insync_replicas: str | None = None
    min_isr_source: str
    under_replicated: int | None = None
    internal: bool | None = None
    configs: dict[str, str] = Field(description="effective value (and its source) of each config some copy overrides")
    groups: int
    lag: int | None = None
    link: str


class TopicAcross(_Model):
    """A topic name across the clusters the caller may view, with its MirrorMaker 2 copies."""

    name: str
    names: list[str] = Field(description="the topic names looked for (the name, its source, its remote copies)")
    copies: list[TopicCopy]
    differing: list[str] = Field(description="configs whose effective values differ between copies")
    groups: list[GroupOnTopic]
    notes: list[str]


class GroupCopy(_Model):
    """One cluster's consumer group of the id."""

    cluster: str
    group_id: str
    group_type: str | None = None
    protocol: str | None = None
    state: str | None = None
    status: str | None = None
    lag: int | None = None
    members: int | None = None
    topics: list[str]
    coordinator_id: int | None = None
    link: str


class GroupAcross(_Model):
    """A consumer group id across the clusters the caller may view."""

    group_id: str
    copies: list[GroupCopy]
    notes: list[str]
