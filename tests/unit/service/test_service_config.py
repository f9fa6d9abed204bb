"""The fleet file's [service] and [[client_configs]] tables: valid entries parse, bad ones name the entry and key."""

from __future__ import annotations

import pytest

from backend.config import FleetConfigError, parse_fleet

CLUSTER = '[[clusters]]\nname = "prod"\nbootstrap_servers = ["k1:9092"]\n'


def test_service_and_sources_parse_with_defaults() -> None:
    fleet = parse_fleet(
        "[service]\nui_port = 8600\nanalyze_interval_s = 120\n\n"
        '[[client_configs]]\nsink = "/var/lib/push-sink"\n\n'
        '[[client_configs]]\nname = "audit"\ntopic = "__client_configs"\ncluster = "prod"\ninterval_s = 30\n\n'
        '[[client_configs]]\njava_log = "/var/log/apps/*.log"\ncluster_id = "abc"\n\n'
        '[[client_configs]]\nproperties = "/etc/clients"\n\n' + CLUSTER, source="f.toml")
    assert fleet.service.ui_port == 8600 and fleet.service.analyze_interval_s == 120
    assert fleet.service.full_analyze_interval_s == 86_400 and fleet.service.metrics_port == 9308
    kinds = [(s.kind, s.label, s.interval_s) for s in fleet.client_configs]
    assert kinds == [("sink", "sink:/var/lib/push-sink", 60.0), ("topic", "audit", 30.0),
                     ("java_log", "java_log:/var/log/apps/*.log", 60.0), ("properties", "properties:/etc/clients", 60.0)]
    assert parse_fleet(CLUSTER).client_configs == []


@pytest.mark.parametrize(("entry", "problem"), [
    ('sink = "/a"\ntopic = "t"\ncluster = "prod"', "exactly one of sink, topic, java_log, properties (got sink, topic)"),
    ('interval_s = 5', "exactly one of sink"),
    ('topic = "t"', "topic needs cluster"),
    ('sink = "/a"\ncluster = "prod"', "apply to a topic source only"),
    ('properties = "/p"\ncluster_id = "x"', "cluster_id applies to a java_log source only"),
    ('sink = "/a"\ninterval_s = 0', "greater than 0"),
    ('sink = "/a"\nname = "bad name"', "name may hold"),
    ('sink = "/a"\npasword = "x"', "key 'pasword': unknown key"),
])
def test_a_bad_source_names_its_entry_and_line(entry: str, problem: str) -> None:
    text = '[[client_configs]]\nsink = "/ok"\n\n[[client_configs]]\n' + entry + "\n\n" + CLUSTER
    with pytest.raises(FleetConfigError) as raised:
        parse_fleet(text, source="f.toml")
    message = str(raised.value)
    assert message.startswith("f.toml:4: client_configs #2") and problem in message, message


def test_a_topic_source_names_an_existing_cluster_and_labels_are_unique() -> None:
    with pytest.raises(FleetConfigError, match=r"f.toml:1: client_configs #1: key 'cluster': no \[\[clusters\]\] entry is named 'nope'"):
        parse_fleet('[[client_configs]]\ntopic = "t"\ncluster = "nope"\n\n' + CLUSTER, source="f.toml")
    with pytest.raises(FleetConfigError, match="'sink:/a' is used by client_configs #1 too"):
        parse_fleet('[[client_configs]]\nsink = "/a"\n\n[[client_configs]]\nsink = "/a"\n\n' + CLUSTER, source="f.toml")


def test_service_bounds() -> None:
    for bad in ("ui_port = 70000", "stop_timeout_s = 15", "analyze_max_rss_mb = 10", "analyze_interval_s = -1",
                "full_analyze_interval_s = inf", "unknown = 1"):
        with pytest.raises(FleetConfigError, match="key '"):
            parse_fleet(f"[service]\n{bad}\n\n" + CLUSTER, source="f.toml")
