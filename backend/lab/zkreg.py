"""Registers a ZooKeeper-mode lab cluster in a real ZooKeeper the way a Kafka broker does (KIP-78, KIP-516)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from backend.lab.state import TopicState, partition_assignment

ZK_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ZkBroker:
    """What /brokers/ids/N describes."""

    id: int
    host: str
    port: int
    rack: str | None
    protocol: str = "PLAINTEXT"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def broker_registration(b: ZkBroker) -> dict[str, object]:
    """The JSON a Kafka 2.7+ broker writes to /brokers/ids/N (registration version 5)."""
    listener = b.protocol
    reg: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": {listener: b.protocol},
        "endpoints": [f"{listener}://{b.host}:{b.port}"],
        "jmx_port": -1,
        "port": b.port if b.protocol == "PLAINTEXT" else -1,
        "host": b.host if b.protocol == "PLAINTEXT" else None,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if b.rack is not None:
        reg["rack"] = b.rack
    return reg


class ZkRegistrar:
    """One kazoo session per lab cluster; broker and controller znodes are ephemeral like Kafka's."""

    def __init__(self, connect: str, chroot: str, timeout_s: float = ZK_TIMEOUT_S) -> None:
        self.connect = connect
        self.chroot = chroot.rstrip("/")
        self.timeout_s = timeout_s
        self._zk: KazooClient | None = None

    def start(self) -> None:
        """Connect (bounded by the timeout) and create the chroot and Kafka's base paths."""
        root = KazooClient(hosts=self.connect, timeout=self.timeout_s)
        root.start(timeout=self.timeout_s)
        try:
            root.ensure_path(self.chroot)
        finally:
            root.stop()
            root.close()
        self._zk = KazooClient(hosts=self.connect + self.chroot, timeout=self.timeout_s)
        self._zk.start(timeout=self.timeout_s)
        for path in ("/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics",
                     "/config/changes", "/admin/delete_topics", "/isr_change_notification",
                     "/latest_producer_id_block"):
            self._zk.ensure_path(path)

    @property
    def zk(self) -> KazooClient:
        """The connected client (start() first)."""
        if self._zk is None:
            raise RuntimeError("ZkRegistrar.start() was not called")
        return self._zk

    def stop(self) -> None:
        """Close the session; ephemeral broker and controller znodes disappear as with a real broker."""
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None

    def _put(self, path: str, data: bytes, ephemeral: bool = False) -> None:
        try:
            self.zk.create(path, data, ephemeral=ephemeral, makepath=True)
        except NodeExistsError:
            self.zk.set(path, data)

    def write_cluster_id(self, cluster_id: str) -> None:
        """/cluster/id as KIP-78 specifies (version is the string "1", as Kafka writes it)."""
        self._put("/cluster/id", _json({"version": "1", "id": cluster_id}))

    def register_broker(self, b: ZkBroker) -> None:
        """Create the broker's ephemeral /brokers/ids/N."""
        path = f"/brokers/ids/{b.id}"
        try:
            self.zk.delete(path)
        except NoNodeError:
            pass
        self.zk.create(path, _json(broker_registration(b)), ephemeral=True, makepath=True)

    def unregister_broker(self, broker_id: int) -> None:
        """Remove /brokers/ids/N (a stopped broker)."""
        try:
            self.zk.delete(f"/brokers/ids/{broker_id}")
        except NoNodeError:
            pass

    def elect_controller(self, broker_id: int) -> None:
        """Write the ephemeral /controller and bump /controller_epoch."""
        try:
            epoch = int(self.zk.get("/controller_epoch")[0] or b"0") + 1
            self.zk.set("/controller_epoch", str(epoch).encode())
        except NoNodeError:
            self.zk.create("/controller_epoch", b"1", makepath=True)
        try:
            self.zk.delete("/controller")
        except NoNodeError:
            pass
        self.zk.create("/controller", _json({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()}),
                       ephemeral=True, makepath=True)

    def write_topic(self, topic: TopicState, broker_ids: Sequence[int]) -> None:
        """/brokers/topics/T (version 3 with topic_id, KIP-516), partition states and topic config."""
        assignment = partition_assignment(topic, broker_ids)
        self._put(f"/brokers/topics/{topic.name}", _json({
            "version": 3,
            "partitions": {str(p): r for p, r in assignment.items()},
            "topic_id": topic.topic_id,
            "adding_replicas": {},
            "removing_replicas": {},
        }))
        for p, replicas in assignment.items():
            self._put(f"/brokers/topics/{topic.name}/partitions/{p}/state", _json({
                "controller_epoch": 1, "leader": replicas[0], "version": 1, "leader_epoch": 0, "isr": replicas,
            }))
        self._put(f"/config/topics/{topic.name}", _json({"version": 1, "config": {}}))

    def delete_topic(self, name: str) -> None:
        """Remove the topic's znodes."""
        for path in (f"/brokers/topics/{name}", f"/config/topics/{name}"):
            try:
                self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass

    def read_json(self, path: str) -> object:
        """Read and parse one znode (for tests and diagnostics)."""
        data, _stat = self.zk.get(path)
        return json.loads(data.decode("utf-8"))
