"""Fleet-wide search (backend/search): index build, incremental update, query latency, size; side by side with a plain
pandas scan of the same tables and with DuckDB over the index's own Parquet files.

A generated lake of 200 clusters × 5,000 topics (1,000,000), 1,000 consumer groups each (200,000, with their members
and committed offsets), 5 brokers each with every broker config of Kafka 4.3 and half a topic override per topic, the
brokers' client-software counts, and 100,000 client instances in the Spark job's heads. The current-state tables are
written with backend.store.state.write_cluster_states (the poller's own writer of them); the heads like the job.

    .venv/bin/python -m benchmarks.search_bench [--scale 1.0] [--queries 40] [--keep DIR]

Measured, in one run: the full build (FleetIndexer on a lake without an index, plus the clients part), a poll that
changed 1 % of the fleet (topics created, deleted and recreated, groups created and deleted, members joining and
leaving, configs changed, client instances replaced: the change rows and rewritten tables FleetWriter hands the
indexer, spread over every cluster) and the compaction it leads to, the reader's cold load and its refresh after the
update, and p50/p99 of each mode's queries over the whole fleet for: the index (the product), pandas over the
current-state tables (lowercased columns prepared in advance, the same as the index does), DuckDB over the index files
(loaded into memory). Sizes: the index's files against the current-state tables'.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from backend.lab.config_catalog import load_catalogs
from backend.pipeline.heads import HEAD_SCHEMA
from backend.search import store as index_store
from backend.search.query import QueryRefused, search
from backend.search.reader import IndexReader
from backend.search.tables import TABLES
from backend.search.updates import ClientIndexer, FleetIndexer
from backend.store import state
from backend.store.lake import Lake, new_poll_id
from backend.store.schemas import STATE_TABLES, schema_for

TEAMS = ["core", "data", "platform", "growth", "risk", "ops", "retail", "finance"]
DOMAINS = ["payments", "orders", "billing", "checkout", "inventory", "shipping", "fraud", "ledger", "users", "search",
           "clicks", "audit", "metrics", "logs", "notifications", "refunds", "invoices", "catalog", "pricing", "sessions"]
ENTITIES = ["events", "commands", "state", "changelog", "dlq", "retry", "snapshots", "updates", "requests", "replies"]
SOFTWARE = [("apache-kafka-java", v) for v in ("2.8.2", "3.6.1", "3.9.1", "4.0.0", "4.3.1")] + \
    [("librdkafka", v) for v in ("1.9.2", "2.3.0", "2.6.0")] + [("franz-go", "1.17.1"), ("sarama", "1.43.0")]
OVERRIDES = [("retention.ms", ["86400000", "604800000", "2592000000", "-1"]), ("cleanup.policy", ["compact", "delete"]),
             ("min.insync.replicas", ["1", "2"]), ("segment.bytes", ["104857600", "536870912"]),
             ("max.message.bytes", ["1048588", "5242880"]), ("compression.type", ["lz4", "zstd", "producer"])]
AT = datetime.now(UTC).replace(microsecond=0)
# What a 4.3 broker advertises (ApiVersions), as the poller stores it per broker.
API_VERSIONS = json.dumps({str(k): [0, v] for k, v in enumerate([11, 17, 10, 13, 7, 4, 8, 3, 9, 6, 6, 9, 4, 5, 5,
                                                                  6, 5, 1, 4, 7, 6, 5, 5, 5, 5, 5, 4, 1, 4, 4])})


def _ids(rng: random.Random, n: int) -> list[str]:
    raw = rng.randbytes(16 * n)
    return [base64.urlsafe_b64encode(raw[i * 16:(i + 1) * 16]).decode().rstrip("=") for i in range(n)]


def _names(rng: random.Random, clusters: int, per: int, shared: float, kind: str) -> list[list[str]]:
    """Per cluster, `per` names; clusters come in fours (prod-eu, prod-us, staging, dev of one application) sharing the
    first `shared` share of their names."""
    out = []
    for c in range(clusters):
        app = c // 4
        names = []
        for j in range(per):
            seed = (app * 1_000_003 + j) if j < per * shared else (c * 7_000_003 + j + 500_000)
            r = random.Random(seed)
            team, domain, entity = r.choice(TEAMS), r.choice(DOMAINS), r.choice(ENTITIES)
            if kind == "topic":
                names.append(f"{team}.{domain}.{entity}-{j}.v{r.randint(1, 5)}")
            else:
                names.append(f"{team}-{domain}-{r.choice(['svc', 'worker', 'sink', 'etl', 'stream'])}-{j}")
        out.append(names)
    return out


def _table(kind: str, columns: dict[str, Any], n: int) -> pa.Table:
    schema = schema_for(STATE_TABLES[kind])
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        if value is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value.cast(f.type))
        elif isinstance(value, list):
            arrays.append(pa.array(value, f.type))
        else:
            arrays.append(pa.array([value] * n, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def generate(root: Path, scale: float, seed: int = 38) -> dict[str, Any]:
    """Write the current state of the generated fleet (and the Spark job's heads) under root."""
    rng = random.Random(seed)
    np_rng = np.random.default_rng(seed)
    clusters = max(4, int(200 * scale))
    per_topics, per_groups, brokers_per = 5_000, 1_000, 5
    instances = int(100_000 * scale)
    lake = Lake(root)
    poll_id = new_poll_id(AT)
    broker_defs = sorted(load_catalogs()["kafka-4.3"].broker.values(), key=lambda d: d.name)
    broker_configs = [(d.name, None if d.sensitive else d.default) for d in broker_defs]
    topic_names = _names(rng, clusters, per_topics, 0.6, "topic")
    group_names = _names(rng, clusters, per_groups, 0.6, "group")
    counts = {"topics": 0, "groups": 0, "members": 0, "offsets": 0, "configs": 0}
    manifest = state.new_manifest()
    updates: dict[str, dict[str, pa.Table]] = {}
    for c in range(clusters):
        name, cid = f"c{c:03d}-{['prod-eu', 'prod-us', 'staging', 'dev'][c % 4]}", _ids(rng, 1)[0]
        head = {"poll_id": poll_id, "polled_at": AT, "cluster_name": name, "cluster_id": cid, "schema_version": 2}
        topics = topic_names[c]
        n = len(topics)
        parts = np_rng.choice([3, 6, 12, 24], size=n, p=[0.3, 0.3, 0.3, 0.1]).astype(np.int32)
        kinds: dict[str, pa.Table] = {}
        kinds["topics"] = _table("topics", {**head, "topic": topics, "topic_id": _ids(rng, n),
                                            "partitions": pa.array(parts), "replication_factor": 3, "internal": False,
                                            "under_replicated": 0, "offline_partitions": 0}, n)
        kinds["clusters"] = _table("clusters", {**head, "tags_json": json.dumps({"env": name.split("-", 1)[1],
                                                                                 "team": TEAMS[c % len(TEAMS)]}),
                                                "status": "ok", "broker_count": brokers_per,
                                                "brokers_reachable": brokers_per, "topic_count": n}, 1)
        bids = list(range(1, brokers_per + 1))
        kinds["brokers"] = _table("brokers", {**head, "broker_id": bids, "host": [f"{name}-b{b}.kafka.internal" for b in bids],
                                              "port": 9092, "rack": [f"rack-{b % 3}" for b in bids], "reachable": True,
                                              "software_name": "Apache Kafka", "software_version": "4.3.1",
                                              "version_provenance": "reported", "api_versions_json": API_VERSIONS,
                                              "probe_ms": 12.5}, brokers_per)
        nb = len(broker_configs) * brokers_per
        with_override = np_rng.random(n) < 0.5
        chosen = np_rng.integers(0, len(OVERRIDES), size=n)
        o_topics = [topics[i] for i in np.flatnonzero(with_override)]
        o_names = [OVERRIDES[chosen[i]][0] for i in np.flatnonzero(with_override)]
        o_values = [rng.choice(OVERRIDES[chosen[i]][1]) for i in np.flatnonzero(with_override)]
        kinds["configs"] = _table("configs", {
            **head, "resource_type": ["broker"] * nb + ["topic"] * len(o_topics),
            "resource": [str(b) for b in bids for _ in broker_configs] + o_topics,
            "config_name": [k for _ in bids for k, _ in broker_configs] + o_names,
            "value": [v for _ in bids for _, v in broker_configs] + o_values,
            "source": ["DEFAULT_CONFIG"] * nb + ["DYNAMIC_TOPIC_CONFIG"] * len(o_topics),
            "read_only": [d.read_only for _ in bids for d in broker_defs] + [False] * len(o_topics),
            "is_sensitive": [d.sensitive for _ in bids for d in broker_defs] + [False] * len(o_topics),
            "config_type": [d.type for _ in bids for d in broker_defs] + ["STRING"] * len(o_topics)}, nb + len(o_topics))
        kinds["config_runs"] = _table("config_runs", {**head, "collected_at": AT, "brokers": brokers_per}, 1)
        groups = group_names[c]
        g = len(groups)
        reads = np_rng.integers(1, 4, size=g)
        topic_of = [np_rng.integers(0, n, size=k) for k in reads]
        members = np_rng.integers(1, 5, size=g)
        window = [AT - timedelta(minutes=10 - i) for i in range(10)]
        lags = np_rng.integers(0, 10_000, size=(g, 10))
        kinds["groups"] = _table("groups", {
            **head, "group_id": groups, "group_type": [rng.choice(["classic", "consumer"]) for _ in groups],
            "protocol_type": "consumer", "protocol": "range", "state": "Stable", "coordinator_id":
                pa.array(np_rng.integers(1, brokers_per + 1, size=g).astype(np.int32)),
            "members": pa.array(members.astype(np.int32)), "topics": pa.array(reads.astype(np.int32)),
            "partitions": pa.array(np.array([int(parts[t].sum()) for t in topic_of], dtype=np.int32)),
            "topic_names": [[topics[i] for i in t] for t in topic_of],
            "lag": pa.array(lags[:, -1]), "lag_partitions": pa.array((lags[:, -1] > 0).astype(np.int32)),
            "max_partition_lag": pa.array(lags[:, -1] // 2), "status": "ok", "status_since": AT - timedelta(days=3),
            "evidence_json": json.dumps({"window": 10, "lag_grew": False}), "last_commit_at": AT,
            "first_seen_at": AT - timedelta(days=20), "window_at": [window] * g,
            "window_lag": lags.tolist(), "window_committed": (lags * 1000 + 7).tolist(), "collected_at": AT}, g)
        m_groups = np.repeat(np.arange(g), members)
        m = len(m_groups)
        member_ids = [f"consumer-{groups[k]}-{i}-{rng.getrandbits(128):032x}" for i, k in enumerate(m_groups)]
        kinds["group_members"] = _table("group_members", {
            **head, "group_id": pc.take(pa.array(groups), pa.array(m_groups)), "member_id": member_ids,
            "client_id": [f"{groups[k].rsplit('-', 1)[0]}-client" for k in m_groups],
            "client_host": [f"/10.{c % 250}.{i % 250}.{i // 250 % 250}" for i in range(m)],
            "member_type": "consumer", "assigned_partitions": 3,
            "assignment_json": [json.dumps({topics[topic_of[k][0]]: [0, 1, 2]}) for k in m_groups],
            "subscribed_json": [json.dumps([topics[t] for t in topic_of[k]]) for k in m_groups]}, m)
        off_group = np.repeat(np.arange(g), [int(parts[t].sum()) for t in topic_of])
        off_topic = np.concatenate([np.repeat(t, parts[t]) for t in topic_of])
        off_part = np.concatenate([np.arange(parts[t_]) for t in topic_of for t_ in t])
        o = len(off_group)
        committed = np_rng.integers(0, 10**9, size=o)
        lag = np_rng.integers(0, 1000, size=o)
        first_member = np.concatenate([[0], np.cumsum(members)[:-1]])
        kinds["group_offsets"] = _table("group_offsets", {
            **head, "group_id": pc.take(pa.array(groups), pa.array(off_group)),
            "topic": pc.take(pa.array(topics), pa.array(off_topic)), "partition": pa.array(off_part.astype(np.int32)),
            "committed_offset": pa.array(committed), "end_offset": pa.array(committed + lag), "lag": pa.array(lag),
            "member_id": pc.take(pa.array(member_ids), pa.array(first_member[off_group])),
            "topic_id": pc.take(kinds["topics"].column("topic_id"), pa.array(off_topic)),
            "last_moved_at": pa.array([AT - timedelta(seconds=int(x)) for x in np_rng.integers(0, 600, size=o)],
                                      pa.timestamp("us", tz="UTC")),
            "lag_since": pa.array([AT - timedelta(seconds=int(x)) if x % 3 else None
                                   for x in np_rng.integers(0, 6000, size=o)], pa.timestamp("us", tz="UTC"))}, o)
        kinds["group_runs"] = _table("group_runs", {**head, "collected_at": AT}, 1)
        inv = [(b, s) for b in bids for s in rng.sample(SOFTWARE, 5)]
        kinds["inventory"] = _table("inventory", {
            **head, "kind": "connections", "broker_id": [b for b, _ in inv], "endpoint": [f"b{b}:7071" for b, _ in inv],
            "listener": "PLAINTEXT", "software_name": [s[0] for _, s in inv], "software_version": [s[1] for _, s in inv],
            "connections": [rng.randint(1, 500) for _ in inv]}, len(inv))
        kinds["inventory_runs"] = _table("inventory_runs", {**head, "collected_at": AT, "status": "ok"}, 1)
        updates[name] = kinds
        counts["topics"] += n
        counts["groups"] += g
        counts["members"] += m
        counts["offsets"] += o
        counts["configs"] += nb + len(o_topics)
        if len(updates) == 20 or c == clusters - 1:
            manifest = state.write_cluster_states(lake, manifest, updates)
            updates = {}
    cluster_ids = [r["cluster_id"] for r in state.read_state(lake, "clusters").to_pylist()]
    heads = _heads(rng, instances, cluster_ids)
    tables_dir = "g000001-bench"
    (root / "_state" / "pipeline" / tables_dir).mkdir(parents=True)
    pq.write_table(heads, root / "_state" / "pipeline" / tables_dir / "heads.parquet", compression="zstd")
    (root / "_state" / "pipeline" / "state.json").write_text(json.dumps({"format": 6, "schema_version": 1,
                                                                         "generation": 1, "tables": tables_dir}))
    return {"clusters": clusters, "instances": instances, **counts, "cluster_ids": cluster_ids}


def _heads(rng: random.Random, n: int, cluster_ids: list[str]) -> pa.Table:
    software = [rng.choice(SOFTWARE) for _ in range(n)]
    services = [f"{rng.choice(DOMAINS)}-{rng.choice(['svc', 'api', 'worker', 'etl'])}" for _ in range(n)]
    return pa.Table.from_pydict({
        "client_instance_id": [f"{rng.getrandbits(128):032x}" for _ in range(n)],
        "snapshot_id": [f"s{i}" for i in range(n)], "received_at": [AT] * n,
        "cluster_id": [rng.choice(cluster_ids) for _ in range(n)], "broker_id": [1] * n,
        "client_id": [f"{s}-{rng.randint(0, 99)}" for s in services],
        "client_type": [rng.choice(["producer", "consumer", "admin"]) for _ in range(n)],
        "client_software_name": [s[0] for s in software], "client_software_version": [s[1] for s in software],
        "principal": [f"User:{s}" for s in services], "client_address": ["/10.0.0.1"] * n,
        "group_id": [None] * n, "cfg_client_id": [None] * n, "rows": [40] * n, "files": [["f.parquet"]] * n,
    }, schema=HEAD_SCHEMA)


def _size(paths: list[Path]) -> int:
    return sum(f.stat().st_size for p in paths for f in (p.rglob("*") if p.is_dir() else [p]) if f.is_file())


# ------------------------------------------------------------------------------------------ a poll that changed 1 %


def one_percent(root: Path, rng: random.Random, share: float = 0.01) -> tuple[pa.Table, dict[str, Any], int]:
    """Change rows (the `changes` table FleetWriter writes and hands over) and rewritten tables of a poll changing
    `share` of the fleet, spread over every cluster; and the number of entities it changed."""
    lake = Lake(root)
    manifest = state.read_manifest(lake) or {}
    topics = state.read_state(lake, "topics", manifest=manifest).select(["cluster_name", "cluster_id", "topic", "topic_id"])
    groups = state.read_state(lake, "groups", manifest=manifest).select(["cluster_name", "group_id", "group_type"])
    members = state.read_state(lake, "group_members", manifest=manifest)
    at = AT + timedelta(minutes=rng.randint(1, 10_000))
    changes: list[dict[str, Any]] = []

    def change(cluster: str, cid: str, entity: str, kind: str, subject: str, before: Any, after: Any) -> None:
        changes.append({"cluster_name": cluster, "cluster_id": cid, "entity": entity, "kind": kind, "subject": subject,
                        "seen_at": at, "before_json": None if before is None else json.dumps(before),
                        "after_json": None if after is None else json.dumps(after)})

    n_topics = int(topics.num_rows * share)
    picked = topics.take(pa.array(rng.sample(range(topics.num_rows), n_topics))).to_pylist()
    for i, t in enumerate(picked):
        row = {"topic": t["topic"], "topic_id": t["topic_id"], "partitions": 6, "replication_factor": 3, "internal": False}
        if i % 4 == 0:
            change(t["cluster_name"], t["cluster_id"], "topic", "topic_deleted", t["topic"], row, None)
        elif i % 4 == 1:
            change(t["cluster_name"], t["cluster_id"], "topic", "topic_recreated", t["topic"], row,
                   {**row, "topic_id": _ids(rng, 1)[0]})
        else:
            name = f"{t['topic']}.new{i}"
            change(t["cluster_name"], t["cluster_id"], "topic", "topic_created", name, None,
                   {**row, "topic": name, "topic_id": _ids(rng, 1)[0]})
    n_groups = int(groups.num_rows * share)
    picked_groups = groups.take(pa.array(rng.sample(range(groups.num_rows), n_groups))).to_pylist()
    touched: dict[str, set[str]] = {}
    for i, g in enumerate(picked_groups):
        facts = {"group_id": g["group_id"], "group_type": g["group_type"], "state": "Stable"}
        if i % 3 == 0:
            change(g["cluster_name"], "", "group", "group_deleted", g["group_id"], facts, None)
        elif i % 3 == 1:
            change(g["cluster_name"], "", "group", "group_created", g["group_id"] + ".new", None,
                   {**facts, "group_id": g["group_id"] + ".new"})
        else:
            change(g["cluster_name"], "", "group", "member_joined", f"{g['group_id']}: x (m)", None,
                   {"group_id": g["group_id"], "member_id": "m", "client_id": "new-client"})
            touched.setdefault(g["cluster_name"], set()).add(g["group_id"])
    for i in range(int(len(picked) / 4)):
        t = picked[i]
        entry = {"resource_type": "topic", "resource": t["topic"], "name": "retention.ms", "value": str(1000 * i),
                 "source": "DYNAMIC_TOPIC_CONFIG", "withheld": None, "read_only": False}
        change(t["cluster_name"], t["cluster_id"], "config", "config_set", f"topic {t['topic']}: retention.ms", None, entry)
    changes_table = pa.Table.from_pylist([{**c, "change_id": f"c{i}", "poll_id": "p", "schema_version": 2}
                                          for i, c in enumerate(changes)], schema=schema_for("changes"))
    # The members tables the write rewrote: every cluster with a group whose membership changed.
    names = pa.array(sorted(touched), pa.string())
    mine = members.filter(pc.is_in(members.column("cluster_name"), value_set=names))
    tables: dict[str, Any] = {}
    for name in sorted(touched):
        tables[name] = {"group_members": mine.filter(pc.equal(mine.column("cluster_name"), name))}
    return changes_table, tables, n_topics + n_groups + len(picked) // 4


# -------------------------------------------------------------------------------------------- queries and engines


def queries(snapshot: Any, rng: random.Random, n: int) -> dict[str, list[str]]:
    """Needles drawn from what the fleet holds (substrings and prefixes of real names and ids), fixed words, misses."""
    pools = [snapshot.tables["topic"].rows.column("topic"), snapshot.tables["group"].rows.column("group_id"),
             snapshot.tables["instance"].rows.column("client_id"), snapshot.tables["topic"].rows.column("topic_id")]

    def sample() -> str:
        pool = rng.choice(pools[:3] if rng.random() < 0.85 else pools[3:])
        return str(pool[rng.randrange(len(pool))].as_py())

    substring, prefix = [], []
    fixed = ["payments", "refunds.dlq", "checkout-svc", "v3", "librdkafka 2.6", "rack-2", "retention.ms", "zzqx",
             "no-such-topic-anywhere", "lz4"]
    for _ in range(max(0, n - len(fixed))):
        s = sample()
        start = rng.randrange(max(1, len(s) - 4))
        substring.append(s[start:start + rng.randint(4, 12)])
        prefix.append(sample()[: rng.randint(3, 14)])
    regex = [r"^payments\.", r"refunds.*v[0-9]$", r"\.dlq-[0-9]{3}\.", r"^(core|data)\.orders", r"[0-9]{4}\.v2$",
             r"^[a-z]+-[a-z]+-svc-1[0-9]$", r"fraud.*(events|state)", r"^user", r"ledger\.changelog-9", r"xyz$"]
    return {"substring": substring + fixed, "prefix": prefix + [f[:6] for f in fixed], "regex": regex * max(1, n // 20)}


def _stats(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))] * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1), "n": len(ordered)}


