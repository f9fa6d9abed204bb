"""A writer process for the SIGKILL test: appends audit records from 4 threads, printing each id once on disk."""

from __future__ import annotations

import sys
import threading

from backend.audit.record import AuditRecord
from backend.audit.store import AuditLog

log = AuditLog(sys.argv[1], sys.argv[2])
lock = threading.Lock()


def write(n: int) -> None:
    i = 0
    while True:
        record = AuditRecord(kind="api", door="api", action=f"GET /api/v1/clusters?t={n}&i={i}",
                             params={"pad": "x" * 200})
        if log.record(record):
            with lock:
                sys.stdout.write(record.record_id + "\n")
                sys.stdout.flush()
        i += 1


for n in range(4):
    threading.Thread(target=write, args=(n,), daemon=True).start()
threading.Event().wait()
