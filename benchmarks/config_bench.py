"""Reading the configs of a 10,000-topic cluster: the product's collector against the lab, librdkafka as a peer.

Run: .venv/bin/python -m benchmarks.config_bench [--topics 10000] [--overridden 1000] [--rounds 3] [--batch 200]

A lab cluster of 3 brokers (Kafka 4.3 catalog: 340 broker configs, 33 topic configs) with N topics,
every (N / overridden)-th topic with two overrides. It times, in one process and side by side:

- `ConfigCollector.collect`, first read (every answer decoded) and unchanged reads (answers with the
  same bytes are not decoded again: `answers_reused`), wall time and this process's CPU time;
- one read after one topic's override changed (one batch decoded again);
- librdkafka's `AdminClient.describe_configs` of the same topics and brokers (confluent-kafka), the
  same answers parsed by a C client, as a peer.

The lab runs in this process and answers from an encoded-response cache; before each timed read a
throw-away collector asks the same batches once, so the lab's own building of answers is not counted
(a real broker builds them in its own process).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from backend.collect.configs import ConfigCollector
from backend.config import ClusterConfig, Settings
from backend.kafka.admin import NodeInfo
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = _cpu(), time.perf_counter()
    result = call()
    return result, round(time.perf_counter() - wall, 3), round(_cpu() - cpu, 3)


def _librdkafka(bootstrap: str, brokers: list[int], topics: list[str], batch: int) -> int:
    """librdkafka's describe_configs: one call per broker resource (it allows one per call), topics in batches."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 60000})
    calls = [[ConfigResource(ResourceType.BROKER, str(b))] for b in brokers]
    calls += [[ConfigResource(ResourceType.TOPIC, t) for t in topics[i:i + batch]] for i in range(0, len(topics), batch)]
    entries = 0
    for resources in calls:
        for future in admin.describe_configs(resources, request_timeout=60).values():
            entries += len(future.result(timeout=120))
    del admin
    return entries


def run(topics: int, overridden: int, rounds: int, batch: int) -> dict[str, Any]:
    """Start the lab cluster, read its configs, return the figures."""
    step = max(1, topics // max(1, overridden))
    spec = [{"name": f"topic-{i:05d}", "partitions": 1, "replication_factor": 3,
             **({"configs": {"retention.ms": 86_400_000 + i, "cleanup.policy": "compact"}} if i % step == 0 else {})}
            for i in range(topics)]
    with tempfile.TemporaryDirectory(prefix="config-bench-") as tmp:
        raw = {"lab": {"state_dir": str(Path(tmp) / "state")}, "clusters": [
            {"name": "big", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}, {"id": 2}, {"id": 3}],
             "topics": spec}]}
        with LabFleet(parse_lab_config(raw, Path(tmp))) as lab:
            info = lab.clusters["big"]
            cluster = ClusterConfig(name="big", bootstrap_servers=[f"{b.host}:{b.port}" for b in info.brokers])
            settings = Settings(config_interval_s=0.001, config_batch_topics=batch, request_timeout_s=60)
            nodes = [NodeInfo(b.id, b.host, b.port, None) for b in info.brokers]
            names = [t.name for t in lab.state.topics("big")]
            collector = ConfigCollector()

            def collect() -> Any:
                return collector.collect(cluster, settings, nodes, names, time.monotonic() + 300)

            def warm_the_lab() -> None:
                ConfigCollector().collect(cluster, settings, nodes, names, time.monotonic() + 300)

            warm_the_lab()
            first, first_wall, first_cpu = _timed(collect)
            decoded_first = collector.stats["answers_decoded"]
            unchanged = [_timed(collect) for _ in range(rounds)]
            reused = collector.stats["answers_reused"]
            lab.set_topic_config("big", names[1], "segment.ms", 3_600_000)
            warm_the_lab()
            _changed, changed_wall, changed_cpu = _timed(collect)
            def peer_read() -> int:
                return _librdkafka(info.bootstrap, [b.id for b in info.brokers], names, batch)

            peer_read()  # the lab caches the answers to librdkafka's requests too
            peer = [_timed(peer_read) for _ in range(rounds)]
            return {
                "topics": len(names), "topics_with_overrides": len(first.topics), "batch": batch,
                "broker_configs": sum(len(c) for c in first.brokers.values()),
                "first_read": {"wall_s": first_wall, "cpu_s": first_cpu, "answers_decoded": decoded_first},
                "unchanged_read": {"wall_s": statistics.median(u[1] for u in unchanged),
                                   "cpu_s": statistics.median(u[2] for u in unchanged),
                                   "answers_reused_per_read": reused // rounds},
                "one_override_changed": {"wall_s": changed_wall, "cpu_s": changed_cpu},
                "librdkafka_describe_configs": {"wall_s": statistics.median(p[1] for p in peer),
                                                "cpu_s": statistics.median(p[2] for p in peer),
                                                "entries": peer[0][0]},
            }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--overridden", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.topics, args.overridden, args.rounds, args.batch), indent=1))


if __name__ == "__main__":
    main()