SEARCHED = {name: [(f.column, f.name) for f in spec.fields] for name, spec in TABLES.items()}


def pandas_frames(root: Path) -> dict[str, pd.DataFrame]:
    """The current-state tables' searchable columns as pandas frames, lowercased copies prepared (a plain scan)."""
    lake = Lake(root)
    manifest = state.read_manifest(lake)

    def read(kind: str, columns: list[str]) -> pd.DataFrame:
        return state.read_state(lake, kind, manifest=manifest).select(columns).to_pandas()

    frames = {"topic": read("topics", ["cluster_name", "topic", "topic_id"]),
              "group": read("groups", ["cluster_name", "group_id"]),
              "member": read("group_members", ["cluster_name", "client_id"]),
              "config": read("configs", ["cluster_name", "config_name", "value"]),
              "broker": read("brokers", ["cluster_name", "host", "rack"]),
              "cluster": read("clusters", ["cluster_name", "cluster_id", "tags_json"])}
    heads = pq.read_table(next((root / "_state" / "pipeline").rglob("heads.parquet"))).to_pandas()
    heads["software"] = heads["client_software_name"] + " " + heads["client_software_version"]
    frames["instance"] = heads[["cluster_id", "client_id", "client_instance_id", "principal", "software"]].copy()
    for frame in frames.values():
        for column in [c for c in frame.columns if c not in ("cluster_name",)]:
            frame["lc_" + column] = frame[column].astype("string").str.lower()
    return frames


