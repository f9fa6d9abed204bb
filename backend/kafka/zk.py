"""Read-only ZooKeeper reads of a ZooKeeper-mode Kafka cluster (KIP-78 /cluster/id, brokers, topics)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from backend.config import ZooKeeperConfig
from backend.kafka.admin import normalize_topic_id

_KAZOO_LOG = logging.getLogger("backend.kafka.kazoo")
_KAZOO_LOG.setLevel(logging.ERROR)


@dataclass(slots=True)
class ZkView:
    """What ZooKeeper says about a cluster; `error` is set when the read failed."""

    cluster_id: str | None = None
    controller_id: int | None = None
    broker_registrations: dict[int, dict[str, Any]] = field(default_factory=dict)
    topic_ids: dict[str, str | None] = field(default_factory=dict)
    nodes: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def read_zookeeper(config: ZooKeeperConfig, timeout_s: float, *, read_topics: bool = True) -> ZkView:
    """Read /cluster/id, /controller, /brokers/ids/* and /brokers/topics/* within timeout_s."""
    view = ZkView()
    timeout_s = min(timeout_s, config.timeout_s) if config.timeout_s else timeout_s
    deadline = time.monotonic() + timeout_s
    client = KazooClient(
        hosts=config.connect_string,
        timeout=max(1.0, timeout_s),
        read_only=True,
        connection_retry=KazooRetry(max_tries=1, deadline=timeout_s),
        command_retry=KazooRetry(max_tries=1, deadline=timeout_s),
        logger=_KAZOO_LOG,
    )
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, KazooException, OSError) as exc:
        view.error = f"ZooKeeper {config.connect_string} unreachable: {type(exc).__name__}: {exc}"
        _close(client)
        return view
    try:
        _read_into(client, view, deadline, read_topics)
    except (KazooTimeoutError, KazooException, OSError) as exc:
        view.error = f"ZooKeeper read failed: {type(exc).__name__}: {exc}"
    finally:
        _close(client)
    return view


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise KazooTimeoutError("ZooKeeper read exceeded its deadline")
    return left


def _get(client: KazooClient, path: str, deadline: float) -> str | None:
    try:
        data, _stat = client.get_async(path).get(timeout=_remaining(deadline))
    except NoNodeError:
        return None
    return _decode(data)


def _children(client: KazooClient, path: str, deadline: float) -> list[str]:
    try:
        return sorted(client.get_children_async(path).get(timeout=_remaining(deadline)))
    except NoNodeError:
        return []


def _read_into(client: KazooClient, view: ZkView, deadline: float, read_topics: bool) -> None:
    cluster_node = _get(client, "/cluster/id", deadline)
    if cluster_node is not None:
        view.nodes.append(("/cluster/id", cluster_node))
        view.cluster_id = _json(cluster_node).get("id")
    controller_node = _get(client, "/controller", deadline)
    if controller_node is not None:
        view.nodes.append(("/controller", controller_node))
        broker_id = _json(controller_node).get("brokerid")
        view.controller_id = int(broker_id) if isinstance(broker_id, int) else None
    ids = [c for c in _children(client, "/brokers/ids", deadline) if c.lstrip("-").isdigit()]
    for child, text in _get_children_data(client, "/brokers/ids", ids, deadline):
        view.nodes.append((f"/brokers/ids/{child}", text))
        view.broker_registrations[int(child)] = _json(text)
    if not read_topics:
        return
    topics = _children(client, "/brokers/topics", deadline)
    for topic, text in _get_children_data(client, "/brokers/topics", topics, deadline):
        view.topic_ids[topic] = normalize_topic_id(_json(text).get("topic_id"))


def _get_children_data(
    client: KazooClient, parent: str, children: list[str], deadline: float
) -> list[tuple[str, str]]:
    """(child, decoded data) of each child, read concurrently; children deleted meanwhile are skipped."""
    pending = {child: client.get_async(f"{parent}/{child}") for child in children}
    found = []
    for child, result in pending.items():
        try:
            data, _stat = result.get(timeout=_remaining(deadline))
        except NoNodeError:
            continue
        found.append((child, _decode(data)))
    return found


def _close(client: KazooClient) -> None:
    try:
        client.stop()
        client.close()
    except (KazooException, OSError):
        pass
