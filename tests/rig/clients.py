"""Real Apache Kafka Java clients for tests: build them from their own jars so they log their configs.

tests/clients/RealClients.java is compiled once (javac) against the 3.9.2 jars and run with
``java -cp`` against the jars of the release under test (from tests/clients/pom.xml, copied into
.cache/clients by ``make client-jars``), with one of two real logging setups:

- ``slf4j-simple``: slf4j 1.7's simple binding, its default format
  (``[main] INFO org.apache.kafka.common.config.AbstractConfig - ProducerConfig values:``);
- ``log4j2``: log4j 2 with the pattern Kafka's own config/log4j2.yaml (4.x) and
  config/log4j.properties (3.x) use, ``[%d] %p %m (%c)%n``.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.rig.procs import REPO, RigError, free_port

CLIENTS_CACHE = REPO / ".cache" / "clients"
KNOWN_KEYS_JARS = REPO / ".cache" / "known-keys"
SOURCE = REPO / "tests" / "clients" / "RealClients.java"
LOGGINGS = ("slf4j-simple", "log4j2")
KAFKA_LOG_PATTERN = "[%d] %p %m (%c)%n"
RUN_TIMEOUT_S = 300.0

_LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${{sys:fleetview.client.log}}">
      <PatternLayout pattern="{pattern}"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def client_libs(version: str) -> Path:
    """The folder of one release's client jars (kafka-clients, kafka-streams and their dependencies)."""
    libs = CLIENTS_CACHE / version / "libs"
    if not (libs / f"kafka-clients-{version}.jar").is_file():
        raise RigError(f"Kafka {version} client jars are missing in {libs}. Run `make client-jars` "
                       "(mvn -f tests/clients/pom.xml dependency:copy-dependencies dependency:copy) first.")
    return libs


def logging_libs(setup: str) -> Path:
    """The folder of one logging setup's jars."""
    libs = CLIENTS_CACHE / "logging" / setup
    if not any(libs.glob("*.jar")):
        raise RigError(f"{setup} jars are missing in {libs}. Run `make client-jars` first.")
    return libs


def compile_real_clients(out: Path, against: str = "3.9.2") -> Path:
    """Compile RealClients.java into ``out`` (classes that run on the 3.9 and 4.x clients alike)."""
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["javac", "-d", str(out), "-cp", f"{client_libs(against)}/*", str(SOURCE)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RigError(f"javac RealClients.java failed:\n{done.stderr[-3000:]}")
    return out


@dataclass(frozen=True)
class ClientRun:
    """What one run of RealClients printed and logged."""

    log: Path
    built: tuple[str, ...]
    refused: dict[str, str]


def unused_bootstrap() -> str:
    """A 127.0.0.1 address nothing listens on: the clients log their configs and never reach a broker."""
    return f"127.0.0.1:{free_port()}"


def known_keys_jars(version: str) -> list[Path]:
    """kafka-clients, kafka-streams and slf4j-api of one release, from .cache/known-keys (no other dependency)."""
    jars = [KNOWN_KEYS_JARS / f"kafka-clients-{version}.jar", KNOWN_KEYS_JARS / f"kafka-streams-{version}.jar",
            *sorted(KNOWN_KEYS_JARS.glob("slf4j-api-*.jar"))[-1:]]
    missing = [j for j in jars if not j.is_file()]
    if missing or len(jars) < 3:
        raise RigError(f"{missing or 'slf4j-api'} missing in {KNOWN_KEYS_JARS}. Run `make client-jars` first.")
    return jars


def run_clients(classes: Path, version: str, setup: str, specs: list[str], workdir: Path,
                jars: list[Path] | None = None) -> ClientRun:
    """Build and close the clients of ``specs`` (``TYPE;NAME;key=value;...``) with one logging setup.

    The client jars are ``client_libs(version)`` unless ``jars`` names others.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / f"clients-{version}-{setup}.log"
    libs = [str(j) for j in jars] if jars is not None else [f"{client_libs(version)}/*"]
    classpath = [str(classes), *libs, f"{logging_libs(setup)}/*"]
    if setup == "slf4j-simple":
        props = [f"-Dorg.slf4j.simpleLogger.logFile={log}"]
    elif setup == "log4j2":
        config = workdir / "log4j2.xml"
        config.write_text(_LOG4J2_XML.format(pattern=KAFKA_LOG_PATTERN), encoding="utf-8")
        props = [f"-Dlog4j2.configurationFile={config}", f"-Dfleetview.client.log={log}"]
    else:
        raise ValueError(f"unknown logging setup {setup!r}")
    done = subprocess.run(["java", "-Xmx256m", *props, "-cp", ":".join(classpath), "RealClients", *specs],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, cwd=workdir)
    if done.returncode != 0:
        raise RigError(f"RealClients failed ({done.returncode}):\n{done.stderr[-3000:]}")
    built, refused = [], {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        name, _, why = rest.partition(" ")
        if word == "BUILT":
            built.append(name)
        elif word == "REFUSED":
            refused[name] = why
    return ClientRun(log, tuple(built), refused)
