"""The client side of a broker, as its own JMX metrics tell it: KIP-511 connections and KIP-896 deprecated requests.

Brokers since 2.4 count their connections by client software name and version (KIP-511, MBean
`kafka.server:type=socket-server-metrics,clientSoftwareName=S,clientSoftwareVersion=V,listener=L,networkProcessor=N`,
attribute `connections`); brokers since 3.7 count the requests that use protocol versions Kafka 4.0 removed
(KIP-896, `kafka.network:type=RequestMetrics,name=DeprecatedRequestsPerSec,request=R,version=V,clientSoftwareName=S,
clientSoftwareVersion=V`, a meter whose `Count` only grows). How they are named in Prometheus depends on the JMX
exporter's rules; this module recognises them by their labels, whatever the rules called them:

- the exporter's default rules: `kafka_server_socket_server_metrics_connections{clientSoftwareName=...}` and
  `kafka_network_RequestMetrics_Count{name="DeprecatedRequestsPerSec",request=...,version=...}`;
- Strimzi's published rules: `kafka_server_socket_server_metrics_connections_software{...}` (RequestMetrics are
  dropped: the KIP-896 series need the rule in docs/client-inventory.md);
- Confluent's published rules (jmx-monitoring-stacks): `kafka_server_socketservermetrics_connections
  {client_software_name=...}` and `kafka_network_requestmetrics_deprecatedrequestspersec_request_produce_version_2
  {clientsoftwarename=...}` (their generic rule folds request and version into the name).

Each was checked against the real `jmx_prometheus_javaagent` 1.0.1 on a Kafka 3.9.2 broker
(tests/fixtures/exporter/, tests/integration/inventory). Pages are parsed with prometheus_client's parser; only
the lines that carry a client-software label are handed to it, which keeps a 10,000-line page cheap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from prometheus_client.parser import text_string_to_metric_families

from backend.kafka.versions import api_name

# Exporter dialects, by the name of the KIP-511 series.
DIALECT_DEFAULT = "jmx-default"
DIALECT_STRIMZI = "strimzi"
DIALECT_CONFLUENT = "confluent"
DIALECT_CUSTOM = "custom"
_DIALECTS = {
    "kafka_server_socket_server_metrics_connections": DIALECT_DEFAULT,
    "kafka_server_socket_server_metrics_connections_software": DIALECT_STRIMZI,
    "kafka_server_socketservermetrics_connections": DIALECT_CONFLUENT,
}
# No dialect proves that DeprecatedRequestsPerSec is exported: the default names survive rules that keep only some
# MBeans (includeObjectNames), and the broker creates the meter only at the first such request (checked with the
# real exporter on 3.9.2), so a page without KIP-896 series cannot tell "none" from "dropped".
UNKNOWN = "unknown"
MAX_TEXT = 255  # a software name or version longer than this is cut (Kafka's own limit is far lower)
_RATE_SUFFIXES = ("meanrate", "oneminuterate", "fiveminuterate", "fifteenminuterate", "rate")
# Lines (not comments) that carry a client-software label are the only ones worth parsing; they are found with
# bytes.find (a case-insensitive regex over a 500 KiB page costs 10x more).
_NEEDLES = (b"oftware", b"OFTWARE")
_REQUEST_METRICS = (b"equestMetrics", b"equestmetrics", b"EQUESTMETRICS")
# The JVM's start time, which the exporter agent serves whatever its rules: it tells one broker process from the next
# (counts are compared only between two reads of the same process).
PROCESS_START = "process_start_time_seconds"
_PROCESS_START = re.compile(rb"^process_start_time_seconds(?:\{[^}\n]*\})?[ \t]+([0-9.eE+-]+)", re.MULTILINE)
# A broker's app-info MBean (kafka.server:type=app-info,id=N) under the default rules: its id label is the broker id.
_APP_INFO = re.compile(r"(?i)^kafka_server_app_?info_start_?time_?ms$")
_FOLDED = re.compile(r"request_?([a-z0-9]+)_?version_?(\d+)$")


def _norm(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "")


@dataclass(frozen=True, slots=True)
class ConnectionSample:
    """KIP-511: connections of one client software version on one listener of one endpoint (network processors summed)."""

    endpoint: str
    listener: str
    software_name: str
    software_version: str
    connections: int


@dataclass(frozen=True, slots=True)
class DeprecatedSample:
    """KIP-896: the request count of one removed protocol version by one client software version on one endpoint."""

    endpoint: str
    request: str
    version: int
    software_name: str
    software_version: str
    count: float


@dataclass
class PageReading:
    """What one exporter page (or one Prometheus answer) holds of the two families."""

    connections: list[ConnectionSample] = field(default_factory=list)
    deprecated: list[DeprecatedSample] = field(default_factory=list)
    kip511_series: int = 0
    kip896_series: int = 0
    dialect: str | None = None
    request_metrics: bool = False  # any RequestMetrics series at all (their rules keep that MBean type)
    started: dict[str, float] = field(default_factory=dict)  # endpoint -> its broker process start (unix seconds)
    broker_ids: dict[str, int] = field(default_factory=dict)  # endpoint -> broker id (app-info's id label), if shown
    kip511_endpoints: set[str] = field(default_factory=set)  # endpoints with at least one KIP-511 series
    kip896_endpoints: set[str] = field(default_factory=set)  # endpoints with at least one KIP-896 series


def _text(value: str | None) -> str:
    text = (value or "").strip() or UNKNOWN
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@lru_cache(maxsize=1)
def _request_names() -> dict[str, str]:
    names = (api_name(key) for key in range(256))
    return {_norm(name): name for name in names if name}


def canonical_request(name: str) -> str:
    """A request name as Kafka spells it ('produce' -> 'Produce'); unknown names are kept as given."""
    return _request_names().get(_norm(name), name)


def recognise(samples: Iterable[tuple[str, Mapping[str, str], float]], endpoint: str | None = None,
              reading: PageReading | None = None) -> PageReading:
    """Fold (metric name, labels, value) samples into a reading; `endpoint` None: take each sample's `instance` label."""
    out = reading or PageReading()
    by_key: dict[tuple[str, str, str, str], float] = {}
    for name, labels, value in samples:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        where = endpoint if endpoint is not None else str(labels.get("instance", ""))
        if name == PROCESS_START:
            if math.isfinite(float(value)):
                out.started[where] = float(value)
            continue
        if _APP_INFO.match(name):
            broker = labels.get("id") or labels.get("client_id") or labels.get("brokerid") or labels.get("BrokerId")
            if broker is not None and str(broker).isdigit():
                out.broker_ids[where] = int(broker)
            continue
        norm = {_norm(k): v for k, v in labels.items()}
        if "clientsoftwarename" not in norm and "clientsoftwareversion" not in norm:
            continue
        lname = _norm(name)
        software = (_text(norm.get("clientsoftwarename")), _text(norm.get("clientsoftwareversion")))
        if "deprecatedrequests" in lname or norm.get("name", "").lower().startswith("deprecatedrequests"):
            if lname.endswith(_RATE_SUFFIXES):
                continue
            request, version = norm.get("request"), norm.get("version")
            if request is None or version is None:
                folded = _FOLDED.search(name.lower())
                if folded is None:
                    continue
                request, version = folded.group(1), folded.group(2)
            if not str(version).isdigit():
                continue
            out.kip896_series += 1
            out.kip896_endpoints.add(where)
            out.deprecated.append(DeprecatedSample(where, canonical_request(request), int(version), *software,
                                                   float(value)))
            continue
        if "connections" not in lname or "requestmetrics" in lname:
            continue
        out.kip511_series += 1
        out.kip511_endpoints.add(where)
        if out.dialect is None:
            out.dialect = _DIALECTS.get(name.lower(), DIALECT_CUSTOM)
        key = (where, _text(norm.get("listener")), *software)
        by_key[key] = by_key.get(key, 0.0) + float(value)
    for (where, listener, software_name, software_version), total in sorted(by_key.items()):
        out.connections.append(ConnectionSample(where, listener, software_name, software_version, int(round(total))))
    return out


