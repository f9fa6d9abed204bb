"""The audit journal: each writer process appends JSON lines to a file of its own, each record on disk before it returns.

Where: `<service state directory>/audit/` (a local disk, also when the lake is on an object store). One file per
process and hour, `<YYYYMMDDTHH>-<pid>-<hex>.jsonl`, opened O_APPEND. `append(record)` returns once the record's line
is written and fsync'd: a caller that got an answer has its record on disk, and a SIGKILL loses at most the records
still in `append` (the in-flight ones). Concurrent callers share one write and one fsync (group commit): the first
waiting caller writes every pending line, the others wait for it. A torn last line (a crash inside the write, a full
disk) is not a record: readers skip any line that does not parse, and the next process writes to a file of its own.

The service's compactor (backend.audit.compactor) rolls finished lines into the lake's `audit` table through the
lake's own writer, and deletes a journal file once it is old and wholly rolled.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path

from backend.audit.record import AuditRecord

JOURNAL_DIR = "audit"
SUFFIX = ".jsonl"
log = logging.getLogger(__name__)


def journal_dir(state_dir: str | os.PathLike[str]) -> Path:
    """The journal directory of a service state directory."""
    return Path(state_dir) / JOURNAL_DIR


def journal_hour(name: str) -> str | None:
    """The hour (YYYYMMDDTHH) a journal file was opened for, from its name; None for other files."""
    if not name.endswith(SUFFIX) or name.startswith((".", "_")):
        return None
    hour = name.split("-", 1)[0]
    return hour if len(hour) == 11 and hour[8] == "T" and (hour[:8] + hour[9:]).isdigit() else None


class AuditJournal:
    """The journal writer of one process (thread-safe; a forked child opens its own file)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        """Write into `directory` (created on the first record)."""
        self.directory = Path(directory)
        self._cond = threading.Condition()
        self._pending: list[bytes] = []
        self._queued = 0
        self._durable = 0
        self._flushing = False
        self._fd: int | None = None
        self._fd_hour = ""
        self._fd_pid = 0
        self.errors = 0
        self.last_error: str | None = None

    def _open(self, hour: str) -> int:
        pid = os.getpid()
        if self._fd is not None and self._fd_hour == hour and self._fd_pid == pid:
            return self._fd
        if self._fd is not None and self._fd_pid == pid:
            os.close(self._fd)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{hour}-{pid}-{secrets.token_hex(3)}{SUFFIX}"
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._fd_hour, self._fd_pid = hour, pid
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the new file's name survives a crash too
        finally:
            os.close(dir_fd)
        return self._fd

    def _flush(self, batch: list[bytes]) -> None:
        data = b"".join(batch)
        fd = self._open(datetime.now(UTC).strftime("%Y%m%dT%H"))
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)

    def append(self, record: AuditRecord) -> bool:
        """Write one record and wait until it is on disk; False (logged, counted) when the disk refused it."""
        line = record.line()
        with self._cond:
            self._pending.append(line)
            self._queued += 1
            mine = self._queued
            ok = True
            while self._durable < mine:
                if self._flushing:
                    self._cond.wait()
                    continue
                self._flushing = True
                batch, self._pending = self._pending, []
                upto = self._queued
                self._cond.release()
                try:
                    self._flush(batch)
                except OSError as exc:
                    ok = False
                    self.errors += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.error("audit journal %s: %d record(s) not written: %s", self.directory, len(batch), exc)
                finally:
                    self._cond.acquire()
                    self._flushing = False
                    self._durable = upto
                    self._cond.notify_all()
            return ok

    def close(self) -> None:
        """Close the current file (a later append opens a new one)."""
        with self._cond:
            if self._fd is not None and self._fd_pid == os.getpid():
                os.close(self._fd)
            self._fd = None


_JOURNALS: dict[tuple[str, int], AuditJournal] = {}
_JOURNALS_LOCK = threading.Lock()


def journal_for(directory: str | os.PathLike[str]) -> AuditJournal:
    """The process's one journal writer for a directory."""
    key = (str(Path(directory).resolve()), os.getpid())
    with _JOURNALS_LOCK:
        journal = _JOURNALS.get(key)
        if journal is None:
            journal = _JOURNALS[key] = AuditJournal(directory)
        return journal

