"""Consumer groups: one real broker with 1,000 groups against kafka-consumer-groups.sh and confluent-kafka's admin
calls, and a 20-cluster lab fleet of 2,000 groups each (one group cycle against the slowest cluster alone).

Run: .venv/bin/python -m benchmarks.groups_bench [--groups 1000] [--topics 20] [--partitions 5] [--repeats 5]
     [--lab-clusters 20] [--lab-groups 2000] [--lab-latency-ms 0,20,50,mixed] [--lab-mix all-active,mostly-idle]
     [--lab-idle-topics 18] [--skip-real] [--skip-lab]

Real part: a 1-node Apache Kafka 4.3.1 KRaft broker of the test rig (`make kafka-jars`), `--topics` topics of
`--partitions` partitions with records, `--groups` groups each committed on one topic (every partition, behind the
end) through the admin API. Then, interleaved, `--repeats` times each:

- the product: `GroupCollector.collect` (ListGroups, DescribeGroups, OffsetFetch batched, Metadata, ListOffsets
  through the project's codec), after one warm read (as the poller runs: its memo of unchanged describe answers);
- the same read through confluent-kafka's admin API: list_consumer_groups, describe_consumer_groups,
  list_consumer_group_offsets (one group per request: the API allows one) and list_offsets, all futures at once;
- the real `kafka-consumer-groups.sh --describe --all-groups` (ConsumerGroupCommand from the rig's jars).

Wall time medians, this process's CPU for the first two and the tool's own CPU (its JVM, from RUSAGE_CHILDREN).
The three readings are checked equal (committed and end offsets of every partition).

Lab part: like poll_bench, a lab of `--lab-clusters` clusters (3 brokers, 20 topics x 6 partitions,
`--lab-groups` synthetic groups each) runs in its own process; per broker latency (the lab's latency fault) it
times one group cycle over all clusters (each in its own thread, as the poller does) and every cluster alone,
and reports cycle / slowest single and the CPU of the reader and the lab per cycle.

Two group mixes, each in its own lab: ``all-active`` (every synthetic group commits every second on a topic that
grows: the worst case, every OffsetFetch answer and every partition changes at every read) and ``mostly-idle``
(a more realistic fleet: `--lab-idle-topics` of the 20 topics get no new records, so the healthy groups reading
them, 18 of 20 by default, stay caught up and their answers repeat from read to read).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from backend.collect.groups import GroupCollector
from backend.config import ClusterConfig, Fleet, Settings
from backend.kafka.admin import NodeInfo
from backend.kafka.probe import probe_broker
from backend.store.group_model import GroupSnapshot
from benchmarks.poll_bench import _fleet, _set_latency
from tests.rig.procs import REPO


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(call: Callable[[], Any], cpu: Callable[[], float] = _cpu_self) -> tuple[Any, float, float]:
    c, w = cpu(), time.perf_counter()
    out = call()
    return out, time.perf_counter() - w, cpu() - c


def _brokers(bootstrap: str) -> list[NodeInfo]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    result = probe_broker(host, int(port), with_metadata=True, timeout_s=30)
    assert result.ok and result.metadata, result.error
    return [NodeInfo(int(b["node_id"]), b["host"], int(b["port"]), None) for b in result.metadata["brokers"]]


def _product(cluster: ClusterConfig, settings: Settings, brokers: list[NodeInfo], collector: GroupCollector
             ) -> GroupSnapshot:
    return collector.collect(cluster, settings, brokers, time.monotonic() + 120)


def _product_offsets(snap: GroupSnapshot, prefix: str) -> dict[tuple[str, str, int], tuple[int | None, int | None]]:
    return {(g, p.topic, p.partition): (p.committed, p.end) for g, parts in snap.offsets.items()
            if g.startswith(prefix) for p in parts}


def _admin_read(admin: AdminClient, prefix: str) -> dict[tuple[str, str, int], tuple[int | None, int | None]]:
    """Everything the product reads, through confluent-kafka's admin API (all requests in flight at once)."""
    listed = admin.list_consumer_groups(request_timeout=120).result()
    ids = [g.group_id for g in listed.valid if g.group_id.startswith(prefix)]
    described = admin.describe_consumer_groups(ids, request_timeout=120)
    offsets = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)], request_timeout=120)[g]
               for g in ids}
    for future in described.values():
        future.result()
    committed = {g: f.result().topic_partitions for g, f in offsets.items()}
    wanted = {(tp.topic, tp.partition) for tps in committed.values() for tp in tps}
    ends = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted}, request_timeout=120)
    end = {(tp.topic, tp.partition): f.result().offset for tp, f in ends.items()}
    return {(g, tp.topic, tp.partition): (tp.offset, end[(tp.topic, tp.partition)])
            for g, tps in committed.items() for tp in tps}


