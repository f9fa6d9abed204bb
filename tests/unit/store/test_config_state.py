"""Broker configs and topic overrides in the lake: current state per cluster plus a change log, read at O(fleet + changes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from backend.store import config_readers, readers
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import (
    BrokerSnapshot,
    ClusterSnapshot,
    ConfigSnapshot,
    ConfigValue,
    FleetPoll,
    TopicSnapshot,
)
from backend.store.stats import read_stats

START = datetime(2026, 2, 1, tzinfo=UTC)
TOPICS = [TopicSnapshot("orders", "id-o", partitions=3, replication_factor=3),
          TopicSnapshot("payments", "id-p", partitions=3, replication_factor=3)]


def configs(at: datetime, *, retention: str = "168", threads: str = "1", mir: str | None = "2",
            brokers: tuple[int, ...] = (1, 2, 3)) -> ConfigSnapshot:
    """A configuration of three brokers with 40 configs each and one topic override."""
    by_broker = {}
    for b in brokers:
        entries = {f"filler.{i:02d}": ConfigValue(str(i), "DEFAULT_CONFIG", True) for i in range(37)}
        entries["log.retention.hours"] = ConfigValue(retention, "STATIC_BROKER_CONFIG", True, False, "INT")
        entries["log.cleaner.threads"] = ConfigValue(threads, "DEFAULT_CONFIG" if threads == "1" else
                                                     "DYNAMIC_BROKER_CONFIG", False, False, "INT")
        entries["ssl.key.password"] = ConfigValue(None, "DEFAULT_CONFIG", False, True, "PASSWORD", "sensitive")
        by_broker[b] = entries
    topics = {"orders": {"min.insync.replicas": ConfigValue(mir, "DYNAMIC_TOPIC_CONFIG", False, False, "INT")}} \
        if mir is not None else {}
    return ConfigSnapshot(collected_at=at, brokers=by_broker, topics=topics, version=4)


def poll(at: datetime, cfg: ConfigSnapshot | None, names: tuple[str, ...] = ("c1",),
         topics: list[TopicSnapshot] = TOPICS) -> FleetPoll:
    poll_id = new_poll_id(at)
    when = poll_id_time(poll_id)
    snaps = [ClusterSnapshot(n, "ok", when, poll_id, cluster_id=f"CID-{n}", controller_id=1,
                             brokers=[BrokerSnapshot(b, "h", 9092, reachable=True) for b in (1, 2, 3)],
                             topics=topics, configs=cfg) for n in names]
    return FleetPoll(poll_id, when, snaps, [], 1.0)


def _config_changes(lake: Lake) -> list[tuple[str, str, str]]:
    frame = readers.changes(lake, entity="config")
    return list(zip(frame["cluster_name"], frame["kind"], frame["subject"], strict=True))


def test_first_collection_is_one_change_and_the_state_reads_back(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    cfg = configs(START)
    writer.write(poll(START, cfg))
    assert _config_changes(lake) == [("c1", "configs_first_seen", "c1")]
    after = json.loads(readers.changes(lake, entity="config")["after_json"].iloc[0])
    assert after == {"brokers": [1, 2, 3], "broker_configs": 120, "topics_with_overrides": 1, "topic_overrides": 1}
    stored = config_readers.latest_configs(lake, ["c1"])
    assert len(stored) == 121
    password = stored[stored["config_name"] == "ssl.key.password"]
    assert password["value"].isna().all() and set(password["withheld"]) == {"sensitive"}
    assert FleetWriter(lake).configs["c1"] == cfg  # a restart's baseline is what was written
    assert config_readers.load_configs(lake)["c1"].brokers == cfg.brokers


def test_changes_per_config_with_before_and_after_and_source(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    writer.write(poll(START, configs(START)))
    t1 = START + timedelta(minutes=10)
    changed = configs(t1, threads="4", mir="1")
    changed.brokers[2]["log.retention.hours"] = ConfigValue("72", "STATIC_BROKER_CONFIG", True, False, "INT")
    result = writer.write(poll(t1, changed))
    assert result.changes == 1 + 3 + 1  # broker 2's retention, 3 brokers' cleaner threads, the topic override
    frame = readers.changes(lake, entity="config")
    latest = frame[frame["seen_at"] > START]
    assert sorted(zip(latest["kind"], latest["subject"], strict=True)) == [
        ("config_changed", "broker 1: log.cleaner.threads"), ("config_changed", "broker 2: log.cleaner.threads"),
        ("config_changed", "broker 2: log.retention.hours"), ("config_changed", "broker 3: log.cleaner.threads"),
        ("config_changed", "topic orders: min.insync.replicas")]
    row = latest[latest["subject"] == "broker 1: log.cleaner.threads"].iloc[0]
    assert json.loads(row["before_json"])["source"] == "DEFAULT_CONFIG"
    assert (json.loads(row["after_json"])["value"], json.loads(row["after_json"])["source"]) == (
        "4", "DYNAMIC_BROKER_CONFIG")
    t2 = t1 + timedelta(minutes=10)
    writer.write(poll(t2, configs(t2, threads="4", mir=None, brokers=(1, 3))))
    last = readers.changes(lake, entity="config", since=t2)
    assert sorted(zip(last["kind"], last["subject"], strict=True)) == [
        ("broker_configs_gone", "broker 2"), ("config_removed", "topic orders: min.insync.replicas")]


def test_the_overrides_of_a_deleted_topic_leave_without_a_config_change(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    writer.write(poll(START, configs(START)))
    t1 = START + timedelta(minutes=10)
    writer.write(poll(t1, configs(t1, mir=None), topics=[TOPICS[1]]))  # orders deleted
    assert not readers.changes(lake, entity="config", since=t1).shape[0]
    assert config_readers.latest_configs(lake, ["c1"], resource_type="topic").empty


def test_an_unchanged_configuration_writes_nothing_and_a_new_read_only_its_run(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    cfg = configs(START)
    writer.write(poll(START, cfg))
    same_object = writer.write(poll(START + timedelta(seconds=30), cfg))
    assert same_object.changes == 0 and same_object.clusters_rewritten == []
    reread = configs(START + timedelta(minutes=10))  # equal content, new collection
    result = writer.write(poll(START + timedelta(minutes=10), reread))
    assert result.changes == 0 and result.clusters_rewritten == ["c1"]
    manifest = writer.manifest["clusters"]["c1"]
    runs = config_readers.config_runs(lake, ["c1"])
    assert runs["collected_at"].iloc[0] == START + timedelta(minutes=10)
    assert f"-{1:012d}-" in manifest["configs"]  # configs written once, by the first poll (generation 1)


def test_a_cluster_without_a_collection_keeps_its_stored_configuration(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    writer.write(poll(START, configs(START)))
    writer.write(poll(START + timedelta(seconds=30), None))
    assert len(config_readers.latest_configs(lake, ["c1"])) == 121
    assert _config_changes(lake) == [("c1", "configs_first_seen", "c1")]


@pytest.mark.parametrize("polls", [100, 600])
def test_readers_cost_the_fleet_and_the_changes_not_the_polls(tmp_path: Path, polls: int) -> None:
    """Many polls, a collection every 20 polls, a change every 40: the config readers open the same files."""
    lake = Lake(tmp_path)
    writer = FleetWriter(lake)
    names = ("c1", "c2", "c3")
    cfg = configs(START)
    for i in range(polls):
        at = START + timedelta(seconds=30 * i)
        if i % 20 == 0:
            cfg = configs(at, threads=str(1 + (i // 40) % 2 * 3))
        writer.write(poll(at, cfg, names))
        writer.maintain(at, 30)
    writer.close(START + timedelta(seconds=30 * polls))
    with read_stats() as one:
        mine = config_readers.latest_configs(lake, ["c2"])
    with read_stats() as all_runs:
        runs = config_readers.config_runs(lake)
    with read_stats() as log:
        changes = readers.changes(lake, "c2", entity="config")
    assert len(mine) == 121 and len(runs) == 3
    # One state file for the cluster asked (plus the manifest), one per cluster for the runs.
    assert one.by_table["state/configs"] == [1, 121]
    assert all_runs.by_table["state/config_runs"] == [3, 3]
    toggles = len(range(40, polls, 40))  # the cleaner threads flip every 40 polls
    assert len(changes) == 1 + 3 * toggles  # first sight, then 3 brokers per toggle
    assert log.rows_read <= 3 * len(changes)  # the change rows of the window, not the polls


def test_an_older_read_never_replaces_a_newer_one_another_writer_stored(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    first, other = FleetWriter(lake), FleetWriter(lake)
    old_read = configs(START)
    first.write(poll(START, old_read))
    newer = configs(START + timedelta(minutes=5), threads="4")
    other.write(poll(START + timedelta(minutes=5), newer))  # e.g. a `poll --once` job
    first.write(poll(START + timedelta(minutes=6), old_read))  # the long-running poller still holds the old read
    runs = config_readers.config_runs(lake, ["c1"])
    assert runs["collected_at"].iloc[0] == START + timedelta(minutes=5)
    stored = config_readers.latest_configs(lake, ["c1"])
    assert set(stored.loc[stored["config_name"] == "log.cleaner.threads", "value"]) == {"4"}
