"""The lab brokers' JMX metrics, as the Prometheus JMX exporter's default rules name them, one page per broker.

`GET /metrics/<cluster>/<broker id>` answers the page of that lab broker: its real open connections by the
client software each sent in ApiVersions (KIP-511; none sent: `unknown`), the `metrics_clients` of lab.toml,
their deprecated requests (KIP-896, a count growing at their rate since the lab started) and, to make the page
as big as a real broker's, `padding_series` other series. A broker stopped, refusing, or with a latency fault
answers that way here too. One HTTP server (127.0.0.1, a free port) serves every broker.
"""

from __future__ import annotations

import gzip
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

from backend.lab.cluster import ClusterRuntime
from backend.lab.faults import BrokerFaults
from backend.lab.server import BrokerServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def padding(n: int) -> str:
    """n series shaped like a broker's other metrics (per-topic byte rates and request counts)."""
    if n <= 0:
        return ""
    lines = ["# HELP kafka_server_BrokerTopicMetrics_Count Attribute exposed for management",
             "# TYPE kafka_server_BrokerTopicMetrics_Count untyped"]
    for i in range(n):
        lines.append(f'kafka_server_BrokerTopicMetrics_Count{{name="BytesInPerSec",topic="lab-topic-{i:05d}",}} '
                     f"{float(i * 17 % 100_000)}")
    return "\n".join(lines) + "\n"


class LabBrokers(Protocol):
    """What the pages read of a lab fleet (LabFleet has it; this module imports no fleet back)."""

    runtimes: dict[str, ClusterRuntime]
    servers: dict[tuple[str, int], BrokerServer]

    def faults(self, cluster: str, broker_id: int) -> BrokerFaults:
        """The faults active on one broker."""
        ...


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # every broker of a big lab may be scraped at once (the default backlog is 5)


class LabMetrics:
    """Serves every lab broker's metrics page (see the module doc)."""

    def __init__(self, fleet: LabBrokers, *, padding_series: int = 200, host: str = "127.0.0.1") -> None:
        """A server for the brokers of `fleet` (not started)."""
        self.fleet = fleet
        self.padding_series = padding_series
        self.host = host
        self.started_at = time.monotonic()
        self.started_wall = time.time()  # process_start_time_seconds: the brokers "started" with the lab
        self._padding = padding(padding_series)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on (0 before start)."""
        return int(self._server.server_address[1]) if self._server is not None else 0

    def url_template(self, cluster: str) -> str:
        """The fleet file's metrics_url of a lab cluster ({broker_id} filled per broker by the poller)."""
        return f"http://{self.host}:{self.port}/metrics/{urllib.parse.quote(cluster, safe='')}/{{broker_id}}"

    def start(self) -> LabMetrics:
        """Listen on a free port, serving from a daemon thread."""
        if self._server is not None:
            return self
        handler = _handler(self.page)
        self._server = _Server((self.host, 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="lab-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def page(self, cluster: str, broker_id: int) -> tuple[int, str, float]:
        """(HTTP status, body, latency in seconds) of one broker's page."""
        runtime = self.fleet.runtimes.get(cluster)
        server = self.fleet.servers.get((cluster, broker_id))
        if runtime is None or server is None:
            return 404, "no such lab broker\n", 0.0
        faults = self.fleet.faults(cluster, broker_id)
        if faults.stopped or faults.refuse or not server.listening:
            return 503, "broker down\n", 0.0
        listener = runtime.security_protocol
        counts: Counter[tuple[str, str, str]] = Counter()
        for conn in list(server.connections.values()):
            counts[(listener, conn.client_software_name or "unknown", conn.client_software_version or "unknown")] += 1
        elapsed = time.monotonic() - self.started_at
        deprecated: list[tuple[str, int, str, str, float]] = []
        for client in runtime.spec.metrics_clients:
            counts[(client.listener, client.software_name, client.software_version)] += client.connections
            for request, api_version in client.deprecated:
                deprecated.append((request, api_version, client.software_name, client.software_version,
                                   float(int(client.rate * elapsed) + 1)))
        lines = ["# HELP kafka_server_socket_server_metrics_connections The number of connections with this client "
                 "and version. kafka.server:name=null,type=socket-server-metrics,attribute=connections",
                 "# TYPE kafka_server_socket_server_metrics_connections untyped"]
        for (lst, name, version), n in sorted(counts.items()):
            lines.append("kafka_server_socket_server_metrics_connections" + _labels(
                clientSoftwareName=name, clientSoftwareVersion=version, listener=lst, networkProcessor="0")
                + f" {float(n)}")
        lines += ["# HELP kafka_network_RequestMetrics_Count Attribute exposed for management",
                  "# TYPE kafka_network_RequestMetrics_Count untyped",
                  'kafka_network_RequestMetrics_Count{name="RequestsPerSec",request="ApiVersions",version="3",} 1.0']
        for request, api_version, name, sw_version, count in deprecated:
            lines.append("kafka_network_RequestMetrics_Count" + _labels(
                clientSoftwareName=name, clientSoftwareVersion=sw_version, name="DeprecatedRequestsPerSec",
                request=request, version=str(api_version)) + f" {count}")
        lines += ["# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
                  "# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {self.started_wall:.3f}"]
        return 200, "\n".join(lines) + "\n" + self._padding, faults.latency_ms / 1000.0


class _Cache:
    """Each page's bytes (plain and gzipped) for CACHE_S: a real exporter serves from its own JVM, so the lab's
    Python building and compressing a 5,000-series page must not be what a benchmark of the reader measures."""

    def __init__(self, page: Callable[[str, int], tuple[int, str, float]]) -> None:
        self.page = page
        self.lock = threading.Lock()
        self.pages: dict[tuple[str, int], tuple[float, int, bytes, bytes, float]] = {}

    def get(self, cluster: str, broker_id: int) -> tuple[int, bytes, bytes, float]:
        now = time.monotonic()
        with self.lock:
            hit = self.pages.get((cluster, broker_id))
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1], hit[2], hit[3], hit[4]
        status, body, delay = self.page(cluster, broker_id)
        data = body.encode("utf-8")
        zipped = gzip.compress(data, compresslevel=1)
        with self.lock:
            self.pages[(cluster, broker_id)] = (now, status, data, zipped, delay)
        return status, data, zipped, delay


CACHE_S = 2.0


def _handler(page: Callable[[str, int], tuple[int, str, float]]) -> type[BaseHTTPRequestHandler]:
    cache = _Cache(page)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            parts = [urllib.parse.unquote(p) for p in self.path.split("?", 1)[0].strip("/").split("/")]
            if len(parts) != 3 or parts[0] != "metrics" or not parts[2].isdigit():
                status, plain, packed, delay = 404, b"not found\n", gzip.compress(b"not found\n"), 0.0
            else:
                status, plain, packed, delay = cache.get(parts[1], int(parts[2]))
            if delay:
                time.sleep(delay)
            zipped = "gzip" in (self.headers.get("Accept-Encoding") or "")
            data = packed if zipped else plain
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            if zipped:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler
