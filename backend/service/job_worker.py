"""What every worker process shares: the channel to the supervisor, the stop flag and the run requests.

The entry point (`python -m backend.service.worker`) and each job's worker (poll in worker.py, ingest_worker.py,
driver.py) import this module; it imports none of them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from backend.service.channel import Channel

log = logging.getLogger("backend.service.worker")
# A stop that has not ended the process after this long exits at once (the supervisor SIGKILLs at 12 s):
# every write path commits last (poll status rows, ingest progress, the pipeline's state.json).
HARD_EXIT_S = 10.0


class Worker:
    """What every worker shares: the channel, the stop flag, and the run events."""

    def __init__(self, job: str, channel: Channel | None) -> None:
        """A worker for job, reporting on channel (None: report to the log only, for a manual run)."""
        self.job = job
        self.channel = channel
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def send(self, event: str, **fields: Any) -> None:
        """Report an event to the supervisor."""
        if self.channel is not None:
            self.channel.send({"event": event, "job": self.job, "pid": os.getpid(), "at": time.time(), **fields})

    def listen(self) -> None:
        """Take operations from the supervisor until the channel closes (which stops the worker)."""
        if self.channel is None:
            return

        def loop() -> None:
            assert self.channel is not None
            for message in self.channel.messages():
                op = message.get("op")
                if op == "run":
                    with self._lock:
                        self.requests.append(message)
                    self.wake.set()
                elif op == "stop":
                    self.request_stop()
            self.request_stop()

        threading.Thread(target=loop, name=f"{self.job}-channel", daemon=True).start()

    def request_stop(self) -> None:
        """Stop after the run in progress (at the latest HARD_EXIT_S from now)."""
        if not self.stop.is_set():
            threading.Thread(target=self._watchdog, name=f"{self.job}-stop-watchdog", daemon=True).start()
        self.stop.set()
        self.wake.set()

    def _watchdog(self) -> None:
        time.sleep(HARD_EXIT_S)
        log.error("%s worker: still running %.0fs after the stop request; exiting now", self.job, HARD_EXIT_S)
        logging.shutdown()
        os._exit(3)

    def next_request(self, timeout_s: float) -> dict[str, Any] | None:
        """The next run request, waiting up to timeout_s (None on timeout or stop)."""
        deadline = time.monotonic() + timeout_s
        while not self.stop.is_set():
            with self._lock:
                if self.requests:
                    return self.requests.pop(0)
                self.wake.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.wake.wait(min(left, 0.5))
        return None