def _tool(version: str, bootstrap: str) -> str:
    from tests.rig.group_tools import consumer_groups

    return consumer_groups(version, bootstrap, "--describe", "--all-groups", timeout_s=600)


def _tool_offsets(text: str, prefix: str) -> dict[tuple[str, str, int], tuple[int | None, int | None]]:
    from tests.rig.group_tools import parse_tables

    out = {}
    for row in parse_tables(text):
        if row.get("GROUP", "").startswith(prefix) and "TOPIC" in row:
            committed = None if row["CURRENT-OFFSET"] == "-" else int(row["CURRENT-OFFSET"])
            end = None if row["LOG-END-OFFSET"] == "-" else int(row["LOG-END-OFFSET"])
            out[(row["GROUP"], row["TOPIC"], int(row["PARTITION"]))] = (committed, end)
    return out


def bench_real(workdir: Path, groups: int, topics: int, partitions: int, repeats: int) -> dict[str, Any]:
    """The product, confluent-kafka's admin calls and kafka-consumer-groups.sh on one real 4.3.1 broker."""
    from tests.rig.kafka import KAFKA_KRAFT_VERSION, KafkaKraftCluster

    kafka = KafkaKraftCluster(workdir / "kafka", size=1)
    kafka.start()
    try:
        bootstrap = kafka.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120000})
        names = [f"bench-t{i:03d}" for i in range(topics)]
        for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
            future.result(timeout=120)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        for name in names:
            for p in range(partitions):
                for i in range(50):
                    producer.produce(name, partition=p, value=b"r%d" % i)
        assert producer.flush(120) == 0
        prefix = "bench-g"
        setup = time.perf_counter()
        pending = []
        for g in range(groups):
            topic = names[g % topics]
            tps = [TopicPartition(topic, p, 10 + (g % 30)) for p in range(partitions)]
            pending += list(admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(f"{prefix}{g:05d}", tps)], request_timeout=120).values())
            if len(pending) >= 200:
                for f in pending:
                    f.result(timeout=120)
                pending = []
        for f in pending:
            f.result(timeout=120)
        setup_s = time.perf_counter() - setup
        cluster = ClusterConfig(name="real", bootstrap_servers=bootstrap.split(","))
        settings = Settings(request_timeout_s=60)
        brokers = _brokers(bootstrap)
        collector = GroupCollector()
        first, cold_wall, cold_cpu = _timed(lambda: _product(cluster, settings, brokers, collector))
        ours = _product_offsets(first, prefix)
        assert len([g for g in first.groups if g.startswith(prefix)]) == groups
        theirs_admin = _admin_read(admin, prefix)
        theirs_tool = _tool_offsets(_tool(KAFKA_KRAFT_VERSION, bootstrap), prefix)
        assert ours == theirs_admin == theirs_tool, "the three readings differ"
        runs: dict[str, list[tuple[float, float]]] = {"product": [], "admin": [], "tool": []}
        for _ in range(repeats):  # interleaved
            _snap, wall, cpu = _timed(lambda: _product(cluster, settings, brokers, collector))
            runs["product"].append((wall, cpu))
            _out, wall, cpu = _timed(lambda: _admin_read(admin, prefix))
            runs["admin"].append((wall, cpu))
            _text, wall, cpu = _timed(lambda: _tool(KAFKA_KRAFT_VERSION, bootstrap), _cpu_children)
            runs["tool"].append((wall, cpu))
        med = {k: (statistics.median(w for w, _c in v), statistics.median(c for _w, c in v)) for k, v in runs.items()}
        return {
            "groups": groups, "topics": topics, "partitions_per_topic": partitions,
            "committed_partitions": len(ours), "setup_commit_s": round(setup_s, 1),
            "product_first_read": {"wall_s": round(cold_wall, 3), "cpu_s": round(cold_cpu, 3)},
            "product": {"wall_s": round(med["product"][0], 3), "cpu_s": round(med["product"][1], 3),
                        "requests": first.requests},
            "confluent_kafka_admin": {"wall_s": round(med["admin"][0], 3), "cpu_s": round(med["admin"][1], 3)},
            "kafka_consumer_groups_sh": {"wall_s": round(med["tool"][0], 3), "cpu_s": round(med["tool"][1], 3)},
            "ratio_product_over_tool_wall": round(med["product"][0] / med["tool"][0], 3),
            "ratio_product_over_tool_cpu": round(med["product"][1] / max(1e-9, med["tool"][1]), 3),
            "ratio_product_over_admin_wall": round(med["product"][0] / med["admin"][0], 3),
            "ratio_product_over_admin_cpu": round(med["product"][1] / max(1e-9, med["admin"][1]), 3),
            "target_product_over_tool_wall": 0.5,
            "runs": {k: [(round(w, 3), round(c, 3)) for w, c in v] for k, v in runs.items()},
            "load_average": os.getloadavg(),
        }
    finally:
        kafka.stop()


