"""`pip install .` into a fresh virtual environment gives a working `fleetview` command.

The dependencies come from pip's cache when it holds them (the shared venv's installs fill it); the package
itself is built from a copy of the sources the wheel needs, so nothing of the checkout leaks in.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.rig.procs import REPO

SOURCES = ("pyproject.toml", "requirements.txt", "README.md", "backend", "dashboard", "pages")


@pytest.mark.slow
def test_pip_install_gives_a_working_fleetview_command(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(src)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    fleetview = venv / "bin" / "fleetview"
    assert fleetview.is_file()
    top = subprocess.run([str(fleetview), "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    assert top.stdout.startswith("usage: fleetview")
    for command in ("serve", "poll", "analyze", "ingest", "export"):
        assert command in top.stdout
    serve = subprocess.run([str(fleetview), "serve", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=60)
    assert serve.returncode == 0, serve.stderr
    assert "usage: fleetview serve" in serve.stdout and "--config" in serve.stdout and "--metrics-port" in serve.stdout

    # The command runs the installed copy (the UI it starts included), not this checkout.
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import backend, backend.service.supervisor as s; print(backend.__file__); print(s.APP)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    backend_file, app = where.stdout.split()
    assert backend_file.startswith(str(venv)) and Path(app).is_file() and app.startswith(str(venv)), where.stdout
    site = Path(app).parent.parent
    assert sorted(p.name for p in (site / "pages").glob("*.py")) == sorted(p.name for p in (REPO / "pages").glob("*.py"))
    data = sorted(str(p.relative_to(REPO)) for p in (REPO / "backend").rglob("*.json"))
    assert data and [d for d in data if not (site / d).is_file()] == []  # every data file the backend reads
    bad = subprocess.run([str(fleetview), "serve", "--config", str(tmp_path / "missing.toml")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot read the fleet file" in bad.stderr
