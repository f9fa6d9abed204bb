"""Real ZooKeeper and Apache Kafka servers for tests, from the Maven Central jars."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.rig.procs import (
    JavaProcess,
    RigError,
    free_port,
    kafka_libs,
    log_tail,
    wait_for_port,
    wait_until_closed,
    write_properties,
)
from tests.rig.tls import TlsFiles, make_tls_files

KAFKA_ZK_VERSION = "3.9.2"
KAFKA_KRAFT_VERSION = "4.3.1"
START_TIMEOUT_S = 180.0


def new_cluster_id() -> str:
    """A KRaft cluster id as Kafka's Uuid prints it: 22 URL-safe base64 chars, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _classpath(version: str) -> str:
    return str(kafka_libs(version) / "*")


@dataclass
class ZooKeeperServer:
    """A standalone ZooKeeper server (the one on Kafka 3.9's classpath) on 127.0.0.1."""

    workdir: Path
    port: int = 0
    proc: JavaProcess | None = None

    @property
    def connect(self) -> str:
        """The connect string, without a chroot."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write zoo.cfg and start the server, waiting until it answers."""
        self.port = self.port or free_port()
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = write_properties(
            self.workdir / "zoo.cfg",
            {
                "tickTime": 500,
                "initLimit": 10,
                "syncLimit": 5,
                "dataDir": data,
                "clientPort": self.port,
                "clientPortAddress": "127.0.0.1",
                "maxClientCnxns": 200,
                "admin.enableServer": "false",
                "4lw.commands.whitelist": "ruok,stat,srvr",
                "minSessionTimeout": 2000,
                "maxSessionTimeout": 20000,
            },
        )
        self.proc = JavaProcess(
            name="zookeeper",
            classpath=_classpath(KAFKA_ZK_VERSION),
            main=["org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            log=self.workdir / "zookeeper.log",
            heap_mb=256,
        )
        self.proc.start()
        wait_for_port(self.port, self.proc, START_TIMEOUT_S)

    def stop(self) -> None:
        """Stop the server by its pid."""
        if self.proc:
            self.proc.stop()


@dataclass
class BrokerNode:
    """One Kafka broker JVM with its ports."""

    node_id: int
    port: int
    proc: JavaProcess
    sasl_port: int | None = None
    controller_port: int | None = None
    host: str = "127.0.0.1"
    metrics_port: int | None = None  # its Prometheus JMX exporter agent's port, when it runs one

    @property
    def id(self) -> int:
        """The broker id (alias of node_id)."""
        return self.node_id

    @property
    def address(self) -> str:
        """host:port of the PLAINTEXT listener."""
        return f"{self.host}:{self.port}"


@dataclass
class KafkaZkCluster:
    """An Apache Kafka 3.9 broker in ZooKeeper mode, registered under a chroot."""

    workdir: Path
    zookeeper: ZooKeeperServer
    zk_chroot: str = "/kafka39"
    version: str = KAFKA_ZK_VERSION
    brokers: list[BrokerNode] = field(default_factory=list)
    cluster_id: str = ""
    jvm_args: list[str] = field(default_factory=list)  # e.g. the Prometheus JMX exporter's -javaagent
    auto_create_topics: bool = False

    @property
    def bootstrap(self) -> str:
        """Bootstrap servers for clients."""
        return ",".join(b.address for b in self.brokers)

    @property
    def zk_connect(self) -> str:
        """The ZooKeeper connect string with this cluster's chroot."""
        return f"{self.zookeeper.connect}{self.zk_chroot}"

    def start(self) -> None:
        """Start one broker and read back the cluster id it registered in ZooKeeper."""
        port = free_port()
        props = write_properties(
            self.workdir / "broker-0" / "server.properties",
            {
                "broker.id": 0,
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": self.workdir / "broker-0" / "data",
                "zookeeper.connect": self.zk_connect,
                "zookeeper.session.timeout.ms": 18000,
                "offsets.topic.replication.factor": 1,
                "offsets.topic.num.partitions": 3,
                "transaction.state.log.replication.factor": 1,
                "transaction.state.log.min.isr": 1,
                "group.initial.rebalance.delay.ms": 0,
                "num.partitions": 1,
                "auto.create.topics.enable": str(self.auto_create_topics).lower(),
                "broker.rack": "rack-a",
                "log.segment.bytes": 1048576,
            },
        )
        proc = JavaProcess("kafka39-broker-0", _classpath(self.version), ["kafka.Kafka", str(props)],
                           self.workdir / "broker-0" / "kafka.log", jvm_args=list(self.jvm_args))
        self.brokers = [BrokerNode(0, port, proc)]
        proc.start()
        wait_for_port(port, proc, START_TIMEOUT_S)
        self.cluster_id = _wait_for_metadata(self.bootstrap, expected_brokers=1, procs=[proc])

    def stop(self) -> None:
        """Stop every broker by pid (before ZooKeeper goes)."""
        for broker in self.brokers:
            broker.proc.stop()

    def restart(self) -> None:
        """Stop the broker (a clean shutdown) and start it again on the same ports, waiting until it serves."""
        broker = self.brokers[0]
        broker.proc.stop()
        wait_until_closed(broker.port)
        broker.proc.start()
        wait_for_port(broker.port, broker.proc, START_TIMEOUT_S)
        _wait_for_metadata(self.bootstrap, expected_brokers=1, procs=[broker.proc])


@dataclass
class KafkaKraftCluster:
    """An Apache Kafka 4.x KRaft cluster of combined broker+controller nodes.

    Each node has a PLAINTEXT listener and a SASL_SSL listener with SCRAM-SHA-256
    and SCRAM-SHA-512 users created at format time. The SASL_SSL listener's JAAS lines carry a
    planted password (`listener_password`, unused by the server-side SCRAM login) that tests look
    for in everything the product writes: the broker reports the config as sensitive.
    """

    workdir: Path
    size: int = 3
    version: str = KAFKA_KRAFT_VERSION
    brokers: list[BrokerNode] = field(default_factory=list)
    cluster_id: str = field(default_factory=new_cluster_id)
    scram_user: str = "fleetview"
    scram_password: str = field(default_factory=lambda: "pw-" + secrets.token_urlsafe(12), repr=False)
    listener_password: str = field(default_factory=lambda: "planted-" + secrets.token_urlsafe(12), repr=False)
    tls: TlsFiles | None = None
    # The Prometheus JMX exporter agent's jar: each node then serves its metrics on its own `metrics_port`, with the
    # agent's default rules in `exporter_rules` (the agent re-reads the file when it changes).
    exporter_agent: Path | None = None

    @property
    def bootstrap(self) -> str:
        """PLAINTEXT bootstrap servers of the running nodes."""
        return ",".join(b.address for b in self.brokers if b.proc.alive()) or ",".join(b.address for b in self.brokers)

    @property
    def sasl_bootstrap(self) -> str:
        """SASL_SSL bootstrap servers (SCRAM)."""
        return ",".join(f"127.0.0.1:{b.sasl_port}" for b in self.brokers)

    @property
    def ca_file(self) -> str:
        """The PEM CA that signed the brokers' certificates."""
        assert self.tls is not None
        return str(self.tls.ca_cert)

    @property
    def exporter_rules(self) -> Path:
        """The exporter agent's rules file, shared by the nodes."""
        return self.workdir / "exporter.yaml"

    def broker(self, node_id: int) -> BrokerNode:
        """The node with this id."""
        return next(b for b in self.brokers if b.node_id == node_id)

    def start(self) -> None:
        """Format every node's storage and start them together."""
        self.tls = make_tls_files(self.workdir / "tls")
        ids = list(range(1, self.size + 1))
        ports = {i: (free_port(), free_port(), free_port()) for i in ids}
        voters = ",".join(f"{i}@127.0.0.1:{ports[i][2]}" for i in ids)
        jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="fleetview-listener" password="{self.listener_password}";')
        for i in ids:
            port, sasl_port, ctrl_port = ports[i]
            node_dir = self.workdir / f"node-{i}"
            props = write_properties(
                node_dir / "server.properties",
                {
                    "node.id": i,
                    "process.roles": "broker,controller",
                    "controller.quorum.voters": voters,
                    "controller.listener.names": "CONTROLLER",
                    "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:{ctrl_port}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}",
                    "inter.broker.listener.name": "PLAINTEXT",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                    "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": jaas,
                    "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": self.tls.server_keystore_pem,
                    "ssl.client.auth": "none",
                    "log.dirs": node_dir / "data",
                    "offsets.topic.replication.factor": min(3, self.size),
                    "offsets.topic.num.partitions": 3,
                    "transaction.state.log.replication.factor": min(3, self.size),
                    "transaction.state.log.min.isr": 1,
                    "share.coordinator.state.topic.replication.factor": min(3, self.size),
                    "share.coordinator.state.topic.min.isr": 1,
                    "group.initial.rebalance.delay.ms": 0,
                    "num.partitions": 1,
                    "auto.create.topics.enable": "false",
                    "broker.rack": f"rack-{'abc'[(i - 1) % 3]}",
                    "log.segment.bytes": 1048576,
                    "controller.quorum.election.timeout.ms": 1000,
                    "controller.quorum.fetch.timeout.ms": 2000,
                    "broker.session.timeout.ms": 6000,
                    "broker.heartbeat.interval.ms": 500,
                },
            )
            self._format(props, node_dir)
            agent: list[str] = []
            metrics_port = None
            if self.exporter_agent is not None:
                metrics_port = free_port()
                self.exporter_rules.parent.mkdir(parents=True, exist_ok=True)
                if not self.exporter_rules.exists():
                    self.exporter_rules.write_text('rules:\n- pattern: ".*"\n', encoding="utf-8")
                agent = [f"-javaagent:{self.exporter_agent}=127.0.0.1:{metrics_port}:{self.exporter_rules}"]
            proc = JavaProcess(f"kafka4-node-{i}", _classpath(self.version), ["kafka.Kafka", str(props)],
                               node_dir / "kafka.log", jvm_args=agent)
            self.brokers.append(BrokerNode(i, port, proc, sasl_port=sasl_port, controller_port=ctrl_port,
                                           metrics_port=metrics_port))
        for broker in self.brokers:
            broker.proc.start()
        for broker in self.brokers:
            wait_for_port(broker.port, broker.proc, START_TIMEOUT_S)
        found = _wait_for_metadata(self.bootstrap, expected_brokers=self.size, procs=[b.proc for b in self.brokers])
        if found != self.cluster_id:
            raise RigError(f"KRaft cluster reports id {found}, formatted with {self.cluster_id}")

    def _format(self, props: Path, node_dir: Path) -> None:
        cmd = [
            "java",
            "-Xmx256m",
            "-cp",
            _classpath(self.version),
            "kafka.tools.StorageTool",
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(props),
            "--add-scram",
            f"SCRAM-SHA-256=[name={self.scram_user},password={self.scram_password}]",
            "--add-scram",
            f"SCRAM-SHA-512=[name={self.scram_user},password={self.scram_password}]",
        ]
        log = node_dir / "format.log"
        with log.open("wb") as out:
            result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
        if result.returncode != 0:
            raise RigError(f"kafka-storage format failed for {props}:\n{log_tail(log)}")

    def stop_broker(self, node_id: int) -> None:
        """Stop one node by its pid (SIGTERM, a clean shutdown) and wait until its port is closed."""
        broker = self.broker(node_id)
        broker.proc.stop()
        wait_until_closed(broker.port)

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one node, as a crash would."""
        broker = self.broker(node_id)
        broker.proc.kill()
        wait_until_closed(broker.port)

    def start_broker(self, node_id: int) -> None:
        """Start a stopped node on its old ports and wait until the cluster shows every broker again."""
        broker = self.broker(node_id)
        broker.proc.start()
        wait_for_port(broker.port, broker.proc, START_TIMEOUT_S)
        _wait_for_metadata(self.bootstrap, expected_brokers=self.size, procs=[b.proc for b in self.brokers])

    def stop(self) -> None:
        """Stop every node by its pid."""
        with ThreadPoolExecutor(max_workers=max(1, len(self.brokers))) as pool:
            list(pool.map(lambda b: b.proc.stop(timeout_s=20), self.brokers))


def _wait_for_metadata(bootstrap: str, expected_brokers: int, procs: list[JavaProcess]) -> str:
    """Wait until Metadata lists the expected brokers; return the cluster id."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + START_TIMEOUT_S
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    last_error = ""
    while time.monotonic() < deadline:
        for proc in procs:
            if not proc.alive() and proc.proc is not None:
                raise RigError(f"{proc.name} died:\n{log_tail(proc.log)}")
        try:
            md = admin.list_topics(timeout=5)
            if len(md.brokers) >= expected_brokers and md.cluster_id:
                return str(md.cluster_id)
            last_error = f"{len(md.brokers)} of {expected_brokers} brokers"
        except Exception as exc:  # noqa: BLE001 - any client error means "not ready yet"
            last_error = str(exc)
        time.sleep(0.5)
    tails = "\n".join(f"--- {p.name}\n{log_tail(p.log, 30)}" for p in procs)
    raise RigError(f"cluster at {bootstrap} not ready in {START_TIMEOUT_S:.0f}s ({last_error}):\n{tails}")


def config_command(version: str, bootstrap: str, *args: str, timeout_s: float = 120.0) -> str:
    """Run the real kafka-configs tool (kafka.admin.ConfigCommand from the rig's jars); return its stdout."""
    cmd = ["java", "-Xmx256m", "-cp", _classpath(version), "kafka.admin.ConfigCommand",
           "--bootstrap-server", bootstrap, *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if result.returncode != 0:
        raise RigError(f"kafka-configs {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def java_available() -> bool:
    """Whether a java binary is on PATH."""
    return any(os.access(os.path.join(d, "java"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))
