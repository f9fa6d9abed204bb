"""The product's own probe against lab brokers: KIP-885 answers are reported, the rest must be guessed."""

from __future__ import annotations

import pytest

from backend.kafka.probe import probe_broker
from backend.lab.fleet import LabFleet


@pytest.mark.parametrize(("cluster", "broker_id", "name", "version"), [
    ("k4", 1, "Kafka", "4.3.1"), ("k4", 3, "Kafka", "4.2.0"), ("rp", 0, "Redpanda", "v24.2.7"),
])
def test_kip885_profiles_are_reported_per_broker(lab: LabFleet, cluster: str, broker_id: int, name: str,
                                                 version: str) -> None:
    b = next(b for b in lab.clusters[cluster].brokers if b.id == broker_id)
    result = probe_broker(b.host, b.port, timeout_s=5)
    assert result.ok, result.error
    assert (result.software_name, result.software_version, result.provenance) == (name, version, "reported")
    assert result.cluster_id == lab.clusters[cluster].cluster_id


@pytest.mark.parametrize(("cluster", "release"), [("k43", "4.3"), ("k39", "3.9"), ("k28", "2.8")])
def test_profiles_without_kip885_leave_a_fingerprint_guess(lab: LabFleet, cluster: str, release: str) -> None:
    b = lab.clusters[cluster].brokers[0]
    result = probe_broker(b.host, b.port, timeout_s=5)
    assert result.ok, result.error
    assert result.provenance == "guessed" and result.software_version is None
    assert result.version_min is not None and result.version_max is not None
    assert result.version_min <= release <= result.version_max
