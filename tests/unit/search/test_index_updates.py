"""The index kept as the data arrives: every poll's write (the real FleetWriter) folded into deltas equals a rebuild from
the lake, costs what changed, survives restarts, is rebuilt when missing or behind, and compacts."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from backend.search import build, store
from backend.search.query import search
from backend.search.reader import IndexReader
from backend.search.tables import TABLES, tables_of
from backend.search.updates import FleetIndexer
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake
from backend.store.stats import read_stats
from tests.unit.search.fleet import START, cluster, configs, groups, inventory, poll, topics


def _rows(tables: dict[str, Any]) -> dict[str, set[tuple[Any, ...]]]:
    out = {}
    for spec in tables_of(part="fleet"):
        table = tables[spec.name]
        columns = spec.schema.names
        out[spec.name] = {tuple(r[c] for c in columns) for r in table.select(columns).to_pylist()}
    return out


def _indexed(lake: Path) -> dict[str, set[tuple[Any, ...]]]:
    snapshot = IndexReader(str(lake)).snapshot()  # a new reader: everything read back from the index files
    assert snapshot.notes == ()
    return _rows({name: t.live_rows() for name, t in snapshot.tables.items()})


def _rebuilt(lake: Path) -> dict[str, set[tuple[Any, ...]]]:
    return _rows(build.fleet_tables(Lake(lake))[0])


class Rig:
    """A lake written by the real FleetWriter, with the poller's indexer following each write."""

    def __init__(self, lake: Path) -> None:
        self.lake = lake
        self.writer = FleetWriter(Lake(lake))
        self.index = FleetIndexer(Lake(lake))
        self.at = START

    def write(self, *snapshots: Any) -> Any:
        self.at += timedelta(minutes=1)
        result = self.writer.write(poll(self.at, list(snapshots)))
        update = self.index.apply_write(result, now=self.at)
        assert update is not None
        return update


def _first(at: Any) -> list[Any]:
    c1 = dict(topics=topics("orders", "payments", "__consumer_offsets"),
              configs=configs(at, overrides={"orders": {"retention.ms": "1000", "cleanup.policy": "compact"},
                                             "payments": {"retention.ms": "5000"}}),
              groups=groups(at, {"billing": ["svc-a", "svc-a"], "audit": ["svc-b"]}),
              inventory=inventory(at, [("librdkafka", "2.6.0", 3)]))
    return [c1, dict(topics=topics("orders"))]


