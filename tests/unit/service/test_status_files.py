"""The files the UI shares with the service: status.json (fresh or not), request files, the sidebar lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.service import status as st
from backend.views.service_views import service_lines


def _status(lake: Path, **fields: object) -> dict[str, object]:
    return {"pid": os.getpid(), "updated_epoch": time.time(), "lake": str(lake), "components": {}, **fields}


def test_status_is_read_only_while_fresh_and_its_process_lives(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    state_dir = st.default_state_dir(str(lake))
    assert state_dir == lake / "_state" / "service"
    assert st.read_status(state_dir) is None  # no service has run
    st.write_status(state_dir, _status(lake))
    assert st.read_status(state_dir) is not None
    st.write_status(state_dir, _status(lake, updated_epoch=time.time() - 60))
    assert st.read_status(state_dir) is None  # stale: the service stopped or hangs
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    st.write_status(state_dir, _status(lake, pid=int(gone.stdout)))
    assert st.read_status(state_dir) is None  # its process is gone
    (state_dir / st.STATUS_FILE).write_text("{not json")
    assert st.read_status(state_dir) is None


def test_service_for_lake_counts_only_a_service_on_that_lake(tmp_path: Path) -> None:
    lake, other = tmp_path / "lake", tmp_path / "other"
    st.write_status(st.default_state_dir(str(lake)), _status(lake))
    state_dir, status = st.service_for_lake(str(lake), environ={})
    assert state_dir == lake / "_state" / "service" and status is not None
    shared = {st.ENV_SERVICE_DIR: str(state_dir)}
    assert st.service_for_lake(str(other), environ=shared)[1] is None  # the UI switched to another lake
    assert st.service_for_lake("mock://bucket/lake", environ={}) == (None, None)  # no default for a remote lake
    with pytest.raises(ValueError, match="not local"):
        st.default_state_dir("mock://bucket/lake")
    assert st.default_state_dir("mock://bucket/lake", str(tmp_path / "svc")) == tmp_path / "svc"


def test_requests_are_taken_once_in_order(tmp_path: Path) -> None:
    st.request_job(tmp_path, "poll")
    st.request_job(tmp_path, "analyze")
    (tmp_path / st.REQUESTS_DIR / "9-junk.json").write_text(json.dumps({"job": "rm -rf"}))
    (tmp_path / st.REQUESTS_DIR / "9-broken.json").write_text("{")
    assert st.take_requests(tmp_path) == ["poll", "analyze"]
    assert st.take_requests(tmp_path) == []
    assert list((tmp_path / st.REQUESTS_DIR).iterdir()) == []
    with pytest.raises(ValueError, match="unknown job"):
        st.request_job(tmp_path, "delete-topics")


def test_sidebar_lines_say_age_duration_outcome_next_and_the_last_error() -> None:
    now = 1_800_000_000.0

    def iso(offset: float) -> str:
        return st.iso(now + offset) or ""

    status = {"pid": 42, "components": {
        "poll": {"up": True, "running": False, "last_started_at": iso(-3), "last_outcome": "ok", "last_duration_s": 0.25,
                 "last_success_at": iso(-3), "next_due_at": iso(12), "restarts": 1},
        "ingest": {"up": True, "running": False, "last_started_at": iso(-20), "last_outcome": "error",
                   "last_duration_s": 0.01, "last_success_at": iso(-600), "next_due_at": iso(40),
                   "last_error": "gone: FileNotFoundError: sink directory x does not exist", "last_error_at": iso(-20)},
        "analyze": {"up": True, "running": True, "running_for_s": 7, "last_started_at": iso(-7)},
        "ui": {"up": True, "restarts": 0},
    }}
    lines = service_lines(status, now)
    assert lines == [
        "Service running (pid 42)",
        "Poll: ok 3 s ago (took 0.2 s), next in 12 s",
        "Ingest: error 20 s ago (took 0.0 s), last ok 10 min ago, next in 40 s",
        "Analyze: running for 7 s",
        "Restarts: poll 1",
        "Last error: Ingest (20 s ago): gone: FileNotFoundError: sink directory x does not exist",
    ]