def pandas_query(frames: dict[str, pd.DataFrame], needle: str, mode: str, limit: int = 100) -> int:
    """Count every match and pick the best `limit` (exact, prefix, substring; shorter first), as the index does."""
    total, best = 0, []
    low = needle.lower()
    for frame in frames.values():
        hit = pd.Series(False, index=frame.index)
        rank = pd.Series(9, index=frame.index)
        for column in [c for c in frame.columns if c.startswith("lc_")]:
            values = frame[column]
            if mode == "substring":
                m = values.str.contains(low, regex=False, na=False)
            elif mode == "prefix":
                m = values.str.startswith(low, na=False)
            else:
                m = frame[column[3:]].astype("string").str.contains(needle, case=False, regex=True, na=False)
            if m.any():
                r = (~values[m].eq(low)).astype(int) + (~values[m].str.startswith(low, na=False)).astype(int)
                rank[m.index[m]] = np.minimum(rank[m.index[m]], r)
            hit |= m
        total += int(hit.sum())
        if hit.any():
            best.append(rank[hit].nsmallest(limit))
    if best:
        pd.concat(best).nsmallest(limit)
    return total


def duckdb_tables(root: Path) -> Any:
    """The index's Parquet files (base files; no deltas at this point) loaded into an in-memory DuckDB."""
    import duckdb

    con = duckdb.connect()
    for name in TABLES:
        part = "clients" if TABLES[name].part == "clients" else "fleet"
        files = sorted(str(p) for p in (root / "_state" / "search" / part / name).glob("b*.parquet"))
        con.execute(f"CREATE TABLE t_{name} AS SELECT row_number() OVER () AS rid, * FROM read_parquet({files!r})")
    return con


