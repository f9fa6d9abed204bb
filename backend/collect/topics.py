"""A cluster's topic table from one Metadata request: ids (KIP-516), partitions, replicas, ISR."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.collect.probing import cluster_resolver
from backend.config import ClusterConfig
from backend.kafka import probe as probe_module
from backend.kafka import protocol as P
from backend.kafka.admin import MetadataView, NodeInfo, TopicInfo, TopicListing, topic_info


class TopicFetchError(Exception):
    """No broker answered the Metadata request; the message says why for each one tried."""


@dataclass(frozen=True)
class TopicTable:
    """One Metadata answer: the cluster's id, controller and brokers, and every topic."""

    view: MetadataView
    listing: TopicListing
    answered_by: str  # host:port of the broker that answered


@dataclass
class _ClusterMemo:
    response: probe_module.ResponseMemo = field(default_factory=probe_module.ResponseMemo)
    body: dict[str, Any] | None = None
    table: tuple[MetadataView, TopicListing] | None = None


def view_from_metadata(body: dict[str, Any]) -> MetadataView:
    """Cluster id, controller and brokers of a decoded Metadata response."""
    controller = body.get("controller_id")
    return MetadataView(
        cluster_id=body.get("cluster_id"),
        controller_id=controller if isinstance(controller, int) and controller >= 0 else None,
        brokers=sorted(
            (NodeInfo(int(b["node_id"]), str(b["host"]), int(b["port"]), b.get("rack"))
             for b in body.get("brokers") or []),
            key=lambda n: n.broker_id,
        ),
        topic_names=sorted(t["name"] for t in body.get("topics") or [] if t.get("name")),
    )


def listing_from_metadata(body: dict[str, Any]) -> TopicListing:
    """Turn a decoded Metadata response into a TopicListing (topic-level errors go to `failed`)."""
    topics: list[TopicInfo] = []
    failed: dict[str, str] = {}
    for topic in body.get("topics") or []:
        name = topic.get("name")
        if not name:
            continue
        error = topic.get("error_code") or 0
        if error == P.UNKNOWN_TOPIC_OR_PARTITION:
            continue  # deleted while the broker built the answer
        if error and not topic.get("partitions"):
            failed[name] = f"Metadata error {P.error_name(error)}"
            continue
        topics.append(topic_info(
            name, topic.get("topic_id"), bool(topic.get("is_internal")),
            (
                (p.get("leader_id", -1), p.get("replica_nodes") or [], len(p.get("isr_nodes") or []))
                for p in topic.get("partitions") or []
            ),
        ))
    return TopicListing(topics=topics, failed=failed)


def metadata_element_budget(max_response_bytes: int) -> int:
    """Elements allowed in a Metadata answer: one per 5 bytes of the cap (3.4 M for 16 MiB, 200,000 partitions)."""
    return max(P.MAX_SMALL_RESPONSE_ELEMENTS, max_response_bytes // 5)


class TopicTables:
    """Fetches each cluster's topic table; an answer with the same bytes as last time is not decoded again."""

    def __init__(self) -> None:
        """Start with no memos."""
        self._memos: dict[str, _ClusterMemo] = {}
        self._lock = threading.Lock()
        self.reused = 0  # answers served from a memo (for tests and benchmarks)

    def forget(self) -> None:
        """Drop every memo (the next answers are decoded in full)."""
        with self._lock:
            self._memos.clear()

    def _memo(self, cluster_name: str) -> _ClusterMemo:
        with self._lock:
            return self._memos.setdefault(cluster_name, _ClusterMemo())

    def fetch(self, cluster: ClusterConfig, candidates: Sequence[tuple[str, int]], deadline: float,
              request_timeout_s: float, *,
              max_response_bytes: int = P.DEFAULT_MAX_METADATA_RESPONSE_BYTES) -> TopicTable:
        """Ask the candidate brokers in turn for Metadata of every topic, until one answers.

        An answer above max_response_bytes, or with more elements than such an answer of
        well-formed partitions would hold, is refused (that broker counts as not answering).
        """
        max_elements = metadata_element_budget(max_response_bytes)
        security = probe_module.ProbeSecurity.from_cluster(cluster)
        memo = self._memo(cluster.name)
        failures: list[str] = []
        for host, port in dict.fromkeys(candidates):  # in order, without repeats
            left = deadline - time.monotonic()
            if left <= 0.05:
                failures.append("poll deadline reached")
                break
            result = probe_module.probe_broker(
                host, port, security=security, timeout_s=min(request_timeout_s, left),
                with_metadata=True, metadata_memo=memo.response,
                max_response_bytes=max_response_bytes, max_metadata_elements=max_elements,
                resolver=cluster_resolver(cluster.name),
            )
            body = result.metadata
            if result.ok and body is not None and not body.get("error_code") and body.get("brokers"):
                if body is not memo.body or memo.table is None:
                    memo.body, memo.table = body, (view_from_metadata(body), listing_from_metadata(body))
                else:
                    self.reused += 1
                return TopicTable(view=memo.table[0], listing=memo.table[1], answered_by=f"{host}:{port}")
            reason = result.error or (
                "no Metadata answer" if body is None
                else f"Metadata error {P.error_name(body.get('error_code') or 0)}")
            failures.append(f"{host}:{port}: {reason}")
        raise TopicFetchError("; ".join(failures) or "no broker to ask")
