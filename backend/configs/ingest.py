"""Ingest driver: read a source, validate, filter secrets, write the lake, count everything."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from backend.configs import lake as lakeio
from backend.configs.readers import (
    RawItem,
    parse_java_log,
    read_properties_dir,
    read_sink,
    read_topic,
    topic_state_name,
)
from backend.configs.record import (
    ParseOutcome,
    Rejected,
    Snapshot,
    parse_json_record,
    validate_record,
)
from backend.configs.sensitive import WITHHELD, safe_excerpt
from backend.plain_text import utf8_safe
from backend.store.commit import CommitConflict
from backend.store.config_schemas import SCHEMA_VERSION, arrow_schema


@dataclass
class IngestResult:
    """What one ingest run read, wrote, quarantined and dropped."""

    run_id: str
    source: str
    location: str
    records_read: int = 0
    records_written: int = 0
    rows_written: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    sensitive_dropped: Counter[str] = field(default_factory=Counter)
    untyped: int = 0
    unparsed_lines: int = 0  # lines inside Java config blocks that were not `key = value`
    files_written: list[str] = field(default_factory=list)
    batches: int = 1
    files_unread: dict[str, str] = field(default_factory=dict)  # file name -> why it was not read (whole)

    def add(self, other: IngestResult) -> None:
        """Add the counts of another run of the same source (a later batch)."""
        self.records_read += other.records_read
        self.records_written += other.records_written
        self.rows_written += other.rows_written
        self.quarantined.update(other.quarantined)
        self.sensitive_dropped.update(other.sensitive_dropped)
        self.untyped += other.untyped
        self.unparsed_lines += other.unparsed_lines
        self.files_written += other.files_written
        self.files_unread.update(other.files_unread)

    @property
    def quarantined_total(self) -> int:
        """All quarantined records."""
        return sum(self.quarantined.values())

    @property
    def sensitive_dropped_total(self) -> int:
        """All dropped sensitive key occurrences."""
        return sum(self.sensitive_dropped.values())

    def stats_rows(self, ran_at: datetime) -> pa.Table:
        """This run's counters as ingest_stats rows."""
        rows: list[tuple[str, str, int]] = [
            ("records_read", "", self.records_read),
            ("records_written", "", self.records_written),
            ("untyped", "", self.untyped),
            ("unparsed_lines", "", self.unparsed_lines),
        ]
        rows += [("quarantined", reason, n) for reason, n in sorted(self.quarantined.items())]
        rows += [("sensitive_dropped", key, n) for key, n in sorted(self.sensitive_dropped.items())]
        rows += [("file_unread", f"{name}: {why}", 1) for name, why in sorted(self.files_unread.items())]
        rows = [(metric, utf8_safe(detail), n) for metric, detail, n in rows]  # names from clients and file systems
        return pa.table(
            {
                "run_id": [self.run_id] * len(rows),
                "ran_at": [ran_at] * len(rows),
                "source": [self.source] * len(rows),
                "location": [utf8_safe(self.location)] * len(rows),
                "metric": [r[0] for r in rows],
                "detail": [r[1] for r in rows],
                "count": [r[2] for r in rows],
                "schema_version": [SCHEMA_VERSION] * len(rows),
            },
            schema=arrow_schema("ingest_stats"),
        )


def _cut_value_withheld(record: dict[str, Any]) -> dict[str, Any]:
    """A block cut by the end of the file ends in a cut value, whose credential shape cannot be judged (a
    bootstrap.servers cut to "u:secret@" or "u:secr"): its last entry keeps its key, never its value."""
    configs = record.get("configs")
    if isinstance(configs, list) and configs and isinstance(configs[-1], dict):
        return {**record, "configs": [*configs[:-1], {**configs[-1], "value": WITHHELD}]}
    return record


def ingest_items(lake: str, items: list[RawItem], source: str, location: str, *,
                 file_problems: dict[str, str] | None = None,
                 progress: tuple[str, dict[str, Any]] | None = None) -> IngestResult:
    """Validate items, write snapshots and quarantine to the lake, commit the reader's progress, record ingest_stats.

    One bad record costs only itself: a record that cannot be parsed, validated or written is quarantined with its
    reason and counted, and every other record of the batch is written. ``file_problems``: files of the source that
    could not be read (whole), kept in the result and in ingest_stats. ``progress`` (name, state): the reader's
    position after these items, committed over the version this process loaded; when another ingest of the same
    source moved it first, the files written here are removed and CommitConflict is raised (nothing counted twice).
    """
    now = datetime.now(UTC)
    result = IngestResult(run_id=uuid.uuid4().hex, source=source, location=location,
                          files_unread=dict(file_problems or {}))
    snapshots: list[Snapshot] = []
    rejected: list[Rejected] = []
    for item in items:
        result.records_read += 1
        result.unparsed_lines += item.unparsed_lines
        outcome = _outcome(item, source)
        result.sensitive_dropped.update(outcome.dropped.by_key)
        if outcome.rejected is not None:
            rejected.append(outcome.rejected)
            result.quarantined[outcome.rejected.reason] += 1
            continue
        assert outcome.snapshot is not None
        snapshots.append(outcome.snapshot)
    snapshots, unwritable = _writable(snapshots)
    for bad in unwritable:
        rejected.append(bad)
        result.quarantined[bad.reason] += 1
    result.untyped = sum(1 for s in snapshots if s.client_type is None)
    result.files_written = lakeio.write_snapshots(lake, snapshots, now)
    result.records_written = len(snapshots)
    result.rows_written = sum(len(s.configs) for s in snapshots)
    quarantined = lakeio.write_quarantine(lake, rejected, now)
    if progress is not None:
        try:
            lakeio.save_progress(lake, *progress)
        except CommitConflict:
            lakeio.remove_files(lake, [*result.files_written, *([quarantined] if quarantined else [])])
            raise
    lakeio.append_ingest_stats(lake, result.stats_rows(now))
    return result


