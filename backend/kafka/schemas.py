"""Message schemas: a small mirror of Apache Kafka's message JSON for the APIs we speak."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from backend.kafka.wire import ZERO_UUID, ProtocolError

API_METADATA = 3
API_DESCRIBE_CONFIGS = 32
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
API_DESCRIBE_CLUSTER = 60
# Consumer groups, all read-only (issue 29): who reads what and how far behind.
API_LIST_OFFSETS = 2
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_DESCRIBE_GROUPS = 15
API_LIST_GROUPS = 16
API_CONSUMER_GROUP_DESCRIBE = 69
API_SHARE_GROUP_DESCRIBE = 77
API_DESCRIBE_SHARE_GROUP_OFFSETS = 90  # KIP-932: a share group's start offsets (v1, KIP-1226: and its lag)

# KIP-1324 leaves PushConfig's key as "NEXT". Apache Kafka assigns keys sequentially:
# 4.3.1 (the newest broker the tests run) uses 0..92 and 4.4.0 0..94, so taking the next key
# would collide as soon as Kafka adds an API. 1324 (the KIP number) is far above the sequential range,
# unused by Apache Kafka and by the forks we fingerprint, and still a positive int16.
PUSH_CONFIG_API_KEY = 1324

# KIP-885 puts BrokerSoftwareName/Version in the next free DescribeCluster version. Kafka
# 4.3.1's DescribeClusterRequest.json/Response.json say "validVersions": "0-2" (v1 added
# EndpointType in 3.7, v2 IncludeFencedBrokers/IsFenced in 4.0), and so does 4.4.0, so the
# next free one is 3.
DESCRIBE_CLUSTER_KIP885_VERSION = 3

# KIP-1324 proposes ApiVersions v5 with ClientInstanceId, but Apache Kafka 4.4.0 already
# released v5 for KIP-1242 (ClusterId, NodeId; checked in kafka-clients-4.4.0.jar). A draft
# KIP must not reuse a released version, so ClientInstanceId goes in the next free one, v6,
# on top of v5's fields.
API_VERSIONS_CLIENT_INSTANCE_ID_VERSION = 6
API_VERSIONS_MAX_VERSION = API_VERSIONS_CLIENT_INSTANCE_ID_VERSION

_LATEST = 0x7FFF
_INT32_MIN = -(2**31)



# ---------------------------------------------------------------------------------------
# Schemas (a small mirror of Kafka's message JSON)
# ---------------------------------------------------------------------------------------


def _vrange(spec: str | None) -> tuple[int, int] | None:
    """Kafka version spec ("3+", "8-10", "5", "none") -> inclusive range or None."""
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), _LATEST)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def _in(rng: tuple[int, int] | None, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


@dataclass(frozen=True)
class Field:
    """One field of a message schema."""

    name: str
    type: str  # int8 int16 int32 int64 float64 bool string bytes uuid, []<scalar>, []struct, struct (one, not null)
    versions: str = "0+"
    nullable: str | None = None
    default: Any = None
    tag: int | None = None
    fields: tuple[Field, ...] = ()
    alias: str | None = None  # extra key accepted on encode only

    def default_value(self) -> Any:
        """Kafka's default for this field when absent."""
        if self.default is not None:
            return self.default
        if self.nullable is not None:
            return None
        t = self.type
        if t.startswith("[]"):
            return []
        if t == "bool":
            return False
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "uuid":
            return ZERO_UUID
        if t == "float64":
            return 0.0
        if t == "struct":
            return {}
        return 0


def F(name: str, type_: str, versions: str = "0+", **kw: Any) -> Field:
    """Short constructor for schema tables."""
    fields = kw.pop("fields", ())
    return Field(name, type_, versions, fields=tuple(fields), **kw)


@dataclass(frozen=True)
class MessageSchema:
    """Request and response schema of one API."""

    api_key: int
    name: str
    valid_versions: tuple[int, int]
    flexible_from: int | None
    request: tuple[Field, ...]
    response: tuple[Field, ...]

    def is_flexible(self, version: int) -> bool:
        """True when this version uses compact types and tagged fields."""
        return self.flexible_from is not None and version >= self.flexible_from


