"""`python -m backend serve --config clusters.toml`: the whole product as one supervised service."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import sys
import threading
from pathlib import Path
from typing import IO

from backend.auth.exposure import INSECURE_FLAG, decide_exposure, is_loopback
from backend.config import DEFAULT_FLEET_FILE, ENV_FLEET, FleetConfigError, load_fleet
from backend.service import status as st
from backend.service.supervisor import ServicePlan, Supervisor
from backend.signals import stop_on_signals
from backend.store.location import LAKE_HELP, LakeLocationError, parse_lake, resolve_lake


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the serve command's options to a (sub)parser."""
    parser.add_argument("--config", default=None, help=f"fleet file (TOML); default ${ENV_FLEET}, else {DEFAULT_FLEET_FILE}")
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--secrets", default=None, help="secrets.toml holding [passwords]")
    parser.add_argument("--state-dir", default=None,
                        help="service status, requests and logs (default: [service] state_dir, else <lake>/_state/service)")
    parser.add_argument("--ui-port", type=int, default=None, help="UI port (default: [service] ui_port, 8501)")
    parser.add_argument("--ui-address", default=None, help="UI address (default: [service] ui_address, 127.0.0.1)")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="/metrics, /healthz, /readyz port (default: [service] metrics_port, 9308; 0 picks a free one)")
    parser.add_argument("--metrics-address", default=None, help="address of that endpoint (default: [service] metrics_address)")
    parser.add_argument(INSECURE_FLAG, action="store_true", dest="insecure_no_login",
                        help="serve the UI beyond loopback WITHOUT login (also needs [auth] required = false in the "
                             "fleet file); every page then says so")
    parser.add_argument("--api-port", type=int, default=None,
                        help="the read-only API and MCP port (default: [service] api_port, 8502; 0 picks a free one)")
    parser.add_argument("--api-address", default=None, help="the API's address (default: [service] api_address)")
    parser.add_argument("--no-api", action="store_true", help="do not start the API")
    parser.add_argument("--no-ui", action="store_true", help="do not start the UI")
    parser.add_argument("--no-analyze", action="store_true", help="do not start the Spark driver (no analyze runs)")
    parser.add_argument("--duration", type=float, default=None, help="stop by itself after this many seconds")


def _port(value: int | None, default: int, flag: str) -> int:
    port = default if value is None else value
    if not 0 <= port <= 65535:
        raise ValueError(f"{flag} must be 0-65535, got {port}")
    return port


def plan_from_args(args: argparse.Namespace) -> ServicePlan:
    """Resolve the fleet file, lake, state directory and ports; raises FleetConfigError or ValueError."""
    config = Path(args.config or os.environ.get(ENV_FLEET) or DEFAULT_FLEET_FILE).resolve()
    fleet = load_fleet(config, args.secrets)
    if not fleet.clusters:
        raise ValueError(f"{config}: no [[clusters]] configured")
    service = fleet.service
    lake = resolve_lake(args.lake, fleet_lake_path=fleet.settings.lake_path)
    where = parse_lake(lake)
    if where.local:
        lake = where.root  # children run elsewhere: hand them an absolute path
    state_dir = Path(args.state_dir).resolve() if args.state_dir else st.default_state_dir(lake, service.state_dir)
    ui = service.ui and not args.no_ui
    ui_address = args.ui_address or service.ui_address
    insecure = bool(getattr(args, "insecure_no_login", False))
    if ui:
        exposure = decide_exposure(ui_address, fleet.auth, insecure)
        if not exposure.allowed:
            raise ValueError(f"{config}: {exposure.reason}")
    api = service.api and not getattr(args, "no_api", False)
    api_address = getattr(args, "api_address", None) or service.api_address
    if api and not fleet.auth.login and not is_loopback(api_address):
        # The API without login answers loopback only, whatever the flags: it has no banner to warn anyone.
        raise ValueError(f"{config}: refusing to serve the API on {api_address or 'every interface'} without login: "
                         "turn login on ([auth] required = true, docs/api.md) or keep api_address on 127.0.0.1")
    return ServicePlan(
        fleet=fleet, fleet_file=config, lake=lake, state_dir=state_dir,
        secrets=str(Path(args.secrets).resolve()) if args.secrets else None,
        ui=ui,
        ui_address=ui_address,
        ui_port=_port(args.ui_port, service.ui_port, "--ui-port"),
        insecure_no_login=insecure,
        metrics_address=args.metrics_address or service.metrics_address,
        metrics_port=_port(args.metrics_port, service.metrics_port, "--metrics-port"),
        api=api, api_address=api_address,
        api_port=_port(getattr(args, "api_port", None), service.api_port, "--api-port"),
        analyze=service.analyze and not args.no_analyze,
        spark_master=fleet.settings.spark_master,
    )


def lock_state_dir(state_dir: Path) -> IO[str] | None:
    """Hold the service lock of a state directory (None when another serve holds it)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = open(state_dir / st.LOCK_FILE, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def run_serve_command(args: argparse.Namespace) -> int:
    """Run the service until SIGTERM/SIGINT (or --duration); 2 for a bad fleet file, port or a second instance."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from backend.configs.sensitive import install_log_filter

    install_log_filter()
    try:
        plan = plan_from_args(args)
    except (FleetConfigError, ValueError, LakeLocationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(plan.metrics_address):
        print(f"note: /metrics, /healthz and /readyz on {plan.metrics_address or 'every interface'} have no login "
              "(cluster names are labels there); see docs/auth.md", file=sys.stderr)
    return serve(plan, duration_s=args.duration)


def serve(plan: ServicePlan, duration_s: float | None = None) -> int:
    """Run the supervisor for plan (holding the state directory's lock) until a stop signal or duration_s."""
    lock = lock_state_dir(plan.state_dir)
    if lock is None:
        print(f"error: another fleetview serve is running on {plan.state_dir} ({st.LOCK_FILE} is locked)", file=sys.stderr)
        return 2
    supervisor = Supervisor(plan)
    try:
        supervisor.open_endpoint()
    except OSError as exc:
        lock.close()
        print(f"error: metrics endpoint {plan.metrics_address}:{plan.metrics_port}: {exc}", file=sys.stderr)
        return 2
    timer = threading.Timer(duration_s, supervisor.stop) if duration_s else None
    try:
        with stop_on_signals(lambda _signum: supervisor.stop(), ignore_repeats=True):
            if timer is not None:
                timer.daemon = True
                timer.start()
            return supervisor.run()
    finally:
        if timer is not None:
            timer.cancel()
        lock.close()
