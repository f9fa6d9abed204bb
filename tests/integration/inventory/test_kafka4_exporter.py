"""The client inventory on the rig's real 4.3.1 KRaft cluster (3 nodes, each with the Prometheus JMX exporter agent),
through Debian's real Prometheus.

- A Prometheus that scrapes one node of three: the inventory is `partial` naming the two brokers it lacks, and the
  removed-protocol item is `unknown`, never `pass`.
- A 4.x broker refuses the removed versions and counts no such request (checked here: kcat with
  api.version.request=false gets its connection closed; the broker logs UnsupportedVersionException, and no
  DeprecatedRequestsPerSec or ErrorsPerSec series counts the refusal): an empty KIP-896 meter is no proof. While a
  client that sends no software name is connected the item is `unknown`. The rig's brokers share their inter-broker
  listener with clients, and their replica fetchers send no name either, so the item stays `unknown` there (saying
  so); a listener of the brokers' own makes it pass (tests/unit/inventory/test_absence.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from backend.collect.client_metrics import ClientMetricsCollector
from backend.collect.configs import ConfigCollector
from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.store.lake import Lake
from backend.views import frames, readiness
from tests.rig.kafka import KafkaKraftCluster
from tests.rig.procs import free_port, log_tail

WINDOW_S = 6.0


class Prometheus:
    """Debian's prometheus on a free port, scraping the exporters it is given every second."""

    def __init__(self, binary: str, work: Path) -> None:
        self.binary, self.work, self.port = binary, work, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def scrape(self, ports: list[int]) -> None:
        self.stop()
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
        (self.work / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kafka\n    static_configs:\n"
            f"      - targets: [{targets}]\n        labels: {{cluster: kafka4}}\n", encoding="utf-8")
        self.log = self.work / "prometheus.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([self.binary, f"--config.file={self.work / 'prometheus.yml'}",
                                          f"--storage.tsdb.path={self.work / 'tsdb'}",
                                          f"--web.listen-address=127.0.0.1:{self.port}"],
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
        self.proc = None


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    assert Path(binary).is_file(), "prometheus is not installed: run `make deps-system` as root"
    server = Prometheus(binary, tmp_path)
    try:
        yield server
    finally:
        server.stop()


def _poll(kafka4: KafkaKraftCluster, prom: Prometheus, lake: Path, collector: ClientMetricsCollector,
          work: Path) -> readiness.Readiness:
    fleet_file = work / "clusters.toml"
    servers = ", ".join(f'"{b.address}"' for b in kafka4.brokers)
    fleet_file.write_text(f"""
[settings]
client_metrics_interval_s = 0.5
client_metrics_window_s = {WINDOW_S}
config_interval_s = 0
[[clusters]]
name = "kafka4"
bootstrap_servers = [{servers}]
[clusters.broker_metrics]
prometheus = "http://127.0.0.1:{prom.port}"
matchers = 'job="kafka", cluster="kafka4"'
""", encoding="utf-8")
    time.sleep(0.6)  # the collector's interval
    run_poller(load_fleet(fleet_file), Lake(lake), once=True, client_metrics=collector, configs=ConfigCollector())
    return readiness.readiness(frames.latest_clusters(str(lake)), frames.latest_rows(str(lake), "broker_snapshots"),
                               frames.inventory_rows(str(lake)), frames.inventory_runs(str(lake)), target="4.3")


def _item(report: readiness.Readiness, item: str = "removed protocol versions") -> tuple[str, str]:
    row = report.items[(report.items["cluster_name"] == "kafka4") & (report.items["item"] == item)]
    return str(row["status"].iloc[0]), str(row["detail"].iloc[0])


def _until(check: object, kafka4: KafkaKraftCluster, prom: Prometheus, lake: Path, collector: ClientMetricsCollector,
           work: Path, timeout_s: float = 90.0) -> readiness.Readiness:
    deadline = time.monotonic() + timeout_s
    while True:
        report = _poll(kafka4, prom, lake, collector, work)
        inventory = collector.last("kafka4")
        if check(report, inventory):  # type: ignore[operator]
            return report
        assert time.monotonic() < deadline, (_item(report), _item(report, "client software floor"),
                                             inventory and (inventory.status, inventory.message),
                                             inventory and sorted({(c.software_name, c.listener, c.role, c.connections)
                                                                   for c in inventory.connections}),
                                             log_tail(prom.log, 5))
        time.sleep(1)


