"""The librdkafka helper process: hosts ClusterAdmin objects and answers its parent's calls over a pipe.

`python -m backend.kafka.admin_child`, started by backend.kafka.admin_helpers. librdkafka may abort() on a malformed
answer; here that ends only this process. Requests come as JSON lines on stdin (`open`: a cluster's client from its
librdkafka configuration; `close`; `call` with an id), each call runs in its own thread (the poller polls clusters in
parallel), answers go as JSON lines on the original stdout, which is moved off fd 1 so no stray print can corrupt it.
End of stdin (the parent exited or let go) ends the process at once.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any, BinaryIO

from backend.kafka import admin_wire as W
from backend.kafka.admin import TOPIC_BATCH_SIZE, AdminCallError, ClusterAdmin

log = logging.getLogger("backend.kafka.admin_child")


class _Server:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._out_lock = threading.Lock()
        self._admins: dict[str, ClusterAdmin] = {}
        self._broken: dict[str, str] = {}

    def send(self, message: dict[str, Any]) -> None:
        line = W.dumps(message)
        with self._out_lock:
            self._out.write(line)
            self._out.flush()

    def open(self, message: dict[str, Any]) -> None:
        name = str(message.get("name"))
        conf = message.get("conf")
        self._admins.pop(name, None)
        self._broken.pop(name, None)
        try:
            if not isinstance(conf, dict):
                raise ValueError("no configuration")
            self._admins[name] = ClusterAdmin(None, name=name, conf=conf)
        except Exception as exc:  # noqa: BLE001 - a bad configuration is every later call's answer
            self._broken[name] = f"creating the librdkafka client failed: {type(exc).__name__}: {exc}"

    def close(self, message: dict[str, Any]) -> None:
        self._admins.pop(str(message.get("name")), None)
        self._broken.pop(str(message.get("name")), None)

    def call(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        try:
            result = self._run(message)
        except AdminCallError as exc:
            self.send({"id": request_id, "ok": False, "error": str(exc), "kind": exc.kind})
        except Exception as exc:  # noqa: BLE001 - one failed call is that call's answer, never the helper's end
            self.send({"id": request_id, "ok": False, "error": f"{type(exc).__name__}: {exc}", "kind": "error"})
        else:
            self.send({"id": request_id, "ok": True, "result": result})

    def _run(self, message: dict[str, Any]) -> Any:
        name = str(message.get("name"))
        admin = self._admins.get(name)
        if admin is None:
            raise AdminCallError(self._broken.get(name, f"no librdkafka client for cluster {name!r} in the helper"))
        deadline = float(message["deadline"])
        timeout_s = max(0.1, min(float(message["timeout_s"]), deadline - time.monotonic()))
        method = message.get("method")
        if method == "metadata":
            return W.encode_view(admin.metadata(timeout_s))
        if method == "describe_cluster":
            return W.encode_description(admin.describe_cluster(timeout_s))
        if method == "describe_topics":
            names = [str(n) for n in message.get("names") or []]
            batch = int(message.get("batch_size") or TOPIC_BATCH_SIZE)
            return W.encode_listing(admin.describe_topics(names, timeout_s, batch_size=batch, deadline=deadline))
        if method == "take_errors":
            return W.encode_errors([(e.code(), e.str()) for e in admin.take_errors()])
        raise ValueError(f"unknown method {method!r}")


def main() -> int:
    """Serve the parent until stdin ends."""
    # A terminal's Ctrl-C or a SIGTERM to the process group is for the parent: it finishes its cycle (whose calls
    # this helper serves), then lets go, and the end of stdin ends the helper. SIGKILL still ends it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the protocol
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s librdkafka helper %(process)d %(levelname)s %(name)s: %(message)s")
    server = _Server(out)
    server.send({"op": "ready", "pid": os.getpid()})
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            break
        try:
            message = W.loads(line)
        except W.WireError as exc:
            log.error("unreadable request: %s", exc)
            continue
        op = message.get("op")
        if op == "open":
            server.open(message)
        elif op == "close":
            server.close(message)
        elif op == "call":
            threading.Thread(target=server.call, args=(message,), daemon=True,
                             name=f"call-{message.get('id')}").start()
    os._exit(0)  # librdkafka's clients may still hold threads: the parent is gone, nothing to flush


if __name__ == "__main__":
    main()
