"""Ingest from a real Kafka 4.x topic: assign() + offsets kept in the lake, no group commits."""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.configs.cli import add_ingest_arguments, run_ingest_command
from backend.configs.ingest import ingest_topic
from backend.configs.lake import load_progress
from backend.configs.readers import topic_state_name
from backend.store.tables import read_table
from tests.unit.configs.helpers import SECRET_VALUES, cfg, lake_bytes_contain, record, secret_configs


def _produce(bootstrap: str, topic: str, values: list[tuple[int, str]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, value in values:
        producer.produce(topic, value=value.encode(), partition=partition)
    assert producer.flush(30) == 0


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)],
                                  operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == 2:
            return
        time.sleep(0.5)
    raise AssertionError(f"topic {topic} not ready")


def test_topic_ingest_is_incremental_and_read_only(kafka4: Any, tmp_path: Path) -> None:
    bootstrap, lake = kafka4.bootstrap, str(tmp_path / "lake")
    topic = f"client-configs-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    good = [json.dumps(record([cfg("acks", "all"), *secret_configs()], client_id=f"p{i}"))
            for i in range(3)]
    _produce(bootstrap, topic, [(0, good[0]), (1, good[1]), (0, "{broken"), (1, good[2])])

    first = ingest_topic(lake, topic, bootstrap, timeout_s=30)
    assert (first.records_read, first.records_written, dict(first.quarantined)) == (
        4, 3, {"malformed_json": 1})
    assert first.sensitive_dropped["ssl.keystore.password"] == 3
    assert load_progress(lake, topic_state_name(topic, bootstrap)) == {"0": 2, "1": 2}
    quarantine = read_table(lake, "quarantine").to_pylist()
    assert [q["position"] for q in quarantine] == [f"{topic}:0:1"]

    _produce(bootstrap, topic, [(1, json.dumps(record([cfg("acks", "1")], client_id="late")))])
    second = ingest_topic(lake, topic, bootstrap, timeout_s=30)
    assert (second.records_read, second.records_written) == (1, 1)
    rows = read_table(lake, "client_configs").to_pylist()
    assert sorted({r["client_id"] for r in rows}) == ["late", "p0", "p1", "p2"]
    assert {r["source_position"] for r in rows if r["client_id"] == "late"} == {f"{topic}:1:2"}

    third = ingest_topic(lake, topic, bootstrap, timeout_s=30)
    assert third.records_read == 0

    groups = AdminClient({"bootstrap.servers": bootstrap}).list_consumer_groups(
        request_timeout=30).result(timeout=60)
    assert groups.valid == []  # assign() only: no group joined, nothing committed
    for secret in SECRET_VALUES:
        assert lake_bytes_contain(tmp_path / "lake", secret) == []


def test_unreachable_bootstrap_is_a_clear_error(tmp_path: Path, capsys: Any) -> None:
    parser = argparse.ArgumentParser()
    add_ingest_arguments(parser)
    started = time.monotonic()
    code = run_ingest_command(parser.parse_args(
        ["--lake", str(tmp_path / "lake"), "--topic", "t", "--bootstrap", "127.0.0.1:1",
         "--timeout", "3"]))
    assert code == 1
    assert "error:" in capsys.readouterr().err
    assert time.monotonic() - started < 30
    assert not (tmp_path / "lake" / "client_configs").exists()


def test_topic_ingest_validates_and_writes_in_bounded_batches(kafka4: Any, tmp_path: Path) -> None:
    """A million-message backlog is never held at once: each batch is validated, written and saved."""
    bootstrap, lake = kafka4.bootstrap, str(tmp_path / "lake")
    topic = f"client-configs-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    _produce(bootstrap, topic, [(i % 2, json.dumps(record([cfg("acks", "all")], client_id=f"b{i}")))
                                for i in range(25)])
    result = ingest_topic(lake, topic, bootstrap, timeout_s=30, batch=10)
    assert (result.records_read, result.records_written, result.batches) == (25, 25, 3)
    assert len(read_table(lake, "client_configs").to_pylist()) == 25
    assert sum(load_progress(lake, topic_state_name(topic, bootstrap)).values()) == 25  # type: ignore[arg-type]
    again = ingest_topic(lake, topic, bootstrap, timeout_s=30, batch=10)
    assert (again.records_read, again.batches) == (0, 1)


def test_a_poison_message_costs_only_itself_through_the_cli(kafka4: Any, tmp_path: Path, capsys: Any) -> None:
    """Valid JSON holding a lone surrogate (issue 32): quarantined as not_text; the good messages around it are
    written and the offsets saved, so the next run goes on (on the previous main every run failed)."""
    bootstrap, lake = kafka4.bootstrap, str(tmp_path / "lake")
    topic = f"client-configs-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    poison = json.dumps(record([cfg("acks", "all")], client_id="POISON")).replace('"POISON"', '"\\udcff x"')
    _produce(bootstrap, topic, [(0, json.dumps(record([cfg("acks", "all")], client_id="t1"))), (0, poison),
                                (0, json.dumps(record([cfg("acks", "1")], client_id="t2")))])
    parser = argparse.ArgumentParser()
    add_ingest_arguments(parser)
    args = ["--lake", lake, "--topic", topic, "--bootstrap", bootstrap, "--timeout", "30"]
    assert run_ingest_command(parser.parse_args(args)) == 0
    out = capsys.readouterr().out
    assert "records written:     2" in out and "not_text: 1" in out, out
    assert sorted(read_table(lake, "client_configs").column("client_id").unique().to_pylist()) == ["t1", "t2"]
    assert [(q["reason"], q["position"]) for q in read_table(lake, "quarantine").to_pylist()] == [
        ("not_text", f"{topic}:0:1")]
    assert load_progress(lake, topic_state_name(topic, bootstrap))["0"] == 3
    _produce(bootstrap, topic, [(0, json.dumps(record([cfg("acks", "0")], client_id="t3")))])
    assert run_ingest_command(parser.parse_args(args)) == 0
    assert "records written:     1" in capsys.readouterr().out
