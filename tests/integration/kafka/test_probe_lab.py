"""The probe against the lab broker: KIP-885 answers are "reported", lab faults become statuses."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from backend.kafka import protocol as P
from backend.kafka.probe import probe_broker, probe_brokers
from backend.lab.fleet import LabFleet
from tests.integration.lab.conftest import make_config

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """A lab fleet of every profile, for this module."""
    fleet = LabFleet(make_config(tmp_path_factory.mktemp("probe-lab")))
    fleet.start()
    try:
        yield fleet
    finally:
        fleet.stop()


def test_kip885_lab_cluster_reports_each_brokers_own_version(lab: LabFleet) -> None:
    info = lab.clusters["k4"]
    results = probe_brokers([(b.host, b.port) for b in info.brokers], timeout_s=TIMEOUT_S)
    by_port = {r.port: r for r in results}
    for b in info.brokers:
        r = by_port[b.port]
        assert r.ok, r.error
        assert r.describe_cluster_version_used == P.DESCRIBE_CLUSTER_KIP885_VERSION
        assert r.provenance == "reported" and r.software_name == "Kafka"
        assert r.cluster_id == info.cluster_id
    # Broker 3 of the lab definition runs 4.2.0 while the others run the profile's version.
    versions = sorted(by_port[b.port].software_version or "" for b in info.brokers)
    assert "4.2.0" in versions and len(set(versions)) == 2


def test_lab_clusters_without_kip885_are_guessed_with_ranges_containing_their_profile(lab: LabFleet) -> None:
    expected = {"k43": "4.3", "k39": "3.9", "k28": "2.8"}
    for name, release in expected.items():
        b = lab.clusters[name].brokers[0]
        r = probe_broker(b.host, b.port, timeout_s=TIMEOUT_S)
        assert r.ok, (name, r.error)
        assert r.provenance == "guessed" and r.software_version is None
        assert r.version_min is not None
        key = tuple(int(x) for x in release.split("."))
        assert tuple(int(x) for x in r.version_min.split(".")) <= key
        assert r.version_max is None or key <= tuple(int(x) for x in r.version_max.split("."))


@pytest.mark.parametrize(("fault", "kinds"), [
    ({"latency_ms": 5000}, {"timeout"}),
    ({"refuse": True}, {"refused"}),
    ({"drop_mid_response": True}, {"disconnected"}),
    ({"malformed": True}, {"protocol"}),
])
def test_lab_faults_become_error_results_within_the_timeout(lab: LabFleet, fault: dict, kinds: set[str]) -> None:
    info = lab.clusters["k43"]
    victim = info.brokers[0]
    lab.set_fault("k43", victim.id, **fault)
    try:
        start = time.monotonic()
        r = probe_broker(victim.host, victim.port, timeout_s=TIMEOUT_S)
        elapsed = time.monotonic() - start
        healthy = probe_broker(info.brokers[1].host, info.brokers[1].port, timeout_s=TIMEOUT_S)
    finally:
        lab.clear_faults()
    assert not r.ok and r.error_kind in kinds, (r.error_kind, r.error)
    assert elapsed < TIMEOUT_S + 1.0
    assert healthy.ok, healthy.error
