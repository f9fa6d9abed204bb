"""The README's first command on its embedded default: `python -m backend demo` with no --lake and no AWS variables
keeps its lake in ./lake where it runs (the end-to-end module runs the demo on S3; this one holds the local path)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from backend.store.readers import latest_clusters
from backend.store.tables import read_table
from tests.conftest import page_errors, wait_for_streamlit
from tests.e2e.demo.test_demo_end_to_end import READY_TIMEOUT_S, _alive, _descendants
from tests.rig.procs import REPO, free_port, log_tail

LAB_CLUSTERS = set(re.findall(r'(?m)^name = "([^"]+)"', (REPO / "lab.toml").read_text(encoding="utf-8")))


def _local_env() -> dict[str, str]:
    """The caller's environment without a lake or S3 settings: the embedded default."""
    return {k: v for k, v in os.environ.items()
            if k != "FLEETVIEW_LAKE" and not k.startswith("AWS_")} | {"PYTHONPATH": str(REPO)}


def _ready(lake: Path) -> bool:
    """Every lab cluster polled and the Spark job's results written."""
    if not (lake / "cluster_snapshots").exists():
        return False
    polled = set(latest_clusters(str(lake))["cluster_name"])
    return LAB_CLUSTERS <= polled and read_table(str(lake), "results/config_alerts").num_rows > 0


@pytest.mark.slow
def test_the_demo_keeps_its_lake_in_the_directory_it_runs_from(tmp_path: Path, browser: object) -> None:
    assert len(LAB_CLUSTERS) >= 5, LAB_CLUSTERS
    lab_file = tmp_path / "lab.toml"
    lab_file.write_text(re.sub(r"(?m)^state_dir = .*$", f"state_dir = {json.dumps(str(tmp_path / 'state'))}",
                               (REPO / "lab.toml").read_text(encoding="utf-8"), count=1), encoding="utf-8")
    home, port, log = tmp_path / "home", free_port(), tmp_path / "demo.log"
    home.mkdir()
    cmd = [sys.executable, "-m", "backend", "demo", "--port", str(port), "--lab", str(lab_file), "--clients", "60",
           "--poll-interval", "5", "--analyze-interval", "600", "--api-port", "0", "--metrics-port", "0"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=home, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=_local_env())
    started: set[int] = set()
    lake = home / "lake"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(lake):
            assert proc.poll() is None, log_tail(log)
            assert time.monotonic() < deadline, f"no polls and results in {lake}:\n{log_tail(log)}"
            started |= _descendants(proc.pid)
            time.sleep(2)
        started |= _descendants(proc.pid)
        assert list((lake / "_state" / "pipeline").glob("state.json")), "the warm Spark driver committed no state"

        context = browser.new_context(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        wait_for_streamlit(page, timeout_ms=90000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60000)
        assert page_errors(page) == []
        shown = page.inner_text("body")
        assert str(home) not in shown and "/tmp/" not in shown  # no machine path on the page
        context.close()

        os.kill(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"demo did not stop within 90 s of SIGINT:\n{log_tail(log)}") from None
        assert code == 0, log_tail(log)
        deadline = time.monotonic() + 30
        while _alive(started):
            assert time.monotonic() < deadline, f"left behind: {_alive(started)}"
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _alive(started):
            os.kill(pid, signal.SIGKILL)
