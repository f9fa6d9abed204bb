"""`python -m backend export --report drift|broker-configs|groups|readiness|readiness-keys|readiness-instances ...`.

drift: the one-file HTML config-drift report (with the broker-config comparison, the consumer groups and upgrade
readiness as sections); broker-configs: the broker-config comparison as CSV; groups: the consumer groups and their lag
per partition as CSV; readiness: the upgrade-readiness checklist of each cluster with its verdict as CSV (`--target`,
default the newest 4.x; `--clusters` optional: every polled cluster); readiness-keys: the client-config keys behind it
(removed, or with a default the target changed) per cluster and client type, as CSV; readiness-instances: every
instance behind those keys that the pipeline's rules name (client.id, group.id, instance id, value), as CSV.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from backend.config import configured_lake
from backend.export.report import (
    ReportError,
    build_broker_config_csv,
    build_drift_report,
    build_groups_csv,
    build_readiness_csv,
)
from backend.store.location import LAKE_HELP
from backend.views.readiness import known_targets

REPORTS = ("drift", "broker-configs", "groups", "readiness", "readiness-keys", "readiness-instances")
NEEDS_CLUSTERS = ("drift", "broker-configs", "groups")


def _csv(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the export sub-command's arguments to parser."""
    parser.add_argument("--report", choices=REPORTS, required=True, help="which report to render")
    parser.add_argument("--clusters", type=_csv, default=None,
                        help="comma-separated cluster names (required for drift and broker-configs; readiness: "
                             "default every polled cluster)")
    parser.add_argument("--keys", type=_csv, default=None, help="comma-separated config keys (default: top drifting)")
    parser.add_argument("--include-identity", action="store_true",
                        help="rank identity keys (client.id, group.id, keys unique per instance) as drift too")
    parser.add_argument("--include-defaults", action="store_true",
                        help="broker-configs: also list configs at their default in every cluster")
    parser.add_argument("--target", default=None,
                        help="readiness: the target release line (default: the newest 4.x the versions table knows)")
    parser.add_argument("--out", type=Path, required=True, help="output file (HTML for drift, CSV for the others)")
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--config", default=None, help="fleet file (TOML) whose lake_path is the default lake")


def run_export_command(args: argparse.Namespace) -> int:
    """Render the chosen report to args.out; return 0, or 2 with a clear message on bad input."""
    try:
        if args.report in NEEDS_CLUSTERS and not args.clusters:
            raise ReportError(f"--report {args.report} needs --clusters")
        if args.target is not None and args.target not in known_targets():
            raise ReportError(f"unknown --target {args.target}; known: {', '.join(known_targets())}")
        location = configured_lake(args.lake, fleet_file=args.config)
        if args.report.startswith("readiness"):
            text = build_readiness_csv(location, args.target, clusters=args.clusters,
                                       keys=args.report == "readiness-keys",
                                       instances=args.report == "readiness-instances")
        elif args.report == "broker-configs":
            text = build_broker_config_csv(location, args.clusters, include_defaults=args.include_defaults)
        elif args.report == "groups":
            text = build_groups_csv(location, args.clusters)
        else:
            text = build_drift_report(location, args.clusters, args.keys, include_identity=args.include_identity)
    except (ReportError, ValueError) as exc:  # a bad lake location or fleet file is a ValueError
        print(f"export: {exc}", file=sys.stderr)
        return 2
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    # Write beside the target, then rename, so a failed run never leaves half a report.
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".report-", suffix=out.suffix or ".out")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, out)
    print(f"wrote {out} ({len(text.encode()):,} bytes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (the lead wires the same functions into python -m backend)."""
    parser = argparse.ArgumentParser(prog="python -m backend.export.cli")
    add_export_arguments(parser)
    return run_export_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
