"""The oldest client software that Kafka 4.x still serves (KIP-896), and where a reported software stands.

KIP-896 ("Remove old client protocol API versions in Kafka 4.0",
https://cwiki.apache.org/confluence/display/KAFKA/KIP-896%3A+Remove+old+client+protocol+API+versions+in+Kafka+4.0)
keeps, per API, the newest version Apache Kafka 2.1 supports and every later one: Java clients 2.1 and newer
keep working. For other clients it took "the latest client release at the end of 2021" and kept what it uses;
for librdkafka that release is 1.8.2 (October 2021), so librdkafka 1.8.2 and newer (and the clients built on it:
confluent-kafka-*, kcat, node-rdkafka) keep working. Clients before 2.4 (KIP-511) send no software name: the
broker says `unknown`, and only their requests (KIP-896's metric) tell whether they use removed versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_JAVA = (2, 1, 0)
MIN_LIBRDKAFKA = (1, 8, 2)
KIP896_URL = ("https://cwiki.apache.org/confluence/display/KAFKA/"
              "KIP-896%3A+Remove+old+client+protocol+API+versions+in+Kafka+4.0")
JAVA_NAMES = frozenset({"apache-kafka-java"})
_RDKAFKA_IN_VERSION = re.compile(r"rdkafka[-_ ]?v?(\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
_RDKAFKA_NAME = re.compile(r"rdkafka|confluent-kafka|kcat|kafkacat", re.IGNORECASE)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class FloorCheck:
    """Where one client software version stands against the Kafka 4.x floor."""

    family: str  # java / librdkafka / unnamed / other
    version: tuple[int, int, int] | None
    floor: tuple[int, int, int] | None
    below: bool | None  # None: cannot tell (no name, no known floor, or an unparsable version)

    @property
    def floor_text(self) -> str:
        """The floor as text ('2.1.0'), or '' when there is none."""
        return ".".join(map(str, self.floor)) if self.floor else ""


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """'2.8.2' / 'v1.9.0' / '3.9.2-SNAPSHOT' -> (2, 8, 2); None when it does not start with a version."""
    match = _VERSION.match((text or "").strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def check(software_name: str | None, software_version: str | None) -> FloorCheck:
    """Classify a KIP-511 software name and version against the Kafka 4.x floor (KIP-896)."""
    name = (software_name or "").strip()
    version = software_version or ""
    if not name or name.lower() == "unknown":
        return FloorCheck("unnamed", None, None, None)
    if name.lower() in JAVA_NAMES:
        parsed = parse_version(version)
        return FloorCheck("java", parsed, MIN_JAVA, None if parsed is None else parsed < MIN_JAVA)
    embedded = _RDKAFKA_IN_VERSION.search(version)
    if embedded is not None or _RDKAFKA_NAME.search(name):
        parsed = parse_version(embedded.group(1) if embedded else version)
        if embedded is None and name.lower() != "librdkafka":
            parsed = None  # a client's own version (kcat 1.7) is not librdkafka's
        return FloorCheck("librdkafka", parsed, MIN_LIBRDKAFKA, None if parsed is None else parsed < MIN_LIBRDKAFKA)
    return FloorCheck("other", parse_version(version), None, None)
