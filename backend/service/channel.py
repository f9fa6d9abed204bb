"""The supervisor <-> worker channel: JSON lines over a socketpair the worker inherits (fd in $FLEETVIEW_SERVICE_FD).

Workers send events (`hello`, `start`, `done`); the supervisor sends operations (`run`, `stop`). A closed
channel means the other side is gone: a worker stops, the supervisor sees the worker as exited.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

ENV_FD = "FLEETVIEW_SERVICE_FD"
MAX_LINE_BYTES = 1 << 20


class Channel:
    """One end of the socketpair: send() from any thread, messages() from one reader thread."""

    def __init__(self, sock: socket.socket) -> None:
        """Wrap a connected stream socket."""
        self.sock = sock
        self._send_lock = threading.Lock()
        self._reader = sock.makefile("rb")

    @classmethod
    def from_env(cls) -> Channel | None:
        """The worker's end, when the supervisor started this process with one."""
        raw = os.environ.get(ENV_FD, "")
        if not raw.isdigit():
            return None
        return cls(socket.socket(fileno=int(raw)))

    def send(self, message: dict[str, Any]) -> bool:
        """Send one message; False when the other side is gone."""
        data = (json.dumps(message, default=str, separators=(",", ":")) + "\n").encode()
        with self._send_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                return False
        return True

    def messages(self) -> Iterator[dict[str, Any]]:
        """Messages until the other side closes; lines that are not JSON objects are skipped."""
        while True:
            try:
                line = self._reader.readline(MAX_LINE_BYTES)
            except (OSError, ValueError):
                return
            if not line:
                return
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                yield message

    def close(self) -> None:
        """Close this end."""
        try:
            self._reader.close()
            self.sock.close()
        except OSError:
            pass
