"""Progress files under lake/_state/<area>/<name>.json (ingest offsets and the like): each a commit point.

``save_state`` commits only over the version this process last loaded or saved (S3 If-Match / If-None-Match, a
compare-and-rename locally), so two processes that both read a progress file and both move it on cannot both win:
the second gets ``CommitConflict`` and must drop what it wrote for that progress. A process that never loaded the
file saves it unconditionally.
"""

from __future__ import annotations

import threading
from typing import Any

from backend.store import commit
from backend.store.atomic import commit_json, json_bytes, read_json_versioned
from backend.store.commit import CommitConflict
from backend.store.location import LakeLocation, parse_lake

STATE_ROOT = "_state"
_UNKNOWN = object()
# (scheme, path) -> the version this process last read or wrote (None: it found none).
_SEEN: dict[tuple[str, str], str | None] = {}
_SEEN_LOCK = threading.Lock()

__all__ = ["STATE_ROOT", "CommitConflict", "forget_versions", "load_state", "save_state", "state_path"]


def state_path(lake: LakeLocation, area: str, name: str) -> str:
    """Where the state file of one area (ingest, pipeline, lake) and name lives."""
    return lake.path(STATE_ROOT, area, f"{name}.json")


def _where(lake: str | LakeLocation) -> LakeLocation:
    return lake if isinstance(lake, LakeLocation) else parse_lake(lake)


def _key(where: LakeLocation, path: str) -> tuple[str, str]:
    return (where.spark_uri.split(":", 1)[0], path)


def load_state(lake: str | LakeLocation, area: str, name: str) -> dict[str, Any]:
    """A saved state ({} when absent); remembers its version for the next save_state."""
    where = _where(lake)
    path = state_path(where, area, name)
    value, version = read_json_versioned(where, path, {})
    with _SEEN_LOCK:
        _SEEN[_key(where, path)] = version
    return value if isinstance(value, dict) else {}


def save_state(lake: str | LakeLocation, area: str, name: str, state: dict[str, Any]) -> None:
    """Replace a state file atomically, only over the version this process loaded (CommitConflict otherwise)."""
    where = _where(lake)
    path = state_path(where, area, name)
    with _SEEN_LOCK:
        seen = _SEEN.get(_key(where, path), _UNKNOWN)
    if seen is _UNKNOWN:
        version = commit.put(where, path, json_bytes(state))
    else:
        try:
            version = commit_json(where, path, state, seen)  # type: ignore[arg-type]
        except CommitConflict as exc:
            with _SEEN_LOCK:
                _SEEN.pop(_key(where, path), None)
            raise CommitConflict(exc.path, f"{exc.detail}: another process moved this progress on; is a second "
                                 "ingest of the same source running on this lake?") from None
    with _SEEN_LOCK:
        _SEEN[_key(where, path)] = version


def forget_versions() -> None:
    """Forget every remembered version (tests; a process that starts over)."""
    with _SEEN_LOCK:
        _SEEN.clear()
