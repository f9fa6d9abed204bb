"""Probe and codec benchmarks, measured side by side in one run.

1. Probe round trip (connect, ApiVersions, DescribeCluster), median of 20, against a real
   Apache Kafka 4.x broker (started by the test rig, or --bootstrap) and a lab broker, each
   next to the bare TCP connect time to the same listener.
2. Topic ids of 1,000 topics on the real broker: the probe's one Metadata v12 request vs
   confluent-kafka's list_topics + describe_topics (wall and CPU time, same ids checked).
3. Codec throughput: Metadata v12 responses with 10,000 topics (3 partitions each) decoded
   and encoded per CPU-second, next to a 1,000-topic response to show how it scales.

Run: .venv/bin/python -m benchmarks.probe_bench [--repeats 20] [--topics 10000] [--real-topics 1000]
     [--bootstrap host:port] [--no-real]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from backend.kafka import protocol as P
from backend.kafka.probe import probe_broker


def _stats(runs: list[float]) -> dict[str, float]:
    runs = sorted(runs)
    return {"median_ms": round(statistics.median(runs) * 1000, 3),
            "p90_ms": round(runs[int(0.9 * (len(runs) - 1))] * 1000, 3),
            "min_ms": round(runs[0] * 1000, 3)}


def bench_probe(host: str, port: int, repeats: int) -> dict[str, Any]:
    """Median probe round trip and bare TCP connect to one listener, interleaved."""
    probe_runs, connect_runs = [], []
    last = None
    for _ in range(repeats):
        start = time.perf_counter()
        with socket.create_connection((host, port), timeout=5):
            pass
        connect_runs.append(time.perf_counter() - start)
        start = time.perf_counter()
        last = probe_broker(host, port, timeout_s=10)
        probe_runs.append(time.perf_counter() - start)
        if not last.ok:
            raise SystemExit(f"probe of {host}:{port} failed: {last.error_kind} {last.error}")
    probe, connect = _stats(probe_runs), _stats(connect_runs)
    return {"target": f"{host}:{port}", "probe": probe, "tcp_connect": connect,
            "probe_over_connect": round(probe["median_ms"] / max(connect["median_ms"], 1e-6), 1),
            "provenance": last.provenance if last else None,
            "version": (last.software_version or f"{last.version_min}-{last.version_max}") if last else None}


def bench_topic_ids(bootstrap: str, host: str, port: int, topics: int, repeats: int) -> dict[str, Any]:
    """Topic ids of every topic: one probe Metadata v12 request vs confluent-kafka's DescribeTopics."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench-{i:05d}" for i in range(topics)]
    for start in range(0, topics, 200):
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[start:start + 200]], request_timeout=60)
        for future in futures.values():
            future.result(timeout=120)

    def via_probe() -> dict[str, str]:
        result = probe_broker(host, port, timeout_s=30, with_metadata=True)
        assert result.ok and result.metadata is not None, result.error
        return {t["name"]: t["topic_id"] for t in result.metadata["topics"]}

    def via_admin() -> dict[str, str]:
        listed = admin.list_topics(timeout=30).topics
        described = admin.describe_topics(TopicCollection(list(listed)), request_timeout=30)
        return {name: str(f.result(timeout=30).topic_id).replace("+", "-").replace("/", "_")
                for name, f in described.items()}

    deadline = time.monotonic() + 60
    while len(via_probe()) < topics and time.monotonic() < deadline:
        time.sleep(0.5)
    ours, theirs = via_probe(), via_admin()
    assert {n: ours[n] for n in names} == {n: theirs[n] for n in names}, "topic ids differ"
    runs: dict[str, list[float]] = {"probe_metadata": [], "admin_describe_topics": []}
    cpu: dict[str, list[float]] = {"probe_metadata": [], "admin_describe_topics": []}
    for _ in range(repeats):
        for name, fn in (("probe_metadata", via_probe), ("admin_describe_topics", via_admin)):
            w, c = time.perf_counter(), time.process_time()
            fn()
            runs[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
    out: dict[str, Any] = {"topics": topics}
    for name in runs:
        out[name] = {**_stats(runs[name]), "cpu_median_ms": round(statistics.median(cpu[name]) * 1000, 1)}
    out["admin_over_probe_wall"] = round(out["admin_describe_topics"]["median_ms"] / out["probe_metadata"]["median_ms"], 2)
    out["admin_over_probe_cpu"] = round(out["admin_describe_topics"]["cpu_median_ms"]
                                        / max(out["probe_metadata"]["cpu_median_ms"], 0.1), 2)
    return out


def metadata_body(topics: int, partitions: int = 3, brokers: int = 3) -> dict[str, Any]:
    """A Metadata v12 response body shaped like a real cluster's."""
    return {
        "throttle_time_ms": 0, "cluster_id": "bench-cluster-id-0000000", "controller_id": 1,
        "brokers": [{"node_id": i, "host": f"broker-{i}.example.internal", "port": 9092, "rack": f"r{i}"}
                    for i in range(1, brokers + 1)],
        "topics": [{
            "error_code": 0, "name": f"team-{t % 50:02d}.service-{t:05d}.events",
            "topic_id": P.uuid_to_kafka_str(uuid.UUID(int=t + 1)), "is_internal": False,
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 1 + (p % brokers),
                            "leader_epoch": 4, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3],
                            "offline_replicas": []} for p in range(partitions)],
            "topic_authorized_operations": -2147483648,
        } for t in range(topics)],
    }


