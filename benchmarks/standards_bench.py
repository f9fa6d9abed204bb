"""Standards: 200 clusters x 2,000 topics judged by 50 policies, full evaluation against a poll that changed 1 %.

Run: .venv/bin/python -m benchmarks.standards_bench [--clusters 200] [--topics 2000] [--rounds 5]

Synthetic FleetPolls (no network), the poller's own engine (`StandardsEngine.evaluate`) and lake writer
(`FleetWriter.write`). 50 policies over every kind the lake feeds the poller: 26 topic policies (topic_config with
where-conditions and name patterns, topic_shape), 12 broker_config, 6 cluster (mode, floors, guessed ranges),
6 consumer_groups (40 groups per cluster). Every cluster has 3 brokers with 60 configs and 5 % of its topics carry
overrides. Tags split the fleet (prod / staging, 4 regions) so selectors matter.

Measured, side by side in one run (each repeated `--rounds` times, median):
- full: a fresh engine judges the whole fleet (the poller's first poll, or a new policy file);
- unchanged: a poll where nothing changed (the steady state of a 30 s poller);
- +1 % topics: 1 % of the topics changed, spread over every cluster (20 per cluster get a new replication
  factor or override; each cluster's topic list and overrides are new objects, as the poller and collector make);
- +1 % clusters: 1 % of the clusters (2) changed everything (new topic lists, configs and groups);
- the poll cycle's write with and without standards: `FleetWriter.write` of the same polls, alternating, for the
  unchanged and the +1 % cases (the evaluation added to a cycle, against the cycle).
Targets (issue 39): incremental <= 5 % of full; the poll cycle's time unchanged within noise. `--findings` sets how
many topics break each topic policy (2 % by default; 1 cluster in 10 also has min.insync.replicas = 1 for every
topic, so its min-isr policies find every replicated topic): the work after a change follows what changed plus the
findings of the (policy, cluster) pairs it touched.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.standards.engine import StandardsEngine
from backend.standards.policy import parse_policies
from backend.store.fleet_writer import FleetWriter
from backend.store.group_model import GroupSnapshot, GroupState
from backend.store.lake import Lake, new_poll_id
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, FleetPoll, TopicSnapshot

START = datetime.now(UTC).replace(microsecond=0)
REGIONS = ("eu", "us", "ap", "sa")


def policy_file() -> str:
    """50 policies of every kind the poller judges."""
    parts = []

    def add(pid: str, body: str, select: str = "") -> None:
        parts.append(f'[[policies]]\nid = "{pid}"\ntitle = "{pid}"\n{select}{body}\n')

    prod = 'select = { env = "prod" }\n'
    for i in range(8):
        add(f"rf-{i}", f'check = "topic_shape"\nreplication_factor = {{ min = {2 + i % 2} }}\n'
                       f'topics = ["t{i}*"]', prod if i % 2 else "")
    for i in range(4):
        add(f"partitions-{i}", f'check = "topic_shape"\npartitions = {{ max = {40 + i} }}')
    for i in range(6):
        add(f"min-isr-{i}", 'check = "topic_config"\nconfig = "min.insync.replicas"\nrequire = { min = 2 }\n'
                            'where = { replication_factor = { min = 3 } }', prod if i % 2 else "")
    for i in range(4):
        add(f"retention-{i}", f'check = "topic_config"\nconfig = "retention.ms"\nrequire = {{ min = {86400000 * (i + 1)} '
                              f'}}\nexclude_topics = ["t9*"]')
    for i in range(4):
        add(f"cleanup-{i}", 'check = "topic_config"\nconfig = "cleanup.policy"\nrequire = { one_of = ["delete", '
                            '"compact"] }\nwhere = { partitions = { min = 2 } }')
    broker_keys = ["unclean.leader.election.enable", "auto.create.topics.enable", "log.retention.hours",
                   "default.replication.factor", "num.partitions", "message.max.bytes"]
    for i in range(12):
        key = broker_keys[i % len(broker_keys)]
        req = "false" if key.endswith("enable") else "{ min = 1 }"
        add(f"broker-{i}", f'check = "broker_config"\nconfig = "{key}"\nrequire = {req}',
            f'select = {{ region = "{REGIONS[i % 4]}" }}\n' if i % 3 == 0 else "")
    for i, body in enumerate(['mode = "kraft"', 'version_min = "3.9.2"', 'version_min = "3.7"', 'version_max = "4.3"',
                              'version_min = "4.0"', 'mode = "kraft"\nversion_min = "3.9"']):
        add(f"cluster-{i}", f'check = "cluster"\n{body}', prod if i % 2 else "")
    for i, body in enumerate(['status = { not_one_of = ["stalled", "stopped"] }', 'group_type = { not_equals = "classic" }',
                              'state = { not_equals = "Dead" }', 'status = { not_equals = "empty_with_lag" }',
                              'group_type = { one_of = ["consumer", "share"] }', 'status = { not_equals = "lagging" }']):
        add(f"groups-{i}", f'check = "consumer_groups"\n{body}')
    return "\n".join(parts)


def _broker_configs(i: int) -> dict[str, ConfigValue]:
    configs = {f"x.config.{k}": ConfigValue(str(k), "DEFAULT_CONFIG") for k in range(54)}
    configs.update({
        "min.insync.replicas": ConfigValue("2" if i % 10 else "1", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "unclean.leader.election.enable": ConfigValue("false", "DEFAULT_CONFIG"),
        "auto.create.topics.enable": ConfigValue("true" if i % 7 == 0 else "false", "STATIC_BROKER_CONFIG"),
        "log.retention.hours": ConfigValue("168", "DEFAULT_CONFIG"), "log.retention.ms": ConfigValue(None, "DEFAULT_CONFIG"),
        "log.cleanup.policy": ConfigValue("delete", "DEFAULT_CONFIG"),
        "default.replication.factor": ConfigValue("3", "STATIC_BROKER_CONFIG"),
        "process.roles": ConfigValue("broker" if i % 4 else "", "STATIC_BROKER_CONFIG"),
    })
    return configs


def build_fleet(n_clusters: int, n_topics: int, findings: float = 0.02) -> list[ClusterSnapshot]:
    """The synthetic fleet (see the module docstring): `findings` of the topics break each topic policy."""
    clusters = []
    step = max(int(1 / findings), 2)
    for i in range(n_clusters):
        topics = [TopicSnapshot(f"t{k % 10}-{k}", f"id-{i}-{k}", partitions=64 if k % step == 1 else 1 + k % 12,
                                replication_factor=2 if k % step == 0 else 1 if k % (step * 2) == 3 else 3)
                  for k in range(n_topics)]
        overrides = {t.topic: {"retention.ms": ConfigValue(str(3_600_000 if k % (step * 5) == 0 else 604_800_000),
                                                           "DYNAMIC_TOPIC_CONFIG")}
                     for k, t in enumerate(topics) if k % 20 == 0}
        configs = ConfigSnapshot(START, {b: _broker_configs(i) for b in (1, 2, 3)}, overrides)
        version = ("4.3.1", "reported", None, None) if i % 3 == 0 else ("", "guessed", "3.9", "3.9")
        brokers = [BrokerSnapshot(b, "h", 9092, reachable=True, software_name="Apache Kafka",
                                  software_version=version[0] or None, version_provenance=version[1],
                                  version_min=version[2], version_max=version[3]) for b in (1, 2, 3)]
        groups = GroupSnapshot(START, groups={f"g{k}": GroupState(f"g{k}", group_type=("classic", "consumer")[k % 2],
                                                                 state="Stable", status=("ok", "lagging")[k % 9 == 0])
                                              for k in range(40)})
        clusters.append(ClusterSnapshot(cluster_name=f"c{i:03d}", status="ok", polled_at=START,
                                        tags={"env": ("prod", "staging")[i % 2], "region": REGIONS[i % 4]},
                                        cluster_id=f"id{i}", brokers=brokers, topics=topics, configs=configs,
                                        groups=groups))
    return clusters


def change_topics(clusters: list[ClusterSnapshot], share: float) -> list[ClusterSnapshot]:
    """`share` of every cluster's topics changed: half of them a new replication factor, half a new override (new
    objects for the changed topics, and new lists and override maps, as the poller and the config collector make)."""
    out = []
    step = max(int(2 / share), 2)
    for s in clusters:
        topics = [replace(t, replication_factor=3 if t.replication_factor != 3 else 2) if k % step == 7 else t
                  for k, t in enumerate(s.topics)]
        overrides = dict(s.configs.topics) if s.configs else {}
        for k in range(step // 2 + 7, len(topics), step):
            overrides[topics[k].topic] = {"min.insync.replicas": ConfigValue("1", "DYNAMIC_TOPIC_CONFIG")}
        configs = replace(s.configs, topics=overrides) if s.configs else None
        out.append(replace(s, topics=topics, configs=configs))
    return out


def change_clusters(clusters: list[ClusterSnapshot], count: int) -> list[ClusterSnapshot]:
    """`count` clusters changed everything (topics, configs, groups); the others are the same objects."""
    out = list(clusters)
    for i in range(count):
        s = out[i]
        topics = [replace(t, partitions=t.partitions + 1) for t in s.topics]
        configs = ConfigSnapshot(START, {b: {**e, "min.insync.replicas": ConfigValue("3", "DYNAMIC_BROKER_CONFIG")}
                                         for b, e in s.configs.brokers.items()}, dict(s.configs.topics)) \
            if s.configs else None
        groups = GroupSnapshot(START, groups={k: replace(g, status="stalled") for k, g in s.groups.groups.items()}) \
            if s.groups else None
        out[i] = replace(s, topics=topics, configs=configs, groups=groups)
    return out


def poll(clusters: list[ClusterSnapshot], at: datetime) -> FleetPoll:
    """A poll of these snapshots at a time (shallow copies: the writer and engine see the same objects inside)."""
    return FleetPoll(new_poll_id(at), at, [replace(s, polled_at=at, standards=None) for s in clusters], [], 0.0)


def timed(fn: Callable[[], object]) -> float:
    gc.collect()
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lab-clusters", type=int, default=0,
                        help="also time real poll cycles against a lab fleet of this many clusters (0: skip)")
    parser.add_argument("--lab-topics", type=int, default=2000)
    parser.add_argument("--workdir", default=None, help="where the lakes and the policy file go (default: a temp dir)")
    parser.add_argument("--findings", type=float, default=0.02,
                        help="share of the topics that break each topic policy (default 0.02; 0.33 for a fleet "
                             "where a third of the topics break them)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="standards-bench-", dir=args.workdir))
    try:
        (work / "policies.toml").write_text(policy_file())
        assert len(parse_policies(policy_file()).policies) == 50
        base = build_fleet(args.clusters, args.topics, args.findings)
        # The fleet lives as long as the run (as the poller's last snapshots do): out of the cyclic GC's way, and a
        # collection before each timed step, so no step pays for a full collection of the others' garbage.
        gc.collect()
        gc.freeze()
        print(f"fleet: {args.clusters} clusters x {args.topics} topics, 50 policies, {args.findings:.0%} of the topics "
              f"breaking each topic policy; load {os.getloadavg()}")
        fulls, unchanged, topics_1, clusters_1 = [], [], [], []
        judged = {}
        for r in range(args.rounds):
            engine = StandardsEngine(work / "policies.toml")
            at = START + timedelta(minutes=r)
            fulls.append(timed(lambda engine=engine, at=at: engine.evaluate(poll(base, at))))
            unchanged.append(timed(lambda engine=engine, at=at: engine.evaluate(poll(base, at + timedelta(seconds=30)))))
            moved = change_topics(base, 0.01)
            before = engine.topics_judged
            topics_1.append(timed(lambda engine=engine, moved=moved, at=at: engine.evaluate(
                poll(moved, at + timedelta(seconds=60)))))
            judged["+1 % topics"] = engine.topics_judged - before
            engine = StandardsEngine(work / "policies.toml")
            engine.evaluate(poll(base, at))
            before = engine.topics_judged
            moved = change_clusters(base, max(args.clusters // 100, 1))
            clusters_1.append(timed(lambda engine=engine, moved=moved, at=at: engine.evaluate(
                poll(moved, at + timedelta(seconds=60)))))
            judged["+1 % clusters"] = engine.topics_judged - before
        full = statistics.median(fulls)
        print("\n| evaluation | median s | of full | topics judged again |\n|---|---|---|---|")
        print(f"| full (a fresh engine) | {full:.3f} | 100 % | {args.clusters * args.topics} per topic policy |")
        for label, values in (("unchanged poll", unchanged), ("+1 % topics (every cluster)", topics_1),
                              ("+1 % clusters", clusters_1)):
            median = statistics.median(values)
            key = "+1 % topics" if "topics" in label else "+1 % clusters" if "clusters" in label else ""
            print(f"| {label} | {median:.3f} | {100 * median / full:.2f} % | {judged.get(key, 0)} |")
        cycle(work, base, args.rounds)
        if args.lab_clusters:
            lab_cycles(work, args.lab_clusters, args.lab_topics, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cycle(work: Path, base: list[ClusterSnapshot], rounds: int) -> None:
    """The poll cycle's write (FleetWriter.write) with and without standards, alternating, same polls."""
    rows: dict[str, list[float]] = {k: [] for k in ("plain unchanged", "with unchanged", "plain +1 %", "with +1 %")}
    lakes = {"plain": Lake(work / "lake-plain"), "with": Lake(work / "lake-with")}
    writers = {k: FleetWriter(v) for k, v in lakes.items()}
    engine = StandardsEngine(work / "policies.toml", str(work / "lake-with"))
    at = START + timedelta(hours=1)
    first = poll(base, at)
    writers["plain"].write(poll(base, at))
    engine.evaluate(first)
    writers["with"].write(first)
    current = base
    for r in range(rounds * 2):
        at += timedelta(seconds=30)
        changed = r % 2 == 1
        if changed:
            current = change_topics(current, 0.01)
        label = "+1 %" if changed else "unchanged"
        plain_poll, with_poll = poll(current, at), poll(current, at)
        rows[f"plain {label}"].append(timed(lambda p=plain_poll: writers["plain"].write(p)))
        rows[f"with {label}"].append(timed(lambda p=with_poll: (engine.evaluate(p), writers["with"].write(p))))
    print("\n| poll cycle (write, and the evaluation where on) | without standards s | with standards s | added |")
    print("|---|---|---|---|")
    for label in ("unchanged", "+1 %"):
        plain, with_ = statistics.median(rows[f"plain {label}"]), statistics.median(rows[f"with {label}"])
        print(f"| {label} | {plain:.3f} | {with_:.3f} | {100 * (with_ - plain) / plain:+.1f} % |")
    print(f"\nload after: {os.getloadavg()}")


