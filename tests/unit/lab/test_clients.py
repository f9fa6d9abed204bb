"""KIP-1324 client side: key selection, the sensitive rules, allowed-keys override, and the fleet generator."""

from __future__ import annotations

from collections import Counter

import pytest

from backend.lab.clientgen import MISCONFIG_KINDS, SHARED_CLIENT_ID, generate_clients
from backend.lab.clients import DEFAULT_PUSH_KEYS, collect_config, sensitive_reason, to_config_string

CLUSTERS = {"eu": "4.3.1", "us": "4.3.1", "edge": "v24.2.7", "old": "3.9.2"}


def test_default_key_lists_are_the_kips() -> None:
    assert len(DEFAULT_PUSH_KEYS["producer"]) == 11 and "enable.idempotence" in DEFAULT_PUSH_KEYS["producer"]
    assert len(DEFAULT_PUSH_KEYS["consumer"]) == 10 and "session.timeout.ms" in DEFAULT_PUSH_KEYS["consumer"]
    assert len(DEFAULT_PUSH_KEYS["share_consumer"]) == 8 and "share.acquire.mode" in DEFAULT_PUSH_KEYS["share_consumer"]


def test_only_default_keys_are_sent_with_types_and_default_flags() -> None:
    user = {"acks": "all", "linger.ms": 10, "enable.idempotence": True, "bootstrap.servers": "h:1",
            "key.serializer": "org.apache.kafka.common.serialization.StringSerializer"}
    got = collect_config("producer", user, {"retries": 2147483647, "batch.size": 16384})
    assert [(e.key, e.value, e.type, e.is_default) for e in got.entries] == [
        ("acks", "all", "STRING", False), ("batch.size", "16384", "INT", True),
        ("enable.idempotence", "true", "BOOLEAN", False), ("linger.ms", "10", "LONG", False),
        ("retries", "2147483647", "INT", True),
    ]
    assert got.dropped == ()


@pytest.mark.parametrize(("key", "config_type", "reason"), [
    ("sasl.jaas.config", "PASSWORD", "type PASSWORD"),
    ("partitioner.class", "CLASS", "type CLASS"),
    ("ssl.truststore.location", "STRING", "security prefix"),
    ("security.protocol", "STRING", "security prefix"),
    ("producer.ssl.endpoint", "STRING", "security segment"),
    ("my.interceptor.classes", "LIST", "class name"),
    ("app.tenant", None, "custom key"),
    ("linger.ms", "LONG", None),
])
def test_sensitive_rules(key: str, config_type: str | None, reason: str | None) -> None:
    assert sensitive_reason(key, config_type) == reason


def test_allowed_keys_override_replaces_the_defaults_and_still_filters() -> None:
    user = {"config.push.allowed.keys": "linger.ms, sasl.mechanism,interceptor.classes,app.secret,max.request.size",
            "linger.ms": 5, "sasl.mechanism": "PLAIN", "interceptor.classes": ["a.B"], "app.secret": "x",
            "max.request.size": 1048576, "acks": "all"}
    got = collect_config("producer", user, {})
    assert [e.key for e in got.entries] == ["linger.ms", "max.request.size"]  # acks is no longer in the list
    assert dict(got.dropped) == {"sasl.mechanism": "security prefix", "interceptor.classes": "class name",
                                 "app.secret": "custom key"}
    assert "config.push.allowed.keys" not in [e.key for e in got.entries]
    with_itself = collect_config("producer", {**user, "config.push.allowed.keys": "config.push.allowed.keys,acks"}, {})
    assert [e.key for e in with_itself.entries] == ["config.push.allowed.keys", "acks"]


def test_unknown_client_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown client type"):
        collect_config("streams-ish", {}, {})


def test_java_value_rendering() -> None:
    assert to_config_string(True) == "true" and to_config_string(["a", "b"]) == "a,b" and to_config_string(5) == "5"


def test_generator_is_deterministic_and_sized() -> None:
    a = generate_clients(CLUSTERS, 250, seed=3)
    assert a == generate_clients(CLUSTERS, 250, seed=3)
    assert a != generate_clients(CLUSTERS, 250, seed=4)
    assert len(a) == 250 and len({c.client_instance_id for c in a}) == 250
    assert {c.cluster for c in a} == set(CLUSTERS)
    assert generate_clients(CLUSTERS, 0) == []
    with pytest.raises(ValueError):
        generate_clients({}, 5)


def test_generator_mixes_software_types_and_groups() -> None:
    clients = generate_clients(CLUSTERS, 400, seed=1)
    types = Counter(c.client_type for c in clients)
    assert types["producer"] > 50 and types["consumer"] > 50 and types["share_consumer"] > 0
    names = Counter(c.software_name for c in clients)
    assert names["apache-kafka-java"] > 100 and names["confluent-kafka-python"] > 30
    groups = Counter((c.cluster, c.config.get("group.id")) for c in clients if c.client_type == "consumer")
    assert max(groups.values()) >= 3  # consumer groups have several members


def test_generator_seeds_every_misconfiguration_kind() -> None:
    clients = generate_clients(CLUSTERS, 600, seed=2)
    kinds = Counter(k for c in clients for k in c.misconfigs)
    assert set(kinds) == set(MISCONFIG_KINDS)
    share = sum(1 for c in clients if c.misconfigs) / len(clients)
    assert 0.05 < share < 0.35
    for c in clients:
        pushed = {e.key: e.value for e in c.collect().entries}
        if "idempotence_with_acks_1" in c.misconfigs:
            assert pushed["enable.idempotence"] == "true" and pushed["acks"] == "1"
        if "acks_zero" in c.misconfigs:
            assert pushed["acks"] == "0"
        if "retries_zero" in c.misconfigs:
            assert pushed["retries"] == "0"
        if "session_lt_3x_heartbeat" in c.misconfigs:
            assert int(pushed["session.timeout.ms"]) < 3 * int(pushed["heartbeat.interval.ms"])
        if "max_poll_records_extreme" in c.misconfigs:
            assert pushed["max.poll.records"] in ("1", "100000")
        if "old_client_on_4x" in c.misconfigs:
            assert CLUSTERS[c.cluster].startswith("4.")
            assert c.software_version.startswith(("2.", "3.0", "1."))
        if "missing_client_id" in c.misconfigs:
            assert c.client_id is None
    shared = [c for c in clients if c.client_id == SHARED_CLIENT_ID]
    assert len(shared) >= 3 and len({c.cluster for c in shared}) >= 2
    disagreeing = [c for c in clients if "group_session_disagreement" in c.misconfigs]
    for victim in disagreeing:
        peers = [c for c in clients if c.cluster == victim.cluster and c.config.get("group.id") == victim.config["group.id"]]
        assert len({p.config["session.timeout.ms"] for p in peers}) >= 2


def test_generator_gives_clusters_their_own_compression_drift() -> None:
    clients = generate_clients(CLUSTERS, 800, seed=5)

    def top(cluster: str) -> str:
        counts = Counter(c.config["compression.type"] for c in clients
                         if c.cluster == cluster and c.client_type == "producer")
        return counts.most_common(1)[0][0]

    assert top("eu") == "lz4" and top("us") == "zstd" and top("edge") == "snappy"


def test_heartbeat_is_pushed_only_through_the_allowed_keys_override() -> None:
    consumers = [c for c in generate_clients(CLUSTERS, 100, seed=8) if c.client_type == "consumer"]
    assert consumers
    for c in consumers:
        keys = [e.key for e in c.collect().entries]
        assert "heartbeat.interval.ms" in keys and "config.push.allowed.keys" not in keys
