"""Conditional commits on a local disk (and pyarrow's mock://): exactly one of two writers wins, the loser keeps nothing.

The same protocol on real S3-compatible servers: tests/integration/store/test_lake_on_s3.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from backend.store import progress, state
from backend.store.atomic import commit_json, read_json_versioned
from backend.store.commit import CommitConflict, CommitUnsupported, create, read_versioned, swap
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake
from backend.store.location import parse_lake
from backend.store.tables import read_table, replace_table, table_files, table_generation, update_table
from tests.unit.store.test_lake_v2 import START, Fleet


@pytest.fixture(autouse=True)
def _fresh_versions() -> None:
    progress.forget_versions()


def test_create_wins_once_and_swap_needs_the_version_read(tmp_path: Path) -> None:
    where = parse_lake(str(tmp_path))
    path = where.path("_state", "x", "m.json")
    first = create(where, path, b"one")
    with pytest.raises(CommitConflict, match="already exists"):
        create(where, path, b"two")
    assert read_versioned(where, path) == (b"one", first)
    second = swap(where, path, b"three", first)
    with pytest.raises(CommitConflict, match="changed by another writer"):
        swap(where, path, b"four", first)  # a stale version loses
    os.unlink(path)
    with pytest.raises(CommitConflict, match="gone"):
        swap(where, path, b"five", second)
    assert not os.path.exists(path)
    # nothing but the lock file beside it: no temp file of the losers
    assert sorted(os.listdir(os.path.dirname(path))) == [".m.json.lock"]


def _race(args: tuple[str, int, int]) -> list[int]:
    root, worker, rounds = args
    where = parse_lake(root)
    path = where.path("_state", "race", "state.json")
    won = []
    for _ in range(rounds):
        while True:
            value, version = read_json_versioned(where, path, {"generation": 0, "by": None})
            nxt = {"generation": value["generation"] + 1, "by": worker}
            try:
                commit_json(where, path, nxt, version)
            except CommitConflict:
                continue  # lost this generation: read the winner's and try the next one
            won.append(nxt["generation"])
            break
    return won


def test_processes_racing_on_one_manifest_commit_each_generation_exactly_once(tmp_path: Path) -> None:
    workers, rounds = 4, 25
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        results = pool.map(_race, [(str(tmp_path), w, rounds) for w in range(workers)])
    generations = sorted(g for won in results for g in won)
    assert generations == list(range(1, workers * rounds + 1))  # no generation twice, none skipped
    final = json.loads((tmp_path / "_state" / "race" / "state.json").read_text())
    assert final["generation"] == workers * rounds


def test_mock_filesystem_has_the_same_protocol_and_hdfs_is_refused() -> None:
    where = parse_lake("mock://commit-test")
    path = where.path("state.json")
    version = create(where, path, b"a")
    with pytest.raises(CommitConflict):
        create(where, path, b"b")
    swap(where, path, b"c", version)
    with pytest.raises(CommitConflict):
        swap(where, path, b"d", version)


def test_a_filesystem_without_conditional_writes_refuses_commits() -> None:
    from backend.store.commit import _memory

    where = parse_lake("mock://x")
    where = type(where)(where.text, where.fs, where.root, False, where.spark_uri, "hdfs")
    with pytest.raises(CommitUnsupported, match="conditional"):
        _memory(where)


def test_progress_saved_over_another_process_s_save_loses(tmp_path: Path) -> None:
    lake = str(tmp_path)
    assert progress.load_state(lake, "ingest", "sink-a") == {}
    progress.save_state(lake, "ingest", "sink-a", {"offset": 10})
    assert progress.load_state(lake, "ingest", "sink-a") == {"offset": 10}
    # another process moves it on behind this one's back
    other = parse_lake(lake)
    _, version = read_json_versioned(other, progress.state_path(other, "ingest", "sink-a"))
    commit_json(other, progress.state_path(other, "ingest", "sink-a"), {"offset": 20}, version)
    with pytest.raises(CommitConflict, match="second ingest"):
        progress.save_state(lake, "ingest", "sink-a", {"offset": 15})
    assert progress.load_state(lake, "ingest", "sink-a") == {"offset": 20}


def test_results_switch_reads_old_or_new_never_a_mix(tmp_path: Path) -> None:
    lake = str(tmp_path)
    name = "results/ingest_stats"
    (tmp_path / "results" / "ingest_stats").mkdir(parents=True)
    # a directory from before switches: read whole, then replaced by the first switch
    import pyarrow.parquet as pq

    from backend.store.config_schemas import arrow_schema

    schema = arrow_schema("ingest_stats")

    def rows(run: str, n: int) -> pa.Table:
        return pa.Table.from_pylist([{"run_id": run, "source": "sink", "location": "x", "metric": "m", "detail": "",
                                      "count": i, "ran_at": START, "schema_version": 1} for i in range(n)],
                                    schema=schema)

    pq.write_table(rows("legacy", 3), tmp_path / "results" / "ingest_stats" / "part-0.parquet")
    assert read_table(lake, name).num_rows == 3
    seen: set[tuple[str, int]] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            table = read_table(lake, name)
            runs = set(table.column("run_id").to_pylist())
            assert len(runs) == 1, runs  # one whole table at a time
            seen.add((runs.pop(), table.num_rows))

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(30):
        replace_table(lake, name, rows(f"r{i}", 5 + i % 3))
    stop.set()
    thread.join()
    assert table_generation(lake, name) == 30
    assert [Path(p).name for p in table_files(lake, name)][0].startswith("part-000000000030-")
    assert len([p for p in (tmp_path / "results" / "ingest_stats").iterdir() if p.suffix == ".parquet"]) == 1
    assert all(n == 5 + int(run[1:]) % 3 for run, n in seen if run != "legacy")
    # an older generation never replaces a newer one (a slow analyze run behind a faster one)
    assert replace_table(lake, name, rows("old", 1), generation=7) is None
    assert read_table(lake, name).column("run_id")[0].as_py() == "r29"


def test_concurrent_appends_to_a_switched_table_lose_nothing(tmp_path: Path) -> None:
    from backend.store.config_schemas import arrow_schema

    lake, name = str(tmp_path), "results/ingest_stats"
    schema = arrow_schema("ingest_stats")

    def add(run: str) -> None:
        row = pa.Table.from_pylist([{"run_id": run, "source": "sink", "location": "x", "metric": "m", "detail": "",
                                     "count": 1, "ran_at": START, "schema_version": 1}], schema=schema)
        update_table(lake, name, lambda current: pa.concat_tables([current, row]))

    threads = [threading.Thread(target=lambda i=i: [add(f"t{i}-{k}") for k in range(5)]) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(read_table(lake, name).column("run_id").to_pylist()) == sorted(
        f"t{i}-{k}" for i in range(4) for k in range(5))


def test_two_fleet_writers_from_one_generation_exactly_one_commits(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = Fleet()
    lake = Lake(tmp_path)
    FleetWriter(lake).write(fleet.poll(START))
    first, second = FleetWriter(Lake(tmp_path)), FleetWriter(Lake(tmp_path))  # both read generation 1
    fleet.topics["a"] = fleet.topics["a"][1:]  # a topic deleted: both polls change the state
    won = first.write(fleet.poll(START + timedelta(seconds=30)))
    assert won.changes > 0
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    # The race: the second writer looked at the manifest just before the first one committed.
    with monkeypatch.context() as patch:
        patch.setattr(second, "_follow_other_writer", lambda: None)
        with pytest.raises(state.StateConflict, match="another writer committed the fleet state first"):
            second.write(fleet.poll(START + timedelta(seconds=31)))
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert after == before  # the loser left nothing: no change rows, no state files, no status rows
    manifest = state.read_manifest(lake)
    assert manifest is not None and manifest["generation"] == 2
    # the loser reloaded the winner's state: its next poll commits on top of it, seeing no change
    again = second.write(fleet.poll(START + timedelta(seconds=60)))  # commits its open incidents' last_seen
    assert again.changes == 0 and state.read_manifest(lake)["generation"] == 3  # type: ignore[index]
    from backend.store import readers

    deleted = readers.changes(tmp_path, kinds="topic_deleted")
    assert len(deleted) == 1  # once, by the winner: nothing counted twice


def test_the_first_poll_of_a_day_checkpoints_the_committed_state_once(tmp_path: Path) -> None:
    fleet = Fleet()
    day2 = datetime(START.year, START.month, START.day, tzinfo=UTC) + timedelta(days=1, hours=1)
    a, b = FleetWriter(Lake(tmp_path)), FleetWriter(Lake(tmp_path))
    a.write(fleet.poll(START))
    b.write(fleet.poll(START + timedelta(seconds=5)))  # b follows a (nothing changed): no conflict, no new checkpoint
    a.write(fleet.poll(day2))
    b.write(fleet.poll(day2 + timedelta(seconds=5)))
    days = state.checkpoint_days(Lake(tmp_path))
    assert days == [START.date().isoformat(), day2.date().isoformat()]
    for day in days:
        files = sorted(p.name for p in (tmp_path / "_state" / "fleet" / "checkpoints" / day).iterdir())
        assert len([f for f in files if f.endswith(".parquet")]) == len(state.CHECKPOINTED)