def _lab_toml(workdir: Path, clusters: int, groups: int, idle_topics: int = 0) -> Path:
    lines = [f'[lab]\nstate_dir = "{workdir / "lab-state"}"\n']
    for c in range(clusters):
        lines.append(
            f'[[clusters]]\nname = "bench-{c:02d}"\nprofile = "apache-kafka-4.3-kraft"\nsynthetic_groups = {groups}\n'
            "brokers = [ { id = 1, port = 0 }, { id = 2, port = 0 }, { id = 3, port = 0 } ]\n"
            "topics = [\n" + "".join(f'  {{ name = "t{t:02d}", partitions = 6, replication_factor = 3'
                                     f'{", idle = true" if t < idle_topics else ""} }},\n'
                                     for t in range(20)) + "]\n")
    path = workdir / "bench-lab.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def bench_lab(workdir: Path, clusters: int, groups: int, repeats: int, latencies: list[str],
              idle_topics: int = 0) -> dict[str, Any]:
    """One group cycle over the lab fleet against each cluster alone, per broker latency."""
    lab_file = _lab_toml(workdir, clusters, groups, idle_topics)
    fleet_file = workdir / "lab-clusters.toml"
    log = (workdir / "lab.log").open("wb")
    lab = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config", str(lab_file), "--fleet-file",
                            str(fleet_file)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not fleet_file.exists():
            if lab.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"lab did not start; see {workdir / 'lab.log'}")
            time.sleep(0.5)
        time.sleep(1.0)
        fleet: Fleet = _fleet("[settings]\nrequest_timeout_s = 60\npoll_deadline_s = 120\n\n" + fleet_file.read_text(),
                              workdir)
        brokers = {c.name: _brokers(",".join(c.bootstrap_servers)) for c in fleet.clusters}
        collector = GroupCollector()

        def one(cluster: ClusterConfig) -> GroupSnapshot:
            return collector.collect(cluster, fleet.settings, brokers[cluster.name], time.monotonic() + 120)

        def cycle(targets: list[ClusterConfig]) -> None:
            with ThreadPoolExecutor(max_workers=len(targets)) as pool:
                snaps = list(pool.map(one, targets))
            assert all(len(s.groups) == groups and not s.errors for s in snaps), [s.errors for s in snaps][:2]

        cycle(fleet.clusters)  # warm: memos of unchanged describe answers, as in a running poller
        lab_proc = psutil.Process(lab.pid)
        results = []
        for latency in latencies:
            _set_latency(workdir / "lab-state", fleet, latency)
            cycle(fleet.clusters)
            single_cpu0 = _cpu_self()
            single = {c.name: statistics.median(_timed(lambda c=c: cycle([c]))[1] for _ in range(repeats))
                      for c in fleet.clusters}
            single_cpu = (_cpu_self() - single_cpu0) / (repeats * len(fleet.clusters))
            lab_cpu0, own_cpu0 = sum(lab_proc.cpu_times()[:2]), _cpu_self()
            full_runs = [_timed(lambda: cycle(fleet.clusters))[1] for _ in range(repeats)]
            lab_cpu = (sum(lab_proc.cpu_times()[:2]) - lab_cpu0) / repeats
            own_cpu = (_cpu_self() - own_cpu0) / repeats
            slowest = max(single, key=single.__getitem__)
            full = statistics.median(full_runs)
            results.append({
                "latency_ms_per_request": latency if latency == "mixed" else int(latency),
                "full_cycle_median_s": round(full, 3), "full_cycle_runs_s": [round(r, 3) for r in full_runs],
                "slowest_single_cluster": slowest, "slowest_single_median_s": round(single[slowest], 3),
                "sum_of_singles_s": round(sum(single.values()), 3),
                "ratio_full_over_slowest_single": round(full / single[slowest], 2), "target_ratio": 1.5,
                "reader_cpu_s_per_cycle": round(own_cpu, 3), "lab_cpu_s_per_cycle": round(lab_cpu, 3),
                "reader_cpu_s_per_cluster_in_cycle": round(own_cpu / len(fleet.clusters), 4),
                "reader_cpu_s_per_cluster_read_alone": round(single_cpu, 4),
                "load_average": os.getloadavg(),
            })
        return {"clusters": clusters, "groups_per_cluster": groups, "partitions_per_group": 6,
                "idle_topics_of_20": idle_topics,
                "by_latency": results, "decoded_vs_reused_answers": dict(collector.stats),
                "lab_process_rss_mb": round(lab_proc.memory_info().rss / 2**20, 1)}
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait(timeout=30)
        log.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON document."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lab-clusters", type=int, default=20)
    parser.add_argument("--lab-groups", type=int, default=2000)
    parser.add_argument("--lab-latency-ms", default="0,20,50,mixed")
    parser.add_argument("--lab-mix", default="all-active,mostly-idle",
                        help="all-active (every group commits every second), mostly-idle (--lab-idle-topics quiet)")
    parser.add_argument("--lab-idle-topics", type=int, default=18)
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--skip-lab", action="store_true")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"load_average_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="groups-bench-") as tmp:
        if not args.skip_real:
            out["real_broker"] = bench_real(Path(tmp) / "real", args.groups, args.topics, args.partitions,
                                            args.repeats)
            print(json.dumps({"real_broker": out["real_broker"]}), file=sys.stderr, flush=True)
        if not args.skip_lab:
            latencies = [x.strip() for x in args.lab_latency_ms.split(",") if x.strip()]
            for mix in [x.strip() for x in args.lab_mix.split(",") if x.strip()]:
                if mix not in ("all-active", "mostly-idle"):
                    parser.error(f"unknown --lab-mix {mix!r}")
                (Path(tmp) / mix).mkdir()
                key = "lab_fleet" if mix == "all-active" else "lab_fleet_mostly_idle"
                out[key] = bench_lab(Path(tmp) / mix, args.lab_clusters, args.lab_groups, args.repeats, latencies,
                                     args.lab_idle_topics if mix == "mostly-idle" else 0)
                print(json.dumps({key: out[key]}), file=sys.stderr, flush=True)
    out["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "groups-bench"
    raise SystemExit(main())
