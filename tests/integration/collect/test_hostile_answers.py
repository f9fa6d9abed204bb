"""What a broker may slip in (issue 32, items 5-7): a hostile lab cluster polled through `python -m backend poll`.

Its DescribeConfigs answers add a topic (`<script>... ghost`) and a broker nobody asked for and answer one broker
with a 32,000-byte error text carrying a password; its Metadata lists topics the validator refuses (300 characters,
a NUL) that have overrides; a broker's software version holds CR, ESC, BEL and a bidi override. On the previous main
the ghost topic and the refused topics' overrides were stored (and raised incidents), the error text was stored
whole with its password, and the raw control characters reached /metrics labels.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.collect.metrics import FleetMetrics, start_metrics_server
from backend.collect.poller import run_poller
from backend.config import load_fleet
from backend.lab.fleet import LabFleet
from backend.store import readers
from backend.views import frames
from tests.rig.hostile import GHOST_TOPIC, LONG_TOPIC, NUL_TOPIC, SECRET, hostile_lab, make_hostile
from tests.rig.procs import REPO

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabFleet, Path, Path, str]]:
    """The hostile lab, polled once through the CLI: (lab, fleet file, lake, the command's output)."""
    root = tmp_path_factory.mktemp("hostile-answers")
    lab = hostile_lab(root / "lab")
    lab.start()
    try:
        make_hostile(lab)
        fleet = lab.write_fleet_file(root / "clusters.toml")
        lake = root / "lake"
        run = subprocess.run([sys.executable, "-m", "backend", "poll", "--once", "--config", str(fleet), "--lake",
                              str(lake)], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        yield lab, fleet, lake, run.stdout + run.stderr
    finally:
        lab.stop()


def test_only_requested_resources_and_valid_topic_names_are_stored(polled: tuple[LabFleet, Path, Path, str]) -> None:
    _, _, lake, output = polled
    configs = frames.broker_configs(str(lake), ["evil"])
    assert not configs.empty, output
    topics = set(configs.loc[configs["resource_type"] == "topic", "resource"])
    assert "orders" in topics and GHOST_TOPIC not in topics  # the resource nobody asked for is dropped
    assert LONG_TOPIC not in topics and NUL_TOPIC not in topics  # names the Metadata validator refuses: never asked
    assert set(configs.loc[configs["resource_type"] == "broker", "resource"]) == {"1"}  # not broker 99
    incidents = readers.incidents(str(lake), open_only=False)
    assert not incidents["subject"].str.contains("ghost|LLLL", regex=True).any(), incidents[["rule", "subject"]]
    error = frames.config_runs(str(lake), ["evil"])["error"].iloc[0]
    assert "not asked for (e.g. 'topic <script>alert(1)</script> ghost')" in error
    assert "not asked for (e.g. 'broker 99')" in error


def test_a_broker_error_text_is_capped_and_its_secrets_withheld(polled: tuple[LabFleet, Path, Path, str]) -> None:
    _, _, lake, output = polled
    error = frames.config_runs(str(lake), ["evil"])["error"].iloc[0]
    broker_2 = next(part for part in error.split("; ") if part.startswith("broker 2:"))
    assert broker_2.startswith("broker 2: INVALID_REQUEST: xxx") and "[REDACTED]" in broker_2
    assert len(broker_2) <= 4096 + len("broker 2: ") and broker_2.endswith("more characters cut]")
    leaked = [p for p in lake.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []
    assert SECRET not in output


def test_control_characters_reach_the_terminal_and_metrics_only_visibly(
        polled: tuple[LabFleet, Path, Path, str], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, fleet_file, _, output = polled
    assert not any(c in output for c in "\x1b\x07\r\u202e"), repr(output[-500:])
    # A second poll (run_poller) with the metrics endpoint up: the labels as Prometheus scrapes them.
    fleet = load_fleet(str(fleet_file))
    metrics = FleetMetrics(str(tmp_path / "lake"))
    server = start_metrics_server(metrics, 0)
    try:
        with caplog.at_level(logging.INFO):
            run_poller(fleet, str(tmp_path / "lake"), once=True, on_poll=metrics.update, stop=threading.Event())
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as response:
            body = response.read()
    finally:
        server.close()
    assert b'version="4.3.1\xe2\x90\x8d\xe2\x90\x9b[31m\xe2\x90\x87<U+202E>"' in body  # ␍ ␛ ␇ and the override
    assert not any(c in body for c in (b"\r", b"\x1b", b"\x07", "\u202e".encode()))
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: Debian's prometheus package provides it (make deps-system)"
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    assert SECRET not in caplog.text


def test_one_hostile_cluster_costs_only_its_own_row(polled: tuple[LabFleet, Path, Path, str]) -> None:
    assert "evil status=degraded" in polled[3] and "calm status=ok" in polled[3], polled[3]
