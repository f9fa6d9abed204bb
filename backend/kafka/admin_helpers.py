"""librdkafka out of the poller's process: ClusterAdmin calls served by helper processes that may die alone.

librdkafka 2.16.1 abort()s its process on some malformed answers (a negative array length: `rd_malloc: Assertion
'p' failed`), so one broken or hostile broker would stop the polling of every cluster. `AdminHelpers` is the poller's
AdminClientCache: `get()` returns a `HelperClusterAdmin`, with ClusterAdmin's methods and results, whose calls run in
a helper process (`python -m backend.kafka.admin_child`, started fresh, not forked: librdkafka has threads). One
helper serves every cluster; calls carry request ids and run concurrently, each bounded by the caller's timeout. When
a helper dies, its calls in flight fail at once as AdminCallError(kind="crashed"), the next call starts a new helper,
and backend.kafka.isolation moves the suspects to isolated helpers (at most `isolation_children`) until the culprit
is alone on one; when that one dies too, librdkafka is off for that cluster for a while (`paused()` says why).
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from backend.config import ClusterConfig
from backend.kafka import admin_wire as W
from backend.kafka.admin import (
    TOPIC_BATCH_SIZE,
    AdminCallError,
    ClusterDescription,
    MetadataView,
    TopicListing,
    config_fingerprint,
)
from backend.kafka.isolation import SHARED, Isolation

log = logging.getLogger(__name__)

GRACE_S = 1.0  # past a call's deadline, as ClusterAdmin waits for its futures in process: a later answer is a timeout
START_RETRY_S = 5.0  # a helper that could not start is not started again sooner than this
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding `backend`
_WHAT = {"metadata": "Metadata", "describe_cluster": "DescribeCluster", "describe_topics": "DescribeTopics",
         "take_errors": "client errors"}


def _how(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


@dataclass
class _Pending:
    name: str
    method: str
    done: threading.Event = field(default_factory=threading.Event)
    message: dict[str, Any] | None = None
    failure: AdminCallError | None = None


@dataclass(frozen=True)
class Death:
    """A helper that ended: its lane, pid, how, and the clusters it ran and had calls in flight for."""

    lane: str
    pid: int
    how: str
    hosted: frozenset[str]
    in_flight: frozenset[str]
    started: bool
    convicted: tuple[str, ...]


class HelperProcess:
    """One helper child: the process, a writer and a reader thread, the calls in flight, the clusters it hosts."""

    _ids = itertools.count(1)

    def __init__(self, lane: str, on_death: Callable[[HelperProcess, str], None], python: str = sys.executable) -> None:
        """Start the helper (its first answer, `ready`, comes after it imported librdkafka)."""
        self.lane = lane
        self._on_death = on_death
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self.hosted: dict[str, str] = {}  # cluster name -> configuration fingerprint
        self.ready = threading.Event()
        self.dead = False
        self.retiring = False
        self.started_at = time.monotonic()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [python, "-m", "backend.kafka.admin_child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            # The parent's process group: a SIGKILL of the group (serve's stop) ends it too; it ignores SIGINT and
            # SIGTERM and ends when its stdin does, i.e. when the parent exits or lets it go.
        )
        self.pid = self.proc.pid
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._write_loop, daemon=True, name=f"librdkafka-{lane}-writer").start()
        threading.Thread(target=self._read_loop, daemon=True, name=f"librdkafka-{lane}-reader").start()

    # ------------------------------------------------------------------ calls

    def pending_names(self) -> set[str]:
        """The clusters with a call in flight."""
        with self._lock:
            return {p.name for p in self._pending.values()}

    def call(self, name: str, fingerprint: str, conf: dict[str, Any], method: str, args: dict[str, Any],
             timeout_s: float, deadline: float) -> Any:
        """Run one method of the cluster's ClusterAdmin in the helper; wait until `deadline` + GRACE_S at most."""
        pending = _Pending(name, method)
        with self._lock:
            if self.dead:
                raise AdminCallError(f"{_WHAT[method]} failed: the librdkafka helper process had ended", "crashed")
            if self.hosted.get(name) != fingerprint:
                self._outbox.put(W.dumps({"op": "open", "name": name, "conf": conf}))
                self.hosted[name] = fingerprint
            request_id = next(self._ids)
            self._pending[request_id] = pending
            self._outbox.put(W.dumps({"op": "call", "id": request_id, "name": name, "method": method,
                                      "timeout_s": timeout_s, "deadline": deadline, **args}))
        if not pending.done.wait(max(0.0, deadline + GRACE_S - time.monotonic())):
            with self._lock:
                self._pending.pop(request_id, None)
            if pending.failure is None and pending.message is None:
                raise AdminCallError(f"{_WHAT[method]} timed out after {timeout_s:g}s (no answer from the librdkafka "
                                     "helper process)")
        if pending.failure is not None:
            raise pending.failure
        message = pending.message or {}
        if not message.get("ok"):
            kind = message.get("kind")
            raise AdminCallError(str(message.get("error") or "the helper gave no reason"),
                                 kind=kind if kind in ("auth", "error") else "error")
        return message.get("result")

    def close_cluster(self, name: str) -> None:
        """Drop a cluster's client in the helper (it moved to another helper)."""
        with self._lock:
            if self.hosted.pop(name, None) is not None and not self.dead:
                self._outbox.put(W.dumps({"op": "close", "name": name}))

    def retire(self) -> None:
        """Let the helper go: its stdin ends, it exits; its end is no death."""
        with self._lock:
            self.retiring = True
        self._outbox.put(None)

    # ------------------------------------------------------------------ threads

    def _write_loop(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            while (line := self._outbox.get()) is not None:
                stdin.write(line)
                stdin.flush()
        except OSError:
            pass  # the reader sees the end and reports it
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _read_loop(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        why = ""
        try:
            while line := stdout.readline(W.MAX_LINE_BYTES):
                if not line.endswith(b"\n"):
                    raise W.WireError("a line without its end")
                message = W.loads(line)
                if message.get("op") == "ready":
                    self.ready.set()
                    continue
                with self._lock:
                    pending = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
                if pending is not None:
                    pending.message = message
                    pending.done.set()
        except (OSError, ValueError) as exc:  # WireError is a ValueError
            why = f"; it broke the protocol ({exc})"
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._outbox.put(None)
        self._on_death(self, _how(self.proc.returncode) + why)

    def fail_pending(self, how: str) -> None:
        """Fail every call in flight (the helper died)."""
        with self._lock:
            self.dead = True
            pending, self._pending = self._pending, {}
        started = self.ready.is_set()
        for item in pending.values():
            what = _WHAT[item.method]
            if started:
                text = (f"{what} failed: the librdkafka helper process died ({how}) with this call in flight; "
                        "a new one serves the next calls")
            else:
                text = f"{what} failed: the librdkafka helper process could not start ({how})"
            item.failure = AdminCallError(text, kind="crashed")
            item.done.set()

    def mark_dead(self) -> tuple[frozenset[str], frozenset[str]]:
        """Stop taking calls; return the hosted clusters and those with calls in flight."""
        with self._lock:
            self.dead = True
            return frozenset(self.hosted), frozenset(p.name for p in self._pending.values())


class HelperClusterAdmin:
    """ClusterAdmin's methods for one cluster, run in a helper process."""

    def __init__(self, pool: AdminHelpers, cluster_name: str, conf: dict[str, Any], fingerprint: str) -> None:
        """A handle; nothing starts until the first call."""
        self.cluster_name = cluster_name
        self._pool = pool
        self._conf = conf  # holds the secret: sent to the helper only, never logged
        self.fingerprint = fingerprint

    def _call(self, method: str, timeout_s: float, deadline: float | None = None, **args: Any) -> Any:
        end = time.monotonic() + timeout_s
        if deadline is not None:
            end = min(end, deadline)
        return self._pool.call(self, method, args, timeout_s, end)

    def describe_cluster(self, timeout_s: float) -> ClusterDescription:
        """DescribeCluster with authorized operations; raise AdminCallError on failure or timeout."""
        return _decoded(W.decode_description, self._call("describe_cluster", timeout_s))

    def metadata(self, timeout_s: float) -> MetadataView:
        """A fresh Metadata request for all topics (also refreshes the helper client's controller view)."""
        return _decoded(W.decode_view, self._call("metadata", timeout_s))

    def list_topic_names(self, timeout_s: float) -> list[str]:
        """Metadata for all topics; return their names."""
        return self.metadata(timeout_s).topic_names

    def describe_topics(self, names: list[str] | Any, timeout_s: float, *, batch_size: int = TOPIC_BATCH_SIZE,
                        deadline: float | None = None) -> TopicListing:
        """Describe topics in concurrent batches; topics that fail are listed in `failed`."""
        raw = self._call("describe_topics", timeout_s, deadline, names=list(names), batch_size=batch_size)
        return _decoded(W.decode_listing, raw)

    def take_errors(self) -> list[KafkaError]:
        """Return and forget the client-level errors the helper's client saw since the last call."""
        pairs = _decoded(W.decode_errors, self._call("take_errors", 5.0))
        return [KafkaError(code, text) for code, text in pairs]

    def paused(self) -> str | None:
        """Why librdkafka is off for this cluster now (its own helper died), else None."""
        return self._pool.isolation.pause_reason(self.cluster_name)

    def resume(self) -> None:
        """End a pause early (the brokers answer sanely again): the next calls run on a helper of its own."""
        if self._pool.isolation.release(self.cluster_name):
            log.info("cluster %s: librdkafka on probation on a helper of its own", self.cluster_name)


def _decoded(decode: Callable[[Any], Any], raw: Any) -> Any:
    try:
        return decode(raw)
    except W.WireError as exc:
        raise AdminCallError(f"the librdkafka helper answered something unreadable: {exc}") from None


class AdminHelpers:
    """The poller's librdkafka clients, in helper processes: one shared, up to `isolation_children` isolated."""

    def __init__(self, *, isolation_children: int = 3, hold_s: float = 3600.0, bench_s: float = 900.0,
                 bench_max_s: float = 4 * 3600.0, python: str = sys.executable) -> None:
        """No helper starts until the first call."""
        self.isolation = Isolation(slots=isolation_children, hold_s=hold_s, bench_s=bench_s, bench_max_s=bench_max_s)
        self._python = python
        self._lock = threading.Lock()
        self._admins: dict[str, HelperClusterAdmin] = {}
        self._helpers: dict[str, HelperProcess] = {}
        self._not_before: dict[str, float] = {}
        self.deaths: list[Death] = []  # the most recent ones (for logs and tests)
        self.started = 0

    # ------------------------------------------------------------------ AdminClientCache's API

    def get(self, cluster: ClusterConfig, request_timeout_s: float) -> HelperClusterAdmin:
        """The cluster's admin handle (a new one, and a fresh start for its isolation, when its config changed)."""
        conf = cluster.librdkafka_config(request_timeout_s)
        fingerprint = config_fingerprint(conf)
        with self._lock:
            cached = self._admins.get(cluster.name)
            if cached is not None and cached.fingerprint == fingerprint:
                return cached
            admin = HelperClusterAdmin(self, cluster.name, conf, fingerprint)
            self._admins[cluster.name] = admin
        if cached is not None:
            self.isolation.forget(cluster.name)
        return admin

    def names(self) -> list[str]:
        """Return the cluster names with a handle."""
        with self._lock:
            return sorted(self._admins)

    def clear(self) -> None:
        """Drop every handle, let every helper go, forget every suspicion."""
        with self._lock:
            names, self._admins = list(self._admins), {}
            helpers, self._helpers = list(self._helpers.values()), {}
        for helper in helpers:
            helper.retire()
        for name in names:
            self.isolation.forget(name)

    close = clear

    def pids(self) -> dict[str, int]:
        """The running helpers' process ids by lane."""
        with self._lock:
            return {lane: h.pid for lane, h in self._helpers.items() if not h.dead}

    # ------------------------------------------------------------------ calls

    def call(self, admin: HelperClusterAdmin, method: str, args: dict[str, Any], timeout_s: float,
             deadline: float) -> Any:
        """Run a call on the helper the cluster is placed on now."""
        name = admin.cluster_name
        lane = self.isolation.lane(name)
        if lane is None:
            raise AdminCallError(self.isolation.pause_reason(name) or "librdkafka is off for this cluster", "paused")
        helper = self._helper(lane, name)
        return helper.call(name, admin.fingerprint, admin._conf, method, args, timeout_s, deadline)

    def _helper(self, lane: str, name: str) -> HelperProcess:
        with self._lock:
            self._tidy(lane, name)
            helper = self._helpers.get(lane)
            if helper is not None and not helper.dead:
                return helper
            wait = self._not_before.get(lane, 0.0) - time.monotonic()
            if wait > 0:
                raise AdminCallError(f"the librdkafka helper process could not start; next try in {wait:.0f}s",
                                     "crashed")
            try:
                helper = HelperProcess(lane, self._died, self._python)
            except OSError as exc:
                self._not_before[lane] = time.monotonic() + START_RETRY_S
                raise AdminCallError(f"the librdkafka helper process could not start: {exc}", "crashed") from None
            self._helpers[lane] = helper
            self.started += 1
            return helper

    def _tidy(self, lane: str, name: str) -> None:
        """A cluster's client lives only on its current helper; an isolated helper that serves no one is let go."""
        for other_lane, helper in list(self._helpers.items()):
            if other_lane != lane and name in helper.hosted:
                helper.close_cluster(name)
        placed = set(self.isolation.lanes().values())
        for other_lane, helper in list(self._helpers.items()):
            if other_lane == SHARED or other_lane in placed or other_lane == lane:
                continue
            if not helper.pending_names():
                helper.retire()
                del self._helpers[other_lane]

    def _died(self, helper: HelperProcess, how: str) -> None:
        hosted, in_flight = helper.mark_dead()
        with self._lock:
            if self._helpers.get(helper.lane) is helper:
                del self._helpers[helper.lane]
        if helper.retiring:
            helper.fail_pending(how)
            return
        started = helper.ready.is_set()
        convicted: list[str] = []
        if started:
            # First the new placement, then the failures: a caller that retries lands on its new helper.
            convicted = self.isolation.died(helper.lane, hosted, in_flight, how)
            lanes = self.isolation.lanes()
            log.error("librdkafka helper %s (pid %d) died (%s) with calls of %s in flight; clusters off the shared "
                      "helper now: %s", helper.lane, helper.pid, how, ", ".join(sorted(in_flight)) or "no cluster",
                      lanes or "none")
            for name in convicted:
                log.error("cluster %s: %s", name, self.isolation.pause_reason(name))
        else:
            with self._lock:
                self._not_before[helper.lane] = time.monotonic() + START_RETRY_S
            log.error("librdkafka helper %s (pid %d) could not start (%s)", helper.lane, helper.pid, how)
        with self._lock:
            self.deaths = [*self.deaths[-19:], Death(helper.lane, helper.pid, how, hosted, in_flight, started,
                                                     tuple(convicted))]
        helper.fail_pending(how)
