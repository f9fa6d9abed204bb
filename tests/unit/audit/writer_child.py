"""A writer process for the SIGKILL test: appends audit records from 4 threads (or 16 asyncio tasks sharing the
group-committing AsyncAuditWriter, as the API does), printing each id once on disk."""

from __future__ import annotations

import asyncio
import sys
import threading

from backend.audit.group_commit import AsyncAuditWriter
from backend.audit.record import AuditRecord
from backend.audit.store import AuditLog

log = AuditLog(sys.argv[1], sys.argv[2])
lock = threading.Lock()
TASKS = 16


def _record(n: int, i: int) -> AuditRecord:
    return AuditRecord(kind="api", door="api", action=f"GET /api/v1/clusters?t={n}&i={i}", params={"pad": "x" * 200})


def write(n: int) -> None:
    i = 0
    while True:
        record = _record(n, i)
        if log.record(record):
            with lock:
                sys.stdout.write(record.record_id + "\n")
                sys.stdout.flush()
        i += 1


async def write_async() -> None:
    writer = AsyncAuditWriter(log)

    async def task(n: int) -> None:
        i = 0
        while True:
            record = _record(n, i)
            if await writer.record(record):
                sys.stdout.write(record.record_id + "\n")
                sys.stdout.flush()
            i += 1

    await asyncio.gather(*(task(n) for n in range(TASKS)))


if sys.argv[3:] == ["asyncio"]:
    asyncio.run(write_async())
else:
    for n in range(4):
        threading.Thread(target=write, args=(n,), daemon=True).start()
    threading.Event().wait()
