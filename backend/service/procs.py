"""Child processes of the service: own process group, die with the parent, output to a log file, stopped by pid."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from backend.service.channel import ENV_FD, Channel

_PR_SET_PDEATHSIG = 1
LOG_MAX_BYTES = 20 * 1024 * 1024


def free_port(address: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (for a UI asked to run on port 0)."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:
    # Runs in the child before exec: if the service itself is killed, the kernel sends SIGTERM.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


@dataclass
class ChildProcess:
    """One child process: its command, log file and (for workers) the channel to it."""

    name: str
    cmd: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    with_channel: bool = False
    # SIGTERM the leader only (it stops its own children, e.g. Spark's JVM, after finishing its write), or the group.
    term_leader_only: bool = False
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    channel: Channel | None = field(default=None, repr=False)
    started_at: float = 0.0
    restarts: int = 0

    def start(self) -> None:
        """Start the process in its own session, appending its output to the log."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env}
        ours: socket.socket | None = None
        theirs: socket.socket | None = None
        pass_fds: tuple[int, ...] = ()
        if self.with_channel:
            ours, theirs = socket.socketpair()
            theirs.set_inheritable(True)
            env[ENV_FD] = str(theirs.fileno())
            pass_fds = (theirs.fileno(),)
        try:
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(
                    self.cmd, cwd=self.cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True, preexec_fn=_die_with_parent, pass_fds=pass_fds,
                )
        finally:
            if theirs is not None:
                theirs.close()
        self.channel = Channel(ours) if ours is not None else None
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int | None:
        """The pid, once started."""
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        """Whether the process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM to the leader or the group); returns at once."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            if self.term_leader_only:
                self.proc.send_signal(signal.SIGTERM)
            else:
                os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def kill_group(self) -> None:
        """SIGKILL whatever is left of the process group (the leader may be gone, its children not)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def stop(self, timeout_s: float = 12.0) -> None:
        """Terminate, wait up to timeout_s, then SIGKILL the group; closes the channel."""
        self.terminate()
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill_group()
        self.close_channel()

    def close_channel(self) -> None:
        """Close our end of the channel."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None

    def tail(self, lines: int = 20) -> str:
        """The last lines of the log."""
        try:
            with self.log.open("rb") as src:
                src.seek(max(0, self.log.stat().st_size - 64 * 1024))
                text = src.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def rotate_log(self, max_bytes: int = LOG_MAX_BYTES) -> bool:
        """Copy a log over max_bytes to <log>.1 and truncate it (the child appends, so it goes on writing)."""
        try:
            if self.log.stat().st_size <= max_bytes:
                return False
            old = self.log.with_name(self.log.name + ".1")
            with self.log.open("rb") as src, old.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.truncate(self.log, 0)
        except OSError:
            return False
        return True
