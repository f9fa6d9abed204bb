"""Lake writes, reads, atomicity and retention against real Parquet files in a tmp dir."""

from __future__ import annotations

import os
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from backend.store import readers
from backend.store.lake import Lake, LakeError, new_poll_id, poll_id_time
from backend.store.schemas import SCHEMA_VERSION, SCHEMAS, TABLES


def _cluster_row(poll_id: str, name: str, status: str = "ok", **extra: object) -> dict:
    return {
        "poll_id": poll_id,
        "polled_at": poll_id_time(poll_id),
        "cluster_name": name,
        "status": status,
        **extra,
    }


def test_poll_id_sorts_by_time_and_round_trips() -> None:
    t0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    first, second = new_poll_id(t0), new_poll_id(t0 + timedelta(microseconds=1))
    assert first < second
    assert poll_id_time(first) == t0


def test_write_is_partitioned_by_day_with_schema_version(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    pid = new_poll_id(datetime(2026, 3, 4, 12, 0, tzinfo=UTC))
    path = lake.write("cluster_snapshots", [_cluster_row(pid, "a", cluster_id="X1")], poll_id=pid)
    assert path is not None
    assert Path(path).parent.name == "date=2026-03-04"
    table = pq.ParquetFile(path).read()
    assert table.schema.equals(SCHEMAS["cluster_snapshots"])
    assert table.column("schema_version").to_pylist() == [SCHEMA_VERSION]
    assert table.column("cluster_id").to_pylist() == ["X1"]
    assert not [p for p in Path(path).parent.iterdir() if p.name.startswith(".")]


def test_zero_rows_write_nothing(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    assert lake.write("topic_snapshots", [], poll_id=new_poll_id()) is None
    assert not (tmp_path / "topic_snapshots").exists()


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"poll_id": "p", "bogus": 1}], "unknown columns"),
        ([{"cluster_name": "a", "broker_count": "many"}], "do not fit"),
    ],
)
def test_bad_rows_raise_clear_error_and_write_nothing(tmp_path: Path, rows: list, message: str) -> None:
    lake = Lake(tmp_path)
    with pytest.raises(LakeError, match=message):
        lake.write("cluster_snapshots", rows, poll_id=new_poll_id())
    assert list(tmp_path.rglob("*")) == []


