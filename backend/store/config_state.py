"""Broker configs and topic overrides in the lake: state rows of a ConfigSnapshot, its change rows, and back.

Each cluster has two state files (kinds `configs` and `config_runs` of the state manifest): one row
per (broker, config) and per (topic, override), rewritten only when the configuration changed, and
one row describing the last collection. Changes go to the change log (entity `config`):
`configs_first_seen` (one row for a cluster's first collection), `broker_configs_first_seen` /
`broker_configs_gone` (one row per broker), and per config `config_set`, `config_changed`,
`config_removed` with the entry before and after (value, source, why a value is withheld).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.store.model import ConfigSnapshot, ConfigValue
from backend.store.schemas import CONFIG_RUNS, CONFIG_STATE, SCHEMA_VERSION, schema_for

BROKER = "broker"
TOPIC = "topic"
FIELDS = ConfigValue._fields

Change = tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]  # kind, subject, before, after


def subject(resource_type: str, resource: str, name: str) -> str:
    """The change-log subject of one config: "broker 1: log.retention.hours", "topic orders: min.insync.replicas"."""
    return f"{resource_type} {resource}: {name}"


def _entry(resource_type: str, resource: str, name: str, value: ConfigValue) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource": resource, "name": name, "value": value.value,
            "source": value.source, "withheld": value.withheld, "read_only": value.read_only}


def _diff_entries(resource_type: str, resource: str, old: dict[str, ConfigValue],
                  new: dict[str, ConfigValue]) -> list[Change]:
    out: list[Change] = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        kind = "config_set" if a is None else "config_removed" if b is None else "config_changed"
        out.append((kind, subject(resource_type, resource, name),
                    None if a is None else _entry(resource_type, resource, name, a),
                    None if b is None else _entry(resource_type, resource, name, b)))
    return out


def diff(prev: ConfigSnapshot | None, new: ConfigSnapshot, cluster_name: str, topic_names: Iterable[str]) -> list[Change]:
    """The change rows from one stored configuration to the next (a deleted topic's overrides leave silently)."""
    if prev is None:
        return [("configs_first_seen", cluster_name, None, {
            "brokers": sorted(new.brokers), "broker_configs": sum(len(c) for c in new.brokers.values()),
            "topics_with_overrides": len(new.topics), "topic_overrides": sum(len(c) for c in new.topics.values()),
        })]
    out: list[Change] = []
    if prev.brokers is not new.brokers:
        for bid in sorted(set(prev.brokers) | set(new.brokers)):
            old, cur = prev.brokers.get(bid), new.brokers.get(bid)
            if old is cur or old == cur:
                continue
            if old is None:
                out.append(("broker_configs_first_seen", f"broker {bid}", None, {"broker_id": bid, "configs": len(cur or {})}))
            elif cur is None:
                out.append(("broker_configs_gone", f"broker {bid}", {"broker_id": bid, "configs": len(old)}, None))
            else:
                out += _diff_entries(BROKER, str(bid), old, cur)
    if prev.topics is not new.topics:
        existing: set[str] | None = None
        for topic in sorted(set(prev.topics) | set(new.topics)):
            old_t, cur_t = prev.topics.get(topic, {}), new.topics.get(topic, {})
            if old_t is cur_t or old_t == cur_t:
                continue
            if not cur_t:
                existing = existing if existing is not None else set(topic_names)
                if topic not in existing:
                    continue  # the topic is gone; the change log has its topic_deleted
            out += _diff_entries(TOPIC, topic, old_t, cur_t)
    return out


def state_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                snap: ConfigSnapshot) -> pa.Table:
    """The `configs` state rows of one cluster (column by column: thousands of rows)."""
    kinds: list[str] = []
    resources: list[str] = []
    names: list[str] = []
    values: list[ConfigValue] = []
    for bid in sorted(snap.brokers):
        entries = snap.brokers[bid]
        for name in sorted(entries):
            kinds.append(BROKER)
            resources.append(str(bid))
            names.append(name)
            values.append(entries[name])
    for topic in sorted(snap.topics):
        entries = snap.topics[topic]
        for name in sorted(entries):
            kinds.append(TOPIC)
            resources.append(topic)
            names.append(name)
            values.append(entries[name])
    n = len(names)
    cols: dict[str, list[Any]] = {
        "poll_id": [poll_id] * n, "polled_at": [polled_at] * n, "cluster_name": [cluster_name] * n,
        "cluster_id": [cluster_id] * n, "resource_type": kinds, "resource": resources, "config_name": names,
        "value": [v.value for v in values], "source": [v.source for v in values],
        "read_only": [v.read_only for v in values], "is_sensitive": [v.sensitive for v in values],
        "config_type": [v.config_type for v in values], "withheld": [v.withheld for v in values],
        "schema_version": [SCHEMA_VERSION] * n,
    }
    schema = schema_for(CONFIG_STATE)
    return pa.Table.from_pydict({f.name: cols[f.name] for f in schema}, schema=schema)


def error_text(snap: ConfigSnapshot) -> str | None:
    """What a collection could not read, in one line (None when it read everything)."""
    return "; ".join(f"{where}: {why}" for where, why in sorted(snap.errors.items())) or None


def runs_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
               snap: ConfigSnapshot) -> pa.Table:
    """The `config_runs` state row of one cluster: when its configuration was read, and what failed."""
    row = {"poll_id": poll_id, "polled_at": polled_at, "cluster_name": cluster_name, "cluster_id": cluster_id,
           "collected_at": snap.collected_at, "describe_configs_version": snap.version,
           "brokers": len(snap.brokers), "topics_with_overrides": len(snap.topics), "error": error_text(snap),
           "duration_ms": round(snap.duration_ms, 3), "schema_version": SCHEMA_VERSION}
    return pa.Table.from_pylist([row], schema=schema_for(CONFIG_RUNS))


def snapshots_from_tables(configs: pa.Table, runs: pa.Table) -> dict[str, ConfigSnapshot]:
    """Per cluster, the stored configuration rebuilt from its state rows (the baseline after a restart)."""
    out: dict[str, ConfigSnapshot] = {}
    for run in runs.to_pylist():
        errors = {"last collection": run["error"]} if run["error"] else {}
        out[run["cluster_name"]] = ConfigSnapshot(collected_at=run["collected_at"], version=run["describe_configs_version"],
                                                  errors=errors, duration_ms=run["duration_ms"] or 0.0)
    if configs.num_rows == 0:
        return out
    cols = {name: configs.column(name).to_pylist() for name in (
        "cluster_name", "resource_type", "resource", "config_name", "value", "source", "read_only", "is_sensitive",
        "config_type", "withheld")}
    for i, cluster in enumerate(cols["cluster_name"]):
        snap = out.get(cluster)
        if snap is None:
            continue  # rows without a run row are not a committed collection
        value = ConfigValue(cols["value"][i], cols["source"][i], bool(cols["read_only"][i]),
                            bool(cols["is_sensitive"][i]), cols["config_type"][i], cols["withheld"][i])
        if cols["resource_type"][i] == BROKER:
            snap.brokers.setdefault(int(cols["resource"][i]), {})[cols["config_name"][i]] = value
        else:
            snap.topics.setdefault(cols["resource"][i], {})[cols["config_name"][i]] = value
    return out
