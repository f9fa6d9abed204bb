"""The product never sends a request that changes a cluster: every request the lab brokers receive from a poll cycle is read-only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from backend.kafka import protocol as P
from backend.lab.fleet import LabFleet
from tests.rig.procs import REPO

# What a poll cycle sent before broker configs were read; DescribeConfigs is the one request added since.
POLL_API_KEYS_BEFORE_CONFIGS = {P.API_API_VERSIONS, P.API_METADATA, P.API_DESCRIBE_CLUSTER, P.API_SASL_HANDSHAKE,
                                P.API_SASL_AUTHENTICATE}
# Reading consumer groups added these, all reads (FindCoordinator only when a group's coordinator moved).
GROUP_API_KEYS = {P.API_LIST_GROUPS, P.API_DESCRIBE_GROUPS, P.API_CONSUMER_GROUP_DESCRIBE, P.API_SHARE_GROUP_DESCRIBE,
                  P.API_OFFSET_FETCH, P.API_LIST_OFFSETS, P.API_FIND_COORDINATOR,
                  P.API_DESCRIBE_SHARE_GROUP_OFFSETS}  # a share group's start offsets and lag (KIP-932)
READ_ONLY_API_KEYS = POLL_API_KEYS_BEFORE_CONFIGS | {P.API_DESCRIBE_CONFIGS} | GROUP_API_KEYS


def test_a_poll_cycle_over_the_lab_fleet_sends_only_read_only_requests(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet_file = lab_fleet.write_fleet_file(tmp_path / "clusters.toml")
    for runtime in lab_fleet.runtimes.values():
        runtime.requests_seen.clear()

    result = subprocess.run(
        [sys.executable, "-m", "backend", "poll", "--config", str(fleet_file), "--lake", str(tmp_path / "lake"), "--once"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert "status=ok" in result.stdout, result.stdout + result.stderr

    seen = {name: list(rt.requests_seen) for name, rt in lab_fleet.runtimes.items()}
    # Every lab cluster was reached, and every broker of it answered the probe.
    for name, runtime in lab_fleet.runtimes.items():
        keys = {api_key for _broker, api_key, _version, _client in seen[name]}
        assert {P.API_API_VERSIONS, P.API_METADATA} <= keys, name
        assert {broker for broker, *_ in seen[name]} == set(runtime.brokers), name
    kip885 = [r for rows in seen.values() for r in rows if r[1] == P.API_DESCRIBE_CLUSTER and r[2] == P.DESCRIBE_CLUSTER_KIP885_VERSION]
    assert kip885, "the probe asked DescribeCluster at the KIP-885 version somewhere"
    sent = {(api_key, client) for rows in seen.values() for _b, api_key, _v, client in rows}
    assert {api_key for api_key, _ in sent} <= READ_ONLY_API_KEYS, sorted(sent)
    assert P.PUSH_CONFIG_API_KEY not in {api_key for api_key, _ in sent}
    added = {api_key for api_key, _ in sent} - POLL_API_KEYS_BEFORE_CONFIGS
    assert added <= {P.API_DESCRIBE_CONFIGS} | GROUP_API_KEYS, sorted(added)
    # the lab's groups were read: listed, described (classic, KIP-848 and share groups), offsets and end offsets
    assert {P.API_DESCRIBE_CONFIGS, P.API_LIST_GROUPS, P.API_DESCRIBE_GROUPS, P.API_CONSUMER_GROUP_DESCRIBE,
            P.API_SHARE_GROUP_DESCRIBE, P.API_OFFSET_FETCH, P.API_LIST_OFFSETS} <= added, sorted(added)
    assert {client for api_key, client in sent if api_key in GROUP_API_KEYS} == {"fleetview-groups"}
    # Every broker of every cluster was asked for its own configs.
    for name, runtime in lab_fleet.runtimes.items():
        asked = {broker for broker, api_key, *_ in seen[name] if api_key == P.API_DESCRIBE_CONFIGS}
        assert asked == set(runtime.brokers), name
