"""`python -m backend serve` against the real Apache Kafka 4.x rig: the poller polls it, client configs come
from a KIP-1324 PushConfig sink (written by the lab's PushConfig brokers) and from the same kind of records in
a topic of the real cluster; broken sources (an unreachable cluster, a missing directory) are statuses."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.lab.clientgen import push_client_fleet
from backend.lab.fleet import LabFleet
from backend.store import readers
from backend.store.tables import read_table
from tests.integration.service.conftest import SPARK_MASTER
from tests.integration.service.servicerig import start_service
from tests.rig.procs import free_port

SERVICE = "analyze_interval_s = 4\nfull_analyze_interval_s = 0\n"


def _sink_lines(sink: Path) -> list[str]:
    return [line for path in sorted(sink.rglob("*.jsonl")) for line in path.read_text().splitlines() if line.strip()]


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == 2:
            return
        time.sleep(0.5)
    raise AssertionError(f"topic {topic} not ready")


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, line in enumerate(lines):
        producer.produce(topic, value=line.encode(), partition=i % 2)
    assert producer.flush(30) == 0


def _configs(lake: Path) -> Any:
    return read_table(str(lake), "client_configs").select(
        ["client_instance_id", "snapshot_id", "key", "source", "source_position"]).to_pandas()


def _api_says_what_the_brokers_say(api: str, bootstrap: str) -> None:
    """The API (login off: loopback) reads the lake the poller wrote: the real brokers' cluster id, broker ids and
    topic ids (KIP-516; librdkafka prints them in standard base64, Kafka in URL-safe base64)."""
    import httpx
    from confluent_kafka import TopicCollection

    api = api.replace("//localhost:", "//127.0.0.1:")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(request_timeout=30).result(timeout=60)
    names = [t for t in admin.list_topics(timeout=30).topics if not t.startswith("__")]
    described = admin.describe_topics(TopicCollection(names), request_timeout=30)
    ids = {name: str(future.result(timeout=60).topic_id).replace("+", "-").replace("/", "_")
           for name, future in described.items()}
    deadline = time.monotonic() + 60
    while True:
        body = httpx.get(f"{api}/clusters/kafka4", timeout=30).json()
        topics = httpx.get(f"{api}/clusters/kafka4/topics", params={"limit": 1000, "include_internal": "false"},
                           timeout=30).json()["items"]
        if {t["name"] for t in topics} >= set(ids) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert body["cluster_id"] == cluster.cluster_id and body["mode"] == "kraft"
    brokers = httpx.get(f"{api}/clusters/kafka4/brokers", timeout=30).json()
    assert {b["broker_id"] for b in brokers} == {n.id for n in cluster.nodes}
    assert {t["name"]: t["topic_id"] for t in topics if t["name"] in ids} == ids


def _instances_in_results(lake: Path) -> int:
    return int(sum(read_table(str(lake), "results/client_versions").column("instances").to_pylist()))


@pytest.mark.slow
def test_serve_on_kafka4_with_a_kip1324_sink(kafka4: Any, service_lab: LabFleet, tmp_path: Path) -> None:
    sink = Path(str(service_lab.config.sink_dir))
    push_client_fleet(service_lab, 30, seed=11)
    topic = f"client-configs-{uuid.uuid4().hex[:8]}"
    _create_topic(kafka4.bootstrap, topic)
    first = _sink_lines(sink)
    _produce(kafka4.bootstrap, topic, first)  # what a KIP-1324 sink publishing to Kafka holds
    push_client_fleet(service_lab, 20, seed=12)  # the sink directory has more than the topic

    servers = json.dumps([b.address for b in kafka4.brokers])
    fleet_file = tmp_path / "clusters.toml"
    fleet_file.write_text(
        f'[settings]\npoll_interval_s = 2\nrequest_timeout_s = 5\npoll_deadline_s = 10\nspark_master = "{SPARK_MASTER}"\n\n'
        f"[service]\n{SERVICE}\n"
        f'[[client_configs]]\nname = "kafka4-topic"\ntopic = "{topic}"\ncluster = "kafka4"\ninterval_s = 2\n\n'
        f'[[client_configs]]\nname = "push-sink"\nsink = "{sink}"\ninterval_s = 2\n\n'
        f'[[client_configs]]\nname = "unreachable"\ntopic = "{topic}"\nbootstrap_servers = ["127.0.0.1:{free_port()}"]\n'
        "interval_s = 2\ntimeout_s = 2\n\n"
        f'[[client_configs]]\nname = "missing-dir"\nproperties = "{tmp_path / "no-such-dir"}"\ninterval_s = 2\n\n'
        f'[[clusters]]\nname = "kafka4"\nbootstrap_servers = {servers}\n', encoding="utf-8")
    lake = tmp_path / "lake"
    service = start_service(fleet_file, lake, tmp_path / "serve.log")
    try:
        expected = len({json.loads(line)["client_instance_id"] for line in _sink_lines(sink)})
        assert expected == 50
        service.wait("polls of the real cluster", lambda: readers.poll_history(lake)["poll_id"].nunique() >= 2)
        assert readers.latest_clusters(lake).set_index("cluster_name").loc["kafka4", "status"] == "ok"
        service.wait("every instance analyzed", lambda: _instances_in_results(lake) == expected, 300)
        configs = _configs(lake)
        assert set(configs["source"]) == {"topic", "sink"}
        assert configs[configs["source"] == "topic"]["source_position"].nunique() == len(first)

        ingest = service.component("ingest")["sources"]
        assert ingest["kafka4-topic"]["last_outcome"] == "ok" and ingest["push-sink"]["last_outcome"] == "ok"
        assert ingest["unreachable"]["last_outcome"] == "error", ingest["unreachable"]
        assert ingest["unreachable"]["last_error"], ingest["unreachable"]
        assert "does not exist" in (ingest["missing-dir"]["last_error"] or ""), ingest["missing-dir"]
        assert (service.metric("kafka_fleet_job_runs_total", job="ingest", outcome="error") or 0) >= 2
        assert service.readyz()[0] == 200
        assert service.metric("kafka_fleet_cluster_up", cluster="kafka4") == 1.0
        _api_says_what_the_brokers_say(service.component("api")["url"], kafka4.bootstrap)

        # Each source resumes from its saved position: new records are read once, nothing twice.
        push_client_fleet(service_lab, 10, seed=13)
        new = [line for line in _sink_lines(sink) if line not in set(first)]
        _produce(kafka4.bootstrap, topic, new)
        service.wait("the new instances analyzed", lambda: _instances_in_results(lake) == expected + 10, 300)
        configs = _configs(lake)
        topic_rows = configs[configs["source"] == "topic"]
        assert topic_rows["source_position"].nunique() == len(first) + len(new)
        for source in ("topic", "sink"):
            rows = configs[configs["source"] == source]
            assert not rows.duplicated(["snapshot_id", "key"]).any(), f"{source} records ingested twice"
        assert service.terminate(signal.SIGTERM) < 15 and service.proc.returncode == 0, service.logs()
    finally:
        service.kill()
