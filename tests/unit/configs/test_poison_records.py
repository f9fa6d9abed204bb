"""One bad record, one odd file name, one vanished file cost only themselves (issue 32, item 4).

Through `python -m backend ingest` (a real subprocess, and the same CLI in-process) and the serve ingest worker's
own call: a sink line that is valid JSON but holds a lone surrogate is quarantined with its reason and every
good record of the batch and of the other files is written; a sink file whose name is not UTF-8 is read, its
position kept as text and its progress saved; a file that vanishes between the listing and the read is a status
of its own. On the previous main each of these made every run fail (UnicodeEncodeError, FileNotFoundError).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cli import main
from backend.config import parse_fleet
from backend.configs import readers
from backend.configs.incremental import ingest_java_log_glob, ingest_properties_changed
from backend.service.ingest_worker import ingest_source
from backend.store.tables import read_table
from tests.rig.procs import REPO
from tests.unit.configs.helpers import cfg, record, write_jsonl

ODD_NAME = os.fsdecode(b"broker-\xff\xfe.jsonl")  # not UTF-8: the OS hands it over surrogate-escaped
POISON = '{"snapshot_id": "p", "received_at": "2026-11-20T10:00:00Z", "cluster_id": "clusterA", "broker_id": 1, ' \
         '"client_instance_id": "00000000-0000-0000-0000-000000000001", "client_id": "\\udcff x", "configs": []}'


def _sink(root: Path) -> Path:
    """Two clusters' files, the first with a poison line between good ones, and one file with a non-UTF-8 name."""
    sink = root / "sink"
    write_jsonl(sink / "clusterA" / "broker-1.jsonl",
                [record([cfg("acks", "all")], client_id="a1"), POISON, record([cfg("acks", "1")], client_id="a2")])
    write_jsonl(sink / "clusterB" / "broker-1.jsonl", [record([cfg("linger.ms", "5", "LONG")], cluster_id="clusterB",
                                                              client_id="b1")])
    write_jsonl(sink / "clusterB" / ODD_NAME, [record([cfg("acks", "0")], cluster_id="clusterB", client_id="b2")])
    return sink


def _client_ids(lake: Path) -> list[str]:
    return sorted(set(read_table(str(lake), "client_configs").column("client_id").to_pylist()))


