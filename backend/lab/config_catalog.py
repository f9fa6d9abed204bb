"""The broker and topic configuration catalogs the lab answers DescribeConfigs from (profiles/broker_configs.json)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CATALOG_FILE = Path(__file__).parent / "profiles" / "broker_configs.json"

# Topic configs whose broker synonyms are in other units, first set one wins (Kafka's
# ServerTopicConfigSynonyms); DescribeConfigs lists no synonym for them while all are at their defaults.
DERIVED: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
}
# The overrides Kafka's group coordinator creates __consumer_offsets with (GroupCoordinator.groupMetadataTopicConfigs).
INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    "__consumer_offsets": {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"},
}
_INT_TYPES = frozenset({"INT", "SHORT", "LONG"})


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    """One broker config as a real broker declares it."""

    name: str
    default: str | None
    type: str
    read_only: bool
    sensitive: bool


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    """One topic config, its default and the broker configs it inherits from."""

    name: str
    default: str | None
    type: str
    synonyms: tuple[str, ...]


@dataclass(frozen=True)
class ConfigCatalog:
    """One family (kafka-3.9, kafka-4.3): every broker and topic config, in the real broker's answer order."""

    family: str
    broker: dict[str, BrokerConfigDef]
    topic: dict[str, TopicConfigDef]
    dynamic_defaults: dict[str, str]


@cache
def load_catalogs(path: Path = CATALOG_FILE) -> dict[str, ConfigCatalog]:
    """Every family of the catalog file."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    out = {}
    for family, body in raw.items():
        if family.startswith("_"):
            continue
        out[family] = ConfigCatalog(
            family=family,
            broker={r[0]: BrokerConfigDef(r[0], r[1], r[2], bool(r[3]), bool(r[4])) for r in body["broker"]},
            topic={r[0]: TopicConfigDef(r[0], r[1], r[2], tuple(r[3])) for r in body["topic"]},
            dynamic_defaults=dict(body.get("dynamic_defaults", {})),
        )
    return out


def config_value(value: object, config_type: str, where: str) -> str:
    """A lab.toml value as the string a broker reports; ValueError naming `where` when it does not fit the type."""
    if isinstance(value, bool):
        if config_type != "BOOLEAN":
            raise ValueError(f"{where}: {config_type} expected, got a boolean")
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, str):
        text = value
    elif isinstance(value, list) and config_type == "LIST":
        text = ",".join(str(v) for v in value)
    else:
        raise ValueError(f"{where}: expected a string, number or boolean, got {type(value).__name__}")
    try:
        if config_type in _INT_TYPES:
            int(text)
        elif config_type == "DOUBLE":
            float(text)
        elif config_type == "BOOLEAN" and text.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a {config_type}") from None
    return text.lower() if config_type == "BOOLEAN" else text
