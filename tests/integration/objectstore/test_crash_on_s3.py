"""Crash consistency of the lake on S3: `poll --once`, `ingest` and `analyze` killed with SIGKILL at random moments
leave a lake that reads whole, the next runs continue from what was committed, and a refresh equals a full run; two
`poll --once` started at once commit each generation of the fleet state exactly once.

The CLIs run as a user runs them, against the lab fleet (KRaft clusters, in this process) and an s3:// lake on a
real S3-compatible server, configured by the standard AWS variables only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.lab.clientgen import push_client_fleet
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from backend.pipeline.job import SPARK_RESULTS, run_analysis
from backend.pipeline.state_store import LakePaths, read_state
from backend.store import progress, readers, state
from backend.store.lake import Lake
from backend.store.tables import read_table
from tests.rig.objectstores import S3Server
from tests.rig.procs import REPO, log_tail

SEED = random.randrange(1 << 30)


@pytest.fixture(scope="module")
def kraft_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """lab.toml's KRaft clusters (no ZooKeeper needed) on free ports, with a PushConfig sink of their own."""
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw["clusters"] = [c for c in raw["clusters"] if "zookeeper" not in c and "misrouted_to" not in c][:3]
    raw.setdefault("lab", {})["state_dir"] = str(tmp_path_factory.mktemp("crash-lab"))
    lab = LabFleet(parse_lab_config(raw, REPO))
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def s3_lake(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[S3Server, str]]:
    """A fresh bucket's lake URI, and this process pointed at the server by the AWS variables."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    progress.forget_versions()
    yield s3_server, f"s3://{s3_server.new_bucket('crash')}/lake"


def _env(server: S3Server) -> dict[str, str]:
    return {**os.environ, **server.env(), "PYTHONPATH": str(REPO), "FLEETVIEW_SPARK_SHUFFLE_PARTITIONS": "2"}


def _start(args: list[str], server: S3Server, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "backend", *args], cwd=REPO, env=_env(server), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _kill_at_random(proc: subprocess.Popen[bytes], rng: random.Random, longest_s: float,
                    after: tuple[Path, str] | None = None) -> bool:
    """SIGKILL the process group at a random moment within longest_s (counted from when `after`'s log shows its
    text, if given: the run is at work); True if it was still running then."""
    if after is not None:
        log, text = after
        start = log.stat().st_size if log.exists() else 0
        limit = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < limit and text not in log.read_text(errors="replace")[start:]:
            time.sleep(0.05)
    deadline = time.monotonic() + rng.uniform(0.3, longest_s)
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    running = proc.poll() is None
    if running:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return running


def _fleet_lake_reads_whole(lake: str) -> None:
    """Every file the committed manifest names exists; the readers read without error."""
    where = Lake(lake)
    manifest = state.read_manifest(where)
    if manifest is not None:
        named = [path for entry in manifest.get("clusters", {}).values() for path in entry.values()]
        named += [manifest[state.OPEN_ENTRY]] if manifest.get(state.OPEN_ENTRY) else []
        for entry in named:
            assert where.where.exists(state.state_path(where, entry)), f"the manifest names a missing file {entry}"
    readers.latest_fleet_state(lake, with_data=True)
    readers.incidents(lake)
    readers.changes(lake)
    readers.poll_history(lake)


def test_sigkill_of_poll_then_two_pollers_at_once(kraft_lab: LabFleet, s3_lake: tuple[S3Server, str],
                                                  tmp_path: Path) -> None:
    server, lake = s3_lake
    rng = random.Random(SEED)
    fleet_file = kraft_lab.write_fleet_file(tmp_path / "clusters.toml")
    log = tmp_path / "cli.log"
    poll = ["poll", "--once", "--config", str(fleet_file), "--lake", lake]
    killed = attempts = 0
    while killed < 2 and attempts < 6:  # two kills of a running poll (one that finished first does not count)
        attempts += 1
        killed += _kill_at_random(_start(poll, server, log), rng, 4.0)
        _fleet_lake_reads_whole(lake)
    done = subprocess.run([sys.executable, "-m", "backend", *poll], cwd=REPO, env=_env(server), capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    _fleet_lake_reads_whole(lake)
    topics = readers.latest_topics(lake)
    for name in kraft_lab.clusters:
        wanted = {t.name for t in kraft_lab.runtimes[name].spec.topics}
        assert set(topics[topics["cluster_name"] == name]["topic"]) >= wanted, name
    assert set(readers.latest_clusters(lake)["cluster_name"]) == set(kraft_lab.clusters)

    assert killed >= 1, f"no poll was still running at its kill (seed {SEED}):\n{log_tail(log)}"

    # Two pollers started at once, each seeing a change (a new topic): each generation is committed by one of them.
    for round_ in range(1):
        topic = f"duel-{server.name}-{round_}"
        kraft_lab.create_topic("prod-eu", topic, partitions=1, replication_factor=1)
        before = int((state.read_manifest(Lake(lake)) or {})["generation"])
        procs = [subprocess.Popen([sys.executable, "-m", "backend", *poll], cwd=REPO, env=_env(server),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = [(p.wait(timeout=180), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in outcomes)
        assert codes in ([0, 0], [0, 3]), outcomes
        for code, _out, err in outcomes:
            if code == 3:
                assert "another writer committed the fleet state first" in err, err
        after = int((state.read_manifest(Lake(lake)) or {})["generation"])
        created = readers.changes(lake, kinds="topic_created")
        assert after > before
        assert list(created["subject"]).count(topic) == 1, created  # one winner, one change row
        _fleet_lake_reads_whole(lake)


def _results(lake: str) -> dict[str, list[str]]:
    out = {}
    for name in SPARK_RESULTS:
        rows = read_table(lake, f"results/{name}").to_pylist()
        out[name] = sorted(json.dumps({k: v for k, v in r.items() if k not in ("computed_at", "alert_id")},
                                      sort_keys=True, default=str) for r in rows)
    return out


@pytest.mark.parametrize("s3_server", ["seaweedfs"], indirect=True)
def test_sigkill_of_ingest_and_analyze_then_a_refresh_equals_a_full_run(
        kraft_lab: LabFleet, s3_lake: tuple[S3Server, str], tmp_path: Path, spark: Any) -> None:
    """The killed `analyze` runs are processes of their own (their JVMs take the lake's credentials from their
    environment, as deployed); the others run in the test run's Spark session, which started before this test knew
    the bucket: it is given the bucket's key by Hadoop's per-bucket settings (test-only)."""
    server, lake = s3_lake
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    bucket = lake[len("s3://"):].split("/", 1)[0]
    for key, value in (("aws.credentials.provider", "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"),
                       ("access.key", server.access_key), ("secret.key", server.secret_key)):
        hadoop.set(f"fs.s3a.bucket.{bucket}.{key}", value)
    rng = random.Random(SEED + 1)
    push_client_fleet(kraft_lab, 60, seed=7)
    log = tmp_path / "analyze.log"
    sink = str(kraft_lab.config.sink_dir)
    # Ingest killed at random moments: the lake reads whole, the next run continues; no record is lost.
    ingest = ["ingest", "--sink", sink, "--lake", lake]
    killed = attempts = 0
    while killed < 2 and attempts < 6:
        attempts += 1
        if attempts > 1:  # an ingest that finished before its kill left nothing to do: give the next one work
            push_client_fleet(kraft_lab, 30, seed=100 + attempts)
        killed += _kill_at_random(_start(ingest, server, log), rng, 4.0)
        read_table(lake, "client_configs")
        read_table(lake, "results/ingest_stats")
    assert killed >= 1, f"no ingest was still running at its kill (seed {SEED}):\n{log_tail(log)}"
    records = {json.loads(line)["snapshot_id"] for path in Path(sink).rglob("*.jsonl")
               for line in path.read_text().splitlines() if line.strip()}
    done = subprocess.run([sys.executable, "-m", "backend", *ingest], cwd=REPO, env=_env(server),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert set(read_table(lake, "client_configs").column("snapshot_id").to_pylist()) == records
    analyze = ["analyze", "--lake", lake, "--master", "local[2]"]
    assert run_analysis(lake, master="local[2]").instances > 0  # the committed state the kills start from
    push_client_fleet(kraft_lab, 40, seed=8)  # more instances, and pushes again by the first ones
    assert subprocess.run([sys.executable, "-m", "backend", "ingest", "--sink", sink, "--lake", lake], cwd=REPO,
                          env=_env(server), capture_output=True, timeout=180).returncode == 0
    for _ in range(2):
        # at a random moment of the run (its JVM up and reading the lake): Spark at work, the commit, the switches
        _kill_at_random(_start(analyze, server, log), rng, 6.0, after=(log, "new client_configs files"))
        found = read_state(LakePaths(lake))
        assert found.state is not None, "a committed pipeline state stays readable after a kill"
        for name in SPARK_RESULTS:
            read_table(lake, f"results/{name}")  # each switched table reads whole
    refresh = run_analysis(lake, master="local[2]")
    assert not refresh.full, refresh.full_reason  # from the committed state (a killed run's, maybe)
    refreshed = _results(lake)
    assert run_analysis(lake, master="local[2]", full=True).full  # the same files, from nothing
    assert _results(lake) == refreshed
    assert sum(len(rows) for rows in refreshed.values()) > 20
