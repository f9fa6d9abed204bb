"""A lab fleet of this package's own (tests here stop and fault it) and fleet files for `serve`."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.rig.kafka import ZooKeeperServer
from tests.rig.procs import REPO

# Small Spark for the service's driver in tests (the runs hold a few hundred instances): two task threads and
# two shuffle partitions keep the task overhead down on a busy machine.
SPARK_MASTER = "local[2]"
SPARK_ENV = {"FLEETVIEW_SPARK_SHUFFLE_PARTITIONS": "2"}


@pytest.fixture(scope="module")
def service_lab(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """The lab fleet of lab.toml on free ports, with its PushConfig sink under its own state directory."""
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(tmp_path_factory.mktemp("service-lab"))
    lab = LabFleet(parse_lab_config(raw, REPO), zookeeper_connect=zookeeper.connect)
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()


def write_service_fleet(lab: LabFleet, path: Path, *, poll_interval_s: float = 2, service: str = "",
                        sources: str = "") -> Path:
    """The lab's clusters plus [settings], [service] and [[client_configs]] tables for a test."""
    clusters = lab.write_fleet_file(path.with_name(path.stem + "-clusters.toml")).read_text(encoding="utf-8")
    text = (f"[settings]\npoll_interval_s = {poll_interval_s}\nrequest_timeout_s = 5\npoll_deadline_s = 10\n"
            f'retention_days = 7\nspark_master = "{SPARK_MASTER}"\n\n[service]\n{service}\n{sources}\n{clusters}')
    path.write_text(text, encoding="utf-8")
    return path
