"""The lake on real S3-compatible servers (moto's and SeaweedFS, on loopback): conditional commits, the fleet lake
whole through compaction and retention, racing writers, results switches and progress files.

Every test runs on both servers (the `s3_server` fixture); each uses a bucket of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from backend.store import progress, readers, state
from backend.store.commit import CommitConflict, create, read_versioned, swap
from backend.store.config_schemas import arrow_schema
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake
from backend.store.location import parse_lake
from backend.store.model import TopicSnapshot
from backend.store.tables import read_table, replace_table, table_generation, update_table
from tests.rig.objectstores import S3Server
from tests.unit.store.test_lake_v2 import START, Fleet


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """The standard AWS variables pointing this process at the server (as a deployment would set them)."""
    for key in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    progress.forget_versions()
    yield s3_server


def test_conditional_writes_hold_on_the_server(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    where = parse_lake(f"s3://{bucket}/lake")
    path = where.path("_state", "m.json")
    first = create(where, path, b"one")
    with pytest.raises(CommitConflict, match="already exists"):
        create(where, path, b"two")
    second = swap(where, path, b"three", first)
    with pytest.raises(CommitConflict, match="changed by another writer"):
        swap(where, path, b"four", first)
    assert read_versioned(where, path) == (b"three", second)
    # If-Match on a missing key: AWS (moto) answers 404, SeaweedFS 412; both are a lost commit here.
    client = s3_env.client()
    try:
        client.put_object(Bucket=bucket, Key="lake/missing.json", Body=b"x", IfMatch=second)
        raise AssertionError("a conditional PUT on a missing key succeeded")
    except client.exceptions.ClientError as exc:
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        assert status == (404 if s3_env.name == "moto" else 412), exc.response
    with pytest.raises(CommitConflict, match="gone"):
        swap(where, where.path("missing.json"), b"x", second)

    # Eight writers create the same next generation at once: exactly one wins.
    wins: list[int] = []
    losses: list[int] = []
    barrier = threading.Barrier(8)

    def creator(i: int) -> None:
        barrier.wait()
        try:
            create(where, where.path("_state", "g000001.json"), f"writer {i}".encode())
            wins.append(i)
        except CommitConflict:
            losses.append(i)

    threads = [threading.Thread(target=creator, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(wins) == 1 and len(losses) == 7
    assert read_versioned(where, where.path("_state", "g000001.json"))[0] == f"writer {wins[0]}".encode()


def _frames(lake: str | Path) -> dict[str, pd.DataFrame]:
    state_now = readers.latest_fleet_state(lake, with_data=True)
    return {
        "clusters": state_now.clusters.drop(columns=["poll_id", "polled_at", "duration_ms"], errors="ignore"),
        "topics": state_now.topics[["cluster_name", "topic", "topic_id", "partitions"]],
        "changes": readers.changes(lake)[["cluster_name", "entity", "kind", "subject"]],
        "incidents": readers.incidents(lake)[["rule", "cluster_name", "subject", "status", "polls_seen"]],
        "history": readers.poll_history(lake)[["cluster_name", "status"]],
    }


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    def norm(frame: pd.DataFrame) -> list[tuple[object, ...]]:
        return sorted(map(tuple, frame.astype(str).to_numpy().tolist()))

    return list(a.columns) == list(b.columns) and norm(a) == norm(b)


def test_the_fleet_lake_on_s3_equals_the_same_polls_on_a_local_disk(s3_env: S3Server, tmp_path: Path) -> None:
    bucket = s3_env.new_bucket()
    uri = f"s3://{bucket}/fleet"
    on_s3, local = FleetWriter(Lake(uri)), FleetWriter(Lake(tmp_path))
    fleet = Fleet()
    at = START
    for i in range(12):
        at = START + timedelta(minutes=5 * i)
        if i == 4:
            fleet.topics["a"] = fleet.topics["a"][1:]  # a topic deleted
        if i == 8:
            fleet.topics["b"] = [*fleet.topics["b"], TopicSnapshot("new", "ID-new", partitions=1, replication_factor=3)]
        poll = fleet.poll(at)
        on_s3.write(poll)
        local.write(poll)
        for writer in (on_s3, local):
            writer.maintain(at, 30)  # compaction (every 10 min of polls) and retention, as the poller runs them
    on_s3.close(at)
    local.close(at)
    assert Lake(uri).compact("cluster_snapshots", now=at + timedelta(days=1))  # the day closed: one file
    Lake(tmp_path).compact("cluster_snapshots", now=at + timedelta(days=1))
    mine, theirs = _frames(uri), _frames(tmp_path)
    for name in mine:
        assert _same(mine[name], theirs[name]), name
    assert len(mine["history"]) == 24 and len(Lake(uri).files("cluster_snapshots")) == 1
    past = readers.fleet_state_at(uri, START + timedelta(minutes=17)).topics
    assert "t0" in set(past[past["cluster_name"] == "a"]["topic"])  # before its deletion, from the checkpoint
    # retention on S3: the day partitions older than the window go
    assert Lake(uri).apply_retention(1, today=(at + timedelta(days=3)).date())
    assert Lake(uri).days("cluster_snapshots") == []


def test_two_writers_on_s3_commit_each_generation_exactly_once(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    uri = f"s3://{bucket}/race"
    FleetWriter(Lake(uri)).write(Fleet().poll(START))
    committed: dict[str, list[int]] = {"x": [], "y": []}
    retiring: set[str] = set()
    conflicts: dict[str, int] = {"x": 0, "y": 0}
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        writer, fleet = FleetWriter(Lake(uri)), Fleet()
        barrier.wait()
        for i in range(12):
            # each writer sees its own topic list (as two pollers of one fleet a moment apart would): every poll
            # changes the state the other one committed
            fleet.topics["a"] = fleet.topics["a"][:40] + [
                TopicSnapshot(f"{name}{i}", f"ID-{name}{i}", partitions=1, replication_factor=3)]
            try:
                writer.write(fleet.poll(START + timedelta(minutes=1 + i)))
                committed[name].append(int(writer.manifest["generation"]))
            except state.StateConflict as exc:
                assert "another writer committed the fleet state first" in str(exc)
                conflicts[name] += 1
        retiring.update(writer.retiring)

    threads = [threading.Thread(target=run, args=(n,)) for n in committed]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    generations = sorted(committed["x"] + committed["y"])
    final = state.read_manifest(Lake(uri))
    assert final is not None and generations == list(range(2, int(final["generation"]) + 1))  # each exactly once
    assert len(generations) + sum(conflicts.values()) == 24 and sum(conflicts.values()) > 0
    # nothing a loser wrote is left: every state file in the bucket is one the committed manifest names, or one a
    # writer's last commit replaced (kept until its next write or close, for readers of the manifest before it)
    named = {f"race/_state/fleet/{path}" for entry in final["clusters"].values() for path in entry.values()}
    named.add(f"race/_state/fleet/{final['incidents_open']}")
    stored = {k for k in s3_env.keys(bucket, "race/_state/fleet/")
              if k.split("/")[3] in ("current", "open") and not k.endswith("/")}  # (pyarrow's directory markers)
    assert stored - named == {k for k in stored if k.removeprefix("race/_state/fleet/") in retiring}
    assert named <= stored
    # the change log holds each committed poll's changes once, and the lake reads whole
    changes = readers.changes(uri, kinds="topic_created")
    assert changes["poll_id"].nunique() == len(generations)
    latest = readers.latest_topics(uri, "a")
    assert len(latest) == 41


def _stats(run: str, n: int) -> pa.Table:
    return pa.Table.from_pylist([{"run_id": run, "source": "sink", "location": "x", "metric": "records_read",
                                  "detail": "", "count": i, "ran_at": START, "schema_version": 1} for i in range(n)],
                                schema=arrow_schema("ingest_stats"))


def test_switches_and_progress_on_s3(s3_env: S3Server) -> None:
    bucket = s3_env.new_bucket()
    uri = f"s3://{bucket}/lake"
    name = "results/ingest_stats"
    seen: list[set[str]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.append(set(read_table(uri, name).column("run_id").to_pylist()))

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(10):
        replace_table(uri, name, _stats(f"r{i}", 3))
    stop.set()
    thread.join()
    assert seen and all(len(runs) <= 1 for runs in seen)  # never two tables mixed
    assert table_generation(uri, name) == 10
    assert [k for k in s3_env.keys(bucket, "lake/results/ingest_stats/") if k.endswith(".parquet")] == [
        k for k in s3_env.keys(bucket, "lake/results/ingest_stats/part-000000000010-")]
    appenders = [threading.Thread(target=lambda i=i: update_table(
        uri, name, lambda t, i=i: pa.concat_tables([t, _stats(f"a{i}", 1)]))) for i in range(4)]
    for appender in appenders:
        appender.start()
    for appender in appenders:
        appender.join()
    assert {f"a{i}" for i in range(4)} <= set(read_table(uri, name).column("run_id").to_pylist())

    assert progress.load_state(uri, "ingest", "sink-x") == {}
    progress.save_state(uri, "ingest", "sink-x", {"offset": 1})
    other = parse_lake(uri)
    path = progress.state_path(other, "ingest", "sink-x")
    swap(other, path, b'{"offset": 2}', read_versioned(other, path)[1])
    with pytest.raises(CommitConflict, match="second ingest"):
        progress.save_state(uri, "ingest", "sink-x", {"offset": 3})
