"""lab.toml validation: good files load, bad ones fail with a message naming the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.kafka import protocol as P
from backend.lab.groups import EPOCH, GroupSpec, LabGroups
from backend.lab.model import LabConfigError, load_lab_config, load_profiles, parse_lab_config

REPO = Path(__file__).resolve().parents[3]


def _cluster(**overrides: Any) -> dict[str, Any]:
    return {"name": "c", "profile": "apache-kafka-3.9-zk", "brokers": [{"id": 1}, {"id": 2}], **overrides}


def _parse(*clusters: dict[str, Any]) -> Any:
    return parse_lab_config({"clusters": list(clusters)}, Path("/tmp/x"))


def test_repo_lab_toml_loads_with_every_required_profile_kind() -> None:
    config = load_lab_config(REPO / "lab.toml")
    profiles = {c.profile.name for c in config.clusters}
    assert {"apache-kafka-2.8-zk", "apache-kafka-3.9-zk", "apache-kafka-4-kraft-kip885", "redpanda-like-24"} <= profiles
    assert any(c.misrouted_to for c in config.clusters)
    assert any(b.software_version for c in config.clusters for b in c.brokers)  # a mid-upgrade cluster
    assert config.state_file == REPO / ".lab" / "state.json"


def test_profiles_only_claim_kip885_where_the_software_has_it() -> None:
    profiles = load_profiles()
    assert {n for n, p in profiles.items() if p.kip885} == {"apache-kafka-4-kraft-kip885", "redpanda-like-24"}
    for p in profiles.values():
        table = {k: (lo, hi) for k, lo, hi in p.api_versions}
        assert table[P.API_DESCRIBE_CLUSTER][1] < P.DESCRIBE_CLUSTER_KIP885_VERSION
        assert P.PUSH_CONFIG_API_KEY not in table
        assert table[P.API_METADATA][1] >= 8


@pytest.mark.parametrize(("cluster", "message"), [
    (_cluster(profile="nope"), "unknown profile 'nope'"),
    (_cluster(brokers=[]), "needs at least one broker"),
    (_cluster(brokers=[{"id": 1}, {"id": 1}]), "duplicate broker ids"),
    (_cluster(brokers=[{"id": -1}]), "expected an integer >= 0"),
    (_cluster(topics=[{"name": "t", "replication_factor": 3}]), "exceeds broker count 2"),
    (_cluster(topics=[{"name": "t", "partitions": 0}]), "expected an integer >= 1"),
    (_cluster(profile="apache-kafka-4.3-kraft", zookeeper={"chroot": "/x"}), "only ZooKeeper-mode profiles"),
    (_cluster(zookeeper={"chroot": "nochroot"}), "must start with '/'"),
    (_cluster(controller_id=9), "controller_id 9 is not one of the brokers"),
    (_cluster(sasl={"mechanisms": ["GSSAPI"]}), "unsupported SASL mechanism 'GSSAPI'"),
    (_cluster(misrouted_to="ghost"), "misrouted_to 'ghost' is not a lab cluster"),
    (_cluster(policy={"client_config_max_bytes": 0}), "policy: expected an integer >= 1"),
    (_cluster(topics=[{"name": "t", "idle": "yes"}]), "idle: expected true or false"),
])
def test_invalid_cluster_is_refused_with_a_clear_message(cluster: dict[str, Any], message: str) -> None:
    with pytest.raises(LabConfigError, match="cluster 'c'") as err:
        _parse(cluster)
    assert message in str(err.value)


def test_duplicate_cluster_names_and_empty_lab_are_refused() -> None:
    with pytest.raises(LabConfigError, match="duplicate cluster names"):
        _parse(_cluster(), _cluster())
    with pytest.raises(LabConfigError, match="no \\[\\[clusters\\]\\]"):
        _parse()


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "lab.toml"
    bad.write_text("[[clusters]\n")
    with pytest.raises(LabConfigError, match="invalid TOML"):
        load_lab_config(bad)


def test_defaults_and_controller() -> None:
    config = _parse(_cluster(brokers=[{"id": 7}, {"id": 3}]))
    c = config.clusters[0]
    assert c.effective_controller == 3
    assert c.policy.push_config is False and c.policy.max_config_bytes == 10240
    assert config.sink_dir == Path("/tmp/x/.lab/sink")


def test_sasl_password_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    c = _parse(_cluster(sasl={"users": [{"name": "u", "password_env": "LAB_TEST_PW"}]})).clusters[0]
    assert c.sasl is not None
    with pytest.raises(LabConfigError, match="LAB_TEST_PW is not set"):
        c.sasl.users[0].secret()
    monkeypatch.setenv("LAB_TEST_PW", "s3cret")
    assert c.sasl.users[0].secret() == "s3cret"
    assert "s3cret" not in repr(c.sasl.users[0])


@pytest.mark.parametrize(("text", "expected"), [
    ("prod-eu:1:latency_ms=500", ("prod-eu", 1, "latency_ms", 500)),
    ("c:2:refuse=true", ("c", 2, "refuse", True)),
    ("c:2:malformed=off", ("c", 2, "malformed", False)),
])
def test_cli_fault_syntax(text: str, expected: tuple[object, ...]) -> None:
    from backend.lab.cli import _parse_fault

    assert _parse_fault(text) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("c:x:refuse=true", "expected CLUSTER:BROKER:MODE=VALUE"),
    ("c:1:explode=true", "unknown mode 'explode'"),
    ("c:1:latency_ms=soon", "whole number"),
    ("c:1:refuse=maybe", "true or false"),
])
def test_cli_fault_syntax_errors(text: str, message: str) -> None:
    from backend.lab.cli import _parse_fault

    with pytest.raises(ValueError, match=message):
        _parse_fault(text)


@pytest.mark.parametrize(("cluster", "message"), [
    (_cluster(configs={"no.such.config": 1}), "cluster 'c' configs: unknown broker config 'no.such.config'"),
    (_cluster(dynamic_configs={"log.retention.hours": 72}), "'log.retention.hours' is read-only"),
    (_cluster(configs={"log.retention.hours": "a week"}), "'a week' is not a INT"),
    (_cluster(configs={"auto.create.topics.enable": 1}), "is not a BOOLEAN"),
    (_cluster(brokers=[{"id": 1, "configs": {"num.io.threads": [1]}}]), "brokers[0] configs num.io.threads"),
    (_cluster(topics=[{"name": "t", "configs": {"log.retention.hours": 1}}]), "unknown topic config 'log.retention.hours'"),
    (_cluster(configs=["x"]), "expected a table of config = value"),
])
def test_invalid_configs_are_refused_naming_the_entry(cluster: dict[str, Any], message: str) -> None:
    with pytest.raises(LabConfigError) as info:
        _parse(cluster)
    assert message in str(info.value)


def test_configs_at_every_level_load_as_the_strings_a_broker_reports() -> None:
    config = _parse(_cluster(
        configs={"auto.create.topics.enable": False, "log.retention.hours": 72},
        dynamic_configs={"min.insync.replicas": 2},
        brokers=[{"id": 1, "configs": {"log.retention.hours": 24}, "dynamic_configs": {"log.cleaner.threads": 3}}],
        topics=[{"name": "t", "configs": {"cleanup.policy": ["compact", "delete"], "min.insync.replicas": 2}}]))
    c = config.clusters[0]
    assert c.configs == {"auto.create.topics.enable": "false", "log.retention.hours": "72"}
    assert c.dynamic_configs == {"min.insync.replicas": "2"}
    assert (c.brokers[0].configs, c.brokers[0].dynamic_configs) == ({"log.retention.hours": "24"}, {"log.cleaner.threads": "3"})
    assert c.topics[0].configs == {"cleanup.policy": "compact,delete", "min.insync.replicas": "2"}
    assert c.profile.catalog.family == "kafka-3.9"


def test_repo_lab_toml_seeds_the_demos_config_differences() -> None:
    config = load_lab_config(REPO / "lab.toml")
    us = config.cluster("prod-us")
    assert {b.id: b.configs.get("log.retention.hours") for b in us.brokers} == {1: None, 2: None, 3: "72"}
    payments = next(t for t in us.topics if t.name == "payments")
    assert int(payments.configs["min.insync.replicas"]) > payments.replication_factor
    assert [c.name for c in config.clusters if c.configs.get("unclean.leader.election.enable") == "true"] == ["legacy-zk"]


def test_an_idle_topics_end_offsets_stay_put_and_its_healthy_groups_with_them() -> None:
    spec = _parse(_cluster(topics=[{"name": "quiet", "idle": True}, {"name": "busy"}])).clusters[0]
    assert [(t.name, t.idle) for t in spec.topics] == [("quiet", True), ("busy", False)]
    groups = LabGroups("c", [GroupSpec("q", ("quiet",)), GroupSpec("b", ("busy",))],
                       idle_topics=frozenset(t.name for t in spec.topics if t.idle))
    t0 = groups.freeze(EPOCH + 10 * 86_400 + 1)  # one second of a four-second cycle where healthy is not behind
    before = groups.snapshot({"quiet": 2, "busy": 2})
    groups.freeze(t0 + 600)
    after = groups.snapshot({"quiet": 2, "busy": 2})
    assert after["q"]["end"] == before["q"]["end"] and after["q"]["committed"] == before["q"]["committed"]
    assert after["q"]["committed"] == {tp: end for tp, end in after["q"]["end"].items()}  # caught up: no lag
    assert all(after["b"]["end"][tp] > before["b"]["end"][tp] for tp in after["b"]["end"])
