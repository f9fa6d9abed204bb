"""`python -m backend poll`: poll the fleet into the lake, one line per cluster per cycle."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from backend.collect.metrics import FleetMetrics, start_metrics_server
from backend.collect.poller import run_poller
from backend.config import DEFAULT_FLEET_FILE, ENV_FLEET, FleetConfigError, load_fleet
from backend.configs.sensitive import install_log_filter
from backend.plain_text import visible
from backend.signals import stop_on_signals
from backend.store.commit import CommitConflict
from backend.store.lake import LakeError
from backend.store.location import LAKE_HELP, resolve_lake
from backend.store.model import NO_DATA_STATUSES, ClusterSnapshot, FleetPoll

CONFLICT_EXIT = 3  # another writer committed the lake's state first: this poll was not written


def add_poll_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the poll command's options to a (sub)parser."""
    parser.add_argument(
        "--config",
        default=None,
        help=f"fleet file (TOML); default ${ENV_FLEET}, else {DEFAULT_FLEET_FILE}",
    )
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--secrets", default=None, help="secrets.toml holding [passwords]")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--once",
        action="store_true",
        help="poll once and exit (non-zero if a cluster is down)",
    )
    mode.add_argument("--interval", type=float, default=None, help="seconds between polls")
    parser.add_argument("--metrics-port", type=int, default=None, metavar="N",
                        help="serve Prometheus metrics on http://HOST:N/metrics (0 picks a free port)")
    parser.add_argument("--metrics-host", default="127.0.0.1", help="address of the metrics endpoint (default 127.0.0.1)")


def format_cluster_line(snapshot: ClusterSnapshot) -> str:
    """Return the one-line summary of a cluster's poll."""
    if snapshot.has_data:
        live = snapshot.live_brokers
        reachable = sum(1 for b in live if b.reachable)
        counts = f"brokers={reachable}/{len(live)} topics={len(snapshot.topics)}"
    else:
        counts = "brokers=- topics=-"
    line = (
        f"{snapshot.polled_at:%Y-%m-%dT%H:%M:%SZ} {snapshot.cluster_name} status={snapshot.status} "
        f"{counts} duration_ms={snapshot.duration_ms:.0f}"
    )
    if snapshot.cluster_id:
        line += f" cluster_id={snapshot.cluster_id}"
    if snapshot.error:
        line += f" error={snapshot.error}"
    return visible(line)  # ids and errors come from brokers: no control character reaches the terminal


def _printer(out: TextIO) -> Callable[[FleetPoll], None]:
    def print_poll(poll: FleetPoll) -> None:
        for snapshot in poll.clusters:
            print(format_cluster_line(snapshot), file=out, flush=True)
        if poll.alerts:
            print(
                f"{len(poll.alerts)} alerts raised in poll {poll.poll_id}",
                file=out,
                flush=True,
            )

    return print_poll


def run_poll_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the poll command; 0 ok, 1 a cluster down/auth_failed with --once, 2 bad config or lake."""
    out = out or sys.stdout
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_filter()
    # the same fleet file the UI's "Poll now" uses when none is named
    args.config = args.config or os.environ.get(ENV_FLEET) or DEFAULT_FLEET_FILE
    try:
        fleet = load_fleet(args.config, args.secrets)
    except FleetConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not fleet.clusters:
        print(f"error: {args.config}: no [[clusters]] configured", file=sys.stderr)
        return 2
    if args.interval is not None and args.interval <= 0:
        print(
            f"error: --interval must be > 0 seconds, got {args.interval:g}",
            file=sys.stderr,
        )
        return 2
    lake = resolve_lake(args.lake, fleet_lake_path=fleet.settings.lake_path)
    on_poll = _printer(out)
    server = None
    if getattr(args, "metrics_port", None) is not None:
        if not 0 <= args.metrics_port <= 65535:
            print(f"error: --metrics-port must be 0-65535, got {args.metrics_port}", file=sys.stderr)
            return 2
        metrics = FleetMetrics(lake, group_max_groups=fleet.settings.group_metrics_max_groups,
                               group_max_topics=fleet.settings.group_metrics_max_topics)
        try:
            server = start_metrics_server(metrics, args.metrics_port, args.metrics_host)
        except OSError as exc:
            print(f"error: metrics endpoint {args.metrics_host}:{args.metrics_port}: {exc}", file=sys.stderr)
            return 2
        print(f"metrics: http://{server.address}:{server.port}/metrics", file=out, flush=True)
        printer = on_poll

        def on_poll(poll: FleetPoll) -> None:
            printer(poll)
            metrics.update(poll)

    stop = threading.Event()
    try:
        # SIGTERM/SIGINT end the loop after the cycle in progress has written its poll (a second one is hard).
        with stop_on_signals(lambda _signum: stop.set()):
            last = run_poller(
                fleet,
                lake,
                interval_s=args.interval,
                once=bool(args.once),
                on_poll=on_poll,
                stop=stop,
            )
    except CommitConflict as exc:
        print(f"error: lake {lake}: {exc}", file=sys.stderr)
        return CONFLICT_EXIT
    except (LakeError, OSError) as exc:
        print(f"error: lake {lake}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    finally:
        if server is not None:
            server.close()
    if args.once and last is not None and any(s.status in NO_DATA_STATUSES for s in last.clusters):
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: python -m backend.collect.cli --config ... --once."""
    parser = argparse.ArgumentParser(prog="python -m backend.collect.cli", description=__doc__)
    add_poll_arguments(parser)
    return run_poll_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
