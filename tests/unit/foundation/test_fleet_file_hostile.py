"""Bad fleet files through `python -m backend poll`: a clear one-line error naming file, line and key, no value echoed.

Each case failed on the previous main: a non-UTF-8 file gave a traceback, inf / 1e300 / 999999999999
passed validation and crashed the poller later, and a password pasted into sasl_password_env was echoed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PASTED = "Tr0ub4dor&3-pasted"
CLUSTER = '[[clusters]]\nname = "a"\nbootstrap_servers = ["127.0.0.1:1"]\n'


def _poll(tmp_path: Path, text: bytes) -> subprocess.CompletedProcess[str]:
    fleet = tmp_path / "fleet.toml"
    fleet.write_bytes(text)
    return subprocess.run([sys.executable, "-m", "backend", "poll", "--config", str(fleet), "--once",
                           "--lake", str(tmp_path / "lake"), "--secrets", str(tmp_path / "none.toml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _clear_error(done: subprocess.CompletedProcess[str], where: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert where in done.stderr, done.stderr
    assert not (Path(done.args[5]).parent / "lake").exists()  # nothing was polled or written


@pytest.mark.parametrize(("line", "key"), [
    ("request_timeout_s = inf", "request_timeout_s"),
    ("poll_deadline_s = 1e300", "poll_deadline_s"),
    ("poll_interval_s = nan", "poll_interval_s"),
    ("retention_days = 999999999999", "retention_days"),
])
def test_non_finite_or_out_of_range_settings_are_refused(tmp_path: Path, line: str, key: str) -> None:
    done = _poll(tmp_path, f"[settings]\n{line}\n\n{CLUSTER}".encode())
    _clear_error(done, f"fleet.toml:2: settings: key '{key}'")


def test_a_non_utf8_file_names_its_line(tmp_path: Path) -> None:
    done = _poll(tmp_path, b"[settings]\npoll_interval_s = 30\n# caf\xe9\n" + CLUSTER.encode())
    _clear_error(done, "fleet.toml:3: the fleet file is not UTF-8")


def test_a_password_pasted_into_sasl_password_env_is_not_echoed(tmp_path: Path) -> None:
    text = (CLUSTER + 'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\nsasl_username = "u"\n'
            f'sasl_password_env = "{PASTED}"\n')
    done = _poll(tmp_path, text.encode())
    _clear_error(done, "fleet.toml:7: cluster 'a': key 'sasl_password_env': ")
    assert PASTED not in done.stderr + done.stdout


def test_an_unset_variable_is_named_by_its_key_only(tmp_path: Path) -> None:
    text = (CLUSTER + 'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\nsasl_username = "u"\n'
            'sasl_password_env = "hunter2"\n')  # a valid name that is really a password
    done = _poll(tmp_path, text.encode())
    _clear_error(done, "key 'sasl_password_env': no password found")
    assert "hunter2" not in done.stderr + done.stdout
