"""`python -m backend analyze`: run the Spark pipeline over the lake."""

from __future__ import annotations

import argparse
import sys
import threading
import time

from backend.config import configured_lake
from backend.store.commit import CommitConflict
from backend.store.location import LAKE_HELP


def add_analyze_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the analyze command's flags to ``parser``."""
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--master", default=None,
                        help="Spark master URL; default: fleet file, $FLEETVIEW_SPARK_MASTER or local[*]")
    parser.add_argument("--full", action="store_true", help="recompute from every snapshot")
    parser.add_argument("--window-days", type=float, default=None,
                        help="only instances whose latest snapshot is this recent")
    parser.add_argument("--config", default=None,
                        help="fleet file (TOML) for lake_path/spark_master, and the policy file it names")
    parser.add_argument("--policies", action="append", default=[],
                        help="a policy file whose client_config keys to keep per instance (repeatable; the poller's "
                             "policy file in the lake and the fleet file's are always kept)")


def _settings(args: argparse.Namespace) -> tuple[str, str | None, str | None, list[str]]:
    master, driver_host = args.master, None
    policies = list(getattr(args, "policies", []) or [])
    if args.config:
        from backend.config import load_fleet
        from backend.standards.engine import policies_path

        fleet = load_fleet(args.config)
        settings = fleet.settings
        master, driver_host = master or settings.spark_master, settings.spark_driver_host
        named = policies_path(fleet)
        if named is not None:
            policies.append(str(named))
    return configured_lake(args.lake, fleet_file=args.config), master, driver_host, policies


STOPPED_EXIT = 143
CONFLICT_EXIT = 3  # another analyze run committed the pipeline's state first: nothing of this run was kept


def _cancel_until(done: threading.Event, timeout_s: float = 10.0) -> None:
    """Cancel the session's Spark jobs until the run has returned (Spark cancels only jobs already submitted)."""
    from pyspark import SparkContext

    deadline = time.monotonic() + timeout_s
    while not done.is_set() and time.monotonic() < deadline:
        context = SparkContext._active_spark_context
        if context is not None:
            try:
                context.cancelAllJobs()
            except Exception:  # noqa: BLE001 - a context going away ends the run anyway
                return
        done.wait(0.1)


def run_analyze_command(args: argparse.Namespace) -> int:
    """Run the analysis from parsed args; prints progress and a summary, returns the exit code.

    SIGTERM/SIGINT cancel the run's Spark jobs: state.json is written last, so the previous state stays
    current and the next run does the work again (exit 143).
    """
    from backend.pipeline.job import run_analysis
    from backend.pipeline.spark import require_s3a_jars
    from backend.signals import stop_on_signals
    from backend.store.location import parse_lake

    try:
        lake, master, driver_host, policy_files = _settings(args)
        require_s3a_jars(parse_lake(lake))
    except (OSError, ValueError) as err:  # S3AJarsMissing is a ValueError
        print(f"error: {err}", file=sys.stderr)
        return 2
    stopping, done = threading.Event(), threading.Event()

    def on_stop(_signum: int) -> None:
        stopping.set()  # py4j calls from a signal handler would share the main thread's connection: use a thread
        threading.Thread(target=_cancel_until, args=(done,), name="analyze-cancel", daemon=True).start()

    try:
        with stop_on_signals(on_stop):
            summary = run_analysis(lake, master=master, full=args.full, window_days=args.window_days,
                                   progress=lambda msg: print(f"  .. {msg}", flush=True), short_lived=True,
                                   driver_host=driver_host, policy_files=policy_files)
    except CommitConflict as exc:
        print(f"error: {exc}", file=sys.stderr)
        return CONFLICT_EXIT
    except Exception:
        if not stopping.is_set():
            raise
        print("analyze: stopped by a signal; the previous state stays current", file=sys.stderr)
        return STOPPED_EXIT
    finally:
        done.set()
    alerts = ", ".join(f"{sev}: {summary.alerts_by_severity.get(sev, 0)}"
                       for sev in ("critical", "warning", "info"))
    mode = f"full: {summary.full_reason}" if summary.full else "incremental"
    print(f"analyze {lake} ({mode})")
    print(f"  files processed:     {summary.files_processed}")
    print(f"  records read:        {summary.records_read} rows, {summary.snapshots_read} snapshots")
    print(f"  client instances:    {summary.instances}")
    if not summary.full and not summary.skipped:
        print(f"  changed instances:   {summary.instances_changed} ({summary.instances_new} new, "
              f"{summary.instances_updated} updated): {summary.rows_added} entries counted, "
              f"{summary.rows_removed} taken out ({summary.files_reread} files read again)")
    print(f"  keys per instance:   {', '.join(summary.watched_keys) or 'none (no client_config policy)'}"
          + (f"; {summary.instances_refilled} unchanged instances read again for new ones"
             if summary.instances_refilled else ""))
    print(f"  quarantined (total): {summary.quarantined}")
    print(f"  sensitive dropped:   {summary.sensitive_dropped}")
    print(f"  untyped records:     {summary.untyped}")
    print(f"  alerts:              {alerts}" + (" (unchanged)" if summary.skipped else ""))
    if not summary.skipped:
        print(f"  spark:               {summary.spark_jobs} jobs, {summary.spark_stages} stages run, "
              f"{summary.shuffle_partitions} shuffle partitions")
    print(f"  took {summary.duration_s:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (spark-submit runs it through spark_analyze.py at the repository root)."""
    parser = argparse.ArgumentParser(prog="analyze")
    add_analyze_arguments(parser)
    return run_analyze_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
