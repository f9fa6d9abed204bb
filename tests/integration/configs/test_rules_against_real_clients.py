"""What docs/rules.md says about the Java clients, checked on real clients of every release 2.8-4.4.

Each release's kafka-clients and kafka-streams jars (.cache/known-keys) build the clients a rule is about;
whether they start, refuse (ConfigException or IllegalArgumentException at construction), and what they
log (read back through the product's Java-log reader) is what the rules' "client versions" rest on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.configs.readers import parse_java_log
from backend.pipeline.rules import rule_by_id
from tests.rig.clients import known_keys_jars, run_clients, unused_bootstrap

RELEASES = ("2.8.2", "3.0.2", "3.1.2", "3.2.3", "3.3.2", "3.4.1", "3.5.2", "3.6.2", "3.7.2", "3.8.1", "3.9.2",
            "4.0.1", "4.1.1", "4.2.0", "4.3.1", "4.4.0")
SPECS = {
    "default": ("producer", {}),
    "acks1": ("producer", {"acks": "1"}),
    "retries0": ("producer", {"retries": "0"}),
    "inflight6": ("producer", {"max.in.flight.requests.per.connection": "6"}),
    "idem-acks1": ("producer", {"enable.idempotence": "true", "acks": "1"}),  # CC001
    "idem-inflight6": ("producer", {"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"}),
    "delivery": ("producer", {"delivery.timeout.ms": "1000"}),  # CC005
    "acks0-batch0-smallbuf": ("producer", {"acks": "0", "batch.size": "0", "buffer.memory": "1000"}),
    "extremes": ("consumer", {"group.id": "g1", "auto.offset.reset": "none", "max.poll.records": "20000",
                              "max.poll.interval.ms": "5000", "fetch.max.wait.ms": "30000",
                              "session.timeout.ms": "3000", "heartbeat.interval.ms": "1000"}),
    "hb-third": ("consumer", {"group.id": "g2", "session.timeout.ms": "10000", "heartbeat.interval.ms": "4000"}),
    "hb-over": ("consumer", {"group.id": "g3", "session.timeout.ms": "10000", "heartbeat.interval.ms": "10000"}),
    "kip848-session": ("consumer", {"group.id": "g4", "group.protocol": "consumer", "session.timeout.ms": "10000",
                                    "heartbeat.interval.ms": "4000"}),
    # Keys later releases removed (CC019, CC021, CC022): every release starts with them.
    "jmx-off": ("producer", {"auto.include.jmx.reporter": "false"}),
    "leave-false": ("consumer", {"group.id": "g5", "internal.leave.group.on.close": "false"}),
    "streams-retries": ("streams", {"application.id": "streams-retries", "retries": "3"}),
}


def _line(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize("version", RELEASES)
def test_java_clients_of_every_release(version: str, real_clients_classes: Path, tmp_path: Path) -> None:
    bootstrap = unused_bootstrap()
    specs = [";".join([kind, name, f"bootstrap.servers={bootstrap}", f"client.id={name}",
                       *(f"{k}={v}" for k, v in config.items())]) for name, (kind, config) in SPECS.items()]
    run = run_clients(real_clients_classes, version, "slf4j-simple", specs, tmp_path, jars=known_keys_jars(version))
    logged = {item.record["client_id"]: {c["key"]: c["value"] for c in item.record["configs"]}
              for item in parse_java_log(run.log) if item.record is not None}
    four = _line(version) >= (4, 0)

    # CC001, CC002: refused whenever idempotence is asked for explicitly, before the block is logged (2.8 logs
    # CC002's first); CC005 and a heartbeat at the session timeout: refused after the block is logged.
    expected_refused = {"idem-acks1", "idem-inflight6", "delivery", "hb-over"} | ({"inflight6"} if four else set())
    # KIP-848 consumers (group.protocol=consumer, a key of 3.7+): 4.x refuses session/heartbeat settings.
    if four:
        expected_refused.add("kip848-session")
    assert set(run.refused) == expected_refused, run.refused
    logged_first = {"delivery", "hb-over"} | ({"idem-inflight6"} if version == "2.8.2" else set())
    assert set(logged) & set(SPECS) == set(SPECS) - (expected_refused - logged_first)

    # Defaults: 2.8 acks=1 without idempotence (CC007 on every default producer); 3.0+ acks=all, idempotent.
    default = logged["default"]
    assert (default["acks"], default["enable.idempotence"]) == (("1", "false") if version == "2.8.2" else ("-1", "true"))
    # acks other than all, and retries=0, silently turn idempotence off (3.0+: the default was on).
    assert logged["acks1"]["enable.idempotence"] == "false" and logged["retries0"]["enable.idempotence"] == "false"
    if not four:
        assert logged["inflight6"]["enable.idempotence"] == "false"  # 3.x: off with a warning; 4.x refuses
    assert logged["acks0-batch0-smallbuf"]["batch.size"] == "0"  # CC004, CC006, CC008: the client starts
    assert logged["extremes"]["auto.offset.reset"] == "none"  # CC011-CC014: the consumer starts
    assert logged["hb-third"]["heartbeat.interval.ms"] == "4000"  # CC009: starts below the session timeout

    # Removed keys: every release starts with them; only the releases that define them log them.
    line = _line(version)
    jmx_off = logged["jmx-off"]
    assert jmx_off.get("auto.include.jmx.reporter") == ("false" if (3, 4) <= line < (4, 0) else None)  # CC019
    # 4.x: JmxReporter is metric.reporters' default (CC020: setting it without JmxReporter loses JMX).
    assert jmx_off["metric.reporters"] == ("org.apache.kafka.common.metrics.JmxReporter" if four else "")
    assert logged["leave-false"].get("internal.leave.group.on.close") == ("false" if line < (4, 2) else None)  # CC022
    # Kafka Streams set it to false on its own consumers (CC022 leaves them out by their client.id).
    streams_consumer = logged["streams-retries-StreamThread-1-consumer"]
    assert streams_consumer.get("internal.leave.group.on.close") == ("false" if line < (4, 2) else None)
    assert logged["streams-retries"].get("retries") == (None if four else "3")  # CC021: StreamsConfig's own
    assert logged["streams-retries-StreamThread-1-producer"]["retries"] == "3"  # still reaches the producer


def test_the_documented_versions_say_so() -> None:
    for rule_id in ("CC001", "CC002"):
        assert rule_by_id(rule_id).versions.startswith("Java 2.8–4.4 refuse to start")
    assert "2.8 logs its config first" in rule_by_id("CC002").versions
    assert "log their config, then refuse" in rule_by_id("CC005").versions
    assert "Java 2.8 by default" in rule_by_id("CC007").versions
    assert "classic-protocol" in rule_by_id("CC009").versions and "classic-protocol" in rule_by_id("CC014").versions
    assert "3.4–3.9 define it" in rule_by_id("CC019").versions
    assert "2.8–3.9 log it in their StreamsConfig block" in rule_by_id("CC021").versions
    assert "2.8–4.1 consumers define it" in rule_by_id("CC022").versions
