"""Consumer groups over a month: 30 days of 60 s group reads through the real write path; pages at 30 days against
the same pages at 1 hour, and lake rows written per read.

Run: .venv/bin/python -m benchmarks.group_time_bench [--days 30] [--clusters 3] [--groups 300] [--active 30]
     [--interval 60] [--repeats 3]

Simulated clock, synthetic polls (no network), each carrying a GroupSnapshot per cluster built the way the collector
builds them (backend.collect.groups.build_snapshot from a synthetic read), so windows, since-when columns and
statuses evolve as in the product; then `run_checks` (the group rules with the others), `FleetWriter.write` and
`FleetWriter.maintain` as the poller runs them. Per cluster `--groups` groups of 3 partitions, `--active` of them
consuming (their offsets move every read), the rest idle. Churn: every hour one group is created and one deleted on
one cluster and one member joins or leaves somewhere; every 6 hours one group falls behind for 30 minutes (lagging,
then stalled: two incidents opened and resolved); once a day a group goes empty for an hour.

At 1 hour the lake is copied aside; at the end the Consumer groups page (list, and one group's detail) and the
Cluster page are rendered through dashboard/app.py (Streamlit AppTest, server-side time) on both lakes, interleaved,
`--repeats` times each. Also printed: lake rows written per read (state rows rewritten + change rows, p50/p99/max),
files per table, and the readers' files and rows (`read_stats`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.collect.checks import run_checks
from backend.collect.groups import build_snapshot
from backend.config import Settings
from backend.kafka import groups as kg
from backend.store import group_readers, readers
from backend.store.fleet_writer import FleetWriter
from backend.store.group_model import GroupSnapshot
from backend.store.lake import Lake, new_poll_id
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot
from backend.store.stats import read_stats

APP = Path(__file__).resolve().parents[1] / "dashboard" / "app.py"


class Fleet:
    """The synthetic fleet's groups and how they move."""

    def __init__(self, clusters: int, groups: int, active: int) -> None:
        self.names = [f"cluster-{c:02d}" for c in range(clusters)]
        self.groups = {n: [f"svc-{g:04d}" for g in range(groups)] for n in self.names}
        self.active = active
        self.committed: dict[tuple[str, str, int], int] = {}
        self.members: dict[tuple[str, str], int] = {}
        self.behind: dict[tuple[str, str], int] = {}  # groups not consuming (lagging/stalled) until a poll index
        self.empty: dict[tuple[str, str], int] = {}
        self.created = 0

    def read(self, cluster: str, i: int) -> kg.GroupsRead:
        """The read of one cluster at poll i (records keep coming: 10 per second per active partition)."""
        read = kg.GroupsRead(listed=len(self.groups[cluster]), brokers_answered=3)
        for n, gid in enumerate(self.groups[cluster]):
            active = n < self.active
            stuck = self.behind.get((cluster, gid), -1) > i
            empty = self.empty.get((cluster, gid), -1) > i
            members = 0 if empty else self.members.setdefault((cluster, gid), 2)
            topic = f"t-{gid}"  # each group reads its own topic (an idle group's topic gets no records)
            group = kg.Group(gid, coordinator=1 + n % 3, protocol_type="consumer", state="Empty" if empty else "Stable",
                             group_type="consumer" if n % 4 == 0 else "classic", protocol="range", described=True,
                             members=tuple(kg.Member(f"{gid}-m{k}", f"{gid}-client-{k}", f"/10.0.{k}.1",
                                                     assignment=tuple((topic, p) for p in range(3) if p % members == k))
                                           for k in range(members)))
            read.groups[gid] = group
            offsets = {}
            for p in range(3):
                key = (cluster, gid, p)
                end = 1_000 + (600 * i if active else 0)
                if active and not stuck and not empty:
                    self.committed[key] = end
                offsets[(topic, p)] = self.committed.setdefault(key, end)
                read.end_offsets[(topic, p)] = end
            read.committed[gid] = offsets
            read.topic_ids[topic] = "topicIdAAAAAAAAAAAAAAAA"
        return read

    def churn(self, i: int, polls_per_hour: int) -> None:
        """Hourly, six-hourly and daily changes."""
        cluster = self.names[(i // polls_per_hour) % len(self.names)]
        if i % polls_per_hour == polls_per_hour // 2:
            self.created += 1
            self.groups[cluster].append(f"new-{self.created:05d}")
            self.groups[cluster].pop(self.active)  # an idle one is deleted
            key = (cluster, self.groups[cluster][1])
            self.members[key] = 3 if self.members.get(key, 2) == 2 else 2
        if i % (6 * polls_per_hour) == 0 and i:
            self.behind[(cluster, self.groups[cluster][0])] = i + polls_per_hour // 2
        if i % (24 * polls_per_hour) == 0 and i:
            self.empty[(cluster, self.groups[cluster][2])] = i + polls_per_hour


def _rows_written(result_tables: dict[str, Any]) -> int:
    return sum(t.num_rows for t in result_tables.values())


def _render(lake: Path, page: str, query: dict[str, str] | None = None) -> float:
    from streamlit.testing.v1 import AppTest

    os.environ["FLEETVIEW_LAKE"] = str(lake)
    os.environ["FLEETVIEW_FLEET"] = str(lake / "no-fleet.toml")
    start = time.perf_counter()
    app = AppTest.from_file(str(APP), default_timeout=120)
    for k, v in (query or {}).items():
        app.query_params[k] = v
    app.run()
    app.switch_page(f"../pages/{page}.py")
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Simulate, measure and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--clusters", type=int, default=3)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--active", type=int, default=30)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    polls = int(args.days * 86_400 / args.interval)
    per_hour = 3600 // args.interval
    settings = Settings(group_window=10, group_stopped_after_s=3 * 3600)
    fleet = Fleet(args.clusters, args.groups, args.active)
    tmp = Path(tempfile.mkdtemp(prefix="group-time-"))
    lake_dir, hour_copy = tmp / "lake", tmp / "lake-1h"
    lake = Lake(lake_dir)
    writer = FleetWriter(lake)
    # The month ends now, so the pages' 7-day and 30-day windows hold data.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=polls * args.interval)
    brokers = [BrokerSnapshot(b, f"h{b}", 9092, reachable=True, software_name="Apache Kafka", software_version="4.1.0",
                              version_provenance="reported", version_min="4.1.0") for b in (1, 2, 3)]
    topics = [TopicSnapshot(f"t-{g}", "topicIdAAAAAAAAAAAAAAAA", partitions=3, replication_factor=3)
              for gs in fleet.groups.values() for g in gs]
    snaps: dict[str, GroupSnapshot | None] = dict.fromkeys(fleet.names)
    previous: dict[str, ClusterSnapshot] = {}
    rows_per_read: list[int] = []
    write_ms: list[float] = []
    began = time.perf_counter()
    for i in range(polls):
        at = start + timedelta(seconds=i * args.interval)
        fleet.churn(i, per_hour)
        poll_id = new_poll_id(at)
        clusters = []
        for name in fleet.names:
            snaps[name] = build_snapshot(fleet.read(name, i), snaps[name], settings, at)
            clusters.append(ClusterSnapshot(cluster_name=name, status="ok", polled_at=at, poll_id=poll_id,
                                            cluster_id=f"id-{name}", controller_id=1, brokers=brokers, topics=topics,
                                            groups=snaps[name]))
        poll = FleetPoll(poll_id, at, clusters, run_checks(previous, clusters), 1.0)
        tables_before = dict(writer.manifest.get("clusters", {}))
        t0 = time.perf_counter()
        result = writer.write(poll)
        write_ms.append((time.perf_counter() - t0) * 1000)
        writer.maintain(at, 30)
        rewritten = [(name, kind) for name, entry in writer.manifest.get("clusters", {}).items()
                     for kind, path in entry.items() if tables_before.get(name, {}).get(kind) != path
                     and kind.startswith("group")]
        rows_per_read.append(result.changes + sum(
            len(snaps[name].groups) if kind == "groups" else  # type: ignore[union-attr]
            sum(len(p) for p in snaps[name].offsets.values()) if kind == "group_offsets" else  # type: ignore[union-attr]
            sum(len(m) for m in snaps[name].members.values()) if kind == "group_members" else 1  # type: ignore[union-attr]
            for name, kind in rewritten))
        previous = {c.cluster_name: c for c in clusters}
        if i == per_hour:
            writer.close(at)
            shutil.copytree(lake_dir, hour_copy)
            print(f"1 hour: {i} reads, {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        if i and i % (24 * per_hour) == 0:
            print(f"day {i // (24 * per_hour)}: {time.perf_counter() - began:.0f} s, write p50 "
                  f"{statistics.median(write_ms[-per_hour:]):.1f} ms", file=sys.stderr, flush=True)
    writer.close(start + timedelta(seconds=polls * args.interval))
    simulated_s = time.perf_counter() - began

    def files(root: Path) -> dict[str, int]:
        return {t: len(list((root / t).rglob("*.parquet"))) for t in ("cluster_snapshots", "changes", "incidents")}

    def readers_cost(root: Path) -> dict[str, Any]:
        out = {}
        for label, call in (("read_groups", lambda: group_readers.read_groups(root)),
                            ("group_offsets_one_cluster", lambda: group_readers.group_offsets(root, ["cluster-00"])),
                            ("incidents", lambda: readers.incidents(root))):
            with read_stats() as stats:
                t0 = time.perf_counter()
                frame = call()
                ms = (time.perf_counter() - t0) * 1000
            out[label] = {"ms": round(ms, 1), "files": stats.files_opened, "rows": stats.rows_read, "frame": len(frame)}
        return out

    key_group = fleet.groups["cluster-00"][0]
    from backend.views.group_views import group_key
    detail = {"cluster": "cluster-00", "group": group_key("cluster-00", key_group)}
    pages: dict[str, dict[str, list[float]]] = {"1h": {}, "30d": {}}
    for _ in range(args.repeats):  # interleaved
        for label, root in (("1h", hour_copy), ("30d", lake_dir)):
            for name, page, query in (("groups list", "consumer_groups", None),
                                      ("group detail", "consumer_groups", detail),
                                      ("cluster", "cluster", {"cluster": "cluster-00"})):
                pages[label].setdefault(name, []).append(_render(root, page, query))
    medians = {label: {k: round(statistics.median(v), 3) for k, v in d.items()} for label, d in pages.items()}
    incidents = readers.incidents(lake_dir)
    out = {
        "clusters": args.clusters, "groups_per_cluster": args.groups, "active_groups": args.active,
        "interval_s": args.interval, "reads": polls, "simulation_s": round(simulated_s, 1),
        "write_ms_p50_p99": [round(statistics.median(write_ms), 1), round(sorted(write_ms)[int(0.99 * len(write_ms))], 1)],
        "rows_written_per_read_p50_p99_max": [statistics.median(rows_per_read),
                                              sorted(rows_per_read)[int(0.99 * len(rows_per_read))],
                                              max(rows_per_read)],
        "group_state_rows_at_end": {"groups": sum(len(s.groups) for s in snaps.values() if s),
                                    "offsets": sum(sum(len(p) for p in s.offsets.values()) for s in snaps.values() if s)},
        "incidents_total": len(incidents), "incidents_by_rule": incidents["rule"].value_counts().to_dict(),
        "files_1h": files(hour_copy), "files_30d": files(lake_dir),
        "lake_bytes_1h": sum(f.stat().st_size for f in hour_copy.rglob("*") if f.is_file()),
        "lake_bytes_30d": sum(f.stat().st_size for f in lake_dir.rglob("*") if f.is_file()),
        "readers_1h": readers_cost(hour_copy), "readers_30d": readers_cost(lake_dir),
        "pages_median_s": medians,
        "pages_ratio_30d_over_1h": {k: round(medians["30d"][k] / medians["1h"][k], 2) for k in medians["1h"]},
        "target_ratio": 1.3, "load_average": os.getloadavg(),
    }
    print(json.dumps(out, indent=2, default=str))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
