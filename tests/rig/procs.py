"""JVM processes for the test rig: start with a log file, stop by pid, wait for ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KAFKA_CACHE = REPO / ".cache" / "kafka"

# Every JVM the rig starts, so a failing test can print their logs (see tests/conftest.py).
LOG_FILES: list[Path] = []


class RigError(RuntimeError):
    """A rig component could not be started; the message holds the log tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kafka_libs(version: str) -> Path:
    """The folder of Kafka jars for a version; they come from Maven Central via tests/pom.xml."""
    libs = KAFKA_CACHE / version / "libs"
    if not (libs / f"kafka_2.13-{version}.jar").is_file():
        raise RigError(
            f"Kafka {version} jars are missing in {libs}. Run `make kafka-jars` "
            "(mvn -f tests/pom.xml dependency:copy-dependencies) first."
        )
    return libs


def log_tail(path: Path, lines: int = 60) -> str:
    """The last lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


@dataclass
class JavaProcess:
    """One JVM: its command line, log file and pid."""

    name: str
    classpath: str
    main: list[str]
    log: Path
    heap_mb: int = 384
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    jvm_args: list[str] = field(default_factory=list)  # extra JVM options, e.g. a -javaagent

    def start(self) -> None:
        """Launch the JVM with stdout and stderr appended to the log file."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.log not in LOG_FILES:
            LOG_FILES.append(self.log)
        cmd = [
            "java",
            f"-Xmx{self.heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-Djava.net.preferIPv4Stack=true",
            "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            # Every request a broker completes is logged with its api key and client id, so tests
            # can prove which requests the product sent (the read-only test).
            "-Dorg.slf4j.simpleLogger.log.kafka.request.logger=debug",
            *self.jvm_args,
            "-cp",
            self.classpath,
            *self.main,
        ]
        with self.log.open("ab") as out:
            out.write(f"\n==== start {time.strftime('%H:%M:%S')}: {' '.join(cmd)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int | None:
        """The JVM's pid while it runs."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def alive(self) -> bool:
        """Whether the JVM still runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the JVM by pid, then SIGKILL if it has not ended within timeout_s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self.proc = None

    def kill(self) -> None:
        """SIGKILL the JVM at once (a crash, for fault tests)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None


def wait_for_port(port: int, proc: JavaProcess, timeout_s: float) -> None:
    """Block until 127.0.0.1:port accepts a connection, or raise RigError with the log tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RigError(f"{proc.name} exited before listening on {port}:\n{log_tail(proc.log)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.25)
    raise RigError(f"{proc.name} did not listen on {port} within {timeout_s:.0f}s:\n{log_tail(proc.log)}")


def wait_until_closed(port: int, timeout_s: float = 30.0) -> None:
    """Block until nothing accepts connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                time.sleep(0.2)
        except OSError:
            return
    raise RigError(f"port {port} still accepts connections after {timeout_s:.0f}s")


def write_properties(path: Path, props: dict[str, object]) -> Path:
    """Write a Java .properties file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()), encoding="utf-8")
    return path
