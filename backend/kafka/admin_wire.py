"""What the librdkafka helper process and its parent say to each other: JSON lines, the admin results as plain lists.

JSON, not pickle: the helper parses what hostile brokers send, so the parent treats its lines as data only; a line
that does not fit these shapes is a broken helper (WireError), never code.
"""

from __future__ import annotations

import json
from typing import Any

from backend.kafka.admin import ClusterDescription, MetadataView, NodeInfo, TopicInfo, TopicListing

MAX_LINE_BYTES = 512 * 1024 * 1024  # a helper line above this is a broken helper (100,000 topics take ~10 MB)


class WireError(ValueError):
    """A helper line that is not what the protocol allows."""


def dumps(message: dict[str, Any]) -> bytes:
    """One protocol line (ASCII JSON: lone surrogates in broker strings travel as escapes)."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    """Parse one protocol line into a dict; WireError for anything else."""
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("not a JSON object")
    return message


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int(value: Any) -> int:
    if type(value) is not int:
        raise WireError(f"expected an integer, got {type(value).__name__}")
    return value


def _opt_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise WireError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise WireError(f"expected a list, got {type(value).__name__}")
    return value


def _nodes_out(nodes: list[NodeInfo]) -> list[list[Any]]:
    return [[n.broker_id, n.host, n.port, n.rack] for n in nodes]


def _nodes_in(value: Any) -> list[NodeInfo]:
    nodes = []
    for row in _list(value):
        broker_id, host, port, rack = _list(row) if len(_list(row)) == 4 else _bad("a node is 4 values")
        nodes.append(NodeInfo(_int(broker_id), _str(host), _int(port), _opt_str(rack)))
    return nodes


def _bad(why: str) -> Any:
    raise WireError(why)


def encode_description(d: ClusterDescription) -> dict[str, Any]:
    """DescribeCluster's result as JSON values."""
    return {"cluster_id": d.cluster_id, "controller_id": d.controller_id, "brokers": _nodes_out(d.brokers),
            "authorized_operations": d.authorized_operations}


def decode_description(value: Any) -> ClusterDescription:
    """The inverse of encode_description."""
    if not isinstance(value, dict):
        raise WireError("a description is an object")
    ops = value.get("authorized_operations")
    return ClusterDescription(
        cluster_id=_opt_str(value.get("cluster_id")),
        controller_id=_opt_int(value.get("controller_id")),
        brokers=_nodes_in(value.get("brokers")),
        authorized_operations=None if ops is None else [_str(op) for op in _list(ops)],
    )


def encode_view(v: MetadataView) -> dict[str, Any]:
    """Metadata's result as JSON values."""
    return {"cluster_id": v.cluster_id, "controller_id": v.controller_id, "brokers": _nodes_out(v.brokers),
            "topic_names": v.topic_names}


def decode_view(value: Any) -> MetadataView:
    """The inverse of encode_view."""
    if not isinstance(value, dict):
        raise WireError("a metadata view is an object")
    return MetadataView(
        cluster_id=_opt_str(value.get("cluster_id")),
        controller_id=_opt_int(value.get("controller_id")),
        brokers=_nodes_in(value.get("brokers")),
        topic_names=[_str(name) for name in _list(value.get("topic_names"))],
    )


def encode_listing(listing: TopicListing) -> dict[str, Any]:
    """DescribeTopics' result as JSON values (one list per topic)."""
    return {
        "topics": [[t.topic, t.topic_id, t.internal, t.partitions, t.replication_factor, t.under_replicated,
                    t.offline_partitions, sorted(t.replica_broker_ids)] for t in listing.topics],
        "failed": listing.failed,
    }


def decode_listing(value: Any) -> TopicListing:
    """The inverse of encode_listing."""
    if not isinstance(value, dict) or not isinstance(value.get("failed"), dict):
        raise WireError("a topic listing is an object with `failed`")
    topics = []
    for row in _list(value.get("topics")):
        fields = _list(row)
        if len(fields) != 8 or not isinstance(fields[2], bool):
            raise WireError("a topic is 8 values")
        topics.append(TopicInfo(
            topic=_str(fields[0]), topic_id=_opt_str(fields[1]), internal=fields[2], partitions=_int(fields[3]),
            replication_factor=_int(fields[4]), under_replicated=_int(fields[5]),
            offline_partitions=_int(fields[6]), replica_broker_ids={_int(b) for b in _list(fields[7])},
        ))
    failed = {_str(k): _str(v) for k, v in value["failed"].items()}
    return TopicListing(topics=topics, failed=failed)


def encode_errors(errors: list[tuple[int, str]]) -> list[list[Any]]:
    """Client-level errors as (code, text) pairs."""
    return [[code, text] for code, text in errors]


def decode_errors(value: Any) -> list[tuple[int, str]]:
    """The inverse of encode_errors."""
    out = []
    for row in _list(value):
        code, text = _list(row) if len(_list(row)) == 2 else _bad("an error is 2 values")
        out.append((_int(code), _str(text)))
    return out
