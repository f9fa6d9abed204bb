"""The poll command's argument handling: bad input gets a clear error and exit code 2."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from backend.collect.cli import add_poll_arguments, run_poll_command


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_poll_arguments(parser)
    return parser.parse_args(argv)


def test_once_and_interval_are_exclusive() -> None:
    with pytest.raises(SystemExit):
        _args(["--once", "--interval", "5"])


def test_missing_fleet_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_poll_command(_args(["--config", str(tmp_path / "absent.toml"), "--once"]), out=io.StringIO())
    assert code == 2
    assert "absent.toml" in capsys.readouterr().err
    assert not (tmp_path / "lake").exists()


def test_inline_password_is_refused_without_echoing_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text('[[clusters]]\nname = "a"\nbootstrap_servers = ["127.0.0.1:9"]\npassword = "s3cr3t-value"\n', encoding="utf-8")
    code = run_poll_command(_args(["--config", str(config), "--once"]), out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2
    assert "password" in err and "s3cr3t-value" not in err


def test_non_positive_interval_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text('[[clusters]]\nname = "a"\nbootstrap_servers = ["127.0.0.1:9"]\n', encoding="utf-8")
    args = _args(["--config", str(config), "--interval", "0", "--secrets", str(tmp_path / "none.toml")])
    assert run_poll_command(args, out=io.StringIO()) == 2
    assert "--interval must be > 0" in capsys.readouterr().err


def test_fleet_file_defaults_to_the_environment_like_the_ui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLEETVIEW_FLEET", str(tmp_path / "from-env.toml"))
    assert run_poll_command(_args(["--once"]), out=io.StringIO()) == 2
    assert "from-env.toml" in capsys.readouterr().err  # not ./clusters.toml
    monkeypatch.delenv("FLEETVIEW_FLEET")
    assert run_poll_command(_args(["--once"]), out=io.StringIO()) == 2
    assert "clusters.toml" in capsys.readouterr().err
