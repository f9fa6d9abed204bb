"""Builds broker_configs.json, the configuration catalog the lab brokers answer DescribeConfigs from.

Asks a real, freshly formatted Apache Kafka broker (one that nobody altered) with the product's
own read-only DescribeConfigs, with synonyms, for its broker resource and for a topic created
without overrides, and writes one family of the catalog:

- `broker`: [name, default, type, read_only, sensitive] per broker config, in the broker's order
  (listener-prefixed configs are deployment-specific and left out);
- `topic`: [name, default, type, [broker synonyms]] per topic config;
- `dynamic_defaults`: cluster-wide dynamic defaults a fresh cluster already has (KRaft 4.x sets
  min.insync.replicas).

Run (the rig in tests/rig starts such brokers):
``python -m backend.lab.configs_build --bootstrap 127.0.0.1:9092 --broker-id 1 --topic fresh --family kafka-4.3``
which updates backend/lab/profiles/broker_configs.json in place (``--out`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from backend.kafka import protocol as P
from backend.kafka.configs import ConfigEntry, describe_configs

CATALOG_FILE = Path(__file__).parent / "profiles" / "broker_configs.json"
DEPLOYMENT_PREFIXES = ("listener.name.",)


def _default(entry: ConfigEntry) -> str | None:
    for name, value, source in entry.synonyms:
        if source == "DEFAULT_CONFIG" and name == entry.name:
            return value
    return entry.value if entry.source == "DEFAULT_CONFIG" else None


def _topic_default(entry: ConfigEntry) -> str | None:
    if entry.source == "DEFAULT_CONFIG":
        return entry.value
    for _name, value, source in entry.synonyms:
        if source == "DEFAULT_CONFIG":
            return value  # a same-unit broker synonym (the unit-converted ones have no listed synonym)
    return None


def build_family(bootstrap: str, broker_id: int, topic: str, timeout_s: float = 15.0) -> dict[str, Any]:
    """One catalog family from a live broker."""
    host, _, port = bootstrap.rpartition(":")
    answer = describe_configs(host, int(port), [(P.RESOURCE_BROKER, str(broker_id)), (P.RESOURCE_TOPIC, topic)],
                              timeout_s=timeout_s, include_synonyms=True)
    if not answer.ok:
        raise SystemExit(f"DescribeConfigs failed: {answer.error}")
    broker, topic_res = answer.resources
    for res in (broker, topic_res):
        if res.error:
            raise SystemExit(f"{res.name}: {res.error}")
    out: dict[str, Any] = {"broker": [], "topic": [], "dynamic_defaults": {}}
    for e in broker.entries:
        if e.name.startswith(DEPLOYMENT_PREFIXES):
            continue
        out["broker"].append([e.name, _default(e), e.config_type, e.read_only, e.sensitive])
        if e.source == "DYNAMIC_DEFAULT_BROKER_CONFIG":
            out["dynamic_defaults"][e.name] = e.value
    for e in topic_res.entries:
        if e.source == "DYNAMIC_TOPIC_CONFIG":
            raise SystemExit(f"topic {topic} overrides {e.name}: describe a topic created without configs")
        synonyms = list(dict.fromkeys(n for n, _v, s in e.synonyms if s != "DYNAMIC_TOPIC_CONFIG"))
        out["topic"].append([e.name, _topic_default(e), e.config_type, synonyms])
    return out


def render_catalog(catalog: dict[str, Any]) -> str:
    """The catalog as JSON with one config per line (readable diffs)."""
    lines = ["{"]
    families = list(catalog.items())
    for i, (family, value) in enumerate(families):
        end = "," if i < len(families) - 1 else ""
        if not isinstance(value, dict):
            lines.append(f" {json.dumps(family)}: {json.dumps(value)}{end}")
            continue
        lines.append(f" {json.dumps(family)}: {{")
        parts = list(value.items())
        for j, (part, rows) in enumerate(parts):
            sep = "," if j < len(parts) - 1 else ""
            if isinstance(rows, list):
                body = ",\n".join(f"   {json.dumps(r)}" for r in rows)
                lines.append(f"  {json.dumps(part)}: [\n{body}\n  ]{sep}")
            else:
                lines.append(f"  {json.dumps(part)}: {json.dumps(rows)}{sep}")
        lines.append(f" }}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Build one family and merge it into the catalog file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="host:port of a fresh broker")
    parser.add_argument("--broker-id", type=int, required=True)
    parser.add_argument("--topic", required=True, help="a topic created without config overrides")
    parser.add_argument("--family", required=True, help="catalog family name, e.g. kafka-4.3")
    parser.add_argument("--out", type=Path, default=CATALOG_FILE)
    args = parser.parse_args(argv)
    catalog = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    catalog[args.family] = build_family(args.bootstrap, args.broker_id, args.topic)
    args.out.write_text(render_catalog(catalog), encoding="utf-8")
    print(f"wrote family {args.family} to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
