"""A tiny in-test TCP server speaking the codec, scripted per test to produce fault modes."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from backend.kafka import protocol as P

# handler(header, body, conn) -> bytes to send (a full frame) or None to send nothing.
Handler = Callable[[P.RequestHeader, dict[str, Any], socket.socket], bytes | None]

API_TABLE_43 = {0: (3, 13), 1: (4, 18), 3: (0, 13), 17: (0, 1), 18: (0, 4), 36: (0, 2), 55: (0, 2),
                60: (0, 2)}


def api_versions_body(table: dict[int, tuple[int, int]], error_code: int = 0) -> dict[str, Any]:
    """An ApiVersions response body for a table."""
    return {"error_code": error_code, "api_keys": [
        {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(table.items())]}


class ScriptedBroker:
    """Listens on 127.0.0.1; each connection is served by the handler until it returns b"" or closes."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept.start()

    def _accept_loop(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn.settimeout(5)
                conn = self.tls.wrap_socket(conn, server_side=True)
            while not self._stop.is_set():
                payload = P.read_frame(conn, P.DEFAULT_MAX_REQUEST_BYTES, time.monotonic() + 10)
                header, body = P.decode_request(payload)
                self.received.append((header.api_key, header.api_version))
                out = self.handler(header, body, conn)
                if out is None:
                    continue
                if out == b"":
                    return
                conn.sendall(out)
        except (OSError, P.ProtocolError, TimeoutError):
            return
        finally:
            conn.close()

    def close(self) -> None:
        """Stop accepting and join the serving threads."""
        self._stop.set()
        self.listener.close()
        self._accept.join(timeout=2)
        for t in self._threads:
            t.join(timeout=2)

    def __enter__(self) -> ScriptedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
