"""Start `python -m backend serve` as a subprocess and read its endpoints: /readyz, /metrics, the lake."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.service.conftest import SPARK_ENV
from tests.rig.procs import REPO, free_port, log_tail

T = TypeVar("T")


@dataclass
class Service:
    """One `python -m backend serve` process and where it answers."""

    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    ui_port: int | None
    lake: Path
    state_dir: Path
    extra_logs: list[Path] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def readyz(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body) of /readyz."""
        try:
            with urllib.request.urlopen(f"{self.base}/readyz", timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of /metrics: (name, sorted labels) -> value."""
        with urllib.request.urlopen(f"{self.base}/metrics", timeout=10) as response:
            text = response.read().decode()
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return samples

    def metric(self, name: str, **labels: str) -> float | None:
        """One sample's value, None when absent."""
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    def component(self, name: str) -> dict[str, Any]:
        """A component's entry of /readyz."""
        return self.readyz()[1]["components"][name]

    def logs(self) -> str:
        """The service log and its children's, for failure messages."""
        parts = [f"--- serve log\n{log_tail(self.log, 80)}"]
        for path in sorted((self.state_dir / "logs").glob("*.log")) + self.extra_logs:
            parts.append(f"--- {path.name}\n{log_tail(path, 40)}")
        return "\n".join(parts)

    def wait(self, what: str, check: Callable[[], T | None], timeout_s: float = 90.0) -> T:
        """Poll check() until it returns a truthy value; fail with the logs."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited ({self.proc.returncode}) while waiting for {what}\n{self.logs()}")
            try:
                last = check()
            except (OSError, KeyError, ValueError) as exc:
                last = exc
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}: {last!r}\n{self.logs()}")

    def terminate(self, sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> float:
        """Send sig and wait for the exit; returns the seconds it took (fails past timeout_s)."""
        began = time.monotonic()
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"serve did not exit within {timeout_s:.0f}s of signal {sig}\n{self.logs()}") from None
        return time.monotonic() - began

    def kill(self) -> None:
        """Kill the whole group (test cleanup)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)


def start_service(fleet_file: Path, lake: Path, log: Path, *, ui: bool = False, extra: list[str] | None = None,
                  env: dict[str, str] | None = None) -> Service:
    """Start serve on free ports; returns once /healthz answers."""
    metrics_port = free_port()
    ui_port = free_port() if ui else None
    cmd = [sys.executable, "-m", "backend", "serve", "--config", str(fleet_file), "--lake", str(lake),
           "--metrics-port", str(metrics_port), "--api-port", "0"]
    cmd += ["--ui-port", str(ui_port)] if ui else ["--no-ui"]
    cmd += extra or []
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **SPARK_ENV, **(env or {})})
    service = Service(proc, log, metrics_port, ui_port, lake, lake / "_state" / "service")

    def healthy() -> bool:
        with urllib.request.urlopen(f"{service.base}/healthz", timeout=2) as response:
            return response.read() == b"ok\n"

    service.wait("/healthz", healthy, 60)
    return service


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (and is not a zombie of ours)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


_SS_LINE = re.compile(r"^\S+\s+\d+\s+\d+\s+(?P<local>\S+)\s+\S+\s+users:\((?P<users>.*)\)\s*$")


def listening_sockets(root_pid: int) -> list[tuple[str, int, str]]:
    """(local address, pid, process name) of every TCP socket that `ss -ltnp` lists as listening for root_pid or
    any of its descendants."""
    tree = {root_pid, *(p.pid for p in psutil.Process(root_pid).children(recursive=True))}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10, check=True).stdout
    found = []
    for line in out.splitlines():
        match = _SS_LINE.match(line.strip())
        if match is None:
            continue
        for name, pid in re.findall(r'\("([^"]*)",pid=(\d+)', match["users"]):
            if int(pid) in tree:
                found.append((match["local"], int(pid), name))
    return found


def is_loopback(local: str) -> bool:
    """Whether an ss local address (127.0.0.1:80, [::1]:80, [::ffff:127.0.0.1]:80, *:80) is loopback only."""
    host = local.rsplit(":", 1)[0].strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # '*' or '0.0.0.0'-like wildcards
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback
