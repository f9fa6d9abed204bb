"""The product never sends a request that changes a cluster: every request a real broker logs from it is read-only.

The rig runs each broker with `kafka.request.logger` at debug, so the broker itself records the api
key and client id of every request it completes. A full poll cycle runs through the CLI against
the real 3.9 (ZooKeeper mode) and 4.x (KRaft) clusters; then the brokers' logs are read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.collect.conftest import kafka4_toml, kafka39_toml, settings_toml
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer
from tests.rig.procs import REPO

# Requests that only read. Telemetry (KIP-714) reports client metrics and changes no cluster state.
READ_ONLY_APIS = {
    "API_VERSIONS", "METADATA", "DESCRIBE_CLUSTER", "SASL_HANDSHAKE", "SASL_AUTHENTICATE",
    "DESCRIBE_CONFIGS", "DESCRIBE_TOPIC_PARTITIONS", "LIST_OFFSETS", "DESCRIBE_ACLS",
    "DESCRIBE_LOG_DIRS", "LIST_GROUPS", "DESCRIBE_GROUPS", "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY",
    "CONSUMER_GROUP_DESCRIBE", "SHARE_GROUP_DESCRIBE", "OFFSET_FETCH", "FIND_COORDINATOR",
    "DESCRIBE_SHARE_GROUP_OFFSETS",
}  # fmt: skip
# Reading consumer groups added these, every one a read (FindCoordinator only when a group's coordinator moved).
GROUP_APIS = {"LIST_GROUPS", "DESCRIBE_GROUPS", "CONSUMER_GROUP_DESCRIBE", "SHARE_GROUP_DESCRIBE", "OFFSET_FETCH",
              "LIST_OFFSETS", "FIND_COORDINATOR", "DESCRIBE_SHARE_GROUP_OFFSETS"}
# What a poll cycle sent before broker configs were read; DescribeConfigs is the one request added since.
POLL_APIS_BEFORE_CONFIGS = {
    "API_VERSIONS", "METADATA", "DESCRIBE_CLUSTER", "SASL_HANDSHAKE", "SASL_AUTHENTICATE", "DESCRIBE_TOPIC_PARTITIONS",
    "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY",
}  # fmt: skip
PRODUCT_CLIENT_IDS = re.compile(r"^fleetview")
COMPLETED = "Completed request:"


def _log_sizes(logs: list[Path]) -> dict[Path, int]:
    return {log: log.stat().st_size for log in logs}


def _requests_since(offsets: dict[Path, int]) -> list[tuple[str, str]]:
    """(api key name, client id) of every request logged after the offsets."""
    seen: list[tuple[str, str]] = []
    for log, offset in offsets.items():
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", errors="replace")
        for line in text.splitlines():
            if COMPLETED not in line:
                continue
            payload = line.split(COMPLETED, 1)[1]
            try:
                header = json.loads(payload)["requestHeader"]
            except (ValueError, KeyError):
                continue
            seen.append((str(header.get("requestApiKeyName", header.get("requestApiKey"))), str(header.get("clientId"))))
    return seen


def test_a_poll_cycle_sends_only_read_only_requests_to_real_brokers(
    kafka4: KafkaKraftCluster, kafka39: KafkaZkCluster, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    for cluster in (kafka4, kafka39):  # a group with committed offsets on each, so there is something to read
        _group_with_offsets(cluster.bootstrap, f"readonly-{uuid.uuid4().hex[:6]}")
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(settings_toml() + kafka4_toml(kafka4) + kafka39_toml(kafka39, zookeeper))
    logs = [b.proc.log for b in kafka4.brokers] + [b.proc.log for b in kafka39.brokers]
    offsets = _log_sizes(logs)

    result = subprocess.run(
        [sys.executable, "-m", "backend", "poll", "--config", str(fleet), "--lake", str(tmp_path / "lake"), "--once"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kafka4 status=ok" in result.stdout and "kafka39 status=ok" in result.stdout

    requests = _requests_since(offsets)
    product = [(api, client) for api, client in requests if PRODUCT_CLIENT_IDS.match(client)]
    apis = {api for api, _ in product}
    # The cycle really reached every kind of broker with the calls the poller makes.
    assert {"API_VERSIONS", "METADATA", "DESCRIBE_CLUSTER", "DESCRIBE_CONFIGS"} <= apis, sorted(set(requests))[:40]
    assert apis <= READ_ONLY_APIS, f"non-read-only requests from the product: {sorted(apis - READ_ONLY_APIS)}"
    # Reading broker and topic configs added one kind of request, DescribeConfigs, and reading consumer groups the
    # group reads; each from its own client id.
    assert apis - POLL_APIS_BEFORE_CONFIGS <= {"DESCRIBE_CONFIGS"} | GROUP_APIS, sorted(apis)
    assert {"DESCRIBE_CONFIGS", "LIST_GROUPS", "DESCRIBE_GROUPS", "OFFSET_FETCH", "LIST_OFFSETS"} <= apis, sorted(apis)
    configs_clients = {client for api, client in product if api == "DESCRIBE_CONFIGS"}
    assert configs_clients == {"fleetview-configs"}, configs_clients
    group_clients = {client for api, client in product if api in GROUP_APIS}
    assert group_clients == {"fleetview-groups"}, group_clients


def _group_with_offsets(bootstrap: str, name: str) -> None:
    """A topic with a few records and a classic group that committed some of them, then left (Empty)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": name, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([name])
    got, deadline = 0, time.monotonic() + 30
    while got < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        got += message is not None and not message.error()
    consumer.commit(asynchronous=False)
    consumer.close()
