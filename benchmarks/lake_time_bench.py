"""Lake over time: 30 days of 30 s polls (86,400) of 50 clusters x 2,000 topics through the real write path.

Run: .venv/bin/python -m benchmarks.lake_time_bench [--days 30] [--clusters 50] [--topics 2000]
     [--interval 30] [--lake DIR] [--keep-lakes DIR] [--no-configs]

Simulated clock (poll ids carry time), synthetic FleetPoll objects, no network. Churn: every hour
one cluster gets a topic created, one deleted and one recreated (new id); one rolling upgrade a
day (a broker every 10 min, so a version skew opens and resolves); one cluster down 5 min a day;
one cluster with an under-replicated topic all month (one incident open the whole time).
Broker configs (unless --no-configs): every cluster's 3 brokers carry the 340 configs of the lab's
Kafka 4.3 catalog and 100 topics 2 overrides each; they are read every 10 minutes (a new
ConfigSnapshot per cluster, unchanged parts reused as the collector does) and one config changes
per hour (one cluster's broker 1 toggles log.cleaner.threads, a dynamic broker config), so one
config change row an hour; config rules run with the other checks.
Polls go through `FleetWriter.write` (change detection, state files, change log, incident
tracker) and `FleetWriter.maintain` (compaction every 10 min, retention hourly), as in the
poller. At 1 hour, 1 day, 7 days and 30 days it prints lake bytes, files per table, write times
and reader times. `--keep-lakes DIR` copies the lake at each checkpoint to DIR/<label>, so page
timings can be taken on the same lakes later.
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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.collect.checks import run_checks
from backend.lab.config_catalog import load_catalogs
from backend.store import config_readers, readers
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import (
    Alert,
    BrokerSnapshot,
    ClusterSnapshot,
    ConfigSnapshot,
    ConfigValue,
    FleetPoll,
    TopicSnapshot,
)
from backend.store.stats import read_stats

START = datetime(2026, 1, 1, tzinfo=UTC)
CHECKPOINTS = (("1h", timedelta(hours=1)), ("1d", timedelta(days=1)), ("7d", timedelta(days=7)),
               ("30d", timedelta(days=30)))
CONFIG_INTERVAL = timedelta(minutes=10)
OVERRIDDEN_TOPICS = 100


def _broker_configs() -> dict[str, ConfigValue]:
    """One broker's configs as the lab's Kafka 4.3 catalog declares them, a few set in server.properties."""
    catalog = load_catalogs()["kafka-4.3"]
    out = {name: ConfigValue(None if d.sensitive else d.default, "DEFAULT_CONFIG", d.read_only, d.sensitive, d.type,
                             "sensitive" if d.sensitive else None) for name, d in catalog.broker.items()}
    for name, value in (("log.retention.hours", "168"), ("auto.create.topics.enable", "false"),
                        ("default.replication.factor", "3")):
        out[name] = out[name]._replace(value=value, source="STATIC_BROKER_CONFIG")
    out["min.insync.replicas"] = out["min.insync.replicas"]._replace(value="2", source="DYNAMIC_DEFAULT_BROKER_CONFIG")
    return out


class SimFleet:
    """The synthetic fleet and its churn, reusing unchanged topic lists as the poller does."""

    def __init__(self, clusters: int, topics: int, configs: bool = True) -> None:
        self.names = [f"cluster-{c:02d}" for c in range(clusters)]
        self.with_configs = configs
        base = _broker_configs()
        overrides = {f"topic-{t:05d}": {"retention.ms": ConfigValue(str(86_400_000 + t), "DYNAMIC_TOPIC_CONFIG"),
                                        "cleanup.policy": ConfigValue("compact,delete", "DYNAMIC_TOPIC_CONFIG")}
                     for t in range(0, min(topics, OVERRIDDEN_TOPICS * 20), 20)}
        # What each cluster's brokers report now (changed by the hourly config change) and what was last read.
        self.config_truth = {n: ({b: dict(base) for b in range(3)}, dict(overrides)) for n in self.names}
        self.configs: dict[str, ConfigSnapshot] = {}
        self.topics: dict[str, list[TopicSnapshot]] = {}
        for c, name in enumerate(self.names):
            self.topics[name] = [
                TopicSnapshot(f"topic-{t:05d}", f"id-{c}-{t}-0", partitions=6, replication_factor=3,
                              under_replicated=1 if (c == 2 and t == 0) else 0)
                for t in range(topics)
            ]
        self.versions = {n: ["3.9.1"] * 3 for n in self.names}
        self.next_topic = topics
        self.generation = 0
        self.previous: dict[str, ClusterSnapshot] = {}
        self._alerts: dict[str, tuple[Any, list[Alert]]] = {}

    def churn(self, at: datetime) -> None:
        """Hourly topic churn on one cluster; the daily rolling upgrade."""
        if at.minute == 0 and at.second == 0:
            name = self.names[(at.hour + at.day) % len(self.names)]
            topics = list(self.topics[name])
            self.generation += 1
            topics.pop(5)  # deleted
            old = topics[6]
            topics[6] = TopicSnapshot(old.topic, f"{old.topic_id}-r{self.generation}", partitions=6,
                                      replication_factor=3)  # recreated
            topics.append(TopicSnapshot(f"topic-{self.next_topic:05d}", f"id-new-{self.next_topic}", partitions=6,
                                        replication_factor=3))  # created
            self.next_topic += 1
            self.topics[name] = topics
        if self.with_configs and at.minute == 30 and at.second == 0:
            name = self.names[(at.hour * 7 + at.day) % len(self.names)]
            brokers, topics = self.config_truth[name]
            broker = dict(brokers[0])
            old = broker["log.cleaner.threads"]
            broker["log.cleaner.threads"] = old._replace(value="2", source="DYNAMIC_BROKER_CONFIG") \
                if old.value == "1" else old._replace(value="1", source="DEFAULT_CONFIG")
            self.config_truth[name] = ({**brokers, 0: broker}, topics)
        day = (at - START).days
        if at.hour == 10 and at.minute in (0, 10, 20) and at.second == 0:
            name = self.names[day % len(self.names)]
            target = "4.1.0" if day % 2 == 0 else "3.9.1"
            self.versions[name] = list(self.versions[name])
            self.versions[name][at.minute // 10] = target

    def read_configs(self, name: str, at: datetime) -> ConfigSnapshot | None:
        """Every 10 minutes a new read of the cluster's configs, unchanged parts reused as the collector does."""
        if not self.with_configs:
            return None
        last = self.configs.get(name)
        if last is not None and at - last.collected_at < CONFIG_INTERVAL:
            return last
        brokers, topics = self.config_truth[name]
        fresh = ConfigSnapshot(collected_at=at, brokers={b: dict(c) for b, c in brokers.items()},
                               topics={t: dict(c) for t, c in topics.items()}, version=4, duration_ms=120.0)
        if last is not None and fresh.brokers == last.brokers:
            fresh.brokers = last.brokers
        if last is not None and fresh.topics == last.topics:
            fresh.topics = last.topics
        self.configs[name] = fresh
        return fresh

    def poll(self, at: datetime) -> FleetPoll:
        """One poll of the fleet at `at` (cluster-01 is down 03:00-03:05 every day)."""
        self.churn(at)
        poll_id = new_poll_id(at)
        at = poll_id_time(poll_id)
        snaps = []
        alerts: list[Alert] = []
        for name in self.names:
            if name == "cluster-01" and at.hour == 3 and at.minute < 5:
                snaps.append(ClusterSnapshot(name, "down", at, poll_id, error="timed out", duration_ms=5000.0))
                continue
            brokers = [BrokerSnapshot(i, f"{name}-b{i}", 9092, rack=f"r{i}", reachable=True, is_controller=i == 0,
                                      software_name="Apache Kafka", software_version=v, version_provenance="reported")
                       for i, v in enumerate(self.versions[name])]
            snap = ClusterSnapshot(name, "ok", at, poll_id, cluster_id=f"CID-{name}", controller_id=0,
                                   brokers=brokers, topics=self.topics[name], duration_ms=40.0,
                                   configs=self.read_configs(name, at))
            configs = snap.configs
            signature = (id(snap.topics), tuple(self.versions[name]),
                         (id(configs.brokers), id(configs.topics)) if configs is not None else None)
            cached = self._alerts.get(name)
            prev = self.previous.get(name)
            if cached is not None and cached[0] == signature and prev is not None and prev.topics is snap.topics:
                alerts.extend(cached[1])  # unchanged cluster: the standing rules say the same
            else:
                fresh = run_checks({name: prev} if prev else {}, [snap])
                alerts.extend(fresh)
                standing = [a for a in run_checks({}, [snap])]
                self._alerts[name] = (signature, standing)
            self.previous[name] = snap
            snaps.append(snap)
        return FleetPoll(poll_id, at, snaps, alerts, 50.0)


