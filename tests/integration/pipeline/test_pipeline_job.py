"""The Spark job end to end: sink -> ingest -> analyze, incremental refresh proven by counts."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from backend.configs.ingest import ingest_sink
from backend.pipeline import spark as spark_settings
from backend.pipeline.cli import add_analyze_arguments, run_analyze_command
from backend.pipeline.job import SPARK_RESULTS, run_analysis
from backend.pipeline.spark import SMALL_RUN_PARTITIONS
from backend.store.config_schemas import arrow_schema
from backend.store.tables import read_table
from tests.unit.configs.helpers import SECRET_VALUES, cfg, lake_bytes_contain, record, secret_configs, write_jsonl

KEYS_PER_SNAPSHOT = 4


def _snapshot(i: int) -> dict[str, Any]:
    cluster = "east" if i % 2 else "west"
    acks = "all" if i % 4 else "1"
    configs = [cfg("acks", acks), cfg("linger.ms", str(5 * (i % 3)), "LONG"),
               cfg("enable.idempotence", "true", "BOOLEAN"),
               cfg("max.in.flight.requests.per.connection", "5" if i % 10 else "10", "INT"),
               *secret_configs()]
    return record(configs, cluster_id=cluster, client_id=f"app-{i % 7}",
                  received_at=f"2026-11-20T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z")


def _dist(lake: str) -> list[tuple[Any, ...]]:
    rows = read_table(lake, "results/distributions").to_pylist()
    return sorted((r["cluster_id"], r["client_type"], r["key"], r["value"], r["instance_count"],
                   r["total_instances"], round(r["share"], 12)) for r in rows)


def test_full_then_incremental_refresh(spark: Any, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    assert spark is not None  # the shared session; run_analysis reuses it
    sink, lake = tmp_path / "sink", str(tmp_path / "lake")
    write_jsonl(sink / "east" / "broker-1.jsonl", [_snapshot(i) for i in range(200)] + ["{oops"])
    assert ingest_sink(lake, sink).records_written == 200

    first = run_analysis(lake)
    assert (first.files_processed, first.snapshots_read, first.instances) == (1, 200, 200)
    # a small run: fewer partitions, no whole-stage code generation (the JVM is the test session's)
    assert first.shuffle_partitions == SMALL_RUN_PARTITIONS
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert first.records_read == 200 * KEYS_PER_SNAPSHOT
    assert first.spark_jobs <= 8  # the two passes' collects and the one broadcast
    assert first.quarantined == 1 and first.sensitive_dropped == 200 * 4
    for name in SPARK_RESULTS:
        names = pq.read_schema(next((tmp_path / "lake" / "results" / name).glob("part-*.parquet"))).names
        assert names == arrow_schema(name).names, name
    dist = _dist(lake)
    assert ("east", "producer", "acks", "all", 100, 100, 1.0) in dist
    assert ("west", "producer", "acks", "1", 50, 100, 0.5) in dist
    drift = read_table(lake, "results/drift_clusters").to_pylist()
    acks = next(r for r in drift if r["key"] == "acks")
    assert (acks["cluster_a"], acks["cluster_b"], acks["tvd"]) == ("east", "west", 0.5)
    alerts = read_table(lake, "results/config_alerts").to_pylist()
    assert sum(1 for a in alerts if a["rule_id"] == "CC002") == 20
    assert sum(1 for a in alerts if a["rule_id"] == "CC001") == 50  # acks=1 with idempotence
    assert first.alerts_by_severity["critical"] == 70
    index = _client_index(lake)  # the search index's client instances follow each committed run
    assert (index["source_generation"], index["tables"]["instance"]["base_rows"]) == (1, 200)

    # 1 % new snapshots: two more lines in the sink
    write_jsonl(sink / "east" / "broker-1.jsonl", [_snapshot(200), _snapshot(201)])
    assert ingest_sink(lake, sink).records_written == 2
    second = run_analysis(lake)
    assert (second.files_processed, second.snapshots_read) == (1, 2)
    assert second.records_read == 2 * KEYS_PER_SNAPSHOT
    assert second.instances == 202 and second.spark_jobs <= 8
    incremental = _dist(lake)
    assert ("east", "producer", "acks", "all", 101, 101, 1.0) in incremental
    index = _client_index(lake)  # a refresh adds what changed: one delta of the two new instances
    assert index["source_generation"] == 2 and index["tables"]["instance"]["delta_rows"] == 2

    parser = argparse.ArgumentParser()
    add_analyze_arguments(parser)
    assert run_analyze_command(parser.parse_args(["--lake", lake])) == 0
    out = capsys.readouterr().out
    assert "files processed:     0" in out and "(unchanged)" in out
    assert "sensitive dropped:   808" in out and "quarantined (total): 1" in out

    # the same lake as if it were large: the sized settings, the same results
    monkeypatch.setattr(spark_settings, "SMALL_RUN_ROWS", 0)
    full = run_analysis(lake, full=True)
    assert (full.files_processed, full.snapshots_read, full.instances) == (2, 202, 202)
    assert full.shuffle_partitions == 2 * spark.sparkContext.defaultParallelism
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert _dist(lake) == incremental
    index = _client_index(lake)  # a full run rebuilds the part
    assert index["tables"]["instance"]["base_rows"] == 202 and index["deltas"] == []
    from backend.search.query import search
    from backend.search.reader import IndexReader

    found = search(IndexReader(lake).snapshot(), "app-3", kinds=["client"])
    assert found.total == 202 // 7 + 1 and {h.field for h in found.hits} == {"client_id"}
    assert {h.cluster for h in found.hits} == {"east", "west"}  # ids no polled cluster reports: shown as they are

    for secret in SECRET_VALUES:
        assert lake_bytes_contain(tmp_path / "lake", secret) == [], secret
    assert not [p for p in (tmp_path / "lake" / "results").iterdir() if p.name.startswith(".")]
    stats = read_table(lake, "results/ingest_stats").to_pylist()
    assert json.dumps(stats, default=str).count("sasl.jaas.config") >= 1


def _client_index(lake: str) -> dict[str, Any]:
    from backend.search.store import read_manifest
    from backend.store.location import parse_lake

    manifest = read_manifest(parse_lake(lake), "clients")
    assert manifest is not None
    return manifest


def _write_poll(lake: str, cluster_id: str, version: str) -> None:
    """One poll of one cluster whose brokers report a version, through the poller's writer."""
    from datetime import UTC, datetime

    from backend.store.fleet_writer import write_fleet_poll
    from backend.store.lake import Lake, new_poll_id, poll_id_time
    from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll

    poll_id = new_poll_id(datetime.now(UTC))
    at = poll_id_time(poll_id)
    broker = BrokerSnapshot(1, "b1", 9092, reachable=True, software_name="Kafka", software_version=version,
                            version_provenance="reported")
    cluster = ClusterSnapshot("east-cluster", "ok", at, poll_id, cluster_id=cluster_id, brokers=[broker])
    write_fleet_poll(Lake(lake), FleetPoll(poll_id, at, [cluster], [], 1.0))


