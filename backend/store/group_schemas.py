"""Schemas of the consumer-group state kinds: one file per cluster and kind, no day table (lag is a time series in
Prometheus; the lake keeps the current state, a bounded window per group, the change log and incidents)."""

from __future__ import annotations

import pyarrow as pa

_TS = pa.timestamp("us", tz="UTC")

GROUP_STATE = "group_state"
GROUP_MEMBERS = "group_members"
GROUP_OFFSETS = "group_offsets"
GROUP_RUNS = "group_runs"

_HEAD = [("poll_id", pa.string()), ("polled_at", _TS), ("cluster_name", pa.string()), ("cluster_id", pa.string())]

GROUP_SCHEMAS: dict[str, pa.Schema] = {
    GROUP_STATE: pa.schema([
        *_HEAD,
        ("group_id", pa.string()),
        ("group_type", pa.string()),  # classic / consumer / share / streams / unknown
        ("protocol_type", pa.string()),  # consumer, connect, share, "" ...
        ("protocol", pa.string()),  # the assignor (classic: the chosen protocol; KIP-848: AssignorName)
        ("state", pa.string()),  # Stable, Empty, PreparingRebalance, Dead, ...
        ("coordinator_id", pa.int32()),
        ("members", pa.int32()),
        ("topics", pa.int32()),
        ("partitions", pa.int32()),
        ("topic_names", pa.list_(pa.string())),  # the topics it commits to or is assigned
        ("lag", pa.int64()),  # sum of positive partition lags; null when no partition's lag is known (or >= 0)
        ("lag_partitions", pa.int32()),
        ("max_partition_lag", pa.int64()),
        ("status", pa.string()),  # ok / lagging / stalled / stopped / empty_with_lag / offset_ahead / unknown
        ("status_since", _TS),
        ("evidence_json", pa.string()),
        ("last_commit_at", _TS),
        ("first_seen_at", _TS),
        ("window_at", pa.list_(_TS)),  # the bounded window (group_window reads), oldest first
        ("window_lag", pa.list_(pa.int64())),  # records waiting at each read: lag + uncommitted_records
        ("window_committed", pa.list_(pa.int64())),
        ("error", pa.string()),
        ("collected_at", _TS),
        ("schema_version", pa.int32()),
        # records on assigned partitions without a commit (log end - log start), beside the lag; null: none such
        ("uncommitted_records", pa.int64()),
        ("uncommitted_partitions", pa.int32()),
        ("partitions_ahead", pa.int32()),  # partitions whose committed offset is past the end of the log
    ]),
    GROUP_MEMBERS: pa.schema([
        *_HEAD,
        ("group_id", pa.string()),
        ("member_id", pa.string()),
        ("instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("rack", pa.string()),
        ("member_type", pa.string()),
        ("assigned_partitions", pa.int32()),
        ("assignment_json", pa.string()),  # {"topic": [partitions]}
        ("subscribed_json", pa.string()),  # ["topic", ...]
        ("schema_version", pa.int32()),
        ("subscribed_regex", pa.string()),  # a KIP-848 member's subscription pattern
    ]),
    GROUP_OFFSETS: pa.schema([
        *_HEAD,
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("committed_offset", pa.int64()),  # null: assigned, nothing committed
        ("end_offset", pa.int64()),
        ("lag", pa.int64()),  # end - committed (negative: the commit is past the end)
        ("member_id", pa.string()),
        ("topic_id", pa.string()),  # the topic's id when the commit last moved
        ("last_moved_at", _TS),
        ("lag_since", _TS),
        ("schema_version", pa.int32()),
        ("offset_kind", pa.string()),  # committed / share_start (committed_offset is a share group's start offset)
        ("reported_lag", pa.int64()),  # share_start: the lag the share coordinator computed (`lag` repeats it)
        ("log_start_offset", pa.int64()),  # an assigned partition without a commit: its log's start offset
    ]),
    GROUP_RUNS: pa.schema([
        *_HEAD,
        ("collected_at", _TS),
        ("groups_listed", pa.int32()),
        ("groups_read", pa.int32()),
        ("groups_skipped", pa.int32()),  # listed beyond max_groups_per_cluster
        ("brokers_answered", pa.int32()),
        ("error", pa.string()),
        ("duration_ms", pa.float64()),
        ("versions_json", pa.string()),
        ("requests_json", pa.string()),
        ("schema_version", pa.int32()),
    ]),
}
# State kind (the manifest's name) -> table schema name.
GROUP_STATE_TABLES: dict[str, str] = {
    "groups": GROUP_STATE,
    "group_members": GROUP_MEMBERS,
    "group_offsets": GROUP_OFFSETS,
    "group_runs": GROUP_RUNS,
}
