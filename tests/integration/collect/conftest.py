"""Fixtures for poller tests: the lab fleet next to the real rig, and fleet files built from them."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.config import Fleet, parse_fleet
from backend.lab.fleet import LabFleet
from backend.lab.model import parse_lab_config
from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer
from tests.rig.procs import REPO


@pytest.fixture(scope="session")
def lab_fleet(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFleet]:
    """The lab fleet of lab.toml (KIP-885 clusters, ZooKeeper-mode ones, a misrouted one) on free ports."""
    state_dir = tmp_path_factory.mktemp("lab")
    raw = tomllib.loads((REPO / "lab.toml").read_text(encoding="utf-8"))
    raw.setdefault("lab", {})["state_dir"] = str(state_dir)
    config = parse_lab_config(raw, REPO)
    lab = LabFleet(config, zookeeper_connect=zookeeper.connect)
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()


def settings_toml(*, request_timeout_s: float = 10, poll_deadline_s: float = 30) -> str:
    """The [settings] table of a test fleet file."""
    return f"[settings]\nrequest_timeout_s = {request_timeout_s}\npoll_deadline_s = {poll_deadline_s}\nretention_days = 7\n\n"


def kafka4_toml(kafka4: KafkaKraftCluster, name: str = "kafka4") -> str:
    """A PLAINTEXT [[clusters]] entry for the KRaft cluster (every node, running or not)."""
    servers = json.dumps([b.address for b in kafka4.brokers])
    return f'[[clusters]]\nname = "{name}"\nbootstrap_servers = {servers}\ntags = {{ rig = "kraft" }}\n\n'


def kafka39_toml(kafka39: KafkaZkCluster, zookeeper: ZooKeeperServer, name: str = "kafka39") -> str:
    """A [[clusters]] entry for the ZooKeeper-mode 3.9 broker, with its ZooKeeper chroot."""
    return (
        f'[[clusters]]\nname = "{name}"\nbootstrap_servers = ["{kafka39.bootstrap}"]\ntags = {{ rig = "zk" }}\n'
        f'zookeeper = {{ connect = "{zookeeper.connect}", chroot = "{kafka39.zk_chroot}" }}\n\n'
    )


def lab_toml(lab: LabFleet, tmp_path: Path, names: list[str] | None = None) -> str:
    """The lab's own fleet file entries (optionally only some clusters)."""
    text = lab.write_fleet_file(tmp_path / "lab-clusters.toml").read_text(encoding="utf-8")
    if names is None:
        return text + "\n"
    blocks = text.split("[[clusters]]")
    kept = [b for b in blocks[1:] if any(f'name = "{n}"\n' in b for n in names)]
    return "".join("[[clusters]]" + b for b in kept) + "\n"


def fleet_from(text: str, tmp_path: Path) -> Fleet:
    """Parse a test fleet file; the repo's .streamlit/secrets.toml is never read."""
    path = tmp_path / "clusters.toml"
    path.write_text(text, encoding="utf-8")
    return parse_fleet(text, source=str(path), secrets_path=tmp_path / "no-secrets.toml")
