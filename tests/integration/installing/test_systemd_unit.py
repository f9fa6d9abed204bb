"""deploy/fleetview.service passes `systemd-analyze verify` (Debian's systemd) and runs the real serve command line."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

from backend.cli import build_parser
from tests.rig.procs import REPO

UNIT = REPO / "deploy" / "fleetview.service"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def _verify(unit_text: str, root: Path) -> subprocess.CompletedProcess[str]:
    """systemd-analyze verify in a root holding the system's own units, the unit and its ExecStart program."""
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing: Debian's systemd package provides it"
    if not (root / "usr/lib/systemd/system").exists():
        shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (root / "etc/systemd/system/fleetview.service").write_text(unit_text)
    program = Path(_service(unit_text)["execstart"].split()[0])
    stub = root / program.relative_to("/")
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text("#!/bin/sh\n")
    stub.chmod(0o755)
    return subprocess.run([tool, "verify", "--man=no", f"--root={root}", "fleetview.service"],
                          capture_output=True, text=True, timeout=60)


def _service(text: str) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str.lower  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return dict(parser["Service"])


def test_the_unit_verifies_clean(tmp_path: Path) -> None:
    text = UNIT.read_text()
    result = _verify(text, tmp_path / "root")
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr
    # The check is real: a wrong directive is reported.
    broken = _verify(text.replace("Restart=on-failure", "Restart=sometimes"), tmp_path / "root")
    assert "Failed to parse service restart specifier" in broken.stdout + broken.stderr


def test_the_unit_runs_serve_as_a_dedicated_user_with_passwords_from_an_environment_file() -> None:
    service = _service(UNIT.read_text())
    assert service["user"] == "fleetview" and service["group"] == "fleetview"
    assert service["environmentfile"].startswith("/etc/fleetview/")
    assert service["restart"] == "on-failure" and service["killmode"] == "mixed"
    assert int(service["timeoutstopsec"]) > 15  # serve stops its children within 15 s
    assert "Environment=FLEETVIEW_LAKE=/var/lib/fleetview/lake" in UNIT.read_text().splitlines()
    assert service["statedirectory"] == "fleetview"
    argv = shlex.split(service["execstart"])
    assert Path(argv[0]).name == "fleetview"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.config == "/etc/fleetview/clusters.toml"
