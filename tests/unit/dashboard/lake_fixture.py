"""Build a small, realistic fixture lake in the documented layout (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from backend.store import config_state, state
from backend.store.config_schemas import arrow_schema
from backend.store.fleet_writer import migrate_v1_if_needed
from backend.store.lake import Lake
from backend.store.model import ConfigSnapshot, ConfigValue

SCHEMA_VERSION = 1
# Dated relative to the clock when the tests start, since the pages show windows relative to now (changes of the
# last 7 days, incidents resolved in the last 24 hours, 30 days retained): two polls an hour apart, the last one two
# days ago (inside 7 days, outside 24 hours), so the fixture means the same on any day.
T0 = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=49)
T1 = T0 + timedelta(hours=1)
POLL_1 = f"{T0:%Y%m%dT%H%M%S}000000Z-aaaaaaaa"
POLL_2 = f"{T1:%Y%m%dT%H%M%S}000000Z-bbbbbbbb"

CLUSTERS: dict[str, dict[str, Any]] = {
    "prod-eu": {"id": "EUcluster-AAAAAAAAAAAA", "tags": {"env": "prod", "region": "eu", "team": "core"}},
    "prod-us": {"id": "UScluster-BBBBBBBBBBBB", "tags": {"env": "prod", "region": "us", "team": "payments"}},
    "staging": {"id": "STcluster-CCCCCCCCCCCC", "tags": {"env": "staging", "region": "eu", "team": "core"}},
}
SECRET_VALUE = "hunter2-do-not-leak"


def write_table(root: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Write snapshot rows through the store's own atomic writer, one file per poll."""
    lake = Lake(root)
    by_poll: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_poll.setdefault(row["poll_id"], []).append(row)
    for poll_id, poll_rows in by_poll.items():
        clean = [{k: v for k, v in r.items() if k != "schema_version"} for r in poll_rows]
        lake.write(table, clean, poll_id=poll_id)