def _dir_stats(root: Path) -> tuple[int, dict[str, int]]:
    total = 0
    files: dict[str, int] = {}
    for dirpath, _, names in os.walk(root):
        rel = Path(dirpath).relative_to(root).parts
        key = "/".join(rel[:3]) if rel[:2] == ("_state", "fleet") else (rel[0] if rel else ".")
        for n in names:
            total += (Path(dirpath) / n).stat().st_size
            files[key] = files.get(key, 0) + 1
    return total, dict(sorted(files.items()))


def _timed(call: Callable[[], Any]) -> dict[str, float | int]:
    with read_stats() as stats:
        t0 = time.perf_counter()
        call()
        ms = (time.perf_counter() - t0) * 1000
    return {"ms": round(ms, 2), "files": stats.files_opened, "rows": stats.rows_read}


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 3), "p99": round(ordered[int(len(ordered) * 0.99) - 1], 3),
            "max": round(ordered[-1], 3), "n": len(ordered)}


def _reader_figures(lake: Lake, name: str, now: datetime) -> dict[str, Any]:
    """Time and count the readers the pages use (files opened, rows read)."""
    return {
        "latest_fleet_state": _timed(lambda: readers.latest_fleet_state(lake)),
        "cluster_topics": _timed(lambda: readers.latest_topics(lake, name)),
        "cluster_brokers": _timed(lambda: readers.latest_brokers(lake, name)),
        "incidents_open": _timed(lambda: readers.incidents(lake, open_only=True)),
        "incidents_7d": _timed(lambda: readers.incidents(lake, since=now - timedelta(days=7))),
        "changes_1d": _timed(lambda: readers.changes(lake, since=now - timedelta(days=1))),
        "version_timeline": _timed(lambda: readers.version_timeline(lake)),
        "fleet_state_at_-12h": _timed(lambda: readers.fleet_state_at(lake, now - timedelta(hours=12))),
        "poll_history_1d_one_cluster": _timed(
            lambda: readers.poll_history(lake, name, since=now - timedelta(days=1))),
        "cluster_configs": _timed(lambda: config_readers.latest_configs(lake, [name])),
        "compare_configs_2_clusters": _timed(lambda: config_readers.latest_configs(lake, [name, "cluster-04"])),
        "config_runs_all": _timed(lambda: config_readers.config_runs(lake)),
        "config_changes_7d": _timed(lambda: readers.changes(lake, entity="config", since=now - timedelta(days=7))),
    }


