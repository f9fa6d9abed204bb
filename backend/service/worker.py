"""The service's worker processes: `python -m backend.service.worker poll|ingest|analyze --config FILE`.

Each worker talks to the supervisor over the channel it inherits (backend.service.channel): it says
`hello`, reports every run with `start` and `done` events, and takes `run` / `stop` operations.
SIGTERM, SIGINT, a `stop` operation or a closed channel stop it after the write in progress.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections import Counter

from backend.config import Fleet, FleetConfigError, load_fleet
from backend.service.channel import Channel
from backend.service.job_worker import Worker
from backend.signals import stop_on_signals
from backend.store.location import resolve_lake

log = logging.getLogger("backend.service.worker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m backend.service.worker", description=__doc__)
    parser.add_argument("job", choices=("poll", "ingest", "analyze"))
    parser.add_argument("--config", required=True, help="fleet file (TOML)")
    parser.add_argument("--secrets", default=None, help="secrets.toml holding [passwords]")
    parser.add_argument("--lake", default=None, help="lake path or URI (default: the fleet file's lake_path)")
    parser.add_argument("--interval", type=float, default=None, help="poll: seconds between polls (default: the fleet file's)")
    parser.add_argument("--master", default=None, help="analyze: Spark master (default: the fleet file's spark_master)")
    return parser


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

        return run_analyze_worker(worker, lake, args.master or fleet.settings.spark_master,
                                  driver_host=fleet.settings.spark_driver_host)


if __name__ == "__main__":
    sys.exit(main())