def write_result(root: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    """Write a pipeline result table under <root>/results/<name>/ with its declared schema."""
    schema = arrow_schema(name)
    folder = root / "results" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-00000.parquet"
    filled = [{"computed_at": T1, "schema_version": 1, **{k: r.get(k) for k in schema.names if k in r}}
              for r in rows]
    pq.write_table(pa.Table.from_pylist(filled, schema=schema), path)
    return path


def _cluster_row(poll: str, at: datetime, name: str, **over: Any) -> dict[str, Any]:
    row = {
        "poll_id": poll, "polled_at": at, "cluster_name": name,
        "tags_json": json.dumps(CLUSTERS[name]["tags"]), "cluster_id": CLUSTERS[name]["id"],
        "zk_cluster_id": None, "controller_id": 1, "status": "ok", "error": None,
        "broker_count": 3, "brokers_reachable": 3, "topic_count": 0, "partition_count": 0,
        "under_replicated": 0, "offline_partitions": 0, "duration_ms": 40.0,
        "schema_version": SCHEMA_VERSION,
    }
    row.update(over)
    return row


def _broker_row(poll: str, at: datetime, name: str, bid: int, **over: Any) -> dict[str, Any]:
    row = {
        "poll_id": poll, "polled_at": at, "cluster_name": name, "cluster_id": CLUSTERS[name]["id"],
        "broker_id": bid, "host": f"{name}-b{bid}.example", "port": 9092, "rack": f"rack-{bid}",
        "is_controller": bid == 1, "reachable": True, "software_name": "Apache Kafka",
        "software_version": "3.9.1", "version_provenance": "reported", "version_min": None,
        "version_max": None, "version_confidence": "high",
        "api_versions_json": json.dumps({"0": [0, 11], "3": [0, 12], "18": [0, 4], "60": [0, 2]}),
        "probe_ms": 3.5, "error": None, "schema_version": SCHEMA_VERSION,
    }
    row.update(over)
    return row


def _topic_row(poll: str, at: datetime, name: str, topic: str, tid: str, **over: Any) -> dict[str, Any]:
    row = {
        "poll_id": poll, "polled_at": at, "cluster_name": name, "cluster_id": CLUSTERS[name]["id"],
        "topic": topic, "topic_id": tid, "zk_topic_id": None, "partitions": 6,
        "replication_factor": 3, "internal": topic.startswith("__"), "under_replicated": 0,
        "offline_partitions": 0, "schema_version": SCHEMA_VERSION,
    }
    row.update(over)
    return row


def build_snapshots(root: Path) -> None:
    """Two polls: prod-eu upgrades a broker and recreates a topic; staging goes down."""
    clusters, brokers, topics = [], [], []
    for poll, at in ((POLL_1, T0), (POLL_2, T1)):
        # prod-eu: healthy; broker 3 upgraded 3.8.0 -> 3.9.1 between polls.
        eu_topics = [("orders", "tid-orders-1" if poll == POLL_1 else "tid-orders-2"),
                     ("payments", "tid-payments-eu"), ("__consumer_offsets", "tid-co-eu")]
        eu_topics += [(f"events-{i:03d}", f"tid-ev-eu-{i}") for i in range(30)]
        clusters.append(_cluster_row(poll, at, "prod-eu", topic_count=len(eu_topics),
                                     partition_count=6 * len(eu_topics)))
        for bid in (1, 2, 3):
            version = "3.8.0" if (bid == 3 and poll == POLL_1) else "3.9.1"
            brokers.append(_broker_row(poll, at, "prod-eu", bid, software_version=version))
        topics += [_topic_row(poll, at, "prod-eu", t, i) for t, i in eu_topics]
        # prod-us: degraded, mixed software with a guessed version and one URP topic.
        ctrl = 4 if poll == POLL_1 else 5
        clusters.append(_cluster_row(poll, at, "prod-us", controller_id=ctrl, status="degraded",
                                     error="broker 6 unreachable: timed out after 5.0 s",
                                     brokers_reachable=2, topic_count=3, partition_count=18,
                                     under_replicated=2))
        brokers.append(_broker_row(poll, at, "prod-us", 4, is_controller=ctrl == 4,
                                   software_version="3.9.1", version_provenance="reported"))
        brokers.append(_broker_row(poll, at, "prod-us", 5, is_controller=ctrl == 5,
                                   software_name=None, software_version=None,
                                   version_provenance="guessed", version_min="3.7.0",
                                   version_max="3.9.1", version_confidence="medium"))
        brokers.append(_broker_row(poll, at, "prod-us", 6, is_controller=False, reachable=False,
                                   software_name=None, software_version=None,
                                   version_provenance="unknown", error="timed out after 5.0 s"))
        topics += [_topic_row(poll, at, "prod-us", "orders", "tid-orders-us", under_replicated=2),
                   _topic_row(poll, at, "prod-us", "payments", "tid-payments-us"),
                   _topic_row(poll, at, "prod-us", "audit", "tid-audit-us")]
        # staging: ZooKeeper mode; up in poll 1, down in poll 2.
        if poll == POLL_1:
            clusters.append(_cluster_row(poll, at, "staging", zk_cluster_id=CLUSTERS["staging"]["id"],
                                         broker_count=1, brokers_reachable=1, topic_count=1,
                                         partition_count=1))
            brokers.append(_broker_row(poll, at, "staging", 1, software_version="3.9.2",
                                       version_provenance="zookeeper"))
            topics.append(_topic_row(poll, at, "staging", "orders", "tid-orders-st", partitions=1,
                                     replication_factor=1))
        else:
            # As the poller writes a down cluster: no id, no controller, no counts (nulls).
            clusters.append(_cluster_row(poll, at, "staging", status="down", controller_id=None, cluster_id=None,
                                         error="connection refused: staging-b1.example:9092",
                                         broker_count=None, brokers_reachable=None, topic_count=None,
                                         partition_count=None, under_replicated=None, offline_partitions=None,
                                         duration_ms=None))
    write_table(root, "cluster_snapshots", clusters)
    write_table(root, "broker_snapshots", brokers)
    write_table(root, "topic_snapshots", topics)
    zk = [{"poll_id": POLL_1, "polled_at": T0, "cluster_name": "staging", "path": p, "value": v,
           "schema_version": SCHEMA_VERSION}
          for p, v in (("/cluster/id", json.dumps({"version": "1", "id": CLUSTERS["staging"]["id"]})),
                       ("/controller", json.dumps({"version": 1, "brokerid": 1})),
                       ("/brokers/ids/1", json.dumps({"host": "staging-b1.example", "port": 9092})))]
    write_table(root, "zk_snapshots", zk)
    alerts = [
        {"alert_id": "fa-1", "raised_at": T1, "poll_id": POLL_2, "rule": "topic_recreated",
         "severity": "warning", "cluster_name": "prod-eu", "subject": "topic orders",
         "evidence_json": json.dumps({"old_topic_id": "tid-orders-1", "new_topic_id": "tid-orders-2"}),
         "explanation": "Topic orders was deleted and recreated with a new topic id.",
         "doc_url": "https://cwiki.apache.org/confluence/x/KIP-516", "schema_version": SCHEMA_VERSION},
        {"alert_id": "fa-2", "raised_at": T1, "poll_id": POLL_2, "rule": "broker_missing",
         "severity": "critical", "cluster_name": "staging", "subject": "cluster staging",
         "evidence_json": json.dumps({"error": "connection refused"}),
         "explanation": "No broker of the cluster answered.", "doc_url": None,
         "schema_version": SCHEMA_VERSION},
        {"alert_id": "fa-3", "raised_at": T1, "poll_id": POLL_2, "rule": "controller_changed",
         "severity": "info", "cluster_name": "prod-us", "subject": "broker 5",
         "evidence_json": json.dumps({"old": 4, "new": 5}),
         "explanation": "The active controller moved.", "doc_url": None,
         "schema_version": SCHEMA_VERSION},
    ]
    write_table(root, "fleet_alerts", alerts)


def build_results(root: Path) -> None:
    """Pipeline results for prod-eu and prod-us, keyed by cluster id as the pipeline writes them."""
    eu, us = CLUSTERS["prod-eu"]["id"], CLUSTERS["prod-us"]["id"]
    dist = []
    shapes = {
        eu: [("producer", "acks", {"all": 80, "1": 20}),
             ("producer", "compression.type", {"zstd": 60, "none": 40}),
             # 0 is the Java producer's linger.ms default up to 3.9 (5 from 4.0): upgrade readiness names them.
             ("producer", "linger.ms", {"0": 40, "100": 60}),
             ("consumer", "enable.auto.commit", {"true": 90, "false": 10})],
        us: [("producer", "acks", {"all": 30, "1": 50, "0": 20}),
             ("producer", "compression.type", {"none": 100}),
             ("consumer", "enable.auto.commit", {"true": 90, "false": 10})],
    }
    for cid, keys in shapes.items():
        for ctype, key, counts in keys:
            total = sum(counts.values())
            dist += [{"cluster_id": cid, "client_type": ctype, "key": key, "value": v,
                      "instance_count": n, "total_instances": total, "share": n / total}
                     for v, n in counts.items()]
    # A Java client log prints acks=-1: the pipeline counts it as "all" and keeps the spellings.
    for row in dist:
        if row["key"] == "acks" and row["value"] == "all":
            row["raw_values"] = ["-1", "all"] if row["cluster_id"] == eu else ["all"]
    # client.id: one value per instance, drifts "most" (TVD 1.0) but means nothing.
    dist += [{"cluster_id": cid, "client_type": "producer", "key": "client.id", "value": f"{cid}-app-{i}",
              "instance_count": 1, "total_instances": 25, "share": 1 / 25} for cid in (eu, us) for i in range(25)]
    # A sensitive key that slipped into results must never reach a page or an export.
    dist.append({"cluster_id": eu, "client_type": "producer", "key": "sasl.jaas.config", "value": SECRET_VALUE,
                 "instance_count": 1, "total_instances": 1, "share": 1.0})
    write_result(root, "distributions", dist)
    write_result(root, "numeric_summary", [
        {"cluster_id": cid, "client_type": "producer", "key": "linger.ms", "type": "INT",
         "instances": 100, "unparsable": 0, "min": 0.0, "p50": med, "p90": med * 3, "max": 100.0}
        for cid, med in ((eu, 5.0), (us, 20.0))
    ])
    write_result(root, "default_share", [
        {"cluster_id": cid, "client_type": ct, "key": key, "instances": 100,
         "default_count": d, "overridden_count": 100 - d, "default_share": d / 100}
        for cid in (eu, us)
        for ct, key, d in (("producer", "acks", 70), ("producer", "linger.ms", 40),
                           ("consumer", "enable.auto.commit", 90))
    ])
    a, b = sorted((eu, us))
    write_result(root, "drift_clusters", [
        {"client_type": ct, "key": key, "cluster_a": a, "cluster_b": b, "tvd": tvd,
         "instances_a": 100, "instances_b": 100, "dominant_value_a": None, "dominant_value_b": None}
        for ct, key, tvd in (("producer", "client.id", 1.0), ("producer", "acks", 0.5), ("producer", "compression.type", 0.6),
                             ("consumer", "enable.auto.commit", 0.0))
    ])
    write_result(root, "drift_keys", [
        {"client_type": ct, "key": key, "cluster_id": cid, "instances": 100, "distinct_values": 2,
         "dominant_value": dom, "dominant_share": 0.8, "max_tvd": tvd}
        for cid in (eu, us)
        for ct, key, dom, tvd in (("producer", "client.id", "x", 1.0), ("producer", "compression.type", "none", 0.6),
                                  ("producer", "acks", "all", 0.5),
                                  ("consumer", "enable.auto.commit", "true", 0.0))
    ])
    write_result(root, "group_drift", [
        {"cluster_id": eu, "group_id": "reporting", "key": "auto.offset.reset", "members": 4,
         "distinct_values": 2, "value_counts_json": json.dumps({"earliest": 3, "latest": 1})},
    ])
    write_result(root, "client_versions", [
        {"cluster_id": cid, "client_type": "producer", "client_software_name": sw,
         "client_software_version": ver, "instances": n}
        for cid, sw, ver, n in ((eu, "apache-kafka-java", "3.9.1", 70), (eu, "librdkafka", "2.16.1", 30),
                                (us, "librdkafka", "2.10.0", 100))
    ])
    write_result(root, "config_alerts", [
        {"alert_id": "ca-1", "rule_id": "producer_acks_zero", "severity": "critical",
         "title": "Producer with acks=0", "cluster_id": us, "client_instance_id": "ci-1",
         "client_id": "billing-writer", "group_id": None, "client_type": "producer", "keys": "acks",
         "observed_json": json.dumps({"acks": "0"}),
         "explanation": "acks=0 loses data on broker failure.",
         "doc_url": "https://kafka.apache.org/documentation/#producerconfigs_acks"},
        {"alert_id": "ca-2", "rule_id": "consumer_short_commit_interval", "severity": "warning",
         "title": "Very short auto commit interval", "cluster_id": eu, "client_instance_id": "ci-2",
         "client_id": "reporting-1", "group_id": "reporting", "client_type": "consumer",
         "keys": "auto.commit.interval.ms", "observed_json": json.dumps({"auto.commit.interval.ms": "10"}),
         "explanation": "A very short commit interval loads the group coordinator.",
         "doc_url": "https://kafka.apache.org/documentation/#consumerconfigs_auto.commit.interval.ms"},
    ])
    write_result(root, "ingest_stats", [
        {"run_id": run, "ran_at": at, "source": "sink", "location": "sink.jsonl", "metric": m,
         "detail": d, "count": n}
        for run, at, counts in (
            ("run-0", T0, (("records_read", "", 1000), ("records_written", "", 998),
                           ("quarantined", "malformed_json", 2), ("sensitive_dropped", "sasl.jaas.config", 4))),
            ("run-1", T1, (("records_read", "", 1500), ("records_written", "", 1497),
                           ("quarantined", "malformed_json", 3), ("sensitive_dropped", "sasl.jaas.config", 7))))
        for m, d, n in counts
    ])


def _cv(value: str | None, source: str = "DEFAULT_CONFIG", **over: Any) -> ConfigValue:
    return ConfigValue(value, source, **over)


def fixture_configs() -> dict[str, ConfigSnapshot]:
    """prod-eu: broker 3 still has an old static retention, two topic overrides; prod-us: unclean election on."""
    eu = {}
    for bid in (1, 2, 3):
        eu[bid] = {
            "log.retention.hours": _cv("72" if bid == 3 else "168", "STATIC_BROKER_CONFIG", read_only=True,
                                       config_type="INT"),
            "min.insync.replicas": _cv("2", "DYNAMIC_DEFAULT_BROKER_CONFIG", config_type="INT"),
            "unclean.leader.election.enable": _cv("false", config_type="BOOLEAN"),
            "auto.create.topics.enable": _cv("false", "STATIC_BROKER_CONFIG", config_type="BOOLEAN"),
            "log.cleaner.threads": _cv("1", config_type="INT"),
            "ssl.keystore.password": _cv(None, sensitive=True, config_type="PASSWORD", withheld="sensitive"),
        }
    us = {}
    for bid in (4, 5, 6):
        us[bid] = {
            "log.retention.hours": _cv("168", read_only=True, config_type="INT"),
            "min.insync.replicas": _cv("1", config_type="INT"),
            "unclean.leader.election.enable": _cv("true", "STATIC_BROKER_CONFIG", config_type="BOOLEAN"),
            "auto.create.topics.enable": _cv("false", "STATIC_BROKER_CONFIG", config_type="BOOLEAN"),
            "log.cleaner.threads": _cv("1", config_type="INT"),
            "ssl.keystore.password": _cv(None, sensitive=True, config_type="PASSWORD", withheld="sensitive"),
        }
    topics = {"orders": {"retention.ms": _cv("86400000", "DYNAMIC_TOPIC_CONFIG", config_type="LONG")},
              "payments": {"min.insync.replicas": _cv("4", "DYNAMIC_TOPIC_CONFIG", config_type="INT")}}
    return {
        "prod-eu": ConfigSnapshot(collected_at=T1, brokers=eu, topics=topics, version=4),
        "prod-us": ConfigSnapshot(collected_at=T1, brokers=us, version=4,
                                  errors={"broker 6": "connection refused: prod-us-b6.example:9092"}),
    }


def build_configs(root: Path) -> None:
    """The broker configs and topic overrides the poller would have stored at POLL_2 (staging never read)."""
    lake = Lake(root)
    manifest = state.read_manifest(lake) or state.new_manifest()
    updates = {}
    for name, snap in fixture_configs().items():
        cid = CLUSTERS[name]["id"]
        updates[name] = {"configs": config_state.state_table(POLL_2, T1, name, cid, snap),
                         "config_runs": config_state.runs_table(POLL_2, T1, name, cid, snap)}
    state.write_cluster_states(lake, manifest, updates)
    before = {"resource_type": "broker", "resource": "3", "name": "log.retention.hours", "value": "168",
              "source": "STATIC_BROKER_CONFIG", "withheld": None, "read_only": True}
    lake.write("changes", [{
        "change_id": "cfg-change-1", "poll_id": POLL_2, "seen_at": T1, "cluster_name": "prod-eu",
        "cluster_id": CLUSTERS["prod-eu"]["id"], "entity": "config", "kind": "config_changed",
        "subject": "broker 3: log.retention.hours", "before_json": json.dumps(before),
        "after_json": json.dumps({**before, "value": "72"})}], poll_id=POLL_2)


def build_lake(root: Path, *, with_results: bool = True, migrate: bool = True) -> Path:
    """Build the full fixture lake under root and return it (migrated to the v2 model unless migrate=False)."""
    root.mkdir(parents=True, exist_ok=True)
    build_snapshots(root)
    if migrate:
        # The snapshots are written in the v1 layout; the pages read the lake the poller writes now.
        migrate_v1_if_needed(Lake(root))
        build_configs(root)
    if with_results:
        build_results(root)
    return root
