"""`serve` against a broker whose answer makes librdkafka abort(): the ingest worker that read it dies and is
restarted, the other client-config source keeps running, and the poller (librdkafka in its helpers) never dies."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from backend.store import readers
from tests.integration.service.conftest import write_service_fleet
from tests.integration.service.servicerig import start_service


@pytest.mark.slow
def test_a_topic_source_that_kills_its_worker_stops_neither_the_other_source_nor_the_poller(tmp_path: Path) -> None:
    topic = {"name": "client-configs", "partitions": 1, "replication_factor": 1}
    raw = {"lab": {"state_dir": str(tmp_path / "lab")}, "clusters": [
        {"name": "bad", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}], "topics": [topic]},
        {"name": "good", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}], "topics": [topic]},
    ]}
    props = tmp_path / "props" / "payments"
    props.mkdir(parents=True)
    (props / "checkout.properties").write_text("bootstrap.servers=kafka:9092\nacks=all\nclient.id=checkout\n")
    sources = (f'[[client_configs]]\nname = "bad-topic"\ntopic = "client-configs"\ncluster = "bad"\ninterval_s = 1\n'
               f'timeout_s = 5\n\n[[client_configs]]\nname = "props"\nproperties = "{props.parent}"\ninterval_s = 1\n\n')
    with LabFleet(parse_lab_config(raw, tmp_path)) as lab:
        lab.set_fault("bad", 1, malformed=True)
        fleet_file = write_service_fleet(lab, tmp_path / "clusters.toml", poll_interval_s=2, sources=sources)
        lake = tmp_path / "lake"
        service = start_service(fleet_file, lake, tmp_path / "serve.log", extra=["--no-analyze"])
        try:
            ingest = service.wait("the ingest worker restarted twice and the other source read 3 times", lambda: (
                (c := service.component("ingest"))["restarts"] >= 2
                and c["sources"]["props"]["runs"].get("ok", 0) >= 3 and c), 120)
            bad = ingest["sources"]["bad-topic"]
            assert bad["last_outcome"] == "error" and "exited with code -6" in bad["last_error"], bad
            assert ingest["sources"]["props"]["last_outcome"] == "ok", ingest
            service.wait("3 polls", lambda: readers.poll_history(lake)["poll_id"].nunique() >= 3, 60)
            poll = service.component("poll")
            assert poll["restarts"] == 0 and poll["up"], poll  # librdkafka's abort took a helper, never the poller
            rows = readers.latest_clusters(lake).set_index("cluster_name")
            assert rows.loc["good", "status"] == "ok"
            assert rows.loc["bad", "status"] == "down" and "librdkafka" in rows.loc["bad", "error"]
            assert "rd_malloc: Assertion" in (service.state_dir / "logs" / "poll.log").read_text(errors="replace")
            assert service.terminate(signal.SIGTERM) < 15
        finally:
            service.kill()
