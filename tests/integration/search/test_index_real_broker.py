"""The search index against a real Apache Kafka 4.3.1 KRaft cluster, through the real poller and the CLI: a topic
deleted and recreated leaves the index with its new id, a deleted one leaves it, and the index survives the poller's
restart (the second run is a new process's poller: it goes on from the index, no rebuild)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from backend.collect.poller import run_poller
from backend.search.query import search
from backend.search.reader import IndexReader
from backend.search.store import read_manifest
from backend.store.lake import Lake
from tests.integration.collect.conftest import fleet_from, kafka4_toml, settings_toml
from tests.integration.collect.test_poller import (
    _broker_topic_ids,
    _create_topic,
    _delete_topic,
    _wait_every_broker_sees,
)
from tests.rig.kafka import KafkaKraftCluster
from tests.rig.procs import REPO

pytestmark = pytest.mark.timeout(300)


def _cli(lake: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backend", "search", *args, "--lake", str(lake)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)


def _json_hits(lake: Path, text: str) -> list[dict[str, Any]]:
    done = _cli(lake, text, "--kind", "topic", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_recreated_topic_leaves_the_index_with_its_new_id(kafka4: KafkaKraftCluster, tmp_path: Path) -> None:
    stamp = time.time_ns()
    recreated, deleted = f"search-recreated-{stamp}", f"search-deleted-{stamp}"
    for topic in (recreated, deleted):
        _create_topic(kafka4.bootstrap, topic)
    ids = _broker_topic_ids(kafka4.bootstrap, [recreated, deleted])
    for topic in (recreated, deleted):
        _wait_every_broker_sees(kafka4.bootstrap, topic, ids[topic])
    fleet = fleet_from(settings_toml() + kafka4_toml(kafka4), tmp_path)
    lake = tmp_path / "lake"
    run_poller(fleet, lake, once=True)
    first = read_manifest(Lake(lake).where, "fleet")
    assert first is not None
    snapshot = IndexReader(str(lake)).snapshot()
    assert snapshot.notes == ()  # the poller wrote the index
    assert [(h.cluster, h.name, h.id, h.state) for h in search(snapshot, recreated).hits] == [
        ("kafka4", recreated, ids[recreated], "current")]

    _delete_topic(kafka4.bootstrap, recreated)
    _create_topic(kafka4.bootstrap, recreated)
    _delete_topic(kafka4.bootstrap, deleted)
    new_id = _broker_topic_ids(kafka4.bootstrap, [recreated])[recreated]
    assert new_id != ids[recreated]
    _wait_every_broker_sees(kafka4.bootstrap, recreated, new_id)
    _wait_every_broker_sees(kafka4.bootstrap, deleted, None)
    run_poller(fleet, lake, once=True)  # a new poller, as after a restart: it goes on from the index it finds

    after = read_manifest(Lake(lake).where, "fleet")
    assert after is not None and after["built_at"] == first["built_at"]  # updated by a delta, not rebuilt
    assert after["deltas"] and after["tables"]["topic"]["delta_rows"]
    hits = _json_hits(lake, f"-{stamp}")  # the CLI over the lake the real poller wrote
    assert [(h["cluster"], h["name"], h["id"], h["state"], h["match"]) for h in hits] == [
        ("kafka4", recreated, new_id, "current", "substring"), ("kafka4", deleted, ids[deleted], "deleted", "substring"),
        ("kafka4", recreated, ids[recreated], "deleted", "substring")]
    snapshot = IndexReader(str(lake)).snapshot()
    by_old_id = search(snapshot, ids[recreated])
    assert [(h.name, h.field, h.state) for h in by_old_id.hits] == [(recreated, "topic_id", "deleted")]
    text = _cli(lake, recreated, "--current-only")
    assert text.returncode == 0 and new_id in text.stdout and ids[recreated] not in text.stdout
    assert text.stdout.strip().endswith("1 matches in 1 cluster (topic 1)")