def test_a_poison_record_is_quarantined_and_the_rest_written_through_python_m_backend(tmp_path: Path) -> None:
    sink, lake = _sink(tmp_path), tmp_path / "lake"
    run = subprocess.run([sys.executable, "-m", "backend", "ingest", "--sink", str(sink), "--lake", str(lake)],
                         cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr
    assert "records written:     4" in run.stdout and "not_text: 1" in run.stdout, run.stdout
    assert _client_ids(lake) == ["a1", "a2", "b1", "b2"]  # every good record of the batch and of the other files
    quarantine = read_table(str(lake), "quarantine").to_pylist()
    assert [(q["reason"], q["position"]) for q in quarantine] == [("not_text", "clusterA/broker-1.jsonl:2")]
    assert "client_id holds a lone surrogate" in quarantine[0]["detail"]
    positions = set(read_table(str(lake), "client_configs").column("source_position").to_pylist())
    assert "clusterB/broker-\\xff\\xfe.jsonl:1" in positions  # the odd name as text, its bytes shown
    stats = {(r["metric"], r["detail"]): r["count"] for r in read_table(str(lake), "results/ingest_stats").to_pylist()}
    assert stats[("quarantined", "not_text")] == 1 and stats[("records_written", "")] == 4
    # The progress of every file was saved, the odd name's too: a second run finds nothing new.
    again = subprocess.run([sys.executable, "-m", "backend", "ingest", "--sink", str(sink), "--lake", str(lake)],
                           cwd=REPO, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert again.returncode == 0 and "records read:        0" in again.stdout, again.stdout + again.stderr


def test_the_serve_ingest_worker_keeps_ingesting_past_a_poison_record(tmp_path: Path) -> None:
    sink, lake = _sink(tmp_path), tmp_path / "lake"
    text = f'[[clusters]]\nname = "a"\nbootstrap_servers = ["127.0.0.1:1"]\n\n[[client_configs]]\nsink = "{sink}"\n'
    fleet = parse_fleet(text, source=str(tmp_path / "clusters.toml"), secrets_path=tmp_path / "none.toml")
    source = fleet.client_configs[0]
    first = ingest_source(source, fleet, str(lake))  # what the worker runs on every interval
    assert (first.records_written, dict(first.quarantined)) == (4, {"not_text": 1})
    write_jsonl(sink / "clusterA" / "broker-1.jsonl", [POISON, record([cfg("acks", "all")], client_id="a3")])
    second = ingest_source(source, fleet, str(lake))  # the next interval: new lines only, the good one written
    assert (second.records_read, second.records_written, dict(second.quarantined)) == (2, 1, {"not_text": 1})
    assert _client_ids(lake) == ["a1", "a2", "a3", "b1", "b2"]


def test_a_file_that_vanishes_before_it_is_read_is_a_status_not_a_failed_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sink, lake = _sink(tmp_path), tmp_path / "lake"
    doomed = sink / "clusterB" / "broker-1.jsonl"
    listing = readers._walk_files

    def list_then_delete(root: Path, problems: readers.FileProblems | None) -> list[Path]:
        found = listing(root, problems)
        doomed.unlink()  # deleted (rotated away) after the listing, before its turn to be read
        return found

    monkeypatch.setattr(readers, "_walk_files", list_then_delete)
    assert main(["ingest", "--sink", str(sink), "--lake", str(lake)]) == 0
    out = capsys.readouterr().out
    assert "files not read:      1" in out and "clusterB/broker-1.jsonl: vanished" in out, out
    assert _client_ids(lake) == ["a1", "a2", "b2"]
    stats = read_table(str(lake), "results/ingest_stats").to_pylist()
    assert [r["detail"] for r in stats if r["metric"] == "file_unread"][0].startswith("clusterB/broker-1.jsonl: vanished")


def test_properties_and_java_logs_with_odd_names_and_a_vanished_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root, lake = tmp_path / "props", tmp_path / "lake"
    odd_dir = root / os.fsdecode(b"prod-\xff")
    odd_dir.mkdir(parents=True)
    (odd_dir / "billing.properties").write_text("acks=all\n# cluster: prod\n")
    (root / "prod").mkdir()
    (root / "prod" / os.fsdecode(b"audit-\xfe.properties")).write_text("acks=1\n")
    (root / "prod" / "gone.properties").write_text("acks=0\n")
    listing = readers._walk_files

    def list_then_delete(base: Path, problems: readers.FileProblems | None) -> list[Path]:
        found = listing(base, problems)
        (root / "prod" / "gone.properties").unlink(missing_ok=True)
        return found

    monkeypatch.setattr(readers, "_walk_files", list_then_delete)
    result = ingest_properties_changed(str(lake), root)
    # Both odd names are read (ids and positions as text); the vanished file is a status.
    assert result.records_written == 2 and result.quarantined_total == 0, (result.quarantined, result.files_unread)
    assert list(result.files_unread) == ["prod/gone.properties"]
    positions = set(read_table(str(lake), "client_configs").column("source_position").to_pylist())
    assert positions == {"prod-\\xff/billing.properties:1", "prod/audit-\\xfe.properties:1"}
    assert ingest_properties_changed(str(lake), root).records_read == 0  # progress saved for the odd names
    monkeypatch.undo()

    logs = tmp_path / "logs"
    logs.mkdir()
    fixture = Path(__file__).resolve().parent / "fixtures" / "clients_interleaved.log"
    (logs / os.fsdecode(b"app-\xff.log")).write_bytes(fixture.read_bytes())
    logged = ingest_java_log_glob(str(lake), str(logs / "*.log"))
    assert logged.records_written == 4 and not logged.files_unread
    assert {p.split(":")[0] for p in read_table(str(lake), "client_configs").column("source_position").to_pylist()
            if p.startswith("app-")} == {"app-\\xff.log"}
    assert ingest_java_log_glob(str(lake), str(logs / "*.log")).records_read == 0


def test_ids_taken_from_non_utf8_paths_are_text(tmp_path: Path) -> None:
    root, lake = tmp_path / "props", tmp_path / "lake"
    (root / os.fsdecode(b"edge-\xff")).mkdir(parents=True)
    (root / os.fsdecode(b"edge-\xff") / os.fsdecode(b"x\xfe.properties")).write_text("acks=all\n")
    (root / "prod").mkdir()
    (root / "prod" / "y.properties").write_text("acks=1\n")
    assert main(["ingest", "--properties", str(root), "--lake", str(lake)]) == 0
    rows = read_table(str(lake), "client_configs").to_pylist()
    assert sorted((r["cluster_id"], r["client_id"]) for r in rows) == [("edge-\\xff", "x\\xfe"), ("prod", "y")]
    assert read_table(str(lake), "quarantine").num_rows == 0
