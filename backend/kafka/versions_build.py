"""Builds versions_table.json, the Apache Kafka release fingerprints used by versions.py.

Releases 2.8 and newer come straight from the message JSON inside each release's
kafka-clients jar (``common/message/*Request.json``: apiKey, validVersions, listeners,
latestVersionUnstable). Releases 0.10.0-2.7 predate those files; their max versions are the
cumulative bumps recorded in franz-go's pkg/kversion (checked here against the 2.8.2 jar).

Run: ``python -m backend.kafka.versions_build JAR [JAR ...] > backend/kafka/versions_table.json``
where each JAR is a kafka-clients-<version>.jar (e.g. from ~/.m2 after ``mvn dependency:get``).
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

ApiTable = dict[int, tuple[int, int]]

# (release, keys bumped (repeats allowed), number of keys appended) per franz-go kversion;
# appended keys start at the current length. Only zkBroker keys are kept below.
_PRE_28: list[tuple[str, list[int], int]] = [
    ("0.8.0", [], 8),
    ("0.8.1", [], 2),
    ("0.8.2", [8, 9], 3),
    ("0.9.0", [0, 1, 6, 7, 8], 4),
    ("0.10.0", [0, 1, 3, 6], 2),
    ("0.10.1", [1, 2, 3, 11], 2),
    ("0.10.2", [6, 19], 0),
    ("0.11.0", [0, 1, 1, 3, 9, 10, 2, 3, 8, 9, 11, 12, 13, 14, 15, 16, 18, 19, 20], 13),
    ("1.0", [0, 1, 3, 4, 6, 0, 17], 4),
    ("1.1", [1, 32], 5),
    ("2.0", [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 24, 25, 26, 28,
             32, 33, 34, 35, 37, 38, 39, 40, 41, 42, 29, 30, 31, 23], 0),
    ("2.1", [8, 20, 1, 2, 3, 8, 9, 23, 28, 0, 1], 0),
    ("2.2", [2, 11, 36, 4, 5, 6, 7], 1),
    ("2.3", [3, 15, 1, 23, 11, 8, 12, 14], 1),
    ("2.4", [4, 15, 19, 43, 13, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22,
             38, 42, 43, 44, 0], 3),
    ("2.5", [22, 9, 36, 37, 39, 40, 41, 28, 29, 30, 31, 11, 14], 0),
    ("2.6", [21, 35, 5, 16, 32], 2),
    ("2.7", [37, 19, 20, 22, 24, 25, 26, 1], 8),
]
# Keys franz-go lists without the zkBroker listener (KRaft-only) among those appended by 2.7.
_NOT_ZK = {52, 53, 54, 55}


def pre_28_tables() -> list[tuple[str, ApiTable]]:
    """Cumulative ZooKeeper-broker tables for 0.8.0-2.7 (min version 0 everywhere)."""
    versions: list[int] = []
    out: list[tuple[str, ApiTable]] = []
    for release, bumps, appended in _PRE_28:
        versions.extend([0] * appended)
        for key in bumps:
            versions[key] += 1
        table = {k: (0, v) for k, v in enumerate(versions) if k not in _NOT_ZK}
        out.append((release, table))
    return out


def _request_messages(jar: str | Path) -> Iterator[tuple[int, str]]:
    """(api key, JSON text without // comments) of every request message definition in a kafka-clients jar."""
    with zipfile.ZipFile(jar) as zf:
        for name in zf.namelist():
            if not (name.startswith("common/message/") and name.endswith("Request.json")):
                continue
            text = re.sub(r"//[^\n]*", "", zf.read(name).decode("utf-8"))
            key_m = re.search(r'"apiKey"\s*:\s*(\d+)', text)
            if key_m is not None:
                yield int(key_m.group(1)), text


def api_table_from_jar(jar: str | Path, listener: str) -> ApiTable:
    """Advertised (min, max) per api key for a listener ("zkBroker"/"broker") from a kafka-clients jar."""
    out: ApiTable = {}
    for key, text in _request_messages(jar):
        valid_m = re.search(r'"validVersions"\s*:\s*"([^"]+)"', text)
        if valid_m is None or valid_m.group(1) == "none":
            continue
        listeners_m = re.search(r'"listeners"\s*:\s*\[([^\]]*)\]', text)
        listeners = re.findall(r'"(\w+)"', listeners_m.group(1)) if listeners_m else ["zkBroker"]
        if listener not in listeners:
            continue
        lo_s, _, hi_s = valid_m.group(1).partition("-")
        lo, hi = int(lo_s), int(hi_s or lo_s)
        if re.search(r'"latestVersionUnstable"\s*:\s*true', text):
            hi -= 1  # brokers do not advertise unstable versions by default
        if hi >= lo:
            out[key] = (lo, hi)
    return out


# What the early KRaft brokers really advertise where it differs from their message JSON, seen on
# real 2.8.2, 3.0.2, 3.1.2 and 3.2.3 brokers (tests/unit/kafka/fixtures/kraft_api_versions.json):
# DescribeQuorum (55) is forwarded to the controller and not offered before 3.3; Envelope (58), a
# controller API, is offered up to 3.1; 2.8 does not offer UnregisterBroker (64).
_KRAFT_ADDED: dict[str, ApiTable] = {"2.8": {58: (0, 0)}, "3.0": {58: (0, 0)}, "3.1": {58: (0, 0)}}
_KRAFT_DROPPED: dict[str, frozenset[int]] = {"2.8": frozenset({64}), "3.0": frozenset({55}),
                                             "3.1": frozenset({55}), "3.2": frozenset({55})}


def advertised_table(table: ApiTable, release: str, family: str = "zk") -> ApiTable:
    """What a broker of this release and family really advertises, where it differs from the JSON.

    Kafka 4.x brokers still advertise Produce from v0 although ProduceRequest.json starts at
    v3 (KAFKA-18659, kept for librdkafka); seen on a real 4.3.1 broker in the tests. KRaft
    brokers of 2.8-3.2: see _KRAFT_ADDED / _KRAFT_DROPPED.
    """
    out = dict(table)
    if int(release.split(".")[0]) >= 4 and 0 in out:
        out[0] = (0, out[0][1])
    if family == "kraft":
        for key in _KRAFT_DROPPED.get(release, frozenset()):
            out.pop(key, None)
        out.update(_KRAFT_ADDED.get(release, {}))
    return out


def api_names_from_jar(jar: str | Path) -> dict[int, str]:
    """Api key -> name ("Produce", "DescribeQuorum") from the request message JSON of a kafka-clients jar."""
    out: dict[int, str] = {}
    for key, text in _request_messages(jar):
        name_m = re.search(r'"name"\s*:\s*"(\w+)Request"', text)
        if name_m is not None:
            out[key] = name_m.group(1)
    return out


def _release_of(jar: Path) -> tuple[str, str]:
    m = re.search(r"kafka-clients-(\d+)\.(\d+)\.(\d+)", jar.name)
    if m is None:
        raise SystemExit(f"cannot read a version from {jar.name}")
    return f"{m.group(1)}.{m.group(2)}", f"{m.group(1)}.{m.group(2)}.{m.group(3)}"


def build(jars: list[Path]) -> dict[str, object]:
    """The whole versions_table.json document."""
    rows: list[dict[str, object]] = []
    names: dict[int, str] = {}
    for release, table in pre_28_tables():
        if release.startswith(("0.8", "0.9")):
            continue
        rows.append({"release": release, "family": "zk", "source": "franz-go kversion",
                     "apis": {str(k): list(v) for k, v in sorted(table.items())}})
    for jar in sorted(jars, key=lambda p: [int(x) for x in _release_of(p)[1].split(".")]):
        release, full = _release_of(jar)
        names.update(api_names_from_jar(jar))  # the newest release names a key last
        for family, listener in (("zk", "zkBroker"), ("kraft", "broker")):
            table = advertised_table(api_table_from_jar(jar, listener), release, family)
            if table:
                rows.append({"release": release, "family": family,
                             "source": f"kafka-clients-{full}.jar",
                             "apis": {str(k): list(v) for k, v in sorted(table.items())}})
    return {"about": "Apache Kafka broker ApiVersions per release; built by "
                     "backend/kafka/versions_build.py", "releases": rows,
            "api_names": {str(k): v for k, v in sorted(names.items())}}


if __name__ == "__main__":
    json.dump(build([Path(p) for p in sys.argv[1:]]), sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")
