"""Command dispatch: each subcommand lives in its own module as add_*_arguments / run_*_command."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

NOT_IMPLEMENTED_EXIT = 2


@dataclass(frozen=True)
class Command:
    """Where a subcommand's arguments and runner live."""

    name: str
    help: str
    module: str
    add_arguments: str
    run: str


COMMANDS = (
    Command("serve", "run the whole product as one service: poller, ingest, warm Spark driver, UI, health", "backend.service.cli", "add_serve_arguments", "run_serve_command"),
    Command("poll", "poll every cluster of the fleet file and write snapshots to the lake", "backend.collect.cli", "add_poll_arguments", "run_poll_command"),
    Command("analyze", "run the Spark job: client-config distributions, drift and alerts", "backend.pipeline.cli", "add_analyze_arguments", "run_analyze_command"),
    Command("ingest", "read client-config snapshots (sink, topic, Java logs, .properties) into the lake", "backend.configs.cli", "add_ingest_arguments", "run_ingest_command"),
    Command("lab", "start the lab fleet (KIP-885 / KIP-1324 brokers) and push a synthetic client fleet", "backend.lab.cli", "add_lab_arguments", "run_lab_command"),
    Command("demo", "run everything on the embedded default: lab fleet, poller, Spark job, UI on :8501", "backend.demo", "add_demo_arguments", "run_demo_command"),
    Command("probe", "probe brokers one by one: ApiVersions, DescribeCluster (KIP-885), version guess", "backend.kafka.probe_cli", "add_probe_arguments", "run_probe_command"),
    Command("export", "export charts and the config-drift report without the UI", "backend.export.cli", "add_export_arguments", "run_export_command"),
    Command("search", "search the fleet: topics, groups, clients, brokers, clusters, configs (or one across the fleet)", "backend.export.search_cli", "add_search_arguments", "run_search_command"),
    Command("check", "judge a policy file against the fleet for CI: exit 0 pass, 1 violations, 2 could not evaluate", "backend.export.check", "add_check_arguments", "run_check_command"),
)  # fmt: skip


def _load(command: Command) -> tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]] | None:
    try:
        module = importlib.import_module(command.module)
    except ModuleNotFoundError as exc:
        if exc.name == command.module:
            return None
        raise
    return getattr(module, command.add_arguments), getattr(module, command.run)


def _not_implemented(name: str) -> Callable[[argparse.Namespace], int]:
    def run(_args: argparse.Namespace) -> int:
        print(f"`{name}` is not implemented yet.", file=sys.stderr)
        return NOT_IMPLEMENTED_EXIT

    return run


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    # `fleetview` when run as the installed console script, else `python -m backend`.
    prog = "fleetview" if os.path.basename(sys.argv[0] or "") == "fleetview" else "python -m backend"
    parser = argparse.ArgumentParser(prog=prog, description="Fleet view for Apache Kafka.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub_parser = sub.add_parser(command.name, help=command.help, description=command.help)
        loaded = _load(command)
        if loaded is None:
            sub_parser.set_defaults(run=_not_implemented(command.name))
            continue
        add_arguments, run = loaded
        add_arguments(sub_parser)
        sub_parser.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run the chosen command; returns the exit code."""
    args = build_parser().parse_args(argv)
    from backend.configs.sensitive import install_log_filter

    install_log_filter()  # warnings printed before a command sets up logging are redacted too
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130
