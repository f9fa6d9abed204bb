"""Read the brokers' JMX metrics over HTTP, read-only: an exporter page per broker, or one Prometheus query.

Every request has a timeout and a byte limit; TLS (CA, client certificate, hostname check) and basic auth
follow the cluster's [clusters.broker_metrics] settings. Errors never carry the password (it is only in a
request header).
"""

from __future__ import annotations

import base64
import gzip
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from backend.config import BrokerMetricsSource
from backend.kafka.broker_metrics import PageReading, read_page, recognise

USER_AGENT = "fleetview-client-inventory"
_PLACEHOLDER = {"host", "broker_id", "port"}


class MetricsFetchError(Exception):
    """An endpoint that could not be read; the message names it and says why (no secret)."""


@dataclass(frozen=True)
class Endpoint:
    """One broker's exporter URL."""

    broker_id: int | None
    url: str


def fill_template(template: str, *, host: str, broker_id: int, port: int) -> str:
    """The metrics_url of one broker: {host} (bracketed when IPv6), {broker_id}, {port} filled in."""
    shown_host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    out = template
    for name, value in (("host", shown_host), ("broker_id", str(broker_id)), ("port", str(port))):
        out = out.replace("{" + name + "}", urllib.parse.quote(value, safe="[]:.-_"))
    return out


def ssl_context(source: BrokerMetricsSource) -> ssl.SSLContext | None:
    """The TLS context for https URLs (None for none configured: the default context of urllib)."""
    if not (source.ssl_cafile or source.ssl_certfile or not source.ssl_check_hostname):
        return None
    ctx = ssl.create_default_context(cafile=source.ssl_cafile)
    if source.ssl_certfile:
        ctx.load_cert_chain(source.ssl_certfile, source.ssl_keyfile)
    if not source.ssl_check_hostname:
        ctx.check_hostname = False
    return ctx


def _headers(source: BrokerMetricsSource, accept: str) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": accept, "Accept-Encoding": "gzip"}
    if source.username:
        token = base64.b64encode(f"{source.username}:{source.password() or ''}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    return headers


def _shown(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def get(url: str, source: BrokerMetricsSource, *, timeout_s: float, max_bytes: int,
        context: ssl.SSLContext | None = None, accept: str = "text/plain") -> bytes:
    """GET one URL: the body (gunzipped), at most max_bytes; MetricsFetchError otherwise."""
    request = urllib.request.Request(url, headers=_headers(source, accept), method="GET")
    where = _shown(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            body = response.read(max_bytes + 1)
            encoding = (response.headers.get("Content-Encoding") or "").lower()
    except urllib.error.HTTPError as exc:
        hint = " (check username and password_env)" if exc.code in (401, 403) else ""
        raise MetricsFetchError(f"{where}: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise MetricsFetchError(f"{where}: {type(reason).__name__}: {reason}") from None
    if len(body) > max_bytes:
        raise MetricsFetchError(f"{where}: answer larger than client_metrics_max_bytes={max_bytes}")
    if encoding == "gzip":
        try:
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
            body = decoder.decompress(body, max_bytes + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise MetricsFetchError(f"{where}: bad gzip body: {exc}") from None
        if len(body) > max_bytes:
            raise MetricsFetchError(f"{where}: answer larger than client_metrics_max_bytes={max_bytes}")
    return body


def read_exporter(endpoint: Endpoint, source: BrokerMetricsSource, *, timeout_s: float, max_bytes: int,
                  context: ssl.SSLContext | None = None) -> PageReading:
    """One broker's exporter page, read and recognised (MetricsFetchError when it cannot be read or parsed)."""
    page = get(endpoint.url, source, timeout_s=timeout_s, max_bytes=max_bytes, context=context)
    try:
        return read_page(page, _shown(endpoint.url))
    except ValueError as exc:
        raise MetricsFetchError(f"{_shown(endpoint.url)}: not the Prometheus text format: {exc}") from None


# The series a Prometheus holds for the dialects the product knows (backend/kafka/broker_metrics.py), plus
# any series whose name says deprecated requests or software connections under other rules.
_SELECTORS = (
    'kafka_server_socket_server_metrics_connections{{{m}}}',
    'kafka_server_socket_server_metrics_connections_software{{{m}}}',
    'kafka_server_socketservermetrics_connections{{{m}}}',
    'kafka_network_RequestMetrics_Count{{name="DeprecatedRequestsPerSec"{c}{m}}}',
    '{{__name__=~"(?i).*deprecatedrequests.*",__name__!~"(?i).*rate$"{c}{m}}}',
    '{{__name__=~"(?i).*(socket.?server|connections).*software.*|.*software.*connections.*"{c}{m}}}',
    # each broker process's start (a restart resets its counts) and, under the default rules, its broker id
    'process_start_time_seconds{{{m}}}',
    '{{__name__=~"(?i)kafka_server_app_?info_start_?time_?ms"{c}{m}}}',
)


def prometheus_query(matchers: str) -> str:
    """The instant query that selects this cluster's KIP-511 and KIP-896 series under any known rules."""
    comma = "," if matchers else ""
    return " or ".join(sel.format(m=matchers, c=comma) if "{c}" in sel else sel.format(m=matchers)
                       for sel in _SELECTORS)


def _prom_samples(answer: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, str], float]]:
    for item in answer.get("data", {}).get("result", []):
        labels = {str(k): str(v) for k, v in item.get("metric", {}).items()}
        name = labels.pop("__name__", "")
        try:
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        yield name, labels, value


def read_prometheus(source: BrokerMetricsSource, *, timeout_s: float, max_bytes: int,
                    context: ssl.SSLContext | None = None) -> PageReading:
    """This cluster's series from a Prometheus server (its HTTP query API), recognised per `instance`."""
    assert source.prometheus is not None
    base = source.prometheus.rstrip("/")
    query = urllib.parse.urlencode({"query": prometheus_query(source.matchers)})
    body = get(f"{base}/api/v1/query?{query}", source, timeout_s=timeout_s, max_bytes=max_bytes, context=context,
               accept="application/json")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise MetricsFetchError(f"{_shown(base)}: not a Prometheus API answer: {exc}") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise MetricsFetchError(f"{_shown(base)}: query failed: {str(error)[:300]}")
    reading = recognise(_prom_samples(answer))
    # RequestMetrics presence is not asked of a Prometheus; the KIP-896 status then rests on the dialect.
    return reading
