"""A real Prometheus scrapes the poller's metrics endpoint over the lab fleet; the shipped rules fire."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.rig.kafka import ZooKeeperServer
from tests.rig.procs import REPO, free_port, log_tail

RULES = REPO / "docs" / "prometheus" / "rules.yml"
STOPPED = "batch-43"  # a KRaft cluster without ZooKeeper: stopping its brokers makes it plainly down
MISROUTED = "staging-zk"  # its ZooKeeper holds analytics-zk's cluster id (lab.toml misrouted_to)
SKEWED = "prod-us"  # mid-upgrade: broker 3 reports 4.2.0


def _get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _wait(what: str, check: Any, timeout_s: float, logs: list[Path]) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}: {last!r}\n" + "\n".join(log_tail(p) for p in logs))


@pytest.fixture(scope="module")
def own_lab(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A lab fleet of its own, since this test stops one of its clusters."""
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(tmp_path_factory.mktemp("metrics-lab"))
    lab = LabFleet(parse_lab_config(raw, REPO), zookeeper_connect=zookeeper.connect)
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def prometheus_bin() -> str:
    """Debian's prometheus server (installed by `make deps-system`); missing is a failure, not a skip."""
    path = shutil.which("prometheus") or "/usr/bin/prometheus"
    assert Path(path).is_file(), "prometheus is not installed: run `make deps-system` as root"
    return path


def _start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _query(base: str, promql: str) -> list[dict[str, Any]]:
    answer = _get(f"{base}/api/v1/query?query={urllib.parse.quote(promql)}")
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def _by_cluster(results: list[dict[str, Any]]) -> dict[str, float]:
    return {r["metric"]["cluster"]: float(r["value"][1]) for r in results}


@pytest.mark.slow
def test_prometheus_scrapes_the_fleet_and_fires_cluster_down(own_lab: LabFleet, prometheus_bin: str,
                                                            tmp_path: Path) -> None:
    fleet_file = own_lab.write_fleet_file(tmp_path / "clusters.toml")
    metrics_port, prom_port = free_port(), free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n  - {RULES}\n"
        "scrape_configs:\n  - job_name: fleet\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n", encoding="utf-8")
    logs = [tmp_path / "poller.log", tmp_path / "prometheus.log"]
    poller = _start([sys.executable, "-m", "backend", "poll", "--config", str(fleet_file), "--lake",
                     str(tmp_path / "lake"), "--interval", "2", "--metrics-port", str(metrics_port)], logs[0])
    prometheus = _start([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                         f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                        logs[1])
    base = f"http://127.0.0.1:{prom_port}"
    try:
        _wait("prometheus ready", lambda: urllib.request.urlopen(f"{base}/-/ready", timeout=2).status == 200, 60, logs)
        loaded = _get(f"{base}/api/v1/rules")["data"]["groups"][0]["rules"]
        assert {r["name"] for r in loaded} == {"KafkaClusterDown", "KafkaClusterMisrouted", "KafkaBrokerVersionSkew",
                                              "KafkaTopicRecreated", "KafkaConsumerGroupStalled",
                                              "KafkaConsumerGroupLagGrowing"}
        lab_names = set(own_lab.clusters)

        def all_scraped() -> dict[str, float] | None:
            seen = _by_cluster(_query(base, "kafka_fleet_cluster_up"))
            return seen if set(seen) >= lab_names else None

        up = _wait("every lab cluster scraped", all_scraped, 90, logs)
        assert all(up[name] == 1.0 for name in lab_names), up
        brokers = _by_cluster(_query(base, "kafka_fleet_brokers"))
        infos = _query(base, "kafka_fleet_broker_info")
        for name, info in own_lab.clusters.items():
            assert brokers[name] == len(info.brokers), (name, brokers)
            assert len([i for i in infos if i["metric"]["cluster"] == name]) == len(info.brokers)
        assert _by_cluster(_query(base, "kafka_fleet_topics"))["prod-eu"] > 0
        # the lab's consumer groups: lag per group is a series of its own (lab.toml's prod-eu groups)
        lags = _wait("group lag series", lambda: {i["metric"]["group"] for i in _query(
            base, 'kafka_fleet_group_lag_records{cluster="prod-eu"}')} or None, 60, logs)
        assert {"orders-consumers", "payments-consumers", "fraud-consumers"} <= lags, lags
        for metric in ("brokers_reachable", "under_replicated_partitions", "offline_partitions",
                       "poll_duration_seconds", "last_successful_poll_timestamp_seconds"):
            assert set(_by_cluster(_query(base, f"kafka_fleet_{metric}"))) >= lab_names, metric
        versions = {(i["metric"]["broker_id"], i["metric"]["version"], i["metric"]["provenance"])
                    for i in infos if i["metric"]["cluster"] == SKEWED}
        assert ("3", "4.2.0", "reported") in versions, versions
        assert _by_cluster(_query(base, 'kafka_fleet_cluster_status{status="misrouted"} == 1')) == {MISROUTED: 1.0}
        skew = _wait("the version-skew incident", lambda: _by_cluster(
            _query(base, 'sum by (cluster) (kafka_fleet_open_incidents{rule="version_skew"})')), 60, logs)
        assert SKEWED in skew, skew

        for broker in own_lab.clusters[STOPPED].brokers:
            own_lab.stop_broker(STOPPED, broker.id)

        def down_firing() -> list[dict[str, Any]]:
            alerts = _get(f"{base}/api/v1/alerts")["data"]["alerts"]
            return [a for a in alerts if a["labels"].get("alertname") == "KafkaClusterDown" and a["state"] == "firing"]

        firing = _wait("KafkaClusterDown firing", down_firing, 180, logs)
        assert {a["labels"]["cluster"] for a in firing} == {STOPPED}
        assert _by_cluster(_query(base, "kafka_fleet_cluster_up"))[STOPPED] == 0.0
        assert poller.poll() is None, log_tail(logs[0])
    finally:
        for proc in (poller, prometheus):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (poller, prometheus):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
