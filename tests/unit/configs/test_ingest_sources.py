"""Ingest from the sink, Java logs and .properties through the real entry points."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from backend.configs.cli import add_ingest_arguments, run_ingest_command
from backend.configs.ingest import ingest_java_log, ingest_properties, ingest_sink
from backend.store.tables import read_table
from tests.unit.configs.helpers import (
    SECRET_VALUES,
    cfg,
    lake_bytes_contain,
    record,
    secret_configs,
    write_jsonl,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _rows(lake: Path) -> list[dict[str, object]]:
    return read_table(str(lake), "client_configs").to_pylist()


def test_sink_partial_last_line_waits_for_next_run(tmp_path: Path) -> None:
    sink, lake = tmp_path / "sink", tmp_path / "lake"
    first = record([cfg("acks", "all"), cfg("linger.ms", "5", "LONG")], client_id="p1")
    second = record([cfg("acks", "1")], client_id="p2")
    write_jsonl(sink / "c1" / "broker-1-2026-11-20.jsonl", [first])
    half = json.dumps(second)
    with (sink / "c1" / "broker-1-2026-11-20.jsonl").open("a") as fh:
        fh.write(half[:40])  # the writer is mid-line

    run1 = ingest_sink(str(lake), sink)
    assert (run1.records_read, run1.records_written, run1.quarantined_total) == (1, 1, 0)
    assert {r["client_id"] for r in _rows(lake)} == {"p1"}

    with (sink / "c1" / "broker-1-2026-11-20.jsonl").open("a") as fh:
        fh.write(half[40:] + "\n")
    run2 = ingest_sink(str(lake), sink)
    assert (run2.records_read, run2.records_written) == (1, 1)
    rows = _rows(lake)
    assert sorted({r["client_id"] for r in rows}) == ["p1", "p2"]
    assert {r["source_position"] for r in rows} == {
        "c1/broker-1-2026-11-20.jsonl:1", "c1/broker-1-2026-11-20.jsonl:2"}

    run3 = ingest_sink(str(lake), sink)
    assert run3.records_read == 0


def test_sink_filters_sensitive_keys_and_counts_them(tmp_path: Path) -> None:
    sink, lake = tmp_path / "sink", tmp_path / "lake"
    rec = record([cfg("acks", "all"), cfg("key.serializer", "org.x.Ser", "CLASS"),
                  cfg("partitioner.class", "org.Y", "STRING"), *secret_configs()])
    write_jsonl(sink / "broker-1.jsonl", [rec])
    result = ingest_sink(str(lake), sink)
    assert result.records_written == 1
    assert dict(result.sensitive_dropped) == {
        "key.serializer": 1, "partitioner.class": 1, "sasl.jaas.config": 1,
        "ssl.keystore.password": 1, "my.app.db.password": 1, "producer.ssl.truststore.password": 1,
    }
    assert [r["key"] for r in _rows(lake)] == ["acks"]
    stats = read_table(str(lake), "results/ingest_stats").to_pylist()
    dropped = {r["detail"]: r["count"] for r in stats if r["metric"] == "sensitive_dropped"}
    assert dropped["sasl.jaas.config"] == 1
    for secret in SECRET_VALUES:
        assert lake_bytes_contain(lake, secret) == []


def test_untyped_records_are_inferred_or_counted(tmp_path: Path) -> None:
    sink, lake = tmp_path / "sink", tmp_path / "lake"
    write_jsonl(sink / "b.jsonl", [
        record([cfg("acks", "all")], client_type=None, client_id="prod"),
        record([cfg("group.id", "g"), cfg("enable.auto.commit", "true", "BOOLEAN")],
               client_type=None, client_id="cons"),
        record([cfg("share.acquire.mode", "batch_optimized"), cfg("group.id", "g")],
               client_type=None, client_id="share"),
        record([cfg("client.dns.lookup", "use_all_dns_ips")], client_type=None, client_id="who"),
    ])
    result = ingest_sink(str(lake), sink)
    assert result.untyped == 1
    types = {(r["client_id"], r["client_type"], r["client_type_inferred"]) for r in _rows(lake)}
    assert types == {("prod", "producer", True), ("cons", "consumer", True),
                     ("share", "share_consumer", True), ("who", None, False)}


def test_java_log_blocks_interleaved(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = ingest_java_log(str(lake), FIXTURES / "clients_interleaved.log", cluster_id="prod")
    assert (result.records_read, result.records_written, result.quarantined_total) == (4, 4, 0)
    rows = _rows(lake)
    by_client: dict[str, dict[str, object]] = {}
    for r in rows:
        by_client.setdefault(r["client_id"], {})[r["key"]] = r["value"]
    assert set(by_client) == {"orders-producer", "orders-consumer-0", "orders-consumer-1",
                              "orders-admin"}
    assert by_client["orders-producer"]["acks"] == "-1"
    assert by_client["orders-producer"]["bootstrap.servers"] == "kafka-1.prod:9093,kafka-2.prod:9093"
    assert by_client["orders-producer"]["transactional.id"] is None
    assert by_client["orders-consumer-1"]["session.timeout.ms"] == "10000"
    assert "sasl.jaas.config" not in by_client["orders-consumer-0"]
    meta = {r["client_id"]: (r["client_type"], r["client_software_version"], r["cluster_id"],
                             r["received_at"].isoformat()) for r in rows}
    assert meta["orders-producer"] == ("producer", "3.7.1", "prod", "2026-11-20T09:14:02.311000+00:00")
    # consumer-1's version line comes first, on its own thread
    assert meta["orders-consumer-0"][1] == "3.8.0"
    assert meta["orders-consumer-1"][1] == "3.9.0"
    assert meta["orders-admin"][:2] == ("admin", "3.9.0")
    assert result.sensitive_dropped["my.app.db.password"] == 1
    assert result.sensitive_dropped["key.serializer"] == 1
    for secret in ("hunter2-orders", "s3cr3t-db", "/etc/kafka/secrets/truststore.jks"):
        assert lake_bytes_contain(lake, secret) == []


def test_properties_dir_layout_and_headers(tmp_path: Path) -> None:
    root, lake = tmp_path / "props", tmp_path / "lake"
    (root / "east").mkdir(parents=True)
    (root / "east" / "billing.properties").write_text(
        "# generated\nacks=all\nlinger.ms = 20\nenable.idempotence: true\n"
        "ssl.keystore.password=keystore-pw-123\nsasl.jaas.config=x required \\\n"
        "  password=\"hunter2-jaas-secret\";\n")
    (root / "misc.properties").write_text(
        "# cluster: west\n# client.id: ledger\n# client.type: consumer\ngroup.id=ledger\n"
        "max.poll.records=100\n")
    (root / "orphan.properties").write_text("acks=all\n")  # no cluster anywhere
    result = ingest_properties(str(lake), root)
    assert (result.records_read, result.records_written) == (3, 2)
    assert dict(result.quarantined) == {"missing_field": 1}
    rows = _rows(lake)
    got = {(r["cluster_id"], r["client_id"], r["client_type"], r["key"], r["value"]) for r in rows}
    assert got == {
        ("east", "billing", "producer", "acks", "all"),
        ("east", "billing", "producer", "linger.ms", "20"),
        ("east", "billing", "producer", "enable.idempotence", "true"),
        ("west", "ledger", "consumer", "group.id", "ledger"),
        ("west", "ledger", "consumer", "max.poll.records", "100"),
    }
    quarantine = read_table(str(lake), "quarantine").to_pylist()
    assert quarantine[0]["position"] == "orphan.properties:1"
    for secret in ("keystore-pw-123", "hunter2-jaas-secret"):
        assert lake_bytes_contain(lake, secret) == []


def test_cli_prints_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    sink, lake = tmp_path / "sink", tmp_path / "lake"
    write_jsonl(sink / "b.jsonl", [record([cfg("acks", "all"), *secret_configs()]), "{not json"])
    parser = argparse.ArgumentParser()
    add_ingest_arguments(parser)
    code = run_ingest_command(parser.parse_args(["--lake", str(lake), "--sink", str(sink)]))
    out = capsys.readouterr().out
    assert code == 0
    assert "records read:        2" in out
    assert "malformed_json: 1" in out
    assert "sensitive dropped:   4 values of 4 keys" in out
    assert not any(secret in out for secret in SECRET_VALUES)
    missing = run_ingest_command(parser.parse_args(["--lake", str(lake), "--sink",
                                                    str(tmp_path / "nope")]))
    assert missing == 1
    files = list(ds.dataset(str(lake / "client_configs"), format="parquet").files)
    assert len(files) == 1 and not os.path.basename(files[0]).startswith(".")


def test_python_m_backend_ingest_java_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from backend.cli import main

    lake = tmp_path / "lake"
    code = main(["ingest", "--lake", str(lake), "--java-log",
                 str(FIXTURES / "clients_interleaved.log"), "--cluster-id", "prod"])
    out = capsys.readouterr().out
    assert code == 0
    assert "records written:     4" in out
    assert "my.app.db.password: 1" in out and "s3cr3t-db" not in out
    assert {r["cluster_id"] for r in _rows(lake)} == {"prod"}
