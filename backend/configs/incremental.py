"""Java logs and .properties files ingested again only where they changed (the service runs them on an interval).

Progress lives next to the sink and topic readers' (lake/_state/ingest/<name>.json): per file its inode, size,
mtime and, for logs, the line of the last whole block ingested. A log that grew gives only its new blocks; a
rotated one (new inode, or shorter) is read from its start; a block still being written waits for next time.
"""

from __future__ import annotations

import glob
import hashlib
import os
from pathlib import Path
from typing import Any

from backend.configs import lake as lakeio
from backend.configs.ingest import IngestResult, ingest_items
from backend.configs.readers import FileProblems, RawItem, file_problem, parse_java_log, read_properties_dir
from backend.plain_text import file_label


def state_name(kind: str, location: str) -> str:
    """The progress file name of one service source."""
    return f"{kind}-" + hashlib.sha256(location.encode()).hexdigest()[:12]


def _stamp(path: str) -> dict[str, int]:
    info = os.stat(path)
    return {"inode": info.st_ino, "size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _line(item: RawItem) -> int:
    return int(item.position.rsplit(":", 1)[-1])


def ingest_java_log_glob(lake: str, pattern: str, cluster_id: str | None = None) -> IngestResult:
    """Ingest the whole config blocks of every file matching pattern that earlier runs did not ingest.

    A file that vanishes or cannot be read is a status of its own (in the result's files_unread); the others go on.
    """
    name = state_name("java_log", pattern)
    state: dict[str, Any] = lakeio.load_progress(lake, name)
    new_state: dict[str, Any] = {}
    items: list[RawItem] = []
    problems: FileProblems = {}
    for path in sorted(glob.glob(pattern, recursive=True)):
        before = state.get(path) if isinstance(state.get(path), dict) else None
        try:
            if not os.path.isfile(path):
                continue
            stamp = _stamp(path)
            same_file = (before is not None and before.get("inode") == stamp["inode"]
                         and stamp["size"] >= before.get("size", 0))
            if same_file and all(before.get(k) == stamp[k] for k in ("size", "mtime_ns")):  # type: ignore[union-attr]
                new_state[path] = before
                continue
            after = int(before.get("line", 0)) if same_file and before else 0
            whole = [i for i in parse_java_log(path, cluster_id) if _line(i) > after]
        except OSError as exc:
            problems[file_label(path)] = file_problem(exc)
            if before is not None:
                new_state[path] = before
            continue
        ready = [i for i in whole if not i.truncated]
        pending = [i for i in whole if i.truncated]
        items += ready
        last = max((_line(i) for i in ready), default=after)
        if pending:  # ingest the block once it is whole: come back to this file next time
            stamp["size"] = stamp["mtime_ns"] = -1
        new_state[path] = {**stamp, "line": last}
    if items:
        return ingest_items(lake, items, "java_log", pattern, file_problems=problems, progress=(name, new_state))
    lakeio.save_progress(lake, name, new_state)
    return IngestResult("", "java_log", pattern, files_unread=problems)


def ingest_properties_changed(lake: str, root: str | Path) -> IngestResult:
    """Ingest the .properties files under root that are new or changed since the last run."""
    name = state_name("properties", str(Path(root).resolve()))
    state: dict[str, Any] = lakeio.load_progress(lake, name)
    base = Path(root)
    new_state: dict[str, Any] = {}
    changed: list[RawItem] = []
    problems: FileProblems = {}
    for item in read_properties_dir(root, problems):
        rel = item.file or item.position.rsplit(":", 1)[0]
        try:
            stamp = _stamp(str(base / rel))
        except OSError as exc:
            problems[file_label(rel)] = file_problem(exc)
            continue
        new_state[rel] = stamp
        if state.get(rel) != stamp:
            changed.append(item)
    if changed:
        return ingest_items(lake, changed, "properties", str(root), file_problems=problems, progress=(name, new_state))
    lakeio.save_progress(lake, name, new_state)
    return IngestResult("", "properties", str(root), files_unread=problems)