_API_VERSIONS = MessageSchema(
    API_API_VERSIONS, "ApiVersions", (0, API_VERSIONS_MAX_VERSION), 3,
    request=(
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
        # v5 (Kafka 4.4, KIP-1242): the cluster and node the client expects.
        F("cluster_id", "string", "5+", nullable="5+"),
        F("node_id", "int32", "5+", default=-1),
        # v6 (KIP-1324 draft, see API_VERSIONS_CLIENT_INSTANCE_ID_VERSION).
        F("client_instance_id", "uuid", f"{API_VERSIONS_CLIENT_INSTANCE_ID_VERSION}+"),
    ),
    response=(
        F("error_code", "int16"),
        F("api_keys", "[]struct", fields=(
            F("api_key", "int16"), F("min_version", "int16"), F("max_version", "int16"),
        )),
        F("throttle_time_ms", "int32", "1+"),
        F("supported_features", "[]struct", "3+", tag=0, fields=(
            F("name", "string", "3+"), F("min_version", "int16", "3+"),
            F("max_version", "int16", "3+"),
        )),
        F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
        F("finalized_features", "[]struct", "3+", tag=2, fields=(
            F("name", "string", "3+"), F("max_version_level", "int16", "3+"),
            F("min_version_level", "int16", "3+"),
        )),
        F("zk_migration_ready", "bool", "3+", tag=3),
    ),
)

_METADATA = MessageSchema(
    API_METADATA, "Metadata", (0, 13), 9,
    request=(
        F("topics", "[]struct", nullable="1+", fields=(
            F("topic_id", "uuid", "10+"),
            F("name", "string", nullable="10+"),
        )),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+"),
        F("brokers", "[]struct", fields=(
            F("node_id", "int32", alias="broker_id"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "1+", nullable="1+"),
        )),
        F("cluster_id", "string", "2+", nullable="2+"),
        F("controller_id", "int32", "1+", default=-1),
        F("topics", "[]struct", fields=(
            F("error_code", "int16"),
            F("name", "string", nullable="12+"),
            F("topic_id", "uuid", "10+"),
            F("is_internal", "bool", "1+"),
            F("partitions", "[]struct", fields=(
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", "7+", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", "5+"),
            )),
            F("topic_authorized_operations", "int32", "8+", default=_INT32_MIN),
        )),
        F("cluster_authorized_operations", "int32", "8-10", default=_INT32_MIN),
        F("error_code", "int16", "13+"),
    ),
)

_DESCRIBE_CLUSTER = MessageSchema(
    API_DESCRIBE_CLUSTER, "DescribeCluster", (0, DESCRIBE_CLUSTER_KIP885_VERSION), 0,
    request=(
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=1),
        F("include_fenced_brokers", "bool", "2+"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F("brokers", "[]struct", fields=(
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", nullable="0+"),
            F("is_fenced", "bool", "2+"),
        )),
        # KIP-885: top-level (per answering broker), after Brokers, before
        # ClusterAuthorizedOperations, as the KIP's JSON orders them.
        F("broker_software_name", "string", f"{DESCRIBE_CLUSTER_KIP885_VERSION}+",
          nullable=f"{DESCRIBE_CLUSTER_KIP885_VERSION}+"),
        F("broker_software_version", "string", f"{DESCRIBE_CLUSTER_KIP885_VERSION}+",
          nullable=f"{DESCRIBE_CLUSTER_KIP885_VERSION}+"),
        F("cluster_authorized_operations", "int32", default=_INT32_MIN),
    ),
)

_SASL_HANDSHAKE = MessageSchema(
    API_SASL_HANDSHAKE, "SaslHandshake", (0, 1), None,
    request=(F("mechanism", "string"),),
    response=(F("error_code", "int16"), F("mechanisms", "[]string")),
)

_SASL_AUTHENTICATE = MessageSchema(
    API_SASL_AUTHENTICATE, "SaslAuthenticate", (0, 2), 2,
    request=(F("auth_bytes", "bytes"),),
    response=(
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("auth_bytes", "bytes"),
        F("session_lifetime_ms", "int64", "1+"),
    ),
)

_PUSH_CONFIG = MessageSchema(
    PUSH_CONFIG_API_KEY, "PushConfig", (0, 0), 0,
    request=(
        F("configs", "[]struct", fields=(
            F("config_key", "string"),
            F("config_value", "string"),
            F("config_type", "int8"),
            F("is_default", "bool"),
        )),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
    ),
)

# Read-only: the broker and topic configurations (the product asks for broker and topic
# resources only; v0 is gone from Kafka 4.0, KIP-896).
_DESCRIBE_CONFIGS = MessageSchema(
    API_DESCRIBE_CONFIGS, "DescribeConfigs", (0, 4), 4,
    request=(
        F("resources", "[]struct", fields=(
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", "[]string", nullable="0+"),
        )),
        F("include_synonyms", "bool", "1+"),
        F("include_documentation", "bool", "3+"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("results", "[]struct", fields=(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", "[]struct", fields=(
                F("name", "string"),
                F("value", "string", nullable="0+"),
                F("read_only", "bool"),
                F("is_default", "bool", "0"),
                F("config_source", "int8", "1+", default=-1),
                F("is_sensitive", "bool"),
                F("synonyms", "[]struct", "1+", fields=(
                    F("name", "string", "1+"),
                    F("value", "string", "1+", nullable="0+"),
                    F("source", "int8", "1+"),
                )),
                F("config_type", "int8", "3+"),
                F("documentation", "string", "3+", nullable="0+"),
            )),
        )),
    ),
)

