"""The audit log in the lake: writing a record, rolling the journals into the `audit` table, reading it back.

- `AuditLog(lake, directory).record(r)`: into the process's journal in `directory` (the service's state directory's
  `audit/`, on local disk); without one (a UI on an object-store lake that has no `[service] state_dir`), straight
  into the lake as one object per record.
- `AuditCompactor.run_once()` (the `serve` supervisor, every `audit_compact_interval_s`): the whole lines each journal
  gained since the last run become rows of the day-partitioned `audit` table, written by the lake's own writer
  (`Lake.write`: atomic locally, one object per batch on object stores), then the journals' offsets are saved with
  `backend.store.progress` (`_state/audit/journals.json`). A crash between the two writes the same lines again on the
  next run; readers drop the repeats by record id. Old journals wholly rolled are deleted; the table is compacted and
  kept for `[settings] audit_retention_days`.
- `read_audit(lake, directory, since=, until=)`: the table's days in the window plus what the journals hold beyond
  the saved offsets, newest first, each record once.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from backend.audit.journal import journal_for, journal_hour
from backend.audit.record import COLUMNS, AuditRecord, row_from_line
from backend.store.commit import CommitConflict, delete_quietly
from backend.store.lake import Lake, new_poll_id
from backend.store.location import parse_lake
from backend.store.progress import load_state, save_state
from backend.store.schemas import AUDIT, schema_for

PROGRESS_AREA = "audit"
PROGRESS_NAME = "journals"
KEEP_JOURNAL_HOURS = 2  # a journal is deleted once this many hours past its hour and wholly rolled into the lake
COMPACT_EVERY_S = 600.0
RETENTION_EVERY_S = 3600.0
log = logging.getLogger(__name__)


class AuditLog:
    """Where one process writes its audit records."""

    def __init__(self, lake: str, directory: str | os.PathLike[str] | None) -> None:
        """Records go to the journal in `directory`; None: each one straight into the lake's table."""
        self.lake = lake
        self.directory = None if directory is None else Path(directory)

    def record(self, record: AuditRecord) -> bool:
        """Write one record durably before returning; False when it could not be written (logged)."""
        return self.record_many([record])

    def record_many(self, records: Sequence[AuditRecord]) -> bool:
        """Write records durably (one write and one fsync for all) before returning; False when they could not be."""
        if not records:
            return True
        if self.directory is not None:
            return journal_for(self.directory).append_many(records)
        try:
            Lake(self.lake).write(AUDIT, [r.row() for r in records], poll_id=new_poll_id(max(r.at for r in records)))
            return True
        except (OSError, ValueError) as exc:
            log.error("%d audit record(s) not written to %s: %s", len(records), self.lake, exc)
            return False


def _journals(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.iterdir() if journal_hour(p.name) is not None and p.is_file())
    except FileNotFoundError:
        return []


def _read_from(path: Path, offset: int) -> tuple[list[dict[str, Any]], int, int]:
    """(rows, new offset after the last whole line, lines that are not records) of a journal from offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset, 0
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset, 0
    rows, bad = [], 0
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        row = row_from_line(line)
        if row is None:
            bad += 1
        else:
            rows.append(row)
    return rows, offset + end + 1, bad


@dataclass
class CompactResult:
    """What one compaction run did."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: int = 0
    journals_deleted: list[str] = field(default_factory=list)
    error: str | None = None

    def counts(self) -> Counter[tuple[str, str]]:
        """Records rolled by (kind, outcome)."""
        return Counter((r["kind"], r["outcome"]) for r in self.rows)