def test_every_write_folded_in_equals_a_rebuild_and_costs_what_changed(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig(tmp_path / "lake")
    assert rig.index.last.rebuilt  # a lake without an index: built (empty) at once
    c1, c2 = _first(rig.at)
    first = rig.write(cluster("c1", rig.at, "", **c1), cluster("c2", rig.at, "", **c2))
    assert not first.rebuilt and first.rows["topic"] == 4 + 2 and first.rows["config"] >= 8  # rows and a clear each
    assert _indexed(rig.lake) == _rebuilt(rig.lake)

    # Topics created, deleted and recreated; broker configs changed, an override gone with its topic; groups
    # created, deleted, their members and protocol changed; new client software; tags; brokers moved and replaced.
    at = rig.at + timedelta(minutes=1)
    c1_two = dict(topics=topics("orders", "events", "__consumer_offsets", ids={"orders": "id-orders-2"}),
                  configs=configs(at, retention="72", overrides={"orders": {"retention.ms": "1000"}}),
                  groups=groups(at, {"billing": ["svc-a", "svc-c"], "fraud": ["svc-f"]}, types={"billing": "consumer"}),
                  inventory=inventory(at, [("librdkafka", "2.6.0", 3), ("apache-kafka-java", "3.9.0", 1)]),
                  tags={"env": "staging"})
    from tests.unit.search.fleet import brokers

    second = rig.write(cluster("c1", at, "", **c1_two),
                       cluster("c2", at, "", topics=c2["topics"], brokers=brokers(1, 3, host="moved")))
    assert not second.rebuilt
    assert second.rows["topic"] == 1 + 2 + 2  # events; orders (+ its old id as a deleted row); payments (delete + row)
    assert _indexed(rig.lake) == _rebuilt(rig.lake)
    snapshot = IndexReader(str(rig.lake)).snapshot()
    orders = search(snapshot, "orders", kinds=["topic"], clusters=["c1"])
    assert [(h.id, h.state) for h in orders.hits] == [("id-orders-2", "current"), ("id-orders", "deleted")]
    gone = search(snapshot, "payments", kinds=["topic"])
    assert [(h.id, h.state) for h in gone.hits] == [("id-payments", "deleted")]  # it left the current index
    assert search(snapshot, "payments", kinds=["config"]).total == 0  # its overrides left with it
    assert {h.name for h in search(snapshot, "svc-", kinds=["client"]).hits} == {"svc-a", "svc-c", "svc-f"}
    assert search(snapshot, "staging", kinds=["cluster"]).hits[0].field == "tag"

    # An unchanged poll (the same objects) writes nothing to the index.
    last = rig.writer.write(poll(rig.at + timedelta(minutes=1), [cluster("c1", at, "", **c1_two)]))
    assert rig.index.apply_write(last).rows == {}  # type: ignore[union-attr]

    # A new cluster: its rows come from the state the write produced, in the same kind of delta.
    third = rig.write(cluster("c3", rig.at, "", topics=topics("orders", "logs")))
    assert third.rows["topic"] == 2 + 1  # and the clear of a segment it never had
    assert _indexed(rig.lake) == _rebuilt(rig.lake)

    # The compaction folds the deltas into the base files and changes no row.
    monkeypatch.setattr(store, "COMPACT_MIN_ROWS", 1)
    monkeypatch.setattr(store, "COMPACT_FRACTION", 0.0)
    fourth = rig.write(cluster("c3", rig.at, "", topics=topics("orders", "logs", "metrics")))
    assert fourth.compacted.get("topic") == 1  # one bucket
    manifest = store.read_manifest(Lake(rig.lake).where, "fleet")
    assert manifest is not None and manifest["deltas"] == [] and manifest["tables"]["topic"]["delta_rows"] == 0
    assert _indexed(rig.lake) == _rebuilt(rig.lake)


def test_an_update_reads_and_writes_what_changed_not_the_fleet(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "lake")
    at = rig.at
    many = topics(*(f"t{i:04d}" for i in range(2000)))
    rig.write(cluster("big", at, "", topics=many), cluster("other", at, "", topics=many))
    changed = [*many[:-1], *topics("brand-new")]
    with read_stats() as stats:
        update = rig.write(cluster("big", at, "", topics=changed), cluster("other", at, "", topics=many))
    assert update.rows == {"topic": 3, "config": 1}  # created; deleted and its deleted row; its overrides gone
    assert not any(name.startswith("search") for name in stats.by_table if name != "search/fleet/manifest")
    assert _indexed(rig.lake) == _rebuilt(rig.lake)


def test_restart_keeps_the_index_and_a_missing_or_stale_one_is_rebuilt(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "lake")
    c1, _ = _first(rig.at)
    rig.write(cluster("c1", rig.at, "", **c1))
    rig.index.close()
    again = FleetIndexer(Lake(rig.lake))
    assert not again.last.rebuilt  # it reflects the lake's state: kept as it is

    # A write the index never saw (a crash between the two commits): the next open rebuilds it.
    rig.writer.write(poll(rig.at + timedelta(minutes=5), [cluster("c1", rig.at, "", topics=topics("late"))]))
    behind = FleetIndexer(Lake(rig.lake))
    assert behind.last.rebuilt and "lake generation" in behind.last.reason
    assert _indexed(rig.lake) == _rebuilt(rig.lake)

    shutil.rmtree(rig.lake / "_state" / "search")
    missing = FleetIndexer(Lake(rig.lake))
    assert missing.last.rebuilt and missing.last.reason == "no index in the lake yet"
    assert _indexed(rig.lake) == _rebuilt(rig.lake)

    # A reader of a lake without an index builds it in memory and says so.
    shutil.rmtree(rig.lake / "_state" / "search")
    snapshot = IndexReader(str(rig.lake)).snapshot()
    assert "not in the lake yet" in snapshot.notes[0]
    assert search(snapshot, "late").hits[0].name == "late"


def test_a_second_writer_moving_the_index_on_is_followed(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "lake")
    rig.write(cluster("c1", rig.at, "", topics=topics("a")))
    # `poll --once` beside the service: its own writer and indexer write the next poll.
    other_writer, other_index = FleetWriter(Lake(rig.lake)), FleetIndexer(Lake(rig.lake))
    other_index.apply_write(other_writer.write(poll(rig.at + timedelta(seconds=30),
                                                    [cluster("c1", rig.at, "", topics=topics("a", "b"))])))
    update = rig.write(cluster("c1", rig.at, "", topics=topics("a", "b", "c")))
    assert update is not None
    assert _indexed(rig.lake) == _rebuilt(rig.lake)
    found = search(IndexReader(str(rig.lake)).snapshot(), "^[abc]$", mode="regex", kinds=["topic"])
    assert {h.name for h in found.hits} == {"a", "b", "c"}


def test_secret_config_values_are_never_indexed(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "lake")
    c1, _ = _first(rig.at)
    rig.write(cluster("c1", rig.at, "", **c1))
    for lake_tables in (build.fleet_tables(Lake(rig.lake))[0], {n: t.live_rows() for n, t in
                                                                IndexReader(str(rig.lake)).snapshot().tables.items()}):
        config = lake_tables["config"].to_pylist()
        secret = [r for r in config if r["config_name"] in ("ssl.key.password", "sasl.jaas.config")]
        assert secret and all(r["value"] is None for r in secret)
    snapshot = IndexReader(str(rig.lake)).snapshot()
    assert search(snapshot, "hunter2").total == 0
    assert search(snapshot, "PlainLoginModule").total == 0
    found = search(snapshot, "sasl.jaas", kinds=["config"])
    assert found.total == 2 and all(h.detail and "value not stored" in h.detail for h in found.hits)
    files = list((rig.lake / "_state" / "search").rglob("*.parquet"))
    assert files and not any(b"hunter2" in f.read_bytes() for f in files)


def test_every_table_has_the_common_columns() -> None:
    for spec in TABLES.values():
        assert spec.schema.names[:5] == ["cluster", "cluster_id", "key", "state", "at"]
        assert all(f.column in spec.schema.names for f in spec.fields)
