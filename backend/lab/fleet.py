"""LabFleet: every lab cluster's brokers in one asyncio loop on a background thread."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

from backend.lab.broker_configs import HostileAnswers
from backend.lab.cluster import BrokerRuntime, ClusterRuntime
from backend.lab.faults import BrokerFaults, read_control_file, write_control_file
from backend.lab.metrics_endpoint import LabMetrics
from backend.lab.model import LabConfig, TopicSpec
from backend.lab.server import BrokerServer
from backend.lab.state import LabState, TopicState
from backend.lab.zkreg import ZkBroker, ZkRegistrar

log = logging.getLogger(__name__)

CONTROL_POLL_S = 0.2
OP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class LabBrokerInfo:
    """Where one lab broker listens."""

    id: int
    host: str
    port: int
    rack: str | None
    software_version: str


@dataclass(frozen=True)
class LabClusterInfo:
    """What a test or the CLI needs to reach one lab cluster."""

    name: str
    cluster_id: str
    profile: str
    bootstrap: str
    security_protocol: str
    brokers: tuple[LabBrokerInfo, ...]
    zookeeper_connect: str | None
    zookeeper_chroot: str | None
    zookeeper_error: str | None
    push_config: bool
    sink_dir: Path | None


class LabFleet:
    """Start/stop the lab clusters; run-time operations (faults, topics) are thread-safe."""

    def __init__(self, config: LabConfig, *, zookeeper_connect: str | None = None,
                 state_file: Path | None = None, control_file: Path | None = None, metrics_padding: int = 200) -> None:
        self.config = config
        self.zookeeper_connect = zookeeper_connect or config.zookeeper_connect
        self.state = LabState.load(state_file or config.state_file)
        self.control_file = control_file or config.state_dir / "faults.json"
        self.runtimes: dict[str, ClusterRuntime] = {}
        self.servers: dict[tuple[str, int], BrokerServer] = {}
        self.registrars: dict[str, ZkRegistrar] = {}
        self.zk_errors: dict[str, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._control_task: asyncio.Task[None] | None = None
        self._control_seen: str | None = None
        self._lock = threading.RLock()
        self.metrics_padding = metrics_padding
        self.metrics: LabMetrics | None = None

    # -------------------------------------------------------------- lifecycle

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LabFleet:
        """Bind every broker, register ZooKeeper-mode clusters, save state; returns self."""
        if self._loop is not None:
            return self
        self.control_file.unlink(missing_ok=True)
        for spec in self.config.clusters:
            self.runtimes[spec.name] = ClusterRuntime(spec, self.state, self.config.host, self.config.sink_dir)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lab-fleet", daemon=True)
        self._thread.start()
        try:
            self._run(self._start_servers())
            for name, rt in self.runtimes.items():
                self.state.clusters[name].ports = {b.id: b.port for b in rt.brokers.values()}
            self.state.save()
            with ThreadPoolExecutor(max_workers=4, thread_name_prefix="lab-zk") as pool:
                list(pool.map(self._register_zk, self.runtimes.values()))  # bounded by each registrar's timeout
            self._control_task = self._run(self._start_control_watch())
            self.metrics = LabMetrics(self, padding_series=self.metrics_padding).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close every listener and ZooKeeper session and end the loop thread."""
        loop = self._loop
        if loop is None:
            return
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        try:
            self._run(self._stop_servers())
        finally:
            for reg in self.registrars.values():
                reg.stop()
            self.registrars.clear()
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(OP_TIMEOUT_S)
            loop.close()
            self._loop = None
            self._thread = None

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the lab fleet is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(OP_TIMEOUT_S)

    async def _start_servers(self) -> None:
        for name, rt in self.runtimes.items():
            for bid, broker in rt.brokers.items():
                server = BrokerServer(rt, broker)
                self.servers[(name, bid)] = server
                await server.start()

    async def _stop_servers(self) -> None:
        if self._control_task is not None:
            self._control_task.cancel()
        for server in self.servers.values():
            await server.stop()
        # Connection handlers still waiting on a client end here, so the loop closes clean.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), OP_TIMEOUT_S / 2)

    async def _start_control_watch(self) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._watch_control_file())

    async def _watch_control_file(self) -> None:
        while True:
            await asyncio.sleep(CONTROL_POLL_S)
            try:
                text = self.control_file.read_text(encoding="utf-8") if self.control_file.exists() else ""
                if text == self._control_seen:
                    continue
                self._control_seen = text
                faults = read_control_file(self.control_file)
                await asyncio.to_thread(self._apply_all_faults, faults)
            except (OSError, ValueError, TypeError) as exc:
                log.warning("lab fault control file %s ignored: %s", self.control_file, exc)

    # ------------------------------------------------------------- ZooKeeper

    def _zk_connect(self, rt: ClusterRuntime) -> str | None:
        zk = rt.spec.zookeeper
        if zk is None:
            return None
        return zk.connect or self.zookeeper_connect

    def _register_zk(self, rt: ClusterRuntime) -> None:
        zk = rt.spec.zookeeper
        connect = self._zk_connect(rt)
        if zk is None:
            return
        if connect is None:
            self.zk_errors[rt.spec.name] = "no ZooKeeper connect string (set zookeeper_connect or --zookeeper)"
            return
        rt.zookeeper_connect = connect
        reg = ZkRegistrar(connect, zk.chroot)
        try:
            reg.start()
        except Exception as exc:  # noqa: BLE001 - kazoo raises its own timeout types; the lab keeps serving without ZK
            self.zk_errors[rt.spec.name] = f"ZooKeeper {connect} unreachable: {exc}"
            reg.stop()
            return
        self.registrars[rt.spec.name] = reg
        zk_cluster_id = rt.cluster_id
        if rt.spec.misrouted_to is not None:
            zk_cluster_id = self.runtimes[rt.spec.misrouted_to].cluster_id
        reg.write_cluster_id(zk_cluster_id)
        for b in rt.alive_brokers():
            reg.register_broker(self._zk_broker(rt, b))
        if rt.controller_id() >= 0:
            reg.elect_controller(rt.controller_id())
        for t in self.state.topics(rt.spec.name):
            reg.write_topic(t, list(rt.brokers))

    @staticmethod
    def _zk_broker(rt: ClusterRuntime, b: BrokerRuntime) -> ZkBroker:
        return ZkBroker(b.id, b.host, b.port, b.spec.rack, rt.security_protocol)

    # ---------------------------------------------------------------- faults

    def _apply_all_faults(self, faults: dict[tuple[str, int], BrokerFaults]) -> None:
        for name, bid in list(self.servers):
            self._apply_faults(name, bid, faults.get((name, bid), BrokerFaults()))

    def _apply_faults(self, cluster: str, broker_id: int, new: BrokerFaults) -> None:
        with self._lock:
            rt = self.runtimes[cluster]
            broker = rt.brokers[broker_id]
            server = self.servers[(cluster, broker_id)]
            was_stopped = broker.faults.stopped
            controller_before = rt.controller_id()
            broker.faults = replace(new)
            listen = not (new.refuse or new.stopped)
            if listen and not server.listening:
                self._run(server.start())
            elif not listen and server.listening:
                self._run(server.stop())
            reg = self.registrars.get(cluster)
            if reg is not None and was_stopped != new.stopped:
                if new.stopped:
                    reg.unregister_broker(broker_id)
                else:
                    reg.register_broker(self._zk_broker(rt, broker))
                if rt.controller_id() != controller_before and rt.controller_id() >= 0:
                    reg.elect_controller(rt.controller_id())

    def faults(self, cluster: str, broker_id: int) -> BrokerFaults:
        """The faults active on one broker."""
        return replace(self.runtimes[cluster].brokers[broker_id].faults)

    def set_fault(self, cluster: str, broker_id: int, **changes: Any) -> BrokerFaults:
        """Change faults of one broker now (latency_ms=, refuse=, drop_mid_response=, malformed=, stopped=)."""
        if broker_id not in self.runtimes[cluster].brokers:
            raise KeyError(f"cluster {cluster!r} has no broker {broker_id}")
        new = replace(self.faults(cluster, broker_id), **changes)
        all_faults = {(n, b): self.faults(n, b) for (n, b) in self.servers}
        all_faults[(cluster, broker_id)] = new
        write_control_file(self.control_file, all_faults)
        self._apply_faults(cluster, broker_id, new)
        self._control_seen = self.control_file.read_text(encoding="utf-8")
        return new

    def clear_faults(self) -> None:
        """Turn every fault off (stopped brokers start again)."""
        for name, bid in list(self.servers):
            if self.faults(name, bid).active():
                self.set_fault(name, bid, **vars(BrokerFaults()))

    def stop_broker(self, cluster: str, broker_id: int) -> None:
        """Take one broker down: no listener, gone from Metadata and ZooKeeper."""
        self.set_fault(cluster, broker_id, stopped=True)

    def start_broker(self, cluster: str, broker_id: int) -> None:
        """Bring a stopped broker back on its port."""
        self.set_fault(cluster, broker_id, stopped=False)

    # ---------------------------------------------------------------- topics

    def create_topic(self, cluster: str, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, object] | None = None) -> TopicState:
        """Lab admin operation: create a topic with a fresh id (configs: its overrides)."""
        rt = self.runtimes[cluster]
        if not 1 <= replication_factor <= len(rt.brokers) or partitions < 1:
            raise ValueError(f"invalid topic layout: {partitions} partitions, replication factor {replication_factor}")
        rt.configs.set_topic_configs(name, {})
        for key, value in (configs or {}).items():
            rt.configs.set_topic_config(name, key, value)
        ts = self.state.create_topic(cluster, TopicSpec(name, partitions, replication_factor))
        if cluster in self.registrars:
            self.registrars[cluster].write_topic(ts, list(rt.brokers))
        return ts

    def delete_topic(self, cluster: str, name: str) -> None:
        """Lab admin operation: delete a topic."""
        self.state.delete_topic(cluster, name)
        self.runtimes[cluster].configs.set_topic_configs(name, None)
        if cluster in self.registrars:
            self.registrars[cluster].delete_topic(name)

    def recreate_topic(self, cluster: str, name: str) -> TopicState:
        """Delete and recreate a topic under the same name: same layout, new topic id."""
        ts = self.state.recreate_topic(cluster, name)
        if cluster in self.registrars:
            reg = self.registrars[cluster]
            reg.delete_topic(name)
            reg.write_topic(ts, list(self.runtimes[cluster].brokers))
        return ts

    def set_broker_config(self, cluster: str, broker_id: int | None, name: str, value: object | None) -> None:
        """Lab admin operation: a dynamic broker config of one broker (None: the cluster-wide default); None deletes."""
        self.runtimes[cluster].configs.set_broker_config(broker_id, name, value)

    def set_topic_config(self, cluster: str, topic: str, name: str, value: object | None) -> None:
        """Lab admin operation: a topic override; value None deletes it."""
        if topic not in {t.name for t in self.state.topics(cluster)}:
            raise KeyError(f"cluster {cluster!r} has no topic {topic!r}")
        self.runtimes[cluster].configs.set_topic_config(topic, name, value)

    def set_hostile_answers(self, cluster: str, hostile: HostileAnswers | None) -> None:
        """Lab fault: the cluster's brokers add `hostile`'s resources and errors to DescribeConfigs answers."""
        self.runtimes[cluster].configs.set_hostile(hostile)

    def topic_id(self, cluster: str, name: str) -> str:
        """The current topic id (Kafka's 22-char text)."""
        return self.state.clusters[cluster].topics[name].topic_id

    # ----------------------------------------------------------------- views

    @property
    def clusters(self) -> dict[str, LabClusterInfo]:
        """Every cluster's bootstrap, ids and brokers, by cluster name."""
        out = {}
        for name, rt in self.runtimes.items():
            zk = rt.spec.zookeeper
            out[name] = LabClusterInfo(
                name=name, cluster_id=rt.cluster_id, profile=rt.spec.profile.name, bootstrap=rt.bootstrap,
                security_protocol=rt.security_protocol,
                brokers=tuple(LabBrokerInfo(b.id, b.host, b.port, b.spec.rack, rt.software_version(b.id))
                              for b in rt.brokers.values()),
                zookeeper_connect=self._zk_connect(rt) if name in self.registrars else None,
                zookeeper_chroot=zk.chroot if zk else None,
                zookeeper_error=self.zk_errors.get(name),
                push_config=rt.spec.policy.push_config,
                sink_dir=rt.sink.directory if rt.sink else None,
            )
        return out

    def write_fleet_file(self, path: str | Path) -> Path:
        """Write a clusters.toml (backend.config format) that points the poller at the lab."""
        path = Path(path)
        lines = ["# Fleet file written by the lab (backend.lab.fleet). Points at the running lab clusters.", ""]
        for name, info in self.clusters.items():
            rt = self.runtimes[name]
            lines += ["[[clusters]]", f"name = {_toml_str(name)}",
                      "bootstrap_servers = [" + ", ".join(_toml_str(f"{b.host}:{b.port}") for b in info.brokers) + "]"]
            tags = {"lab": "true", "profile": info.profile, **rt.spec.tags}
            lines.append("tags = { " + ", ".join(f"{_toml_key(k)} = {_toml_str(v)}" for k, v in tags.items()) + " }")
            if info.security_protocol != "PLAINTEXT":
                lines.append(f"security_protocol = {_toml_str(info.security_protocol)}")
            sasl = rt.spec.sasl
            if sasl is not None and sasl.users:
                user = sasl.users[0]
                env = user.password_env or "LAB_" + re.sub(r"[^A-Z0-9]", "_", name.upper()) + "_PASSWORD"
                lines += [f"sasl_mechanism = {_toml_str(sasl.mechanisms[0])}", f"sasl_username = {_toml_str(user.name)}",
                          f"sasl_password_env = {_toml_str(env)}"]
            if rt.spec.tls is not None and rt.spec.tls.cafile:
                lines.append(f"ssl_cafile = {_toml_str(rt.spec.tls.cafile)}")
            if self.metrics is not None:
                # the lab's pages export every DeprecatedRequestsPerSec series (its "rules" keep the meter)
                lines += ["[clusters.broker_metrics]", f"metrics_url = {_toml_str(self.metrics.url_template(name))}",
                          "exports_deprecated_requests = true"]
            if info.zookeeper_connect and info.zookeeper_chroot:
                lines += ["[clusters.zookeeper]", f"connect = {_toml_str(info.zookeeper_connect)}",
                          f"chroot = {_toml_str(info.zookeeper_chroot)}"]
            lines.append("")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines), encoding="utf-8")
        return path


def _toml_str(value: str) -> str:
    return json.dumps(value)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)
