"""Audit records of an asyncio server, group-committed: the requests of one moment share one write and one fsync.

A request hands its record to `AsyncAuditWriter.record` and awaits it; one writer thread takes every record pending
when it starts a batch, writes them with one fsync (`AuditLog.record_many`), and wakes their requests. A request's
answer leaves after its record is on disk, so a SIGKILL loses at most the records of requests still waiting (the
in-flight ones, whose callers had no answer). The event loop never waits on the disk, and it pays one hand-off to the
writer thread per batch instead of one per request.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from backend.audit.record import AuditRecord
from backend.audit.store import AuditLog

MAX_BATCH = 2000
log = logging.getLogger(__name__)


class AsyncAuditWriter:
    """Group commit for the records of one event loop (create it, and call it, on that loop)."""

    def __init__(self, audit: AuditLog) -> None:
        """Write through `audit` (its journal, or the lake without one)."""
        self.audit = audit
        self._pending: list[tuple[AuditRecord, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-writer")
        self.batches = 0
        self.records = 0

    async def record(self, record: AuditRecord) -> bool:
        """Write one record with whatever else is pending; return once it is on disk (False: not written)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        self._pending.append((record, done))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._drain())
        return await done  # a cancelled request leaves its record to the batch: it is written all the same

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            try:
                ok = await loop.run_in_executor(self._thread, self.audit.record_many, [r for r, _ in batch])
            except Exception:  # the audit log fails open: logged, and the requests go on
                log.exception("audit: %d record(s) not written", len(batch))
                ok = False
            self.batches += 1
            self.records += len(batch)
            for _, done in batch:
                if not done.done():
                    done.set_result(ok)

    def close(self) -> None:
        """Stop the writer thread once what it has is written."""
        self._thread.shutdown(wait=True)
