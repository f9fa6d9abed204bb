"""Real consumer-group peers for tests: kafka-consumer-groups.sh from the rig's jars, and Java consumers.

`consumer_groups(version, bootstrap, *args)` runs org.apache.kafka.tools.consumer.group.ConsumerGroupCommand (what
kafka-consumer-groups.sh runs) on the broker's libs plus the release's kafka-tools jar (`make kafka-jars` puts it in
.cache/kafka-tools/<version>). `JavaConsumer` runs tests/clients/GroupConsumer.java against a release's client jars
(.cache/clients, `make client-jars`).
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.rig.clients import client_libs
from tests.rig.procs import REPO, RigError, kafka_libs

TOOLS_CACHE = REPO / ".cache" / "kafka-tools"
SOURCE = REPO / "tests" / "clients" / "GroupConsumer.java"
COMMAND_CLASS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
SHARE_COMMAND_CLASS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"  # kafka-share-groups.sh


def tools_jar(version: str) -> Path:
    """The kafka-tools jar of one release."""
    jar = TOOLS_CACHE / version / f"kafka-tools-{version}.jar"
    if not jar.is_file():
        raise RigError(f"{jar} is missing. Run `make kafka-jars` (mvn -f tests/tools/pom.xml dependency:copy).")
    return jar


def consumer_groups(version: str, bootstrap: str, *args: str, timeout_s: float = 120.0,
                    command: str = COMMAND_CLASS) -> str:
    """Run the real kafka-consumer-groups tool of a release (or, `command`, another of its group tools such as
    kafka-share-groups.sh's SHARE_COMMAND_CLASS); return its stdout (its log goes to stderr)."""
    cmd = ["java", "-Xmx256m", "-cp", f"{kafka_libs(version)}/*:{tools_jar(version)}", command,
           "--bootstrap-server", bootstrap, *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RigError(f"kafka-consumer-groups {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def parse_tables(text: str) -> list[dict[str, str]]:
    """Every row of the tool's whitespace-aligned tables (the header line names the columns); '-' stays '-'."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.strip():
            header = None
            continue
        words = line.split()
        if words[0] == "GROUP":
            header = [w for w in words if w != "(ID)"]
            continue
        if header is None:
            continue
        if "COORDINATOR" in header:
            merged: list[str] = []
            for w in words:  # "host:port  (id)" is one column
                if merged and re.fullmatch(r"\(\d+\)", w):
                    merged[-1] = f"{merged[-1]} {w}"
                else:
                    merged.append(w)
            words = merged
            if len(words) == len(header) - 1 and "ASSIGNMENT-STRATEGY" in header:  # 3.9 leaves it blank
                at = header.index("ASSIGNMENT-STRATEGY")
                words = [*words[:at], "-", *words[at:]]
        rows.append(dict(zip(header, words, strict=False)))
    return rows


@dataclass
class JavaConsumer:
    """A real Java consumer (GroupConsumer.java) that reads COUNT records, commits, and stays or closes."""

    classes: Path
    version: str
    bootstrap: str
    group: str
    topic: str
    count: int
    workdir: Path
    stay: bool = True
    configs: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = None
    consumed: int | None = None

    @property
    def stop_file(self) -> Path:
        """The file whose creation makes a staying consumer close."""
        return self.workdir / f"stop-{self.group}"

    def start(self, timeout_s: float = 120.0) -> JavaConsumer:
        """Start it and wait until it has committed its records."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.stop_file.unlink(missing_ok=True)
        classpath = f"{self.classes}:{client_libs(self.version)}/*"
        mode = str(self.stop_file) if self.stay else "close"
        cmd = ["java", "-Xmx128m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", classpath,
               "GroupConsumer", self.bootstrap, self.group, self.topic, str(self.count), mode,
               *(f"{k}={v}" for k, v in self.configs.items())]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("CONSUMED"):
                self.consumed = int(line.split()[1])
                if not self.stay:
                    self.proc.wait(timeout=60)
                return self
            if not line and self.proc.poll() is not None:
                break
        self.close()
        raise RigError(f"Java consumer of {self.group} did not commit within {timeout_s:.0f} s")

    def close(self) -> None:
        """Make it leave the group and wait for it (killed after 30 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def compile_group_consumer(out: Path, against: str = "3.9.2") -> Path:
    """Compile GroupConsumer.java into ``out`` (runs on the 3.9 and 4.x clients alike)."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["javac", "-d", str(out), "-cp", f"{client_libs(against)}/*", str(SOURCE)],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RigError(f"javac GroupConsumer.java failed:\n{done.stderr[-3000:]}")
    return out
