"""Java logs and .properties files as service sources: each run ingests only what is new or changed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from backend.configs.incremental import ingest_java_log_glob, ingest_properties_changed
from backend.store.tables import read_table

FIXTURE = Path(__file__).resolve().parents[1] / "configs" / "fixtures" / "clients_interleaved.log"


def _positions(lake: Path) -> list[str]:
    return sorted(set(read_table(str(lake), "client_configs").column("source_position").to_pylist()))


def test_a_log_that_grows_gives_only_its_new_blocks(tmp_path: Path) -> None:
    logs, lake = tmp_path / "logs", tmp_path / "lake"
    logs.mkdir()
    text = FIXTURE.read_text()
    lines = text.splitlines(keepends=True)
    first = "".join(lines[:29])  # the producer block and its version lines; the consumers come later
    (logs / "app.log").write_text(first)
    pattern = str(logs / "*.log")
    assert ingest_java_log_glob(str(lake), pattern).records_written == 1
    assert ingest_java_log_glob(str(lake), pattern).records_read == 0  # unchanged: nothing read, nothing written
    with (logs / "app.log").open("a") as out:
        out.write("".join(lines[29:]))
    grown = ingest_java_log_glob(str(lake), pattern)
    assert grown.records_written == 3  # two consumers and the admin client, not the producer again
    assert _positions(lake) == ["app.log:2", "app.log:30", "app.log:45", "app.log:55"]
    shutil.copy(FIXTURE, logs / "other.log")  # a new file matching the glob: all its blocks
    assert ingest_java_log_glob(str(lake), pattern).records_written == 4
    os.replace(logs / "other.log", logs / "moved.txt")  # gone from the glob: forgotten, nothing re-read
    assert ingest_java_log_glob(str(lake), pattern).records_read == 0


def test_a_block_still_being_written_waits_for_its_end(tmp_path: Path) -> None:
    logs, lake = tmp_path / "logs", tmp_path / "lake"
    logs.mkdir()
    lines = FIXTURE.read_text().splitlines(keepends=True)
    (logs / "app.log").write_text("".join(lines[:12]))  # cut inside the producer's block
    assert ingest_java_log_glob(str(lake), str(logs / "*.log")).records_read == 0
    (logs / "app.log").write_text("".join(lines[:29]))
    assert ingest_java_log_glob(str(lake), str(logs / "*.log")).records_written == 1
    assert read_table(str(lake), "quarantine").num_rows == 0


def test_properties_files_are_ingested_when_new_or_changed(tmp_path: Path) -> None:
    root, lake = tmp_path / "props", tmp_path / "lake"
    (root / "prod").mkdir(parents=True)
    (root / "prod" / "billing.properties").write_text("acks=all\nclient.id=billing\n")
    (root / "prod" / "audit.properties").write_text("group.id=audit\n")
    assert ingest_properties_changed(str(lake), root).records_written == 2
    assert ingest_properties_changed(str(lake), root).records_read == 0
    target = root / "prod" / "billing.properties"
    target.write_text("acks=1\nclient.id=billing\n")
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    changed = ingest_properties_changed(str(lake), root)
    assert changed.records_written == 1
    values = read_table(str(lake), "client_configs").to_pandas()
    assert sorted(values[values["key"] == "acks"]["value"]) == ["1", "all"]
