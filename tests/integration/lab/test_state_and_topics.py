"""Cluster and topic ids survive a lab restart; recreate gives a new id; lab admin create/delete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from backend.lab.fleet import LabFleet
from tests.integration.lab.conftest import make_config


def _ids(fleet: LabFleet) -> dict[str, tuple[str, dict[str, str]]]:
    return {n: (c.cluster_id, {t.name: t.topic_id for t in fleet.state.topics(n)}) for n, c in fleet.clusters.items()}


def _admin_topic_ids(bootstrap: str, names: list[str]) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    futures = admin.describe_topics(TopicCollection(names), request_timeout=10)
    return {n: str(f.result(timeout=15).topic_id) for n, f in futures.items()}


def test_ids_and_ports_persist_across_restart(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with LabFleet(config) as first:
        before = _ids(first)
        bootstraps = {n: c.bootstrap for n, c in first.clusters.items()}
    saved = json.loads(config.state_file.read_text())
    assert saved["clusters"]["k4"]["cluster_id"] == before["k4"][0]
    with LabFleet(make_config(tmp_path)) as second:
        assert _ids(second) == before
        assert {n: c.bootstrap for n, c in second.clusters.items()} == bootstraps  # remembered ports reused
        admin = AdminClient({"bootstrap.servers": second.clusters["k4"].bootstrap, "socket.timeout.ms": 5000})
        assert admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id == before["k4"][0]


def test_recreate_topic_gets_a_new_id_that_clients_see_and_that_persists(tmp_path: Path) -> None:
    with LabFleet(make_config(tmp_path)) as fleet:
        bootstrap = fleet.clusters["k4"].bootstrap
        old = _admin_topic_ids(bootstrap, ["orders"])["orders"]
        new_state = fleet.recreate_topic("k4", "orders")
        new = _admin_topic_ids(bootstrap, ["orders"])["orders"]
        assert new != old
        assert new_state.partitions == 6 and new_state.replication_factor == 3
        recreated_id = fleet.topic_id("k4", "orders")
    with LabFleet(make_config(tmp_path)) as again:
        assert again.topic_id("k4", "orders") == recreated_id


def test_create_and_delete_topics_are_lab_admin_operations(tmp_path: Path) -> None:
    with LabFleet(make_config(tmp_path)) as fleet:
        bootstrap = fleet.clusters["k43"].bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
        created = fleet.create_topic("k43", "fresh", partitions=4, replication_factor=2)
        md = admin.list_topics(timeout=10)
        assert len(md.topics["fresh"].partitions) == 4
        with pytest.raises(ValueError, match="already exists"):
            fleet.create_topic("k43", "fresh")
        with pytest.raises(ValueError, match="replication factor 3"):
            fleet.create_topic("k43", "too-wide", replication_factor=3)
        fleet.delete_topic("k43", "events")
        assert "events" not in admin.list_topics(timeout=10).topics
    with LabFleet(make_config(tmp_path)) as again:
        names = {t.name for t in again.state.topics("k43")}
        assert "events" not in names  # a deleted lab.toml topic stays deleted
        assert again.topic_id("k43", "fresh") == created.topic_id
