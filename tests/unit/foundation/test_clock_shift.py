"""The guard against date-bound tests works: --clock-shift moves the wall clock, not the monotonic one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

PROBE = '''
import datetime as dt
import threading
import time

import pandas as pd


def test_probe():
    real = dt.datetime.fromtimestamp(float(open(REAL).read()), dt.UTC)
    shifted = dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=399) < shifted - real < dt.timedelta(days=401)
    assert abs((pd.Timestamp.now(tz="UTC") - shifted).total_seconds()) < 60
    assert abs(time.time() - shifted.timestamp()) < 60
    began = time.monotonic()
    threading.Event().wait(0.2)  # timed waits keep working (libfaketime hangs them)
    assert 0.15 < time.monotonic() - began < 30
'''


def test_clock_shift_moves_the_wall_clock_of_the_tests_it_runs(tmp_path: Path) -> None:
    import time

    from time_machine import escape_hatch

    real = escape_hatch.time.time() if escape_hatch.is_travelling() else time.time()  # real even when shifted
    (tmp_path / "real.txt").write_text(str(real), encoding="utf-8")
    probe = tmp_path / "tests" / "unit" / "test_probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(f"REAL = {str(tmp_path / 'real.txt')!r}\n" + PROBE, encoding="utf-8")
    # The repo's conftest (where --clock-shift lives) next to the probe, as pytest finds it from the rootdir.
    (tmp_path / "tests" / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text(), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--clock-shift=400",
                             "--rootdir", str(tmp_path), str(probe)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