# ---------------------------------------------------------------------------------------
# Consumer groups (read-only): FindCoordinator, ListGroups, DescribeGroups, ConsumerGroupDescribe
# (KIP-848), ShareGroupDescribe (KIP-932), OffsetFetch, ListOffsets. Every version of the 3.9.2 and
# 4.3.1 message JSON (4.x removed OffsetFetch v0 and ListOffsets v0, KIP-896; 3.9 had
# ShareGroupDescribe v0 in early access, 4.x v1 with the same fields).
# ---------------------------------------------------------------------------------------

_TOPIC_PARTITIONS = (
    F("topic_partitions", "[]struct", fields=(
        F("topic_id", "uuid"),
        F("topic_name", "string"),
        F("partitions", "[]int32"),
    )),
)

_FIND_COORDINATOR = MessageSchema(
    API_FIND_COORDINATOR, "FindCoordinator", (0, 6), 3,
    request=(
        F("key", "string", "0-3"),
        F("key_type", "int8", "1+"),
        F("coordinator_keys", "[]string", "4+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3"),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F("coordinators", "[]struct", "4+", fields=(
            F("key", "string", "4+"),
            F("node_id", "int32", "4+"),
            F("host", "string", "4+"),
            F("port", "int32", "4+"),
            F("error_code", "int16", "4+"),
            F("error_message", "string", "4+", nullable="4+"),
        )),
    ),
)

_LIST_GROUPS = MessageSchema(
    API_LIST_GROUPS, "ListGroups", (0, 5), 3,
    request=(
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("groups", "[]struct", fields=(
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", "4+"),
            F("group_type", "string", "5+"),
        )),
    ),
)

_DESCRIBE_GROUPS = MessageSchema(
    API_DESCRIBE_GROUPS, "DescribeGroups", (0, 6), 5,
    request=(
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "1+"),
        F("groups", "[]struct", fields=(
            F("error_code", "int16"),
            F("error_message", "string", "6+", nullable="6+"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F("members", "[]struct", fields=(
                F("member_id", "string"),
                F("group_instance_id", "string", "4+", nullable="4+"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            )),
            F("authorized_operations", "int32", "3+", default=_INT32_MIN),
        )),
    ),
)

_OFFSET_FETCH = MessageSchema(
    API_OFFSET_FETCH, "OffsetFetch", (0, 10), 6,
    request=(
        F("group_id", "string", "0-7"),
        F("topics", "[]struct", "0-7", nullable="2-7", fields=(
            F("name", "string", "0-7"),
            F("partition_indexes", "[]int32", "0-7"),
        )),
        F("groups", "[]struct", "8+", fields=(
            F("group_id", "string", "8+"),
            F("member_id", "string", "9+", nullable="9+"),
            F("member_epoch", "int32", "9+", default=-1),
            F("topics", "[]struct", "8+", nullable="8+", fields=(
                F("name", "string", "8-9"),
                F("topic_id", "uuid", "10+"),
                F("partition_indexes", "[]int32", "8+"),
            )),
        )),
        F("require_stable", "bool", "7+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+"),
        F("topics", "[]struct", "0-7", fields=(
            F("name", "string", "0-7"),
            F("partitions", "[]struct", "0-7", fields=(
                F("partition_index", "int32", "0-7"),
                F("committed_offset", "int64", "0-7"),
                F("committed_leader_epoch", "int32", "5-7", default=-1),
                F("metadata", "string", "0-7", nullable="0-7"),
                F("error_code", "int16", "0-7"),
            )),
        )),
        F("error_code", "int16", "2-7"),
        F("groups", "[]struct", "8+", fields=(
            F("group_id", "string", "8+"),
            F("topics", "[]struct", "8+", fields=(
                F("name", "string", "8-9"),
                F("topic_id", "uuid", "10+"),
                F("partitions", "[]struct", "8+", fields=(
                    F("partition_index", "int32", "8+"),
                    F("committed_offset", "int64", "8+"),
                    F("committed_leader_epoch", "int32", "8+", default=-1),
                    F("metadata", "string", "8+", nullable="8+"),
                    F("error_code", "int16", "8+"),
                )),
            )),
            F("error_code", "int16", "8+"),
        )),
    ),
)

_LIST_OFFSETS = MessageSchema(
    API_LIST_OFFSETS, "ListOffsets", (0, 11), 6,
    request=(
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
        F("topics", "[]struct", fields=(
            F("name", "string"),
            F("partitions", "[]struct", fields=(
                F("partition_index", "int32"),
                F("current_leader_epoch", "int32", "4+", default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", "0", default=1),
            )),
        )),
        F("timeout_ms", "int32", "10+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+"),
        F("topics", "[]struct", fields=(
            F("name", "string"),
            F("partitions", "[]struct", fields=(
                F("partition_index", "int32"),
                F("error_code", "int16"),
                F("old_style_offsets", "[]int64", "0"),
                F("timestamp", "int64", "1+", default=-1),
                F("offset", "int64", "1+", default=-1),
                F("leader_epoch", "int32", "4+", default=-1),
            )),
        )),
    ),
)

_CONSUMER_GROUP_DESCRIBE = MessageSchema(
    API_CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", (0, 1), 0,
    request=(
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("groups", "[]struct", fields=(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", "[]struct", fields=(
                F("member_id", "string"),
                F("instance_id", "string", nullable="0+"),
                F("rack_id", "string", nullable="0+"),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", "[]string"),
                F("subscribed_topic_regex", "string", nullable="0+"),
                F("assignment", "struct", fields=_TOPIC_PARTITIONS),
                F("target_assignment", "struct", fields=_TOPIC_PARTITIONS),
                F("member_type", "int8", "1+", default=-1),
            )),
            F("authorized_operations", "int32", default=_INT32_MIN),
        )),
    ),
)

