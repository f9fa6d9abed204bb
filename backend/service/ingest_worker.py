"""The ingest worker: one client-config source per run request, resuming from the source's saved progress."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from backend.config import Fleet
from backend.service_settings import ClientConfigSource

if TYPE_CHECKING:
    from backend.configs.ingest import IngestResult
    from backend.service.job_worker import Worker

log = logging.getLogger("backend.service.ingest")


def ingest_source(source: ClientConfigSource, fleet: Fleet, lake: str, should_stop: Any = None) -> IngestResult:
    """Run one source once (new data only); raises OSError/TimeoutError/RuntimeError for a broken source."""
    from backend.configs.incremental import ingest_java_log_glob, ingest_properties_changed
    from backend.configs.ingest import ingest_sink, ingest_topic

    if source.sink:
        return ingest_sink(lake, source.sink, skip_empty=True)
    if source.topic:
        extra: dict[str, Any] = {}
        if source.cluster:
            extra = fleet.cluster(source.cluster).librdkafka_config(source.timeout_s)
            bootstrap = str(extra.pop("bootstrap.servers"))
        else:
            bootstrap = ",".join(source.bootstrap_servers or [])
        return ingest_topic(lake, source.topic, bootstrap, source.timeout_s, extra, skip_empty=True,
                            should_stop=should_stop)
    if source.java_log:
        return ingest_java_log_glob(lake, source.java_log, source.cluster_id)
    assert source.properties is not None
    return ingest_properties_changed(lake, source.properties)


def _error_text(exc: BaseException, source: ClientConfigSource, fleet: Fleet) -> str:
    from backend.collect.poller import scrub

    text = f"{type(exc).__name__}: {exc}"
    if source.cluster:
        text = scrub(text, fleet.cluster(source.cluster)) or text
    return text[:2000]


def run_ingest_worker(worker: Worker, fleet: Fleet, lake: str) -> int:
    """Serve run requests ({"source": label}) until stopped; a broken source is an error outcome, never an exit."""
    sources = {source.label: source for source in fleet.client_configs}
    failing: dict[str, str] = {}  # a broken source is logged when it breaks, changes its error or recovers
    unread_before: dict[str, list[tuple[str, str]]] = {}
    worker.send("hello", sources=sorted(sources))
    while not worker.stop.is_set():
        request = worker.next_request(1.0)
        if request is None:
            continue
        label = str(request.get("source"))
        source = sources.get(label)
        began = time.monotonic()
        worker.send("start", id=request.get("id"), source=label)
        if source is None:
            worker.send("done", id=request.get("id"), source=label, outcome="error", duration_s=0.0,
                        error=f"no client_configs source named {label!r} in the fleet file")
            continue
        try:
            result = ingest_source(source, fleet, lake, should_stop=worker.stop.is_set)
        except Exception as exc:  # noqa: BLE001 - a broken source is its status; the others go on
            error = _error_text(exc, source, fleet)
            if failing.get(label) != error:
                log.error("ingest %s: %s", label, error)
            failing[label] = error
            worker.send("done", id=request.get("id"), source=label, outcome="error", error=error,
                        duration_s=time.monotonic() - began)
            continue
        detail = {"kind": source.kind, "records_read": result.records_read, "records_written": result.records_written,
                  "quarantined": result.quarantined_total, "sensitive_dropped": result.sensitive_dropped_total,
                  "files_unread": len(result.files_unread)}
        if failing.pop(label, None) is not None:
            log.info("ingest %s: works again", label)
        if result.records_read:
            log.info("ingest %s: %s", label, detail)
        unread = sorted(result.files_unread.items())
        if unread != unread_before.get(label, []):  # logged when it appears or changes, not every interval
            for name, why in unread:
                log.warning("ingest %s: file %s: %s", label, name, why)
            unread_before[label] = unread
        worker.send("done", id=request.get("id"), source=label, outcome="ok", duration_s=time.monotonic() - began,
                    detail=detail)
    return 0