def relevant_lines(page: bytes) -> list[bytes]:
    """The sample lines (not comments) of a page that mention client software, in page order, each once."""
    starts: set[int] = set()
    out: list[tuple[int, bytes]] = []
    for needle in _NEEDLES:
        at = page.find(needle)
        while at != -1:
            start = page.rfind(b"\n", 0, at) + 1
            end = page.find(b"\n", at)
            end = len(page) if end == -1 else end
            if start not in starts and not page.startswith(b"#", start):
                starts.add(start)
                out.append((start, page[start:end]))
            at = page.find(needle, end)
    return [line for _, line in sorted(out)]


def read_page(page: bytes, endpoint: str) -> PageReading:
    """Read one exposition-format page (as an exporter serves it) from one endpoint.

    Only lines with a client-software label are parsed (prometheus_client's parser); a line the parser refuses
    raises ValueError, which the caller turns into that endpoint's error.
    """
    wanted = b"\n".join(relevant_lines(page))
    reading = PageReading(request_metrics=any(n in page for n in _REQUEST_METRICS))
    started = _PROCESS_START.search(page)
    if started is not None:
        try:
            value = float(started.group(1))
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            reading.started[endpoint] = value
    if not wanted:
        return reading
    text = wanted.decode("utf-8", errors="replace") + "\n"
    samples = ((s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples)
    return recognise(samples, endpoint, reading)