def test_bad_poll_id_and_table_are_rejected(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    with pytest.raises(LakeError, match="bad poll id"):
        lake.write("cluster_snapshots", [{"cluster_name": "a"}], poll_id="../../etc")
    with pytest.raises(KeyError, match="unknown lake table"):
        lake.write("nope", [{"cluster_name": "a"}], poll_id=new_poll_id())


def test_readers_on_missing_and_empty_lake_return_typed_empty_frames(
    tmp_path: Path,
) -> None:
    for location in (tmp_path / "missing", tmp_path):
        state = readers.latest_fleet_state(location)
        assert list(state.clusters.columns) == SCHEMAS["cluster_snapshots"].names
        # v2 adds columns after the v1 ones (state_poll_id; the incident columns of alerts).
        assert list(state.brokers.columns) == SCHEMAS["broker_snapshots"].names + ["state_poll_id"]
        assert list(state.topics.columns) == SCHEMAS["topic_snapshots"].names + ["state_poll_id"]
        assert state.clusters.empty and state.topics.empty
        assert list(readers.alerts(location).columns) == SCHEMAS["fleet_alerts"].names + readers.ALERT_EXTRA_COLUMNS
        assert readers.incidents(location).empty and readers.changes(location).empty
        assert list(readers.version_timeline(location).columns) == readers.VERSION_TIMELINE_COLUMNS
        assert list(readers.topic_id_changes(location).columns) == readers.TOPIC_ID_CHANGE_COLUMNS
        assert readers.poll_history(location).empty
        assert readers.latest_poll_id(location) is None


def test_temp_files_are_invisible_to_readers(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    day_dir = tmp_path / "cluster_snapshots" / "date=2026-01-01"
    day_dir.mkdir(parents=True)
    (day_dir / ".tmp-half.parquet").write_bytes(b"PAR1 half written")
    assert lake.files("cluster_snapshots") == []
    assert readers.latest_clusters(tmp_path).empty


def test_latest_state_picks_each_clusters_newest_poll(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    polls = [new_poll_id(t0 + timedelta(seconds=i)) for i in range(3)]
    for i, pid in enumerate(polls):
        clusters = [_cluster_row(pid, "a", topic_count=i)]
        topics = [
            {
                "poll_id": pid,
                "polled_at": poll_id_time(pid),
                "cluster_name": "a",
                "topic": f"t{i}",
            }
        ]
        if i < 2:  # cluster b disappears from the config after poll 1
            clusters.append(_cluster_row(pid, "b", topic_count=10 + i))
            topics.append(
                {
                    "poll_id": pid,
                    "polled_at": poll_id_time(pid),
                    "cluster_name": "b",
                    "topic": f"b{i}",
                }
            )
        lake.write("cluster_snapshots", clusters, poll_id=pid)
        lake.write("topic_snapshots", topics, poll_id=pid)
    state = readers.latest_fleet_state(tmp_path)
    assert dict(zip(state.clusters.cluster_name, state.clusters.poll_id, strict=True)) == {
        "a": polls[2],
        "b": polls[1],
    }
    assert sorted(state.topics.topic) == ["b1", "t2"]
    assert list(readers.latest_topics(tmp_path, "b").topic) == ["b1"]
    assert readers.latest_poll_id(tmp_path) == polls[2]


def test_with_data_skips_polls_where_the_cluster_was_down(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    good, down = new_poll_id(t0), new_poll_id(t0 + timedelta(seconds=30))
    lake.write("cluster_snapshots", [_cluster_row(good, "a")], poll_id=good)
    lake.write(
        "topic_snapshots",
        [
            {
                "poll_id": good,
                "polled_at": poll_id_time(good),
                "cluster_name": "a",
                "topic": "t",
            }
        ],
        poll_id=good,
    )
    lake.write("cluster_snapshots", [_cluster_row(down, "a", status="down")], poll_id=down)
    assert readers.latest_fleet_state(tmp_path).clusters.status.tolist() == ["down"]
    assert readers.latest_fleet_state(tmp_path).topics.empty
    last_good = readers.latest_fleet_state(tmp_path, with_data=True)
    assert last_good.clusters.poll_id.tolist() == [good]
    assert last_good.topics.topic.tolist() == ["t"]


def test_version_timeline_lists_first_sighting_and_changes_only(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    versions = [
        "3.9.0",
        "3.9.0",
        None,
        "4.0.0",
    ]  # None: broker unreachable in that poll
    for i, version in enumerate(versions):
        pid = new_poll_id(t0 + timedelta(seconds=i))
        row = {
            "poll_id": pid,
            "polled_at": poll_id_time(pid),
            "cluster_name": "a",
            "broker_id": 1,
            "reachable": version is not None,
            "software_name": "Kafka" if version else None,
            "software_version": version,
            "version_provenance": "reported" if version else "unknown",
        }
        lake.write("broker_snapshots", [row], poll_id=pid)
    timeline = readers.version_timeline(tmp_path, "a")
    assert timeline.change.tolist() == ["first_seen", "changed"]
    assert timeline.software_version.tolist() == ["3.9.0", "4.0.0"]
    assert timeline.previous_software_version.tolist()[1] == "3.9.0"
    assert readers.version_timeline(tmp_path, "other").empty


def test_topic_id_changes_pairs_old_and_new_ids(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    t0 = datetime.now(UTC) - timedelta(minutes=5)
    ids = ["id-A", "id-A", "id-B", "id-C"]
    for i, topic_id in enumerate(ids):
        pid = new_poll_id(t0 + timedelta(seconds=i))
        rows = [
            {
                "poll_id": pid,
                "polled_at": poll_id_time(pid),
                "cluster_name": "a",
                "topic": "t",
                "topic_id": topic_id,
            },
            {
                "poll_id": pid,
                "polled_at": poll_id_time(pid),
                "cluster_name": "a",
                "topic": "stable",
                "topic_id": "id-S",
            },
        ]
        lake.write("topic_snapshots", rows, poll_id=pid)
    changes = readers.topic_id_changes(tmp_path)
    assert list(zip(changes.old_topic_id, changes.new_topic_id, strict=True)) == [
        ("id-A", "id-B"),
        ("id-B", "id-C"),
    ]
    assert (changes.topic == "t").all()
    assert (changes.old_last_seen < changes.new_first_seen).all()


def test_alert_filters(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    pid = new_poll_id()
    at = poll_id_time(pid)
    rows = [
        {
            "alert_id": "1",
            "raised_at": at,
            "poll_id": pid,
            "rule": "topic_created",
            "severity": "info",
            "cluster_name": "a",
            "subject": "t",
        },
        {
            "alert_id": "2",
            "raised_at": at,
            "poll_id": pid,
            "rule": "broker_missing",
            "severity": "critical",
            "cluster_name": "b",
            "subject": "broker 1",
        },
    ]
    lake.write("fleet_alerts", rows, poll_id=pid)
    assert readers.alerts(tmp_path, severity="critical").alert_id.tolist() == ["2"]
    assert readers.alerts(tmp_path, cluster_name=["a"]).alert_id.tolist() == ["1"]
    assert readers.alerts(tmp_path, rule="nope").empty
    assert len(readers.alerts(tmp_path, since=at - timedelta(seconds=1))) == 2
    assert readers.alerts(tmp_path, since=at + timedelta(seconds=1)).empty


def test_retention_deletes_only_old_day_partitions(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    today = date(2026, 5, 10)
    for days_ago in (0, 2, 3, 10):
        at = datetime(today.year, today.month, today.day, 12, tzinfo=UTC) - timedelta(days=days_ago)
        pid = new_poll_id(at)
        lake.write("cluster_snapshots", [_cluster_row(pid, "a")], poll_id=pid)
    stale = tmp_path / "cluster_snapshots" / "date=2026-05-10" / ".tmp-stale.parquet"
    stale.write_bytes(b"x")
    os.utime(stale, (0, 0))
    deleted = lake.apply_retention(3, today=today)
    assert lake.days("cluster_snapshots") == ["2026-05-08", "2026-05-10"]
    assert any(p.endswith("date=2026-04-30") for p in deleted)
    assert not stale.exists()
    with pytest.raises(LakeError):
        lake.apply_retention(0)


def test_reader_never_sees_a_partial_file_while_writer_runs(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    stop = threading.Event()
    errors: list[BaseException] = []
    rows_per_poll = 5000

    def writer() -> None:
        try:
            while not stop.is_set():
                pid = new_poll_id()
                at = poll_id_time(pid)
                rows = [
                    {
                        "poll_id": pid,
                        "polled_at": at,
                        "cluster_name": "a",
                        "topic": f"t{i}",
                        "topic_id": f"id{i}",
                        "partitions": 3,
                    }
                    for i in range(rows_per_poll)
                ]
                lake.write("topic_snapshots", rows, poll_id=pid)
                lake.write("cluster_snapshots", [_cluster_row(pid, "a")], poll_id=pid)
        except (OSError, ValueError) as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=3)
        while datetime.now(UTC) < deadline:
            table = lake.read("topic_snapshots")
            assert table.num_rows % rows_per_poll == 0
            topics = readers.latest_topics(tmp_path)
            assert len(topics) in (0, rows_per_poll)
            reads += 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors
    assert reads > 0
    assert len(lake.files("topic_snapshots")) >= 1


def test_every_table_has_schema_version() -> None:
    for table in TABLES:
        assert "schema_version" in SCHEMAS[table].names


def test_non_local_filesystem_uri_round_trips_and_retains() -> None:
    # pyarrow's in-memory filesystem stands in for s3:// or hdfs://: the same non-local code path.
    lake = Lake("mock:///lake")
    assert not lake.local
    old = new_poll_id(datetime(2026, 1, 1, tzinfo=UTC))
    new = new_poll_id(datetime(2026, 1, 10, tzinfo=UTC))
    for pid in (old, new):
        lake.write("cluster_snapshots", [_cluster_row(pid, "a", cluster_id=pid[-4:])], poll_id=pid)
    latest = readers.latest_clusters(lake)
    assert latest.poll_id.tolist() == [new]
    assert lake.apply_retention(3, today=date(2026, 1, 10)) == ["lake/cluster_snapshots/date=2026-01-01"]
    assert lake.days("cluster_snapshots") == ["2026-01-10"]
