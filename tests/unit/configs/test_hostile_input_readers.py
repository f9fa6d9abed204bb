"""Java logs with stray and cut-off blocks, and sink lines too long to hold, through the ingest entry points.

Each case failed on the previous main: a stray line ended a block and dropped the keys after it, a block
cut off at the end of the file was written as complete, and a 100 MiB sink line was read whole.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from backend.cli import main
from backend.configs.ingest import ingest_sink
from backend.store.tables import read_table
from tests.unit.configs.helpers import cfg, record, write_jsonl

HEAD = "[2026-11-20 09:14:02,311] INFO [app-main] ProducerConfig values: \n"
KEYS = ["acks = -1", "batch.size = 16384", "bootstrap.servers = [k1:9092]", "client.id = orders",
        "compression.type = lz4", "linger.ms = 5"]
TAIL = " (org.apache.kafka.clients.producer.ProducerConfig)\n[2026-11-20 09:14:02,355] INFO Kafka version: 3.9.1\n"


def _ingest_log(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    log = tmp_path / "client.log"
    log.write_text(text, encoding="utf-8")
    code = main(["ingest", "--java-log", str(log), "--cluster-id", "prod", "--lake", str(tmp_path / "lake")])
    assert code == 0
    return capsys.readouterr().out


def test_a_stray_line_inside_a_block_is_counted_and_the_keys_after_it_kept(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stray = "[2026-11-20 09:14:02,312] WARN [other-thread] something else entirely\n"
    text = HEAD + "".join(f"\t{k}\n" for k in KEYS[:3]) + stray + "".join(f"\t{k}\n" for k in KEYS[3:]) + TAIL
    out = _ingest_log(tmp_path, text, capsys)
    assert "unparsed log lines:  1" in out
    keys = {r["key"] for r in read_table(str(tmp_path / "lake"), "client_configs").to_pylist()}
    assert {"client.id", "compression.type", "linger.ms"} <= keys  # after the stray line
    stats = read_table(str(tmp_path / "lake"), "results/ingest_stats").to_pylist()
    assert {(s["metric"], s["count"]) for s in stats} >= {("unparsed_lines", 1)}


def test_a_block_cut_off_at_the_end_of_the_file_is_quarantined_with_its_position(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whole = HEAD + "".join(f"\t{k}\n" for k in KEYS) + TAIL
    cut = HEAD.replace("09:14:02", "09:15:00") + "".join(f"\t{k}\n" for k in KEYS[:2])
    out = _ingest_log(tmp_path, whole + cut, capsys)
    assert "records written:     1" in out and "truncated_block: 1" in out
    rows = read_table(str(tmp_path / "lake"), "quarantine").to_pylist()
    assert [(r["reason"], r["position"]) for r in rows] == [("truncated_block", "client.log:10")]


def test_a_100_mib_sink_line_is_quarantined_without_being_held(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    write_jsonl(sink / "b.jsonl", [record([cfg("acks", "all")])])
    huge = 100 * 1024 * 1024
    with (sink / "b.jsonl").open("ab") as fh:
        fh.write(b'{"configs": "' + b"x" * (huge - 16) + b'"}\n')
    write_jsonl(sink / "b.jsonl", [record([cfg("acks", "1")])])
    tracemalloc.start()
    try:
        result = ingest_sink(str(tmp_path / "lake"), sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (result.records_read, result.records_written, dict(result.quarantined)) == (3, 2, {"too_large": 1})
    assert peak < 16 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB while reading a 100 MiB line"
    row = read_table(str(tmp_path / "lake"), "quarantine").to_pylist()[0]
    assert row["position"] == "b.jsonl:2" and f"{huge - 1} bytes" in row["detail"]  # the line without its newline


def test_an_over_long_line_still_being_written_waits(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    write_jsonl(sink / "b.jsonl", [record([cfg("acks", "all")])])
    with (sink / "b.jsonl").open("ab") as fh:
        fh.write(b"{" + b"y" * 200_000)  # no newline yet
    first = ingest_sink(str(tmp_path / "lake"), sink)
    assert (first.records_read, first.quarantined_total) == (1, 0)
    with (sink / "b.jsonl").open("ab") as fh:
        fh.write(b"}\n")
    second = ingest_sink(str(tmp_path / "lake"), sink)
    assert (second.records_read, dict(second.quarantined)) == (1, {"too_large": 1})