def run(days: float, clusters: int, topics: int, interval_s: int, lake_dir: Path,
        keep_lakes: Path | None, retention_days: int = 30, start: datetime = START,
        configs: bool = True) -> dict[str, Any]:
    """Simulate the polls and return the figures at each checkpoint."""
    START = start
    lake = Lake(lake_dir)
    writer = FleetWriter(lake)
    fleet = SimFleet(clusters, topics, configs)
    end = START + timedelta(days=days)
    marks = [(label, START + delta) for label, delta in CHECKPOINTS if START + delta <= end]
    if not marks or marks[-1][1] != end:
        marks.append((f"{days:g}d", end))
    out: dict[str, Any] = {"clusters": clusters, "topics_per_cluster": topics, "interval_s": interval_s,
                           "retention_days": retention_days, "configs": configs, "checkpoints": {}}
    unchanged: list[float] = []
    changed: list[float] = []
    maintain: list[float] = []
    at = START
    polls = 0
    wall0 = time.perf_counter()
    for label, until in marks:
        while at < until:
            poll = fleet.poll(at)
            t0 = time.perf_counter()
            result = writer.write(poll)
            t1 = time.perf_counter()
            writer.maintain(poll.polled_at, retention_days)
            t2 = time.perf_counter()
            (changed if result.changes or result.incidents_opened or result.incidents_resolved
             else unchanged).append((t1 - t0) * 1000)
            maintain.append((t2 - t1) * 1000)
            polls += 1
            at += timedelta(seconds=interval_s)
        writer.close(at)
        size, files = _dir_stats(lake_dir)
        now = at - timedelta(seconds=interval_s)
        name = fleet.names[3]
        figures = {
            "polls": polls,
            "lake_bytes": size,
            "files_per_table": files,
            "write_ms_unchanged_poll": _percentiles(unchanged),
            "write_ms_changed_poll": _percentiles(changed),
            "maintain_ms": _percentiles(maintain),
            "readers": _reader_figures(lake, name, now),
            "open_incidents": int(len(readers.incidents(lake, open_only=True))),
            "sim_wall_s": round(time.perf_counter() - wall0, 1),
        }
        out["checkpoints"][label] = figures
        print(json.dumps({label: figures}), file=sys.stderr, flush=True)  # progress, survives a cut-short run
        unchanged, changed, maintain = [], [], []
        if keep_lakes is not None:
            shutil.copytree(lake_dir, keep_lakes / label, dirs_exist_ok=True)
    return out


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the simulation, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--interval", type=int, default=30)
    parser.add_argument("--lake", type=Path, default=None, help="lake directory (default: a temp dir, removed)")
    parser.add_argument("--keep-lakes", type=Path, default=None, help="copy the lake at each checkpoint here")
    parser.add_argument("--pages", action="store_true",
                        help="also time the Fleet, Cluster and Alerts pages in Chromium and the server's peak RSS "
                             "on the lake kept at each checkpoint (benchmarks/lake_pages_bench.py)")
    parser.add_argument("--repeats", type=int, default=3, help="warm page visits per page and lake (with --pages)")
    parser.add_argument("--no-configs", action="store_true", help="leave broker configs out (as before they were read)")
    args = parser.parse_args(argv)
    # With --pages the month ends now, so the pages' time windows ("resolved in the last 7 days") hold data.
    start = (datetime.now(UTC) - timedelta(days=args.days)).replace(second=0, microsecond=0) if args.pages else START
    with tempfile.TemporaryDirectory(prefix="lake-time-") as tmp:
        keep = args.keep_lakes or (Path(tmp) / "kept" if args.pages else None)
        out = run(args.days, args.clusters, args.topics, args.interval, args.lake or Path(tmp) / "lake", keep,
                  start=start, configs=not args.no_configs)
        if args.pages and keep is not None:
            from benchmarks.lake_pages_bench import measure_pages

            out["pages"] = measure_pages({label: keep / label for label in out["checkpoints"]}, args.repeats)
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
