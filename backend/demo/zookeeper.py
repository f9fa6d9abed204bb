"""A local ZooKeeper server for the demo's ZooKeeper-mode lab clusters, when one can be started."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from backend.service.procs import ChildProcess

DEBIAN_CLASSPATH = ("/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar")
REPO = Path(__file__).resolve().parents[2]


def zookeeper_classpath() -> tuple[str, str] | None:
    """(classpath, origin) of a ZooKeeper server on this machine, or None."""
    if shutil.which("java") is None:
        return None
    if Path(DEBIAN_CLASSPATH[1]).is_file():
        return ":".join(DEBIAN_CLASSPATH), "Debian package zookeeper"
    for libs in sorted((REPO / ".cache" / "kafka").glob("3.*/libs")):
        if any(libs.glob("zookeeper-3*.jar")):
            return f"{libs}/*", f"Kafka {libs.parent.name} jars in .cache"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers_ruok(port: int) -> bool:
    """Whether the server is serving: it answers the `ruok` four-letter word with `imok`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.settimeout(2)
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


@dataclass
class LocalZooKeeper:
    """A standalone ZooKeeper on 127.0.0.1 with a fresh data dir each start."""

    workdir: Path
    classpath: str
    origin: str
    port: int = 0
    process: ChildProcess | None = None

    @property
    def connect(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server and wait until it accepts connections."""
        shutil.rmtree(self.workdir / "data", ignore_errors=True)  # a clean tree every run
        (self.workdir / "data").mkdir(parents=True)
        self.port = self.port or _free_port()
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            "tickTime=500\ninitLimit=10\nsyncLimit=5\n"
            f"dataDir={self.workdir / 'data'}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\nmaxClientCnxns=200\n4lw.commands.whitelist=ruok,srvr\n"
        )
        self.process = ChildProcess(
            "zookeeper",
            ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", self.classpath, "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            self.workdir / "zookeeper.log",
        )
        self.process.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.process.running():
                raise RuntimeError(f"ZooKeeper exited:\n{self.process.tail()}")
            if _answers_ruok(self.port):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not serve within {timeout_s:.0f}s:\n{self.process.tail()}")

    def stop(self) -> None:
        """Stop the server by pid."""
        if self.process:
            self.process.stop()


def start_local_zookeeper(workdir: Path) -> tuple[LocalZooKeeper | None, str]:
    """Start a ZooKeeper if the machine has one; returns it (or None) and a note for the user."""
    found = zookeeper_classpath()
    if found is None:
        return None, ("no ZooKeeper server found (install Debian's `zookeeper`, or run `make kafka-jars`); "
                      "ZooKeeper-mode lab clusters run without ZooKeeper, so the KIP-78 check is not shown")
    server = LocalZooKeeper(workdir, *found)
    try:
        server.start()
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return None, f"ZooKeeper from {found[1]} failed to start; ZooKeeper-mode lab clusters run without it"
    return server, f"ZooKeeper ({found[1]}) on {server.connect}"
