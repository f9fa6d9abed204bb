"""Builds known_keys.json: the config keys, ConfigDef types and defaults of Apache Kafka's Java clients, per release.

KnownKeysDump.java (beside this file) reads, by reflection, the static ConfigDef of ProducerConfig,
ConsumerConfig, ShareConsumerConfig (4.1+), AdminClientConfig and StreamsConfig from each release's
kafka-clients and kafka-streams jars (each key's type and default), plus the consumer keys a share
consumer refuses. This module runs it once for all releases (one JVM, one class loader per release)
and folds the answers into spans of releases per key: types in "clients", defaults in "defaults"
(where a default changed, e.g. the producer's linger.ms 0 -> 5 in 4.0, the key has two spans).

Run: ``python -m backend.configs.known_keys_build DIR > backend/configs/known_keys.json`` where DIR
holds ``kafka-clients-<v>.jar``, ``kafka-streams-<v>.jar`` and an ``slf4j-api-*.jar`` (``make
client-jars`` copies them into .cache/known-keys, from tests/known-keys/pom.xml).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

DUMP_SOURCE = Path(__file__).with_name("KnownKeysDump.java")
CLIENT_TYPES = ("producer", "consumer", "share_consumer", "admin", "streams")
DUMP_TIMEOUT_S = 600.0

# key -> [[first release, last release, type], ...]: contiguous releases with one type (or default) each.
# A default may be None (the default is null), so a span's last field is str | None.
Spans = list[list[str | None]]


def release_jars(jar_dir: str | Path) -> dict[str, list[Path]]:
    """Full version ("3.9.2") -> its kafka-clients, kafka-streams and slf4j-api jars, oldest first."""
    root = Path(jar_dir)
    slf4j = sorted(root.glob("slf4j-api-*.jar"))
    if not slf4j:
        raise FileNotFoundError(f"no slf4j-api jar in {root}")
    out: dict[str, list[Path]] = {}
    for clients in root.glob("kafka-clients-*.jar"):
        match = re.fullmatch(r"kafka-clients-(\d+\.\d+\.\d+)\.jar", clients.name)
        if match is None:
            continue
        version = match.group(1)
        streams = root / f"kafka-streams-{version}.jar"
        if not streams.is_file():
            raise FileNotFoundError(f"{streams} is missing (each release needs kafka-clients and kafka-streams)")
        out[version] = [clients, streams, slf4j[-1]]
    if not out:
        raise FileNotFoundError(f"no kafka-clients jar in {root}")
    return dict(sorted(out.items(), key=lambda kv: _version_key(kv[0])))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def dump(jars: dict[str, list[Path]], java: str = "java") -> list[dict[str, Any]]:
    """KnownKeysDump's answer per release, oldest first."""
    args = [f"{version}={':'.join(str(j) for j in paths)}" for version, paths in jars.items()]
    done = subprocess.run([java, str(DUMP_SOURCE), *args], capture_output=True, text=True,
                          timeout=DUMP_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"KnownKeysDump failed ({done.returncode}): {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _line(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _add(spans: Spans, release: str, previous: str | None, value: str | None) -> None:
    """Extend the last span when it ended at the previous release with the same value, else open one."""
    if spans and spans[-1][1] == previous and spans[-1][2] == value:
        spans[-1][1] = release
    else:
        spans.append([release, release, value])


def build(dumps: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole known_keys.json document from KnownKeysDump's answers (oldest release first)."""
    clients: dict[str, dict[str, Spans]] = {t: {} for t in CLIENT_TYPES}
    defaults: dict[str, dict[str, Spans]] = {t: {} for t in CLIENT_TYPES}
    unsupported: dict[str, Spans] = {}
    previous: str | None = None
    for answer in dumps:
        release = _line(answer["release"])
        for client_type in CLIENT_TYPES:
            for key, typ in answer.get(client_type, {}).items():
                _add(clients[client_type].setdefault(key, []), release, previous, typ)
            for key, default in answer.get("defaults", {}).get(client_type, {}).items():
                _add(defaults[client_type].setdefault(key, []), release, previous, default)
        for key in answer.get("share_unsupported", []):
            _add(unsupported.setdefault(key, []), release, previous, "refused")
        previous = release
    return {
        "about": "Configuration keys and ConfigDef types of Apache Kafka's Java clients per release: "
                 "key -> [[first release, last release, type], ...]; defaults: key -> [[first release, last "
                 "release, default], ...] (the default as ConfigDef.convertToString renders it, null for a null "
                 "default; releases where a key has no default are left out); share_unsupported: the consumer keys "
                 "a share consumer refuses. Built by backend/configs/known_keys_build.py from the "
                 "kafka-clients and kafka-streams jars; do not edit by hand.",
        "releases": {_line(a["release"]): a["release"] for a in dumps},
        "clients": {t: dict(sorted(keys.items())) for t, keys in clients.items()},
        "defaults": {t: dict(sorted(keys.items())) for t, keys in defaults.items()},
        "share_unsupported": {k: [s[:2] for s in v] for k, v in sorted(unsupported.items())},
    }


def render(table: dict[str, Any]) -> str:
    """known_keys.json text: one key per line, so a release's changes read as a small diff."""
    def block(mapping: dict[str, Any], indent: str) -> str:
        rows = [f"{indent}{json.dumps(k)}: {json.dumps(v)}" for k, v in mapping.items()]
        return "{\n" + ",\n".join(rows) + "\n" + indent[:-2] + "}"

    def per_client(section: str) -> str:
        return ",\n".join(f'    {json.dumps(t)}: {block(keys, "      ")}' for t, keys in table[section].items())

    return (
        "{\n"
        f'  "about": {json.dumps(table["about"])},\n'
        f'  "releases": {json.dumps(table["releases"])},\n'
        f'  "clients": {{\n{per_client("clients")}\n  }},\n'
        f'  "defaults": {{\n{per_client("defaults")}\n  }},\n'
        f'  "share_unsupported": {block(table["share_unsupported"], "    ")}\n'
        "}\n"
    )


def main(argv: list[str]) -> int:
    """Print known_keys.json for the jars in argv[0]."""
    if len(argv) != 1:
        print("usage: python -m backend.configs.known_keys_build JAR_DIR", file=sys.stderr)
        return 2
    sys.stdout.write(render(build(dump(release_jars(argv[0])))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