class AuditCompactor:
    """Rolls the journals of one directory into one lake's `audit` table (one compactor per lake: the service's)."""

    def __init__(self, lake: str, directory: str | os.PathLike[str], retention_days: int = 365) -> None:
        """Journals in `directory`, table in `lake`, day partitions kept `retention_days`."""
        self.lake = lake
        self.directory = Path(directory)
        self.retention_days = retention_days
        self._last_compact = 0.0
        self._last_retention = 0.0

    def run_once(self, now: datetime | None = None) -> CompactResult:
        """Roll what the journals gained, delete old rolled journals, compact and retain now and then."""
        now = (now or datetime.now(UTC)).astimezone(UTC)
        result = CompactResult()
        where = parse_lake(self.lake)
        saved = load_state(where, PROGRESS_AREA, PROGRESS_NAME)
        offsets: dict[str, int] = {k: int(v) for k, v in (saved.get("offsets") or {}).items()
                                   if isinstance(v, int | float)}
        before = dict(offsets)
        journals = _journals(self.directory)
        for path in journals:
            rows, offsets[path.name], bad = _read_from(path, offsets.get(path.name, 0))
            result.rows.extend(rows)
            result.bad_lines += bad
        lake = Lake(self.lake)
        written: list[str] = []
        if result.rows:
            by_day: dict[str, list[dict[str, Any]]] = {}
            for row in result.rows:
                by_day.setdefault(row["at"].date().isoformat(), []).append(row)
            try:
                for rows in by_day.values():
                    file = lake.write(AUDIT, rows, poll_id=new_poll_id(max(r["at"] for r in rows)))
                    written += [file] if file else []
            except (OSError, ValueError) as exc:
                result.error = f"{type(exc).__name__}: {exc}"
                log.error("audit: rolling %d record(s) into %s failed (tried again next run): %s",
                          len(result.rows), self.lake, exc)
                result.rows = []
                return result
        cutoff = (now - timedelta(hours=KEEP_JOURNAL_HOURS)).strftime("%Y%m%dT%H")
        for path in journals:
            hour = journal_hour(path.name) or ""
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                offsets.pop(path.name, None)
                continue
            if hour < cutoff:
                if size > offsets.get(path.name, 0):
                    result.bad_lines += 1  # a torn last line its writer never finished
                path.unlink(missing_ok=True)
                offsets.pop(path.name, None)
                result.journals_deleted.append(path.name)
        present = {p.name for p in journals}
        offsets = {k: v for k, v in offsets.items() if k in present}
        if offsets != before:
            try:
                save_state(where, PROGRESS_AREA, PROGRESS_NAME, {"offsets": offsets, "updated_at": now.isoformat()})
            except CommitConflict as exc:
                # Another compactor rolled the same journals first: its rows stand, these are removed.
                delete_quietly(where, written)
                result.error = f"{type(exc).__name__}: {exc}"
                log.error("audit: another compactor rolled %s first; %d record(s) left to it: %s", self.lake,
                          len(result.rows), exc)
                result.rows = []
                return result
        mono = now.timestamp()
        if mono - self._last_compact >= COMPACT_EVERY_S:
            self._last_compact = mono
            lake.compact(AUDIT, now=now)
        if mono - self._last_retention >= RETENTION_EVERY_S:
            self._last_retention = mono
            lake.apply_retention(self.retention_days, today=now.date(), tables=(AUDIT,))
        return result


def _empty() -> pd.DataFrame:
    return schema_for(AUDIT).empty_table().to_pandas()


def read_audit(lake: str, directory: str | os.PathLike[str] | None = None, *, since: datetime | None = None,
               until: datetime | None = None) -> pd.DataFrame:
    """Audit records in [since, until) from the lake's table and the journals' unrolled lines, newest first."""
    # The offsets first, then the table, then the journals past those offsets: a roll that lands between the reads
    # shows a record twice (dropped below by its id), never zero times.
    offsets = (load_state(parse_lake(lake), PROGRESS_AREA, PROGRESS_NAME).get("offsets") or {}) if directory else {}
    table = Lake(lake)
    days = table.days(AUDIT)
    if since is not None:
        days = [d for d in days if d >= since.astimezone(UTC).date().isoformat()]
    if until is not None:
        days = [d for d in days if d <= until.astimezone(UTC).date().isoformat()]
    frames = [table.read(AUDIT, table.files(AUDIT, days)).to_pandas()] if days else []
    if directory is not None:
        rows: list[dict[str, Any]] = []
        for path in _journals(Path(directory)):
            offset = offsets.get(path.name, 0)
            found, _, _ = _read_from(path, int(offset) if isinstance(offset, int | float) else 0)
            rows.extend(found)
        if rows:
            journal = pd.DataFrame(rows, columns=list(COLUMNS))
            journal["at"] = pd.to_datetime(journal["at"], utc=True)
            frames.append(journal)
    frames = [f for f in frames if not f.empty]
    if not frames:
        return _empty().drop(columns=["schema_version"])
    out = pd.concat(frames, ignore_index=True)
    out["at"] = pd.to_datetime(out["at"], utc=True)
    if since is not None:
        out = out[out["at"] >= pd.Timestamp(since).tz_convert("UTC")]
    if until is not None:
        out = out[out["at"] < pd.Timestamp(until).tz_convert("UTC")]
    out = out.drop_duplicates("record_id", keep="first")
    out = out.sort_values(["at", "record_id"], ascending=[False, False]).reset_index(drop=True)
    return out.drop(columns=[c for c in ("schema_version",) if c in out])
