"""A broker whose answer makes librdkafka abort() costs its own row only: the poller's librdkafka clients run in
helper processes, the culprit is isolated, and the poll goes on (run_poller and `python -m backend poll --once`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.collect.poller import run_poller
from backend.kafka.admin import AdminCallError
from backend.kafka.admin_helpers import AdminHelpers
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from backend.store import readers
from backend.store.model import FleetPoll
from tests.integration.collect.conftest import fleet_from
from tests.rig.procs import REPO

pytestmark = pytest.mark.timeout(300)
SETTINGS = "[settings]\nrequest_timeout_s = 10\npoll_deadline_s = 30\nconfig_interval_s = 0\n\n"
GOOD = ("good-kraft", "good-zk")
DIED = "librdkafka helper process died (killed by SIGABRT)"
PAUSED = "librdkafka is off for this cluster"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """Three small clusters; "bad" has one broker (its garbage reaches librdkafka whichever broker it asks)."""
    tmp: Path = tmp_path_factory.mktemp("rdk-lab")
    topic = {"name": "t0", "partitions": 2, "replication_factor": 1}
    raw = {"lab": {"state_dir": str(tmp / "state")}, "clusters": [
        {"name": "bad", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}], "topics": [topic]},
        {"name": "good-kraft", "profile": "apache-kafka-4-kraft-kip885", "brokers": [{"id": 1}, {"id": 2}],
         "topics": [topic]},
        {"name": "good-zk", "profile": "apache-kafka-3.9-zk", "brokers": [{"id": 1}], "topics": [topic]},
    ]}
    fleet = LabFleet(parse_lab_config(raw, tmp))
    fleet.start()
    yield fleet
    fleet.stop()


def _fleet_file(lab: LabFleet, tmp_path: Path) -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(SETTINGS + lab.write_fleet_file(tmp_path / "lab-clusters.toml").read_text(encoding="utf-8"))
    return path


def _wait_dead(helpers: AdminHelpers, lane: str, pid: int) -> None:
    deadline = time.monotonic() + 10
    while helpers.pids().get(lane) == pid:
        assert time.monotonic() < deadline, f"helper {lane} pid {pid} still listed after its kill"
        time.sleep(0.02)


def test_the_poller_survives_its_culprit_polls_on_and_restarts_a_killed_helper(lab: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(_fleet_file(lab, tmp_path).read_text(encoding="utf-8"), tmp_path)
    helpers = AdminHelpers()
    polls: list[FleetPoll] = []
    killed: dict[str, object] = {}
    stop = threading.Event()

    def on_poll(poll: FleetPoll) -> None:
        polls.append(poll)
        if len(polls) == 2:  # between polls 2 and 3: kill -9 of the shared helper (idle)
            pid = killed["shared"] = helpers.pids()["shared"]
            os.kill(pid, signal.SIGKILL)
            _wait_dead(helpers, "shared", pid)
        if len(polls) == 3:
            lab.set_fault("bad", 1, malformed=False)  # the broker is fixed
        if len(polls) == 5:
            killed["lanes"] = helpers.isolation.lanes()  # type: ignore[assignment]
            stop.set()

    lab.set_fault("bad", 1, malformed=True)
    try:
        run_poller(fleet, tmp_path / "lake", interval_s=0.2, on_poll=on_poll, stop=stop, clients=helpers)
    finally:
        lab.set_fault("bad", 1, malformed=False)
        helpers.close()

    assert len(polls) == 5
    for poll in polls:
        assert [poll.cluster(name).status for name in GOOD] == ["ok", "ok"], [c.error for c in poll.clusters]
    # Poll 1: the shared helper died, the retry on a helper of its own died too: librdkafka is off for "bad".
    first = polls[0].cluster("bad")
    assert first.status == "down" and DIED in (first.error or "") and PAUSED in (first.error or ""), first.error
    shared, own = helpers.deaths[:2]
    assert (shared.lane, shared.how, shared.convicted) == ("shared", "killed by SIGABRT", ()) and "bad" in shared.in_flight
    assert own.lane.startswith("isolated-") and own.in_flight == {"bad"} and own.convicted == ("bad",)
    # Polls 2 and 3: no librdkafka for "bad" (no helper dies), its row says why, in plain text.
    for poll in polls[1:3]:
        row = poll.cluster("bad")
        assert row.status == "down" and PAUSED in (row.error or "") and "invalid array length" in (row.error or "")
        assert row.error.isprintable(), row.error
    # The killed shared helper was replaced, and it implicated no one (nothing was in flight).
    assert helpers.deaths[2].pid == killed["shared"] and helpers.deaths[2].in_flight == frozenset()
    assert len(helpers.deaths) == 3
    # The broker fixed: one poll from the built-in codec ends the pause, the next uses librdkafka again, on probation.
    assert polls[3].cluster("bad").status == "degraded" and PAUSED in (polls[3].cluster("bad").error or "")
    assert polls[4].cluster("bad").status == "ok", polls[4].cluster("bad").error
    assert str(killed["lanes"]) == "{'bad': 'isolated-1'}"  # on a helper of its own; the others on the shared one
    history = readers.poll_history(tmp_path / "lake")
    assert history.groupby("cluster_name").size().to_dict() == {"bad": 5, "good-kraft": 5, "good-zk": 5}


def test_poll_once_survives_a_broker_that_makes_librdkafka_abort(lab: LabFleet, tmp_path: Path) -> None:
    config = _fleet_file(lab, tmp_path)
    lab.set_fault("bad", 1, malformed=True)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "backend", "poll", "--config", str(config), "--lake", str(tmp_path / "lake"),
             "--once", "--secrets", str(tmp_path / "none.toml")],
            cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    finally:
        lab.set_fault("bad", 1, malformed=False)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr[-3000:])  # 1: a cluster is down
    lines = {line.split()[1]: line for line in done.stdout.splitlines() if " status=" in line}
    assert "status=ok" in lines["good-kraft"] and "status=ok" in lines["good-zk"], done.stdout
    assert "status=down" in lines["bad"] and PAUSED in lines["bad"], lines["bad"]
    assert "rd_malloc: Assertion" in done.stderr  # librdkafka's own words, from the helper that died


def test_every_call_is_bounded_by_its_timeout_even_when_the_helper_hangs(lab: LabFleet, tmp_path: Path) -> None:
    fleet = fleet_from(_fleet_file(lab, tmp_path).read_text(encoding="utf-8"), tmp_path)
    helpers = AdminHelpers()
    try:
        admin = helpers.get(fleet.cluster("good-kraft"), 10)
        assert admin.describe_cluster(10).cluster_id == lab.clusters["good-kraft"].cluster_id
        pid = helpers.pids()["shared"]
        os.kill(pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            with pytest.raises(AdminCallError, match="timed out after 1s"):
                admin.describe_cluster(1.0)
            assert time.monotonic() - began < 1.0 + 2.0
        finally:
            os.kill(pid, signal.SIGCONT)
        assert admin.metadata(10).topic_names == ["__consumer_offsets", "t0"]  # the same helper answers again
        assert helpers.pids()["shared"] == pid and helpers.deaths == []
    finally:
        helpers.close()
