"""One lab cluster's broker and topic configuration, and the DescribeConfigs answers built from it.

Levels, as a real broker resolves them: per-broker dynamic (DYNAMIC_BROKER_CONFIG) over the
cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG) over server.properties
(STATIC_BROKER_CONFIG) over the declared default (DEFAULT_CONFIG). A topic's config is its override
(DYNAMIC_TOPIC_CONFIG), else what the answering broker has for the broker config it inherits from.
Run-time changes (`set_broker_config`, `set_topic_config`) last until the lab stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from backend.kafka import protocol as P
from backend.lab.config_catalog import DERIVED, INTERNAL_TOPIC_CONFIGS, ConfigCatalog, config_value
from backend.lab.model import ClusterSpec

DYNAMIC_TOPIC = "DYNAMIC_TOPIC_CONFIG"
DYNAMIC_BROKER = "DYNAMIC_BROKER_CONFIG"
DYNAMIC_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"
STATIC = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
SOURCE_CODES = {name: code for code, name in P.CONFIG_SOURCES.items()}
TYPE_CODES = {name: code for code, name in P.DESCRIBE_CONFIGS_TYPES.items()}
INVALID_REQUEST = P.INVALID_REQUEST

Level = tuple[str, str | None]  # (source, value)


@dataclass(frozen=True)
class HostileAnswers:
    """What a hostile (or broken) broker slips into its DescribeConfigs answers: a lab fault for tests.

    extra_topics: topic resources nobody asked for (name -> overrides), added to every answer that describes
    topics; extra_broker: a broker resource nobody asked for (another id), added to every answer that describes
    a broker; errors: (resource type, name) -> an error message the broker answers instead of the configs.
    """

    extra_topics: dict[str, dict[str, str]] = field(default_factory=dict)
    extra_broker: str | None = None
    errors: dict[tuple[int, str], str] = field(default_factory=dict)


class LabConfigChangeError(ValueError):
    """A run-time config change a real broker would refuse (unknown key, read-only key, bad value)."""


class ClusterConfigs:
    """Every level of one cluster's configuration; `identity(broker_id)` gives the per-host static configs."""

    def __init__(self, spec: ClusterSpec, identity: Callable[[int], dict[str, str]]) -> None:
        self.catalog: ConfigCatalog = spec.profile.catalog
        self.identity = identity
        self.static_cluster = dict(spec.configs)
        self.static_broker = {b.id: dict(b.configs) for b in spec.brokers}
        self.dynamic_default = {**self.catalog.dynamic_defaults, **spec.dynamic_configs}
        self.dynamic_broker = {b.id: dict(b.dynamic_configs) for b in spec.brokers}
        self.topics: dict[str, dict[str, str]] = {t.name: dict(t.configs) for t in spec.topics}
        self.generation = 0  # bumped on every change: keys the brokers' cached answers
        self.hostile: HostileAnswers | None = None
        self._lock = threading.RLock()
        self._inherited: dict[tuple[int, int], dict[str, tuple[str, str | None, list[tuple[str, Level]]]]] = {}

    # ---------------------------------------------------------------- levels

    def broker_levels(self, broker_id: int, name: str) -> list[Level]:
        """Every level that has a value for a broker config, most specific first (the default last)."""
        levels: list[Level] = []
        with self._lock:
            if name in self.dynamic_broker.get(broker_id, {}):
                levels.append((DYNAMIC_BROKER, self.dynamic_broker[broker_id][name]))
            if name in self.dynamic_default:
                levels.append((DYNAMIC_DEFAULT, self.dynamic_default[name]))
            static = {**self.identity(broker_id), **self.static_cluster, **self.static_broker.get(broker_id, {})}
        if name in static:
            levels.append((STATIC, static[name]))
        definition = self.catalog.broker.get(name)
        if definition is not None and definition.default is not None:
            levels.append((DEFAULT, definition.default))
        return levels

    def broker_value(self, broker_id: int, name: str) -> Level:
        """The effective (source, value) of a broker config."""
        levels = self.broker_levels(broker_id, name)
        return levels[0] if levels else (DEFAULT, None)

    def _inherited_values(self, broker_id: int) -> dict[str, tuple[str, str | None, list[tuple[str, Level]]]]:
        """What every topic config of a topic without overrides is at `broker_id` (cached per generation)."""
        key = (broker_id, self.generation)
        with self._lock:
            found = self._inherited.get(key)
        if found is not None:
            return found
        out = {}
        for name, definition in self.catalog.topic.items():
            synonyms: list[tuple[str, Level]] = []
            inherited: Level | None = None
            if name in DERIVED:
                for broker_name, factor in DERIVED[name]:
                    source, value = self.broker_value(broker_id, broker_name)
                    if value is not None:
                        if source != DEFAULT:
                            synonyms.append((broker_name, (source, value)))
                        inherited = (source, str(int(value) * factor) if factor != 1 else value)
                        break
            else:
                for broker_name in definition.synonyms:
                    levels = self.broker_levels(broker_id, broker_name)
                    synonyms += [(broker_name, level) for level in levels]
                    if levels and inherited is None:
                        inherited = levels[0]
            source, value = inherited if inherited is not None else (DEFAULT, definition.default)
            out[name] = (source, value, synonyms)
        with self._lock:
            self._inherited = {k: v for k, v in self._inherited.items() if k[1] == self.generation}
            self._inherited[key] = out
        return out

    def overrides(self, topic: str) -> dict[str, str]:
        """A topic's overrides (internal topics have Kafka's own)."""
        with self._lock:
            return {**INTERNAL_TOPIC_CONFIGS.get(topic, {}), **self.topics.get(topic, {})}

    def topic_value(self, broker_id: int, topic: str, name: str) -> tuple[str, str | None, list[tuple[str, Level]]]:
        """The effective (source, value) of a topic config as `broker_id` answers, with its synonyms."""
        override = self.overrides(topic).get(name)
        source, value, synonyms = self._inherited_values(broker_id)[name]
        if override is None:
            return source, value, synonyms
        return DYNAMIC_TOPIC, override, [(name, (DYNAMIC_TOPIC, override)), *synonyms]

    # --------------------------------------------------------------- changes

    def set_broker_config(self, broker_id: int | None, name: str, value: object | None) -> None:
        """A dynamic broker config (broker_id None: the cluster-wide default); value None deletes it."""
        definition = self.catalog.broker.get(name)
        if definition is None:
            raise LabConfigChangeError(f"unknown broker config {name!r}")
        if definition.read_only:
            raise LabConfigChangeError(f"{name!r} is read-only: it cannot be updated dynamically")
        with self._lock:
            if broker_id is not None and broker_id not in self.dynamic_broker:
                raise LabConfigChangeError(f"no broker {broker_id}")
            target = self.dynamic_default if broker_id is None else self.dynamic_broker[broker_id]
            if value is None:
                target.pop(name, None)
            else:
                target[name] = self._value(name, value, definition.type)
            self.generation += 1

    def set_topic_config(self, topic: str, name: str, value: object | None) -> None:
        """A topic override; value None deletes it."""
        definition = self.catalog.topic.get(name)
        if definition is None:
            raise LabConfigChangeError(f"unknown topic config {name!r}")
        with self._lock:
            overrides = self.topics.setdefault(topic, {})
            if value is None:
                overrides.pop(name, None)
            else:
                overrides[name] = self._value(name, value, definition.type)
            self.generation += 1

    def set_topic_configs(self, topic: str, configs: dict[str, str] | None) -> None:
        """Replace a topic's overrides (topic created or deleted: None)."""
        with self._lock:
            if configs is None:
                self.topics.pop(topic, None)
            else:
                self.topics[topic] = dict(configs)
            self.generation += 1

    def set_hostile(self, hostile: HostileAnswers | None) -> None:
        """Make every DescribeConfigs answer carry `hostile`'s additions (None: answer honestly again)."""
        with self._lock:
            self.hostile = hostile
            self.generation += 1

    @staticmethod
    def _value(name: str, value: object, config_type: str) -> str:
        try:
            return config_value(value, config_type, name)
        except ValueError as exc:
            raise LabConfigChangeError(str(exc)) from None

    # --------------------------------------------------------------- answers

    def _entry(self, name: str, source: str, value: str | None, read_only: bool, sensitive: bool, config_type: str,
               synonyms: Iterable[tuple[str, Level]], version: int, with_synonyms: bool) -> dict[str, Any]:
        return {
            "name": name,
            "value": None if sensitive else value,
            "read_only": read_only,
            "is_default": source == DEFAULT,
            "config_source": SOURCE_CODES[source],
            "is_sensitive": sensitive,
            "synonyms": [{"name": n, "value": None if sensitive else v, "source": SOURCE_CODES[s]}
                         for n, (s, v) in synonyms] if with_synonyms and version >= 1 else [],
            "config_type": TYPE_CODES.get(config_type, 0),
            "documentation": None,
        }

    def broker_entries(self, broker_id: int, keys: list[str] | None, version: int,
                       with_synonyms: bool) -> list[dict[str, Any]]:
        """DescribeConfigs entries of this broker's own resource."""
        out = []
        wanted = set(keys) if keys is not None else None
        for name, d in self.catalog.broker.items():
            if wanted is not None and name not in wanted:
                continue
            levels = self.broker_levels(broker_id, name)
            source, value = levels[0] if levels else (DEFAULT, None)
            out.append(self._entry(name, source, value, d.read_only, d.sensitive, d.type,
                                   [(name, level) for level in levels], version, with_synonyms))
        return out

    def default_entries(self, keys: list[str] | None, version: int, with_synonyms: bool) -> list[dict[str, Any]]:
        """DescribeConfigs entries of the empty broker name: the cluster-wide dynamic defaults only."""
        with self._lock:
            defaults = dict(self.dynamic_default)
        out = []
        for name, value in defaults.items():
            d = self.catalog.broker[name]
            if keys is None or name in keys:
                out.append(self._entry(name, DYNAMIC_DEFAULT, value, d.read_only, d.sensitive, d.type,
                                       [(name, (DYNAMIC_DEFAULT, value))], version, with_synonyms))
        return out

    def topic_entries(self, broker_id: int, topic: str, keys: list[str] | None, version: int,
                      with_synonyms: bool) -> list[dict[str, Any]]:
        """DescribeConfigs entries of one topic, as `broker_id` answers."""
        out = []
        overrides = self.overrides(topic)
        inherited = self._inherited_values(broker_id)
        for name, d in self.catalog.topic.items():
            if keys is not None and name not in keys:
                continue
            source, value, synonyms = inherited[name]
            if name in overrides:
                source, value = DYNAMIC_TOPIC, overrides[name]
                synonyms = [(name, (DYNAMIC_TOPIC, value)), *synonyms]
            out.append(self._entry(name, source, value, False, False, d.type, synonyms, version, with_synonyms))
        return out

    def describe(self, broker_id: int, request: dict[str, Any], version: int,
                 topics: set[str]) -> dict[str, Any]:
        """A DescribeConfigs response body, as broker `broker_id` of this cluster answers it."""
        results = []
        with_synonyms = bool(request.get("include_synonyms"))
        for resource in request.get("resources") or []:
            kind, name = resource.get("resource_type"), resource.get("resource_name") or ""
            keys = resource.get("configuration_keys")
            row: dict[str, Any] = {"error_code": P.ERROR_NONE, "error_message": None, "resource_type": kind,
                                   "resource_name": name, "configs": []}
            if kind == P.RESOURCE_BROKER:
                if name == "":
                    row["configs"] = self.default_entries(keys, version, with_synonyms)
                elif name == str(broker_id):
                    row["configs"] = self.broker_entries(broker_id, keys, version, with_synonyms)
                else:
                    row.update(error_code=INVALID_REQUEST, error_message=(
                        f"Unexpected broker id, expected {broker_id} or empty string, but received {name}"))
            elif kind == P.RESOURCE_TOPIC:
                if name in topics:
                    row["configs"] = self.topic_entries(broker_id, name, keys, version, with_synonyms)
                else:
                    row.update(error_code=P.UNKNOWN_TOPIC_OR_PARTITION, error_message=None)
            else:
                row.update(error_code=INVALID_REQUEST,
                           error_message=f"Resource type {kind} is not described by the lab broker")
            results.append(row)
        if self.hostile is not None:
            results = self._tampered(results, broker_id, version, with_synonyms)
        return {"throttle_time_ms": 0, "results": results}

    def _tampered(self, results: list[dict[str, Any]], broker_id: int, version: int,
                  with_synonyms: bool) -> list[dict[str, Any]]:
        hostile = self.hostile
        assert hostile is not None
        for row in results:
            message = hostile.errors.get((row["resource_type"], row["resource_name"]))
            if message is not None:
                row.update(error_code=INVALID_REQUEST, error_message=message, configs=[])
        kinds = {row["resource_type"] for row in results}
        if P.RESOURCE_TOPIC in kinds:
            for topic, overrides in hostile.extra_topics.items():
                entries = []
                for name, d in self.catalog.topic.items():
                    if name in overrides:
                        entries.append(self._entry(name, DYNAMIC_TOPIC, overrides[name], False, False, d.type,
                                                   [], version, with_synonyms))
                results.append({"error_code": P.ERROR_NONE, "error_message": None, "resource_type": P.RESOURCE_TOPIC,
                                "resource_name": topic, "configs": entries})
        if P.RESOURCE_BROKER in kinds and hostile.extra_broker is not None:
            results.append({"error_code": P.ERROR_NONE, "error_message": None, "resource_type": P.RESOURCE_BROKER,
                            "resource_name": hostile.extra_broker,
                            "configs": self.broker_entries(broker_id, None, version, with_synonyms)})
        return results
