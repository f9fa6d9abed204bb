"""The lab's ClientConfigPolicy sink: one JSON line per accepted PushConfig, a file per broker per day."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORD_FIELDS = (
    "snapshot_id", "received_at", "cluster_id", "broker_id", "client_instance_id", "client_id",
    "client_type", "client_software_name", "client_software_version", "principal",
    "client_address", "configs",
)


def iso_utc(ts: datetime) -> str:
    """ISO-8601 UTC with milliseconds and a Z suffix."""
    return ts.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class SinkWriter:
    """Appends records to <dir>/<cluster>/broker-<id>-<YYYY-MM-DD>.jsonl, flushing each line."""

    def __init__(self, directory: Path, cluster_name: str) -> None:
        self.directory = Path(directory) / cluster_name
        self._lock = threading.Lock()

    def path_for(self, broker_id: int, day: datetime) -> Path:
        """The file a record received on `day` by `broker_id` goes to."""
        return self.directory / f"broker-{broker_id}-{day.astimezone(UTC).date().isoformat()}.jsonl"

    def write(self, record: dict[str, Any], received: datetime) -> Path:
        """Append one record as one line; the record must have exactly RECORD_FIELDS."""
        if tuple(record) != RECORD_FIELDS:
            raise ValueError(f"sink record fields {tuple(record)} differ from {RECORD_FIELDS}")
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n"
        path = self.path_for(int(record["broker_id"]), received)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
        return path