def duckdb_query(con: Any, needle: str, mode: str, limit: int = 100) -> int:
    """The same query in SQL: every searched column (ids only for a long enough piece, as the index), a count and the
    best `limit` rows by rank and length."""
    low = needle.lower()
    parts = []
    for name, fields in SEARCHED.items():
        for column, _ in fields:
            spec = next(f for f in TABLES[name].fields if f.column == column)
            if spec.unique and mode != "regex" and len(needle) < (3 if mode == "prefix" else 4):
                continue
            if spec.chars is not None and mode != "regex" and not set(low) <= spec.chars:
                continue
            if mode == "substring" and not spec.unique:
                cond = f"contains(lower({column}), $n)"
            elif mode != "regex":  # prefix mode, and ids (found by their beginning)
                cond = f"starts_with(lower({column}), $n)"
            else:
                cond = f"regexp_matches({column}, $r, 'i')"
            rank = f"(CASE WHEN lower({column}) = $n THEN 0 WHEN starts_with(lower({column}), $n) THEN 1 ELSE 2 END)"
            parts.append(f"SELECT '{name}' AS t, rid, cluster, {rank} AS rank, length({column}) AS len FROM t_{name} "
                         f"WHERE {cond}")
    sql = " UNION ALL ".join(parts)
    params = {"n": low, "r": needle} if mode == "regex" else {"n": low}
    con.execute(f"SELECT * FROM ({sql}) ORDER BY rank, len LIMIT {limit}", params).fetchall()
    return int(con.execute(f"SELECT count(*) FROM (SELECT DISTINCT t, rid FROM ({sql}))", params).fetchone()[0])


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def main() -> None:
    """Run the benchmark and print its JSON document."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="share of the 200-cluster fleet (1.0: all of it)")
    parser.add_argument("--queries", type=int, default=40, help="queries per mode")
    parser.add_argument("--updates", type=int, default=3, help="1 %% updates measured")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the generated lake here; a lake already generated there is used again (its index "
                             "removed first)")
    parser.add_argument("--no-pandas", action="store_true")
    parser.add_argument("--no-duckdb", action="store_true")
    args = parser.parse_args()
    rng = random.Random(38)
    root = (args.keep or Path(tempfile.mkdtemp(prefix="search-bench-"))) / "lake"
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    try:
        if (root / "_state" / "fleet" / "state.json").exists():
            shutil.rmtree(root / "_state" / "search", ignore_errors=True)
            manifest = state.read_manifest(Lake(root)) or {}
            out["fleet"] = {"clusters": len(manifest.get("clusters", {})), "reused": str(root)}
        else:
            seconds, fleet = _timed(lambda: generate(root, args.scale))
            out["fleet"] = {k: v for k, v in fleet.items() if k != "cluster_ids"} | {"generate_s": round(seconds, 1)}
        state_size = _size([root / "_state" / "fleet" / "current", root / "_state" / "pipeline"])

        rss = _rss_mb()
        build_fleet, indexer = _timed(lambda: FleetIndexer(Lake(root)))
        heads = pq.read_table(next((root / "_state" / "pipeline").rglob("heads.parquet")))
        build_clients, client_indexer = _timed(lambda: ClientIndexer(str(root)))
        build_clients_s, _ = _timed(lambda: client_indexer.apply_run(None, 1, heads.slice(0, 0), heads, full=True))
        full_s = build_fleet + build_clients + build_clients_s
        index_size = _size([root / "_state" / "search"])
        rows = {name: int(entry["base_rows"]) for part in ("fleet", "clients")
                for name, entry in (index_store.read_manifest(Lake(root).where, part) or {"tables": {}})["tables"].items()}
        out["build"] = {"full_s": round(full_s, 2), "fleet_s": round(build_fleet, 2),
                        "clients_s": round(build_clients + build_clients_s, 2), "rows": rows,
                        "rss_growth_mb": round(_rss_mb() - rss, 1)}
        out["size"] = {"index_bytes": index_size, "current_state_bytes": state_size,
                       "index_over_state": round(index_size / state_size, 3),
                       "index_files": len(list((root / "_state" / "search").rglob("*.parquet")))}

        rss = _rss_mb()
        reader = IndexReader(str(root), check_every_s=0.0)
        cold_s, snapshot = _timed(reader.snapshot)
        out["reader"] = {"cold_load_s": round(cold_s, 2), "rss_growth_mb": round(_rss_mb() - rss, 1),
                         "rows": snapshot.rows}
        needles = queries(snapshot, rng, args.queries)

        refused: list[str] = []

        def product(q: str, m: str) -> int:
            try:
                return search(snapshot, q, mode=m).total
            except QueryRefused:  # past the regex time limit on a loaded machine: counted, timed like the others
                refused.append(q)
                return -1

        engines: dict[str, Any] = {"index": product}
        if not args.no_duckdb:
            con = duckdb_tables(root)
            engines["duckdb_over_index"] = lambda q, m: duckdb_query(con, q, m)
        if not args.no_pandas:
            frames = pandas_frames(root)
            engines["pandas_scan"] = lambda q, m: pandas_query(frames, q, m)
        latency: dict[str, Any] = {}
        agree: dict[str, int] = {}
        for mode, items in needles.items():
            times: dict[str, list[float]] = {name: [] for name in engines}
            for needle in items:
                totals = {}
                for name, run in engines.items():  # interleaved: the same load on each side
                    seconds, totals[name] = _timed(lambda run=run, needle=needle, mode=mode: run(needle, mode))
                    times[name].append(seconds)
                same = totals.get("duckdb_over_index", totals["index"]) == totals["index"]
                agree[mode] = agree.get(mode, 0) + int(same)
            latency[mode] = {name: _stats(t) for name, t in times.items()}
            for name in engines:
                if name != "index":
                    latency[mode][f"{name}_over_index_p50"] = round(
                        latency[mode][name]["p50_ms"] / max(latency[mode]["index"]["p50_ms"], 0.1), 1)
        out["queries"] = latency
        out["index_refused"] = refused
        # The index and DuckDB read the same rows: their counts must agree. pandas scans the state tables' rows (a
        # member per row, not a (group, client id) pair; raw tags JSON): its counts differ, its work is the same scan.
        out["index_and_duckdb_same_totals"] = {mode: f"{agree[mode]} of {len(items)}" for mode, items in needles.items()}

        updates = []
        for _ in range(args.updates):
            changes, tables, changed = one_percent(root, rng)
            seconds, result = _timed(lambda changes=changes, tables=tables: indexer.apply(
                indexer.store.source_generation, (indexer.store.source_generation or 0) + 1, changes, tables))
            clients_changed = heads.take(pa.array(rng.sample(range(heads.num_rows), heads.num_rows // 100)))
            clients_changed = clients_changed.set_column(
                clients_changed.schema.get_field_index("client_software_version"), "client_software_version",
                pa.array(["9.9.9"] * clients_changed.num_rows))
            generation_clients = client_indexer.store.source_generation
            c_seconds, _ = _timed(lambda c=clients_changed, g=generation_clients: client_indexer.apply_run(
                g, (g or 0) + 1, c, heads, full=False))
            refresh_s, snapshot = _timed(reader.snapshot)
            updates.append({"changed": changed + clients_changed.num_rows, "fleet_s": round(seconds, 3),
                            "clients_s": round(c_seconds, 3), "total_s": round(seconds + c_seconds, 3),
                            "delta_rows": result.rows, "compacted": result.compacted,
                            "reader_refresh_s": round(refresh_s, 2)})
        typical = statistics.median(u["total_s"] for u in updates)
        out["update_1pct"] = {"runs": updates, "median_s": typical, "over_full_build": round(typical / full_s, 4)}
        compact_s, buckets = _timed(indexer.store.compact)
        per_update_rows = sum(sum(u["delta_rows"].values()) for u in updates) / len(updates)
        threshold_rows = index_store.COMPACT_FRACTION * rows["topic"]
        out["compaction"] = {"s": round(compact_s, 2), "buckets": buckets,
                             "updates_between": round(threshold_rows / max(per_update_rows, 1), 1),
                             "amortized_over_full_build": round(
                                 (compact_s / max(threshold_rows / max(per_update_rows, 1), 1) + typical) / full_s, 4)}
        refresh_s, snapshot = _timed(reader.snapshot)
        out["reader"]["refresh_after_compaction_s"] = round(refresh_s, 2)
        out["load_after"] = os.getloadavg()
    finally:
        if args.keep is None:
            shutil.rmtree(root.parent, ignore_errors=True)
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