_SHARE_GROUP_DESCRIBE = MessageSchema(
    API_SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", (0, 1), 0,
    request=(
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("groups", "[]struct", fields=(
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F("members", "[]struct", fields=(
                F("member_id", "string"),
                F("rack_id", "string", nullable="0+"),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", "[]string"),
                F("assignment", "struct", fields=_TOPIC_PARTITIONS),
            )),
            F("authorized_operations", "int32", default=_INT32_MIN),
        )),
    ),
)

_DESCRIBE_SHARE_GROUP_OFFSETS = MessageSchema(
    API_DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", (0, 1), 0,
    request=(
        F("groups", "[]struct", fields=(
            F("group_id", "string"),
            F("topics", "[]struct", nullable="0+", fields=(  # null: every topic-partition of the group
                F("topic_name", "string"),
                F("partitions", "[]int32"),
            )),
        )),
    ),
    response=(
        F("throttle_time_ms", "int32"),
        F("groups", "[]struct", fields=(
            F("group_id", "string"),
            F("topics", "[]struct", fields=(
                F("topic_name", "string"),
                F("topic_id", "uuid"),
                F("partitions", "[]struct", fields=(
                    F("partition_index", "int32"),
                    F("start_offset", "int64"),
                    F("leader_epoch", "int32"),
                    F("lag", "int64", "1+", default=-1),
                    F("error_code", "int16"),
                    F("error_message", "string", nullable="0+"),
                )),
            )),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
        )),
    ),
)

_GROUP_SCHEMAS = (_FIND_COORDINATOR, _LIST_GROUPS, _DESCRIBE_GROUPS, _OFFSET_FETCH, _LIST_OFFSETS,
                  _CONSUMER_GROUP_DESCRIBE, _SHARE_GROUP_DESCRIBE, _DESCRIBE_SHARE_GROUP_OFFSETS)

SCHEMAS: dict[int, MessageSchema] = {
    s.api_key: s
    for s in (_API_VERSIONS, _METADATA, _DESCRIBE_CLUSTER, _SASL_HANDSHAKE, _SASL_AUTHENTICATE,
              _DESCRIBE_CONFIGS, _PUSH_CONFIG, *_GROUP_SCHEMAS)
}


def supported_versions(api_key: int) -> tuple[int, int]:
    """(min, max) version this codec implements for an api key."""
    try:
        return SCHEMAS[api_key].valid_versions
    except KeyError:
        raise ProtocolError(f"api key {api_key} is not implemented by this codec") from None


def _schema(api_key: int, api_version: int) -> MessageSchema:
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise ProtocolError(f"api key {api_key} is not implemented by this codec")
    lo, hi = schema.valid_versions
    if not lo <= api_version <= hi:
        raise ProtocolError(f"{schema.name} v{api_version} not implemented (have v{lo}-v{hi})")
    return schema