def test_new_broker_versions_rerun_the_rules_without_new_configs(spark: Any, tmp_path: Path) -> None:
    assert spark is not None
    sink, lake = tmp_path / "sink", str(tmp_path / "lake")
    old_java = record([cfg("acks", "all"), cfg("client.id", "legacy-app")], cluster_id="east",
                      client_id="legacy-app", software=("apache-kafka-java", "2.0.1"))
    write_jsonl(sink / "east" / "broker-1.jsonl", [old_java])
    ingest_sink(lake, sink)
    _write_poll(lake, "east", "3.9.0")
    first = run_analysis(lake)
    assert not first.skipped
    cc018 = [a for a in read_table(lake, "results/config_alerts").to_pylist() if a["rule_id"] == "CC018"]
    assert cc018 == []  # a 2.0 client is fine against 3.9 brokers

    # The cluster is upgraded to 4.x: no new client configs, but the rules must run again.
    _write_poll(lake, "east", "4.0.0")
    second = run_analysis(lake)
    assert not second.skipped and second.files_processed == 0
    cc018 = [a for a in read_table(lake, "results/config_alerts").to_pylist() if a["rule_id"] == "CC018"]
    assert [a["client_id"] for a in cc018] == ["legacy-app"]

    assert run_analysis(lake).skipped  # nothing new at all: skipped


def test_normalised_values_are_one_value_in_results(spark: Any, tmp_path: Path) -> None:
    """acks=-1 and acks=all (and boolean case) count as one value, full run and refresh alike."""
    assert spark is not None
    sink, lake = tmp_path / "sink", str(tmp_path / "lake")

    def snap(i: int, acks: str, idem: str) -> dict[str, Any]:
        return record([cfg("acks", acks), cfg("enable.idempotence", idem, "BOOLEAN")],
                      cluster_id="east", client_id=f"n-{i}",
                      received_at=f"2026-11-20T10:00:{i:02d}.000Z")

    write_jsonl(sink / "east" / "b.jsonl", [snap(0, "-1", "True"), snap(1, "all", "true"),
                                            snap(2, "ALL", "TRUE"), snap(3, "1", "false")])
    assert ingest_sink(lake, sink).records_written == 4
    run_analysis(lake)

    def by_value() -> dict[tuple[str, str], tuple[int, list[str]]]:
        rows = read_table(lake, "results/distributions").to_pylist()
        return {(r["key"], r["value"]): (r["instance_count"], r["raw_values"]) for r in rows}

    got = by_value()
    assert got[("acks", "all")] == (3, ["-1", "ALL", "all"])
    assert ("acks", "-1") not in got and ("acks", "ALL") not in got
    assert got[("enable.idempotence", "true")] == (3, ["TRUE", "True", "true"])

    write_jsonl(sink / "east" / "b.jsonl", [snap(4, "-1", "true")])
    assert ingest_sink(lake, sink).records_written == 1
    assert run_analysis(lake).files_processed == 1
    got = by_value()
    assert got[("acks", "all")] == (4, ["-1", "ALL", "all"])
    assert {v for k, v in got if k == "acks"} == {"all", "1"}
