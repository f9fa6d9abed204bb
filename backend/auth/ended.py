"""Logins ended with Log out, kept on disk with the service's state so a restarted UI still refuses their cookies.

Streamlit's identity cookie is signed, lives 30 days and cannot be revoked: a copy taken before Log out stays valid.
The UI therefore remembers each ended login (a digest of its claims, never a token) until the cookie it was issued
with has expired, in one small JSON file shared by every UI process that uses the same state directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path

ENDED_FILE = "ended_logins.json"
# Streamlit's identity cookie lives 30 days: an ended login need not be remembered longer.
COOKIE_LIFETIME_S = 30 * 86400
# A bound on the file, whatever happens: a hostile user cannot make it grow without limit by logging out.
MAX_ENTRIES = 200_000


class EndedLogins:
    """Session key -> epoch until which the login is refused; persisted in `directory` (None: this process only)."""

    def __init__(self, directory: Path | None) -> None:
        """Remember where the file lives; it is read lazily and again whenever another process changed it."""
        self.path = None if directory is None else directory / ENDED_FILE
        self._lock = threading.Lock()
        self._until: dict[str, float] = {}
        self._stamp: tuple[int, int] | None = None

    def add(self, key: str, now: float) -> None:
        """Refuse this login from now until its cookie has expired."""
        with self._lock, self._file_lock():
            self._reload(force=True)
            self._until[key] = now + COOKIE_LIFETIME_S
            self._prune(now)
            self._save()

    def holds(self, key: str, now: float) -> bool:
        """Whether this login was ended (by any UI process sharing the state directory) and its cookie still lives."""
        with self._lock:
            self._reload()
            until = self._until.get(key)
            return until is not None and until >= now

    def __len__(self) -> int:
        with self._lock:
            self._reload()
            return len(self._until)

    def _prune(self, now: float) -> None:
        for stale in [k for k, until in self._until.items() if until < now]:
            del self._until[stale]
        if len(self._until) > MAX_ENTRIES:  # keep the logins that stay refused the longest
            kept = sorted(self._until.items(), key=lambda item: item[1])[-MAX_ENTRIES:]
            self._until = dict(kept)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        if self.path is None:
            yield
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _reload(self, *, force: bool = False) -> None:
        if self.path is None:
            return
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._stamp = None
            return
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp == self._stamp and not force:
            return
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raw = {}  # an unreadable file is replaced by the next Log out; what this process holds stays refused
        loaded = {str(k): float(v) for k, v in (raw.items() if isinstance(raw, dict) else ())
                  if isinstance(v, int | float) and math.isfinite(v)}
        self._until = {**loaded, **{k: v for k, v in self._until.items() if v > loaded.get(k, -math.inf)}}
        self._stamp = stamp

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(f".{ENDED_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(self._until, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        info = os.stat(self.path)
        self._stamp = (info.st_mtime_ns, info.st_size)