@pytest.mark.slow
def test_a_prometheus_missing_brokers_and_refused_old_clients_on_kafka_4(kafka4: KafkaKraftCluster,
                                                                         prometheus: Prometheus,
                                                                         tmp_path: Path) -> None:
    ports = [b.metrics_port for b in kafka4.brokers]
    assert all(ports), "the rig's KRaft nodes run without the exporter agent"
    lake, collector = tmp_path / "lake", ClientMetricsCollector()

    # 1. Prometheus scrapes node 1 only, while Metadata lists three brokers.
    prometheus.scrape([ports[0]])
    report = _until(lambda r, inv: inv is not None and inv.status == "partial" and inv.connections, kafka4,
                    prometheus, lake, collector, tmp_path)
    inventory = collector.last("kafka4")
    assert inventory is not None
    for b in kafka4.brokers[1:]:
        assert f"broker {b.node_id} ({b.address})" in (inventory.message or ""), inventory.message
    assert f"broker {kafka4.brokers[0].node_id} (" not in (inventory.message or "")
    assert {c.broker_id for c in inventory.connections} == {kafka4.brokers[0].node_id}  # app-info's id label
    assert _item(report)[0] == "unknown" and _item(report, "client software floor")[0] == "unknown"

    # 2. Every node scraped, no old client. The rig's brokers share PLAINTEXT with their clients as the inter-broker
    # listener, and their replica fetchers send no software name: with a topic replicated on all three and the group
    # coordinator's __consumer_offsets in place, unnamed connections are there already. The item stays `unknown` and
    # says why (a listener of the brokers' own would tell them apart), never `pass`.
    prometheus.scrape(ports)
    topic = f"inv4-{os.getpid()}"
    admin = AdminClient({"bootstrap.servers": kafka4.bootstrap})  # kept: the futures need their client
    for future in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(f"{topic}-rf3", 1, 3)]).values():
        future.result(timeout=30)
    warm = Consumer({"bootstrap.servers": kafka4.bootstrap, "group.id": f"{topic}-warm"})
    warm.subscribe([topic])
    deadline = time.monotonic() + 60
    while not warm.assignment() and time.monotonic() < deadline:
        warm.poll(0.5)
    warm.close()

    def unnamed(inv: object) -> int:
        return sum(c.connections for c in getattr(inv, "connections", ()) if c.software_name == "unknown")

    counts: list[int] = []

    def settled(report: readiness.Readiness, inv: object) -> bool:
        counts.append(unnamed(inv) if getattr(inv, "status", None) == "ok" else -1)
        return len(counts) >= 2 and counts[-1] == counts[-2] > 0

    report = _until(settled, kafka4, prometheus, lake, collector, tmp_path)
    status, detail = _item(report)
    assert status == "unknown" and "replica fetchers" in detail, detail
    inventory = collector.last("kafka4")
    assert inventory is not None
    before = unnamed(inventory)
    assert all(c.role == "either" for c in inventory.connections if c.software_name == "unknown"
               and c.listener == "PLAINTEXT")
    assert any(c.role == "broker" and c.listener == "CONTROLLER" for c in inventory.connections)

    # 3. A 0.9-protocol client (kcat, api.version.request=false) joins a group: the 4.3.1 brokers refuse its removed
    # requests (its connections close; the brokers log UnsupportedVersionException) and count none of them.
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed: run `make deps-system`"
    old = "-X api.version.request=false -X broker.version.fallback=0.9.0"
    logs = [b.proc.log for b in kafka4.brokers]
    sizes = {log: log.stat().st_size for log in logs}
    proc = subprocess.Popen(["bash", "-c", f"{kcat} -C -b {kafka4.bootstrap} -G inv4-old {topic} {old} -q"],
                            stdout=(tmp_path / "kcat.log").open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        report = _until(lambda r, inv: inv is not None and inv.status == "ok" and unnamed(inv) > before, kafka4,
                        prometheus, lake, collector, tmp_path)
        refused = ""
        deadline = time.monotonic() + 60
        while "unsupported version" not in refused and time.monotonic() < deadline:
            time.sleep(1)
            refused = "".join(log.read_bytes()[sizes[log]:].decode("utf-8", "replace") for log in logs)
        assert "UnsupportedVersionException" in refused and "unsupported version" in refused
        pages = [urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
                 for port in ports]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    assert not any("DeprecatedRequestsPerSec" in page or 'error="UNSUPPORTED_VERSION"' in page for page in pages)
    inventory = collector.last("kafka4")
    assert inventory is not None and inventory.kip896 == "not_exported" and not inventory.deprecated
    status, detail = _item(report)
    assert status == "unknown" and "UnsupportedVersionException" in detail and "sent no name" in detail, detail
    assert _item(report, "client software floor")[0] == "unknown"