def bench_codec(topics: int, repeats: int) -> dict[str, Any]:
    """Decode and encode rates of Metadata v12 responses of `topics` topics."""
    body = metadata_body(topics)
    start = time.perf_counter()
    frame = P.encode_response(P.API_METADATA, 12, 1, body)
    first_encode = time.perf_counter() - start
    decode_runs, encode_runs = [], []
    # CPU time of this process: the codec is CPU-bound, and wall time on a shared box mostly
    # measures the neighbours.
    for _ in range(repeats):
        start = time.process_time()
        _corr, decoded = P.decode_response(P.API_METADATA, 12, frame[4:])
        decode_runs.append(time.process_time() - start)
        start = time.process_time()
        P.encode_response(P.API_METADATA, 12, 1, body)
        encode_runs.append(time.process_time() - start)
    assert len(decoded["topics"]) == topics
    decode_s, encode_s = statistics.median(decode_runs), statistics.median(encode_runs)
    return {"topics": topics, "frame_bytes": len(frame),
            "decode_ms": round(decode_s * 1000, 1), "decode_responses_per_s": round(1 / decode_s, 2),
            "decode_mb_per_s": round(len(frame) / decode_s / 1e6, 1),
            "encode_ms": round(encode_s * 1000, 1), "encode_responses_per_s": round(1 / encode_s, 2),
            "first_encode_ms": round(first_encode * 1000, 1)}


def main() -> None:
    """Run every benchmark and print one JSON document."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--bootstrap", help="host:port of an existing broker instead of starting one")
    ap.add_argument("--no-real", action="store_true", help="skip the real Kafka broker")
    ap.add_argument("--real-topics", type=int, default=1000,
                    help="topics to create on the real broker for the topic-id comparison (0: skip)")
    args = ap.parse_args()

    out: dict[str, Any] = {}
    big = bench_codec(args.topics, repeats=5)
    small = bench_codec(max(1, args.topics // 10), repeats=5)
    out["codec"] = {"large": big, "small": small,
                    "large_over_small_decode_time": round(big["decode_ms"] / max(small["decode_ms"], 1e-6), 2)}

    from backend.lab.fleet import LabFleet
    from backend.lab.model import parse_lab_config

    with tempfile.TemporaryDirectory() as tmp:
        lab_def = {"lab": {"state_dir": str(Path(tmp) / "state")}, "clusters": [
            {"name": "bench", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}],
             "topics": [{"name": "t", "partitions": 1, "replication_factor": 1}]}]}
        with LabFleet(parse_lab_config(lab_def, Path(tmp))) as lab:
            b = lab.clusters["bench"].brokers[0]
            out["probe_lab_broker"] = bench_probe(b.host, b.port, args.repeats)
        if args.bootstrap:
            host, port = args.bootstrap.rsplit(":", 1)
            out["probe_real_broker"] = bench_probe(host, int(port), args.repeats)
        elif not args.no_real:
            from tests.rig.kafka import KafkaKraftCluster

            cluster = KafkaKraftCluster(Path(tmp) / "kafka", size=1)
            cluster.start()
            try:
                node = cluster.brokers[0]
                out["probe_real_broker"] = bench_probe(node.host, node.port, args.repeats)
                out["probe_real_broker"]["kafka_version"] = cluster.version
                if args.real_topics:
                    out["topic_ids_real_broker"] = bench_topic_ids(
                        cluster.bootstrap, node.host, node.port, args.real_topics, repeats=5)
            finally:
                cluster.stop()
    if "probe_real_broker" in out:
        out["real_over_lab_probe_median"] = round(
            out["probe_real_broker"]["probe"]["median_ms"] / out["probe_lab_broker"]["probe"]["median_ms"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
