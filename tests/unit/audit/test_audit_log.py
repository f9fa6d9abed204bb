"""The audit log: no secret gets in, records are durable before the caller goes on, a SIGKILL loses at most the
records in flight and corrupts nothing, the compactor rolls journals into the lake's day table exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.audit.journal import AuditJournal
from backend.audit.record import AuditRecord, row_from_line, scrub_params
from backend.audit.store import AuditCompactor, AuditLog, read_audit
from backend.store.lake import Lake
from backend.store.schemas import AUDIT

REPO = Path(__file__).resolve().parents[3]
CANARIES = {
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlLWNhbmFyeQ",
    "password": "hunter2-canary-pw",
    "cookie": "canary-cookie-value-7f3a",
    "secret": "canary-client-secret-91",
}


def test_secrets_never_reach_a_record() -> None:
    params = scrub_params({"Authorization": f"Bearer {CANARIES['jwt']}", "access_token": CANARIES["jwt"],
                           "password": CANARIES["password"], "cookie": CANARIES["cookie"], "client_secret":
                           CANARIES["secret"], "q": f"token={CANARIES['secret']}", "free": CANARIES["jwt"],
                           "search": "payments"})
    record = AuditRecord(kind="api", door="api", action=f"GET /x?access_token={CANARIES['jwt']}", params=params,
                         user_agent=f"curl password={CANARIES['password']}", detail=f"Bearer {CANARIES['jwt']}")
    line = record.line().decode()
    for canary in CANARIES.values():
        assert canary not in line
    assert json.loads(line)["params_json"].count("[REDACTED]") == 7
    assert "payments" in line  # what is not a secret stays


def test_records_round_trip_and_bad_lines_are_not_records() -> None:
    record = AuditRecord(kind="refusal", door="api", action="GET /api/v1/clusters/x", outcome="not_found",
                         clusters=("x",), status=404, duration_ms=1.5)
    row = row_from_line(record.line())
    assert row is not None and row["record_id"] == record.record_id and row["clusters_json"] == '["x"]'
    for bad in (b"", b"{", b"[]", b'{"record_id": 1}', record.line()[:-20]):
        assert row_from_line(bad) is None


def test_journal_compactor_and_reader(tmp_path: Path) -> None:
    lake, journals = str(tmp_path / "lake"), tmp_path / "state" / "audit"
    log = AuditLog(lake, journals)
    written = [AuditRecord(kind="api", door="api", action=f"GET /{i}") for i in range(30)]
    for record in written:
        assert log.record(record)
    ids = {r.record_id for r in written}
    assert set(read_audit(lake, journals)["record_id"]) == ids  # read from the journal before any roll
    compactor = AuditCompactor(lake, journals, retention_days=30)
    result = compactor.run_once()
    assert len(result.rows) == 30 and result.counts()[("api", "ok")] == 30
    assert compactor.run_once().rows == []  # rolled once
    frame = read_audit(lake, journals)
    assert set(frame["record_id"]) == ids and len(frame) == 30
    assert list(frame["at"]) == sorted(frame["at"], reverse=True)
    # A crash after the lake write but before the offsets were saved: the next run writes the lines again; readers
    # still see each record once.
    (Path(lake) / "_state" / "audit" / "journals.json").unlink()
    assert len(AuditCompactor(lake, journals).run_once().rows) == 30
    assert len(read_audit(lake, journals)) == 30
    # Old journals, wholly rolled, are deleted; retention drops old days of the audit table only.
    later = datetime.now(UTC) + timedelta(hours=3)
    assert AuditCompactor(lake, journals).run_once(now=later).journals_deleted
    assert not list(journals.glob("*.jsonl"))
    assert len(read_audit(lake, None)) == 30
    old = AuditRecord(kind="login", door="ui", action="login", at=datetime.now(UTC) - timedelta(days=40))
    AuditLog(lake, None).record(old)  # without a journal directory: straight into the lake
    assert old.record_id in set(read_audit(lake, None, since=datetime.now(UTC) - timedelta(days=50))["record_id"])
    Lake(lake).apply_retention(30)  # the fleet's retention leaves the audit table alone
    assert len(Lake(lake).days(AUDIT)) == 2
    Lake(lake).apply_retention(30, tables=(AUDIT,))
    assert len(Lake(lake).days(AUDIT)) == 1


def test_group_commit_serves_many_threads(tmp_path: Path) -> None:
    import threading

    journal = AuditJournal(tmp_path)
    threads = [threading.Thread(target=lambda: [journal.append(AuditRecord(kind="mcp", door="mcp", action="t"))
                                                for _ in range(25)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = b"".join(p.read_bytes() for p in tmp_path.glob("*.jsonl")).splitlines()
    assert len(lines) == 200 and all(row_from_line(line) for line in lines)


def test_sigkill_while_writing_loses_at_most_the_records_in_flight(tmp_path: Path) -> None:
    lake, journals = str(tmp_path / "lake"), tmp_path / "audit"
    child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("writer_child.py")), lake, str(journals)],
                             stdout=subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout is not None
    acknowledged: list[str] = []
    deadline = time.monotonic() + 60
    while len(acknowledged) < 300 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        acknowledged.append(line.decode().strip())
    os.kill(child.pid, signal.SIGKILL)
    acknowledged += [line.decode().strip() for line in child.stdout.read().splitlines() if line.strip()]
    child.wait(timeout=30)
    assert len(acknowledged) >= 300, "the writer did not get going"
    raw = b"".join(p.read_bytes() for p in journals.glob("*.jsonl"))
    lines = raw.split(b"\n")
    whole = [row_from_line(line) for line in lines[:-1]]
    assert all(whole), "a finished line that is not a whole record"
    on_disk = {r["record_id"] for r in whole if r}
    assert set(acknowledged) <= on_disk  # every record the writer was told is durable is there
    # At most the records in flight (written, not yet acknowledged: at most one batch per thread) are extra.
    assert len(on_disk - set(acknowledged)) <= 4
    # (the child writes in real time: keep retention out of the way of the tests with the clock moved ahead)
    assert AuditCompactor(lake, journals, retention_days=3650).run_once().bad_lines == 0
    assert set(read_audit(lake, journals)["record_id"]) == on_disk
