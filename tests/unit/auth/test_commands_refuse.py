"""The commands that start the UI (serve, demo) take the same decision as the app, before starting anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.cli import build_parser
from backend.service.cli import plan_from_args
from backend.service.supervisor import Supervisor
from tests.rig.procs import REPO, free_port

CLUSTER = '[[clusters]]\nname = "eu"\nbootstrap_servers = "127.0.0.1:9"\n'


def _fleet(tmp_path: Path, auth: str = "") -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(auth + CLUSTER, encoding="utf-8")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backend", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "FLEETVIEW_INSECURE_NO_LOGIN": "1"})


@pytest.mark.parametrize(("auth", "flag", "missing"), [
    ("", [], "does not say [auth] required = false"),
    ("[auth]\nrequired = false\n\n", [], "lacks --insecure-no-login"),
    ("", ["--insecure-no-login"], "does not say [auth] required = false"),
])
def test_serve_refuses_a_non_loopback_ui_without_login(tmp_path: Path, auth: str, flag: list[str], missing: str) -> None:
    # An inherited FLEETVIEW_INSECURE_NO_LOGIN=1 counts for nothing: only the flag does.
    done = _run("serve", "--config", str(_fleet(tmp_path, auth)), "--lake", str(tmp_path / "lake"),
                "--state-dir", str(tmp_path / "state"), "--ui-address", "0.0.0.0", "--ui-port", str(free_port()), *flag)
    assert done.returncode == 2, done.stderr
    assert "refusing to serve the UI on 0.0.0.0 without login" in done.stderr and missing in done.stderr
    assert not (tmp_path / "state" / "logs").exists()  # nothing was started


@pytest.mark.parametrize("auth", ["", "[auth]\nrequired = false\n\n"])
def test_serve_refuses_a_non_loopback_api_without_login_even_with_the_flag(tmp_path: Path, auth: str) -> None:
    done = _run("serve", "--config", str(_fleet(tmp_path, auth)), "--lake", str(tmp_path / "lake"),
                "--state-dir", str(tmp_path / "state"), "--no-ui", "--api-address", "0.0.0.0",
                "--api-port", str(free_port()), "--insecure-no-login")
    assert done.returncode == 2, done.stderr
    assert "refusing to serve the API on 0.0.0.0 without login" in done.stderr
    assert not (tmp_path / "state" / "logs").exists()
    login = plan_from_args(build_parser().parse_args(
        ["serve", "--config", str(_fleet(tmp_path, "[auth]\nrequired = true\n\n")), "--lake", str(tmp_path / "lake"),
         "--no-ui", "--api-address", "0.0.0.0", "--api-port", "0"]))
    assert login.api and login.api_address == "0.0.0.0"
    assert "--port" in Supervisor(login).components["api"].child.cmd


def test_serve_passes_the_flag_to_the_ui_only_when_given(tmp_path: Path) -> None:
    base = ["serve", "--lake", str(tmp_path / "lake"), "--state-dir", str(tmp_path / "state"), "--ui-port", str(free_port())]
    open_plan = plan_from_args(build_parser().parse_args(
        [*base, "--config", str(_fleet(tmp_path, "[auth]\nrequired = false\n\n")), "--ui-address", "0.0.0.0",
         "--insecure-no-login"]))
    assert open_plan.insecure_no_login
    assert Supervisor(open_plan).components["ui"].child.env["FLEETVIEW_INSECURE_NO_LOGIN"] == "1"
    loopback = plan_from_args(build_parser().parse_args([*base, "--config", str(_fleet(tmp_path))]))
    assert Supervisor(loopback).components["ui"].child.env["FLEETVIEW_INSECURE_NO_LOGIN"] == "0"
    login = plan_from_args(build_parser().parse_args(
        [*base, "--config", str(_fleet(tmp_path, "[auth]\nrequired = true\n\n")), "--ui-address", "0.0.0.0"]))
    assert login.ui_address == "0.0.0.0" and not login.insecure_no_login


def test_demo_refuses_a_non_loopback_ui_before_starting_anything(tmp_path: Path) -> None:
    done = _run("demo", "--address", "0.0.0.0", "--port", str(free_port()), "--state-dir", str(tmp_path / "lab"),
                "--lake", str(tmp_path / "lake"), "--zookeeper", "none", "--duration", "1")
    assert done.returncode == 2, done.stderr
    assert "refusing to serve the UI on 0.0.0.0 without login" in done.stderr
    assert not (tmp_path / "lake").exists() and not (tmp_path / "lab").exists()


def test_the_metrics_endpoints_bind_loopback_by_default() -> None:
    from backend.service_settings import ServiceSettings

    poll = build_parser().parse_args(["poll", "--config", "x.toml", "--metrics-port", "0"])
    assert poll.metrics_host == "127.0.0.1"  # no login there: docs/auth.md
    assert ServiceSettings().metrics_address == "127.0.0.1" and ServiceSettings().ui_address == "127.0.0.1"
