"""Lake benchmark: write polls of a fleet with 100,000 topics, then time the readers on it.

Run: .venv/bin/python -m benchmarks.poll_lake_bench [--topics 100000] [--polls 30]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.store import readers
from backend.store.fleet_writer import write_fleet_poll
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot
from backend.store.snapshots import load_previous_state


def _poll(at: datetime, clusters: int, topics_per_cluster: int, generation: int) -> FleetPoll:
    poll_id = new_poll_id(at)
    polled_at = poll_id_time(poll_id)
    snapshots = []
    for c in range(clusters):
        topics = [
            # Every 10th poll recreates topic 0 of each cluster, so topic_id_changes has work.
            TopicSnapshot(f"topic-{t:06d}", f"id-{c}-{t}-{generation // 10 if t == 0 else 0}", partitions=6,
                          replication_factor=3)
            for t in range(topics_per_cluster)
        ]  # fmt: skip
        brokers = [
            BrokerSnapshot(b, f"b{b}", 9092, reachable=True, software_name="Kafka", software_version="4.1.0",
                           version_provenance="reported")
            for b in range(3)
        ]  # fmt: skip
        snapshots.append(
            ClusterSnapshot(f"cluster-{c:02d}", "ok", polled_at, poll_id, cluster_id=f"C{c}", brokers=brokers,
                            topics=topics)
        )  # fmt: skip
    return FleetPoll(poll_id, polled_at, snapshots, [], 0.0)


def _time(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return round(time.perf_counter() - start, 3)


def main(argv: list[str] | None = None) -> int:
    """Write the polls, time each reader, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=100_000, help="topics over the whole fleet")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--polls", type=int, default=30)
    args = parser.parse_args(argv)
    per_cluster = args.topics // args.clusters
    with tempfile.TemporaryDirectory(prefix="lake-bench-") as tmp:
        lake = Lake(Path(tmp))
        start = datetime.now(UTC) - timedelta(hours=1)
        write_s = []
        for i in range(args.polls):
            poll = _poll(start + timedelta(seconds=30 * i), args.clusters, per_cluster, i)
            write_s.append(_time(lambda poll=poll: write_fleet_poll(lake, poll)))
        state = readers.latest_fleet_state(lake)
        assert len(state.topics) == per_cluster * args.clusters
        results = {
            "topics": per_cluster * args.clusters,
            "polls": args.polls,
            "lake_mb": round(sum(p.stat().st_size for p in Path(tmp).rglob("*.parquet")) / 2**20, 1),
            "write_poll_median_s": sorted(write_s)[len(write_s) // 2],
            "latest_fleet_state_s": _time(lambda: readers.latest_fleet_state(lake)),
            "latest_topics_one_cluster_s": _time(lambda: readers.latest_topics(lake, "cluster-00")),
            "previous_state_for_checks_s": _time(lambda: load_previous_state(lake)),
            "poll_history_s": _time(lambda: readers.poll_history(lake)),
            "version_timeline_s": _time(lambda: readers.version_timeline(lake)),
            "topic_id_changes_all_polls_s": _time(lambda: readers.topic_id_changes(lake)),
            "topic_id_changes_found": len(readers.topic_id_changes(lake)),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
