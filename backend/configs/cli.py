"""`python -m backend ingest`: load client-config snapshots into the lake."""

from __future__ import annotations

import argparse
import sys
import threading

from backend.config import configured_lake
from backend.configs.ingest import (
    IngestResult,
    ingest_java_log,
    ingest_properties,
    ingest_sink,
    ingest_topic,
)
from backend.plain_text import visible
from backend.signals import stop_on_signals
from backend.store.location import LAKE_HELP


def add_ingest_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ingest command's flags to ``parser``."""
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--config", default=None, help="fleet file (TOML) whose lake_path is the default lake")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sink", metavar="DIR", help="PushConfig sink directory (JSONL)")
    source.add_argument("--topic", metavar="T", help="Kafka topic holding snapshot records")
    source.add_argument("--java-log", metavar="FILE", help="Java client log file")
    source.add_argument("--properties", metavar="DIR", help="<DIR>/<cluster>/<client>.properties")
    parser.add_argument("--bootstrap", metavar="B", help="bootstrap servers for --topic")
    parser.add_argument("--cluster-id", help="cluster id for --java-log records")
    parser.add_argument("--timeout", type=float, default=10.0, help="network timeout, seconds")


def format_result(result: IngestResult) -> str:
    """A human summary of one ingest run."""
    lines = [
        f"ingest {result.source} {result.location}",
        f"  records read:        {result.records_read}",
        f"  records written:     {result.records_written} ({result.rows_written} config rows)",
        f"  quarantined:         {result.quarantined_total}"
        + "".join(f"\n    {reason}: {n}" for reason, n in sorted(result.quarantined.items())),
        f"  sensitive dropped:   {result.sensitive_dropped_total} values of "
        f"{len(result.sensitive_dropped)} keys"
        + "".join(f"\n    {key}: {n}" for key, n in sorted(result.sensitive_dropped.items())),
        f"  untyped records:     {result.untyped}",
        f"  unparsed log lines:  {result.unparsed_lines} (inside config blocks, not key = value)",
    ]
    if result.files_unread:
        lines.append(f"  files not read:      {len(result.files_unread)}"
                     + "".join(f"\n    {name}: {why}" for name, why in sorted(result.files_unread.items())))
    # Key and file names come from clients and file systems: no control character reaches the terminal.
    return "\n".join(visible(line) for line in "\n".join(lines).split("\n"))


def run_ingest_command(args: argparse.Namespace) -> int:
    """Run ingest from parsed args; prints a summary, returns the exit code."""
    try:
        lake = configured_lake(args.lake, fleet_file=args.config)
    except (OSError, ValueError) as err:  # a bad fleet file names file, line and key
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.topic and not args.bootstrap:
        print("error: --topic needs --bootstrap", file=sys.stderr)
        return 2
    stopping = threading.Event()
    try:
        # SIGTERM/SIGINT: the write in progress finishes and its progress is saved (a topic stops after the
        # batch being read); a second signal stops at once.
        with stop_on_signals(lambda _signum: stopping.set()):
            if args.sink:
                result = ingest_sink(lake, args.sink)
            elif args.topic:
                result = ingest_topic(lake, args.topic, args.bootstrap, args.timeout, should_stop=stopping.is_set)
            elif args.java_log:
                result = ingest_java_log(lake, args.java_log, args.cluster_id)
            else:
                result = ingest_properties(lake, args.properties)
    except (OSError, TimeoutError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(format_result(result))
    if stopping.is_set():
        print("ingest: stopped by a signal after saving its progress", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (the lead wires the same functions into backend.cli)."""
    parser = argparse.ArgumentParser(prog="python -m backend.configs.cli")
    add_ingest_arguments(parser)
    return run_ingest_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
