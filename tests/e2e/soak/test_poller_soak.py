"""Soak: the poller polls the demo's lab fleet continuously; its memory and open file descriptors stay flat."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from backend.lab.fleet import LabFleet
from tests.rig.procs import REPO, log_tail

SOAK_S = float(os.environ.get("FLEETVIEW_SOAK_S", "150"))
RSS_GROWTH_LIMIT_MB = 25.0
FD_GROWTH_LIMIT = 4


def _sample(proc: psutil.Process) -> tuple[float, int]:
    return proc.memory_info().rss / 2**20, proc.num_fds()


@pytest.mark.slow
def test_poller_memory_and_fds_stay_flat(lab_fleet: LabFleet, tmp_path: Path) -> None:
    fleet_file = lab_fleet.write_fleet_file(tmp_path / "clusters.toml")
    log = tmp_path / "poller.log"
    with log.open("wb") as out:
        poller = subprocess.Popen(
            [sys.executable, "-m", "backend", "poll", "--config", str(fleet_file), "--lake", str(tmp_path / "lake"), "--interval", "1"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    samples: list[tuple[float, float, int]] = []
    try:
        handle = psutil.Process(poller.pid)
        started = time.monotonic()
        while time.monotonic() - started < SOAK_S:
            assert poller.poll() is None, log_tail(log)
            rss, fds = _sample(handle)
            samples.append((time.monotonic() - started, rss, fds))
            time.sleep(2)
    finally:
        poller.terminate()
        poller.wait(timeout=30)
    cycles = log.read_text().count("prod-eu status=")
    assert cycles >= SOAK_S / 5, f"only {cycles} poll cycles in {SOAK_S:.0f}s:\n{log_tail(log)}"
    third = len(samples) // 3
    # After warm-up (imports, first clients), compare the middle third with the last third.
    middle, last = samples[third : 2 * third], samples[2 * third :]
    rss_growth = statistics.median(s[1] for s in last) - statistics.median(s[1] for s in middle)
    # Median, not max: a sample taken mid-poll also counts the probe's short-lived sockets.
    fd_growth = statistics.median(s[2] for s in last) - statistics.median(s[2] for s in middle)
    print(f"soak: {cycles} cycles in {SOAK_S:.0f}s, RSS {samples[0][1]:.0f}->{samples[-1][1]:.0f} MiB "
          f"(median growth {rss_growth:+.1f} MiB), fds {samples[0][2]}->{samples[-1][2]} (median growth {fd_growth:+.0f})")
    assert rss_growth < RSS_GROWTH_LIMIT_MB, samples
    assert fd_growth <= FD_GROWTH_LIMIT, samples
