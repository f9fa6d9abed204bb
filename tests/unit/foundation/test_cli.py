"""`python -m backend` lists its commands, and each answers --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
COMMANDS = ["poll", "analyze", "lab", "demo", "export"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backend", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_help_lists_the_five_commands() -> None:
    result = run("--help")
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("positional arguments:")[1]
    for command in COMMANDS:
        assert f"\n    {command} " in listed, command


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m backend {command}")


def test_no_command_is_a_usage_error() -> None:
    result = run()
    assert result.returncode == 2 and "COMMAND" in result.stderr