def lab_cycles(work: Path, clusters: int, topics: int, rounds: int) -> None:
    """Real poll cycles (poll_fleet over a lab fleet in its own process, checks, the lake write) without and with
    the policies, alternating, in the steady state of a 30 s poller (the fleet does not change between polls)."""
    import subprocess
    import sys

    from backend.collect.configs import ConfigCollector
    from backend.collect.poller import poll_fleet
    from backend.config import parse_fleet
    from backend.kafka.admin import AdminClientCache

    lines = [f'[lab]\nstate_dir = "{work / "lab-state"}"\n']
    for c in range(clusters):
        lines.append(f'[[clusters]]\nname = "bench-{c:03d}"\nprofile = "apache-kafka-4-kraft-kip885"\n'
                     f'tags = {{ env = "{("prod", "staging")[c % 2]}", region = "{REGIONS[c % 4]}" }}\n'
                     "brokers = [ { id = 1, port = 0 }, { id = 2, port = 0 }, { id = 3, port = 0 } ]\n"
                     "topics = [\n" + "".join(f'  {{ name = "t{t % 10}-{t}", partitions = 1, replication_factor = '
                                              f'{2 if t % 50 == 0 else 3} }},\n' for t in range(topics)) + "]\n")
    (work / "lab.toml").write_text("\n".join(lines))
    fleet_file = work / "lab-clusters.toml"
    repo = Path(__file__).resolve().parents[1]
    lab = subprocess.Popen([sys.executable, "-m", "backend", "lab", "--config", str(work / "lab.toml"),
                            "--fleet-file", str(fleet_file)], cwd=repo, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not fleet_file.exists():
            if lab.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the lab did not start")
            time.sleep(0.5)
        time.sleep(1.0)
        fleet = parse_fleet("[settings]\nrequest_timeout_s = 60\npoll_deadline_s = 120\ngroup_interval_s = 0\n\n"
                            + fleet_file.read_text(), source=str(fleet_file))
        clients = AdminClientCache()
        configs = ConfigCollector()  # one per run, as run_poller keeps it: configs read when due (config_interval_s)
        writers = {k: FleetWriter(Lake(work / f"lab-lake-{k}")) for k in ("plain", "with")}
        engine = StandardsEngine(work / "policies.toml", str(work / "lab-lake-with"))
        previous: dict[str, ClusterSnapshot] = {}
        times: dict[str, list[float]] = {"plain": [], "with": []}
        for r in range(rounds * 2 + 2):
            kind = ("plain", "with")[r % 2]
            began = time.perf_counter()
            polled = poll_fleet(fleet, previous, clients=clients, configs=configs)
            if kind == "with":
                engine.evaluate(polled)
            writers[kind].write(polled)
            if r >= 2:  # the first of each warms clients, memos and state
                times[kind].append(time.perf_counter() - began)
            previous.update({s.cluster_name: s for s in polled.clusters if s.has_data})
        plain, with_ = statistics.median(times["plain"]), statistics.median(times["with"])
        spread = statistics.pstdev(times["plain"]) if len(times["plain"]) > 1 else 0.0
        print(f"\n| real poll cycle, lab fleet {clusters} x {topics} (poll + checks + write) | without standards s | "
              "with standards s | added | spread of plain (sd) |\n|---|---|---|---|---|")
        print(f"| steady state, {rounds} cycles each, alternating | {plain:.3f} | {with_:.3f} | "
              f"{100 * (with_ - plain) / plain:+.1f} % | {spread:.3f} s |")
        print("cycles plain: " + ", ".join(f"{t:.2f}" for t in times["plain"]) + "; with: "
              + ", ".join(f"{t:.2f}" for t in times["with"]))
    finally:
        lab.terminate()
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            lab.kill()


if __name__ == "__main__":
    main()