def _outcome(item: RawItem, source: str) -> ParseOutcome:
    """One item validated; anything unexpected while doing so quarantines the item, never stops the batch."""
    try:
        if item.record is not None and item.truncated:
            return ParseOutcome(rejected=Rejected(
                source, item.position, "truncated_block",
                "the config block ends at the end of the file before its closing line; ingest it again once "
                "the client has written it whole", safe_excerpt(_cut_value_withheld(item.record))))
        if item.record is not None:
            return validate_record(item.record, source, item.position)
        return parse_json_record(item.raw or b"", source, item.position, size=item.oversize or None)
    except Exception as exc:  # noqa: BLE001 - one record's surprise is its own quarantine reason
        return ParseOutcome(rejected=Rejected(source, item.position, "unreadable_record",
                                              f"validation failed: {type(exc).__name__}", None))


def _writable(snapshots: list[Snapshot]) -> tuple[list[Snapshot], list[Rejected]]:
    """The snapshots the lake can take, and a Rejected for each it cannot (checked one by one only when the batch
    as a whole does not convert)."""
    try:
        lakeio.snapshot_rows(snapshots, datetime.now(UTC))
        return snapshots, []
    except (pa.ArrowException, UnicodeError, ValueError, TypeError, OverflowError):
        pass
    good: list[Snapshot] = []
    bad: list[Rejected] = []
    for snap in snapshots:
        try:
            lakeio.snapshot_rows([snap], datetime.now(UTC))
        except (pa.ArrowException, UnicodeError, ValueError, TypeError, OverflowError) as exc:
            bad.append(Rejected(snap.source, snap.position, "unwritable",
                                f"the lake cannot store the record: {type(exc).__name__}", None))
            continue
        good.append(snap)
    return good, bad


def ingest_sink(lake: str, sink_dir: str | Path, *, skip_empty: bool = False) -> IngestResult:
    """Ingest new complete lines of a PushConfig sink directory.

    ``skip_empty``: a run that found nothing new writes nothing (the service runs every source often).
    """
    state_name = "sink-" + uuid.uuid5(uuid.NAMESPACE_URL, str(Path(sink_dir).resolve())).hex[:12]
    state: dict[str, Any] = lakeio.load_progress(lake, state_name)
    problems: dict[str, str] = {}
    items, new_state = read_sink(sink_dir, state, problems=problems)
    if skip_empty and not items:  # nothing new: nothing written (a file that stays unreadable is reported, not logged)
        return IngestResult(run_id=uuid.uuid4().hex, source="sink", location=str(sink_dir), files_unread=problems)
    return ingest_items(lake, items, "sink", str(sink_dir), file_problems=problems, progress=(state_name, new_state))


TOPIC_BATCH = 10_000


def ingest_topic(
    lake: str, topic: str, bootstrap: str, timeout_s: float = 10.0,
    extra_config: dict[str, Any] | None = None, batch: int = TOPIC_BATCH, *, skip_empty: bool = False,
    should_stop: Callable[[], bool] | None = None,
) -> IngestResult:
    """Ingest new records of a Kafka topic from the offsets saved in the lake, ``batch`` messages at a time.

    ``should_stop`` is asked after each written batch (a clean stop keeps the progress of whole batches);
    ``skip_empty``: a batch that found nothing new writes no ingest_stats run.
    """
    state_name = topic_state_name(topic, bootstrap)
    state: dict[str, Any] = lakeio.load_progress(lake, state_name)
    total = IngestResult(run_id=uuid.uuid4().hex, source="topic", location=f"{bootstrap}/{topic}", batches=0)
    while True:  # bounded batches: validated and written before the next is read, progress saved after each
        items, state = read_topic(topic, bootstrap, state, timeout_s, extra_config, max_messages=batch)
        if not (skip_empty and not items):
            part = ingest_items(lake, items, "topic", f"{bootstrap}/{topic}", progress=(state_name, state))
            total.add(part)
            total.batches += 1
        else:
            lakeio.save_progress(lake, state_name, state)
        if len(items) < batch or (should_stop is not None and should_stop()):
            return total


def ingest_java_log(lake: str, path: str | Path, cluster_id: str | None = None) -> IngestResult:
    """Ingest every client config block of a Java client log file."""
    return ingest_items(lake, parse_java_log(path, cluster_id), "java_log", str(path))


def ingest_properties(lake: str, root: str | Path) -> IngestResult:
    """Ingest every .properties file under ``root``."""
    problems: dict[str, str] = {}
    items = read_properties_dir(root, problems)
    return ingest_items(lake, items, "properties", str(root), file_problems=problems)
