"""Ended logins outlive the UI process that ended them, for as long as the cookie they were issued with lives."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

from backend.auth.ended import COOKIE_LIFETIME_S, ENDED_FILE, EndedLogins


def _end_in_another_process(directory: str, key: str, now: float) -> None:
    EndedLogins(Path(directory)).add(key, now)


def test_an_ended_login_is_refused_by_a_new_process_until_its_cookie_expires(tmp_path: Path) -> None:
    now = time.time()
    process = multiprocessing.get_context("spawn").Process(target=_end_in_another_process,
                                                            args=(str(tmp_path), "login-a", now))
    process.start()
    process.join(60)
    assert process.exitcode == 0
    restarted = EndedLogins(tmp_path)  # what a restarted UI builds
    assert restarted.holds("login-a", now + 1)
    assert not restarted.holds("login-b", now + 1)
    assert restarted.holds("login-a", now + COOKIE_LIFETIME_S - 1)
    assert not restarted.holds("login-a", now + COOKIE_LIFETIME_S + 1)  # the cookie itself is dead by then
    assert (tmp_path / ENDED_FILE).stat().st_mode & 0o777 == 0o600
    assert "login-a" in json.loads((tmp_path / ENDED_FILE).read_text(encoding="utf-8"))


def test_two_ui_processes_share_their_logouts_and_expired_ones_are_pruned(tmp_path: Path) -> None:
    now = time.time()
    first, second = EndedLogins(tmp_path), EndedLogins(tmp_path)
    first.add("old", now - COOKIE_LIFETIME_S - 10)  # ended so long ago that its cookie has expired
    second.add("new", now)
    assert first.holds("new", now) and second.holds("new", now)
    assert set(json.loads((tmp_path / ENDED_FILE).read_text(encoding="utf-8"))) == {"new"}


def test_a_damaged_file_is_replaced_and_a_remote_lake_keeps_logouts_in_memory(tmp_path: Path) -> None:
    (tmp_path / ENDED_FILE).write_text("{not json", encoding="utf-8")
    ended = EndedLogins(tmp_path)
    assert not ended.holds("x", time.time())
    ended.add("x", time.time())
    assert EndedLogins(tmp_path).holds("x", time.time())
    memory_only = EndedLogins(None)
    memory_only.add("y", time.time())
    assert memory_only.holds("y", time.time()) and len(memory_only) == 1
