"""backend/store alone owns the lake: the import structure, and every CLI and the UI resolve the same lake."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.config import configured_lake
from backend.export.cli import add_export_arguments
from backend.pipeline.cli import _settings, add_analyze_arguments
from backend.store.location import parse_lake
from backend.views.lakes import configured_lakes

ROOT = Path(__file__).resolve().parents[3]


def _imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "backend" / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def _offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    out = {}
    for path, names in _imports(package).items():
        bad = sorted(n for n in names if n.startswith(forbidden))
        if bad:
            out[path] = bad
    return out


def test_store_depends_on_no_other_backend_layer() -> None:
    assert _imports("store"), "backend/store has no modules"
    assert _offenders("store", ("backend.configs", "backend.pipeline", "backend.collect", "backend.views",
                                "backend.export", "backend.lab", "backend.demo", "dashboard", "streamlit")) == {}


def test_configs_and_pipeline_do_not_import_each_other() -> None:
    assert _offenders("configs", ("backend.pipeline",)) == {}
    assert _offenders("pipeline", ("backend.configs",)) == {}


def test_no_second_lake_parser_outside_store() -> None:
    """Only backend/store turns a lake text into a filesystem (pyarrow's from_uri / file:// handling)."""
    offenders = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        if path.parent.name == "store":
            continue
        text = path.read_text(encoding="utf-8")
        if "FileSystem.from_uri" in text or '"file://"' in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _fleet_file(tmp_path: Path, lake: Path) -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(
        "[settings]\n"
        f'lake_path = "{lake}"\n'
        "request_timeout_s = 1\npoll_deadline_s = 3\n"
        f'lakes = {{ archive = "{tmp_path / "archive"}" }}\n\n'
        '[[clusters]]\nname = "nowhere"\nbootstrap_servers = ["127.0.0.1:1"]\n',
        encoding="utf-8")
    return path


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backend", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("how", ["fleet_file", "env", "flag", "file_uri_flag"])
def test_poll_and_ingest_write_to_the_same_resolved_lake(tmp_path: Path, how: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fleet_lake, env_lake, flag_lake = tmp_path / "from_file", tmp_path / "from_env", tmp_path / "from_flag"
    fleet = _fleet_file(tmp_path, fleet_lake)
    sink = tmp_path / "sink"
    sink.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("FLEETVIEW_LAKE", "FLEETVIEW_FLEET")}
    env["PYTHONPATH"] = str(ROOT)
    flag: list[str] = []
    expected = fleet_lake
    if how == "env":
        env["FLEETVIEW_LAKE"], expected = str(env_lake), env_lake
    elif how == "flag":
        env["FLEETVIEW_LAKE"], flag, expected = str(env_lake), ["--lake", str(flag_lake)], flag_lake
    elif how == "file_uri_flag":
        flag, expected = ["--lake", f"file://{flag_lake}"], flag_lake
    poll = _run(["poll", "--config", str(fleet), "--once", *flag], env, ROOT)
    assert poll.returncode == 1, poll.stderr  # the only cluster is down: exit 1, and its status row is written
    ingest = _run(["ingest", "--config", str(fleet), "--sink", str(sink), *flag], env, ROOT)
    assert ingest.returncode == 0, ingest.stderr
    written = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*.parquet")}
    assert written == {expected.name}, written
    # The analyze and export CLIs and the UI resolve the same lake from the same inputs.
    monkeypatch.delenv("FLEETVIEW_FLEET", raising=False)
    if "FLEETVIEW_LAKE" in env:
        monkeypatch.setenv("FLEETVIEW_LAKE", env["FLEETVIEW_LAKE"])
    else:
        monkeypatch.delenv("FLEETVIEW_LAKE", raising=False)
    analyze = argparse.ArgumentParser()
    add_analyze_arguments(analyze)
    lake, _master, _driver_host, _policies = _settings(analyze.parse_args(["--config", str(fleet), *flag]))
    export = argparse.ArgumentParser()
    add_export_arguments(export)
    args = export.parse_args(["--report", "drift", "--clusters", "a", "--out", "x.html", "--config", str(fleet), *flag])
    assert parse_lake(lake).root == str(expected)
    assert parse_lake(configured_lake(args.lake, fleet_file=args.config)).root == str(expected)
    if not flag:  # the UI has no flag: its default lake is the same, and the fleet file's named lakes are offered
        choices = configured_lakes(str(fleet))
        assert parse_lake(choices["default"]).root == str(expected)
        assert choices["archive"] == str(tmp_path / "archive")


def test_a_bad_lake_in_the_fleet_file_names_file_and_key(tmp_path: Path) -> None:
    fleet = tmp_path / "clusters.toml"
    fleet.write_text('[settings]\nlake_path = "file://evil.example/tmp/x"\n', encoding="utf-8")
    done = _run(["ingest", "--config", str(fleet), "--sink", str(tmp_path)], dict(os.environ, PYTHONPATH=str(ROOT)),
                ROOT)
    assert done.returncode == 2
    assert "clusters.toml" in done.stderr and "lake_path" in done.stderr and "host" in done.stderr
