"""The service's worker processes: `python -m backend.service.worker poll|ingest|analyze --config FILE`.

Each worker talks to the supervisor over the channel it inherits (backend.service.channel): it says
`hello`, reports every run with `start` and `done` events, and takes `run` / `stop` operations.
SIGTERM, SIGINT, a `stop` operation or a closed channel stop it after the write in progress.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections import Counter
from typing import Any

from backend.config import Fleet, FleetConfigError, load_fleet
from backend.service.channel import Channel
from backend.signals import stop_on_signals
from backend.store.location import resolve_lake

log = logging.getLogger("backend.service.worker")
# A stop that has not ended the process after this long exits at once (the supervisor SIGKILLs at 12 s):
# every write path commits last (poll status rows, ingest progress, the pipeline's state.json).
HARD_EXIT_S = 10.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m backend.service.worker", description=__doc__)
    parser.add_argument("job", choices=("poll", "ingest", "analyze"))
    parser.add_argument("--config", required=True, help="fleet file (TOML)")
    parser.add_argument("--secrets", default=None, help="secrets.toml holding [passwords]")
    parser.add_argument("--lake", default=None, help="lake path or URI (default: the fleet file's lake_path)")
    parser.add_argument("--interval", type=float, default=None, help="poll: seconds between polls (default: the fleet file's)")
    parser.add_argument("--master", default=None, help="analyze: Spark master (default: the fleet file's spark_master)")
    return parser


class Worker:
    """What every worker shares: the channel, the stop flag, and the run events."""

    def __init__(self, job: str, channel: Channel | None) -> None:
        """A worker for job, reporting on channel (None: report to the log only, for a manual run)."""
        self.job = job
        self.channel = channel
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def send(self, event: str, **fields: Any) -> None:
        """Report an event to the supervisor."""
        if self.channel is not None:
            self.channel.send({"event": event, "job": self.job, "pid": os.getpid(), "at": time.time(), **fields})

    def listen(self) -> None:
        """Take operations from the supervisor until the channel closes (which stops the worker)."""
        if self.channel is None:
            return

        def loop() -> None:
            assert self.channel is not None
            for message in self.channel.messages():
                op = message.get("op")
                if op == "run":
                    with self._lock:
                        self.requests.append(message)
                    self.wake.set()
                elif op == "stop":
                    self.request_stop()
            self.request_stop()

        threading.Thread(target=loop, name=f"{self.job}-channel", daemon=True).start()

    def request_stop(self) -> None:
        """Stop after the run in progress (at the latest HARD_EXIT_S from now)."""
        if not self.stop.is_set():
            threading.Thread(target=self._watchdog, name=f"{self.job}-stop-watchdog", daemon=True).start()
        self.stop.set()
        self.wake.set()

    def _watchdog(self) -> None:
        time.sleep(HARD_EXIT_S)
        log.error("%s worker: still running %.0fs after the stop request; exiting now", self.job, HARD_EXIT_S)
        logging.shutdown()
        os._exit(3)

    def next_request(self, timeout_s: float) -> dict[str, Any] | None:
        """The next run request, waiting up to timeout_s (None on timeout or stop)."""
        deadline = time.monotonic() + timeout_s
        while not self.stop.is_set():
            with self._lock:
                if self.requests:
                    return self.requests.pop(0)
                self.wake.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.wake.wait(min(left, 0.5))
        return None


def run_poll_worker(worker: Worker, fleet: Fleet, lake: str, interval_s: float | None) -> int:
    """Poll on the fleet's interval, serve the per-cluster metrics on a loopback port, report each cycle."""
    from backend.collect.metrics import FleetMetrics, start_metrics_server
    from backend.collect.poller import run_poller
    from backend.store.model import FleetPoll

    metrics = FleetMetrics(lake, group_max_groups=fleet.settings.group_metrics_max_groups,
                           group_max_topics=fleet.settings.group_metrics_max_topics)
    server = start_metrics_server(metrics, 0, "127.0.0.1")
    worker.send("hello", metrics_port=server.port)
    began = [time.monotonic()]

    def on_start() -> None:
        began[0] = time.monotonic()
        worker.send("start")

    def on_poll(poll: FleetPoll) -> None:
        metrics.update(poll)
        statuses = Counter(s.status for s in poll.clusters)
        not_ok = {s.cluster_name: s.status for s in poll.clusters if s.status != "ok"}
        worker.send("done", outcome="error" if poll.write_error else "ok", error=poll.write_error,
                    duration_s=time.monotonic() - began[0],
                    detail={"poll_id": poll.poll_id, "clusters": len(poll.clusters), "statuses": dict(statuses),
                            "not_ok": not_ok})

    def poll_now() -> None:
        # A "run" operation wakes the poller; its requests list is not needed beyond that.
        while not worker.stop.is_set():
            if worker.next_request(1.0) is not None:
                poller_wake.set()

    poller_wake = threading.Event()
    threading.Thread(target=poll_now, name="poll-now", daemon=True).start()
    try:
        run_poller(fleet, lake, interval_s=interval_s, stop=worker.stop, wake=poller_wake, on_start=on_start,
                   on_poll=on_poll)
    finally:
        server.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one worker until stopped; exit 2 for a fleet file it cannot use."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from backend.configs.sensitive import install_log_filter

    install_log_filter()
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        fleet = load_fleet(args.config, args.secrets)
    except FleetConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lake = resolve_lake(args.lake, fleet_lake_path=fleet.settings.lake_path)
    worker = Worker(args.job, Channel.from_env())
    worker.listen()
    with stop_on_signals(lambda _signum: worker.request_stop()):
        if args.job == "poll":
            return run_poll_worker(worker, fleet, lake, args.interval)
        if args.job == "ingest":
            from backend.service.ingest_worker import run_ingest_worker

            return run_ingest_worker(worker, fleet, lake)
        from backend.service.driver import run_analyze_worker

        return run_analyze_worker(worker, lake, args.master or fleet.settings.spark_master)


if __name__ == "__main__":
    sys.exit(main())
