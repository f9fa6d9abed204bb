"""A hung name lookup costs only its own cluster's deadline (per-cluster Resolver, no shared queue)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from backend.kafka import protocol as P
from backend.kafka.probe import Resolver, probe_broker
from tests.unit.kafka.scripted_broker import API_TABLE_43, ScriptedBroker, api_versions_body


def _answer(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes | None:
    if header.api_key == P.API_API_VERSIONS:
        return P.encode_response(header.api_key, header.api_version, header.correlation_id,
                                 api_versions_body(API_TABLE_43))
    if header.api_key == P.API_DESCRIBE_CLUSTER:
        return P.encode_response(header.api_key, header.api_version, header.correlation_id, {
            "cluster_id": "ok", "controller_id": 1, "brokers": [{"broker_id": 1, "host": "localhost", "port": 1}]})
    return b""


def test_hung_lookups_of_one_cluster_do_not_delay_another() -> None:
    release = threading.Event()

    def hanging(*args: Any) -> list[Any]:  # a resolver that never answers (until the test ends)
        release.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "gave up")

    hostile = Resolver(max_in_flight=8, lookup=hanging)
    healthy = Resolver()
    try:
        results: list[Any] = []
        threads = [threading.Thread(target=lambda i=i: results.append(
            probe_broker(f"broker-{i}.hostile.invalid", 9092, timeout_s=1.0, resolver=hostile)))
            for i in range(50)]
        for t in threads:
            t.start()
        time.sleep(0.2)  # the hostile cluster's lookups are all pending now
        with ScriptedBroker(_answer) as broker:
            good = probe_broker("localhost", broker.port, timeout_s=5.0, resolver=healthy)
        assert good.ok, good.error
        for t in threads:
            t.join(5)
        assert len(results) == 50 and not any(r.ok for r in results)
        kinds = {r.error_kind for r in results}
        assert kinds <= {"timeout", "dns"} and "timeout" in kinds
        assert any("still unanswered" in (r.error or "") for r in results)  # the in-flight cap
        assert hostile.in_flight() <= 8
    finally:
        release.set()
