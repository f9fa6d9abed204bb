"""`python -m backend demo`: the lab fleet, a client fleet, the poller, the Spark job and the UI, together."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import signal
import socket
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from backend.auth.exposure import INSECURE_FLAG, decide_exposure, is_loopback
from backend.config import AuthSettings
from backend.demo.zookeeper import LocalZooKeeper, start_local_zookeeper
from backend.store.location import LakeLocationError, parse_lake, resolve_lake

REPO = Path(__file__).resolve().parents[2]
POLICIES = REPO / "policies.example.toml"  # the standard the demo holds its lab fleet to (docs/standards.md)
RECREATED_TOPIC = ("prod-eu", "payments")


def _metrics_port(wanted: int) -> int:
    """The wanted port when it is free, else (or for 0) a free one, so a busy 9308 never loops the poller."""
    if wanted > 0 and _port_free(wanted):
        return wanted
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo command's options."""
    parser.add_argument("--lab", default=str(REPO / "lab.toml"), help="lab fleet file (default: lab.toml)")
    parser.add_argument("--lake", default=None,
                        help="lake directory or s3://bucket/prefix (default: $FLEETVIEW_LAKE, else ./lake); on S3 the "
                             "endpoint and credentials come from the AWS variables (AWS_ENDPOINT_URL, ...)")
    parser.add_argument("--state-dir", default=None,
                        help="lab state and sink (default: the lab file's state_dir); the service's logs are under "
                             "<lake>/_state/service (an s3:// lake: <state dir>/service)")
    parser.add_argument("--port", type=int, default=8501, help="UI port (default: 8501)")
    parser.add_argument("--metrics-port", type=int, default=9308,
                        help="Prometheus /metrics, /healthz, /readyz (default: 9308; a free one when that is taken or 0)")
    parser.add_argument("--api-port", type=int, default=8502,
                        help="the read-only API and MCP endpoint (default: 8502; a free one when that is taken or 0)")
    parser.add_argument("--clients", type=int, default=400, help="synthetic client instances pushing configs (default: 400)")
    parser.add_argument("--seed", type=int, default=1324, help="seed of the synthetic client fleet")
    parser.add_argument("--poll-interval", type=float, default=15.0, help="seconds between polls (default: 15)")
    parser.add_argument("--analyze-interval", type=float, default=180.0, help="seconds between Spark runs (default: 180)")
    parser.add_argument("--zookeeper", default="auto", help="'auto' (start a local one if possible), 'none', or HOST:PORT")
    parser.add_argument("--address", default="127.0.0.1",
                        help="UI address (default: 127.0.0.1; the demo has no login, so any other address needs "
                             f"{INSECURE_FLAG})")
    parser.add_argument(INSECURE_FLAG, action="store_true", dest="insecure_no_login",
                        help="serve the demo UI beyond loopback WITHOUT login: its fleet file then says [auth] "
                             "required = false, and every page says that login is off")
    parser.add_argument("--no-ui", action="store_true", help="do not start the UI (tests and soak runs)")
    parser.add_argument("--duration", type=float, default=None, help="stop by itself after this many seconds")


@dataclass
class DemoState:
    """What the demo has started, so one Ctrl-C can stop all of it."""

    zookeeper: LocalZooKeeper | None = None
    lab: object | None = None
    supervisor: object | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    recreated: bool = False
    children: int = 0


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the demo until Ctrl-C (or --duration); returns the exit code."""
    from backend.lab.model import LabConfigError, load_lab_config

    # kazoo reports every reconnect of the lab's ZooKeeper sessions at WARNING; the banner says what matters.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        config = load_lab_config(args.lab)
    except LabConfigError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    if args.state_dir:
        state_dir = Path(args.state_dir).resolve()
        config = dataclasses.replace(config, state_dir=state_dir, state_file=state_dir / "state.json", sink_dir=state_dir / "sink")
    # The demo writes its own fleet file, without login; --insecure-no-login puts [auth] required = false in it.
    auth = AuthSettings(required=False) if args.insecure_no_login else AuthSettings()
    exposure = decide_exposure(args.address, auth, args.insecure_no_login)
    if not args.no_ui and not exposure.allowed:
        print(f"demo: {exposure.reason}", file=sys.stderr)
        return 2
    if not args.no_ui and not _port_free(args.port):
        print(f"demo: port {args.port} is in use (another demo or Streamlit?); stop it or pass --port", file=sys.stderr)
        return 2
    try:
        where = parse_lake(resolve_lake(args.lake))
    except LakeLocationError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    if where.local:
        Path(where.root).mkdir(parents=True, exist_ok=True)
        lake = where.root
    else:
        lake = where.text  # the service, its children and the UI all open this URI
    state = DemoState()

    def on_signal(signum: int, _frame: object) -> None:
        state.stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run(args, config, lake, state)
    finally:
        # A second Ctrl-C while stopping must not leave children behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _shutdown(state)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def demo_fleet_file(lab: object, path: Path, args: argparse.Namespace, sink_dir: Path, metrics_port: int,
                    api_port: int = 0) -> Path:
    """The lab's clusters plus the service tables the demo runs with (its intervals, ports and the PushConfig sink)."""
    clusters = lab.write_fleet_file(path.with_name("lab-clusters.toml")).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    # --insecure-no-login puts [auth] required = false in it; without, the demo keeps to loopback.
    auth = ["[auth]", "required = false  # python -m backend demo --insecure-no-login", ""] if args.insecure_no_login else []
    service = [
        *auth,
        "[settings]",
        f"poll_interval_s = {args.poll_interval!r}",
        # consumer groups at every poll (a little under the interval, so no poll skips its read), judged over 5 reads:
        # the lab's stalled group shows as stalled within a few minutes
        f"group_interval_s = {round(args.poll_interval * 0.9, 3)!r}",
        "group_window = 5",
        f"policies = {json.dumps(str(POLICIES))}",
        "",
        "[service]",
        f"ui = {'false' if args.no_ui else 'true'}",
        f"ui_address = {json.dumps(args.address)}",
        f"ui_port = {args.port}",
        'metrics_address = "127.0.0.1"',
        f"metrics_port = {metrics_port}",
        'api_address = "127.0.0.1"  # the demo has no login: its API answers loopback only',
        f"api_port = {api_port}",
        f"analyze_interval_s = {args.analyze_interval!r}",
        "",
        "[[client_configs]]",
        'name = "lab-sink"',
        f"sink = {json.dumps(str(sink_dir))}",
        f"interval_s = {min(15.0, args.analyze_interval)!r}",
        "",
    ]
    path.write_text("\n".join(service) + "\n" + clusters, encoding="utf-8")
    return path


def _run(args: argparse.Namespace, config: object, lake: str, state: DemoState) -> int:
    from backend.config import load_fleet
    from backend.lab.clientgen import generate_clients, push_all
    from backend.lab.fleet import LabFleet
    from backend.service.cli import serve
    from backend.service.status import default_state_dir
    from backend.service.supervisor import ServicePlan

    print("Fleet view demo: starting the lab fleet, the poller, the Spark job and the UI.", flush=True)
    zk_connect: str | None = None
    if args.zookeeper == "auto":
        state.zookeeper, note = start_local_zookeeper(config.state_dir / "zookeeper")  # type: ignore[attr-defined]
        zk_connect = state.zookeeper.connect if state.zookeeper else None
        print(f"  zookeeper: {note}", flush=True)
    elif args.zookeeper != "none":
        zk_connect = args.zookeeper
        print(f"  zookeeper: {zk_connect} (given)", flush=True)
    else:
        print("  zookeeper: none (--zookeeper none); ZooKeeper-mode lab clusters run without it", flush=True)
    if state.stop.is_set():
        return 0

    lab = LabFleet(config, zookeeper_connect=zk_connect)  # type: ignore[arg-type]
    lab.start()
    state.lab = lab
    for name, info in lab.clusters.items():
        versions = sorted({b.software_version for b in info.brokers})
        zk = f", zookeeper {info.zookeeper_connect}{info.zookeeper_chroot}" if info.zookeeper_connect else ""
        if info.zookeeper_error:
            zk = f", not registered in ZooKeeper: {info.zookeeper_error}"
        print(f"  lab cluster {name:<13} {info.profile:<30} {', '.join(versions):<14} {info.bootstrap}{zk}", flush=True)

    push_versions = {n: lab.runtimes[n].spec.profile.software_version for n, i in lab.clusters.items() if i.push_config}
    if push_versions and args.clients > 0:
        clients = generate_clients(push_versions, args.clients, seed=args.seed)
        brokers = {n: [(b.host, b.port) for b in lab.clusters[n].brokers] for n in push_versions}
        outcomes = push_all(clients, brokers, seed=args.seed)
        counts = Counter(o.status for o in outcomes)
        print(f"  clients: {len(clients)} synthetic client instances pushed their configs (KIP-1324): "
              + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
    if state.stop.is_set():
        return 0

    # One code path with `serve`: the demo is the service on the lab fleet.
    metrics_port = _metrics_port(args.metrics_port)
    api_port = _metrics_port(getattr(args, "api_port", 0))
    fleet_file = demo_fleet_file(lab, config.state_dir / "clusters.toml", args, config.sink_dir, metrics_port,  # type: ignore[attr-defined]
                                 api_port)
    fleet = load_fleet(fleet_file)
    service = fleet.service
    # A local lake keeps the service's status and logs in it; an object-store lake cannot: beside the lab's state.
    state_dir = (default_state_dir(lake) if parse_lake(lake).local
                 else Path(config.state_dir) / "service")  # type: ignore[attr-defined]
    plan = ServicePlan(fleet=fleet, fleet_file=fleet_file, lake=lake, state_dir=state_dir,
                       ui=service.ui, ui_address=service.ui_address, ui_port=service.ui_port,
                       metrics_address=service.metrics_address, metrics_port=service.metrics_port,
                       api=service.api, api_address=service.api_address, api_port=service.api_port,
                       spark_master=fleet.settings.spark_master, insecure_no_login=args.insecure_no_login, banner=lambda sup: _banner(sup, args, lake),
                       stop_event=state.stop)
    scenario = threading.Thread(target=_scenario, args=(lab, lake, state), name="demo-scenario", daemon=True)
    scenario.start()
    state.children = len([c for c in ("poll", "ingest", "analyze", "ui", "api")
                          if (c != "ui" or service.ui) and (c != "api" or service.api)])
    return serve(plan, duration_s=args.duration)


def _banner(supervisor: object, args: argparse.Namespace, lake: str) -> None:
    """The demo's banner, as before it ran on the service: where everything is, one line each."""
    components = supervisor.components  # type: ignore[attr-defined]
    poller = components["poll"].child
    print(f"  poller: every {args.poll_interval:.0f}s, pid {poller.pid}, log {poller.log}", flush=True)
    print(f"  metrics: http://127.0.0.1:{supervisor.http.port}/metrics  (Prometheus; rules in "  # type: ignore[attr-defined]
          "docs/prometheus/rules.yml; health: /healthz, /readyz)", flush=True)
    if "ui" in components:
        ui = components["ui"].child
        address = supervisor.plan.ui_address  # type: ignore[attr-defined]
        shown = "localhost" if address in ("127.0.0.1", "0.0.0.0", "::", "") else address
        print(f"  ui: http://{shown}:{supervisor.plan.ui_port}  (pid {ui.pid}, log {ui.log})"  # type: ignore[attr-defined]
              + ("  -- NO LOGIN: anyone who reaches it sees every cluster" if not is_loopback(address) else ""),
              flush=True)
    if "api" in components:
        print(f"API: {supervisor.api_url()}", flush=True)  # type: ignore[attr-defined]
    analyze = components.get("analyze")
    logs = poller.log.parent
    print(f"  spark job: ingest of the PushConfig sink, analyze in a warm Spark driver after the first poll and every "
          f"{args.analyze_interval:.0f}s" + (f" (pid {analyze.child.pid})" if analyze else "") + f", logs in {logs}",
          flush=True)
    print(f"  lake: {lake.split('?', 1)[0]}", flush=True)
    print(f"  standards: {POLICIES.name}, judged every poll (Standards page; python -m backend check --policies "
          f"{POLICIES.name} --lake {lake.split('?', 1)[0]})", flush=True)
    print("Press Ctrl-C once to stop everything.", flush=True)


def _scenario(lab: object, lake: str, state: DemoState) -> None:
    """After the first poll, recreate one topic so the next poll sees a new topic id."""
    while not state.stop.wait(1.0):
        if _latest_poll(lake):
            _recreate_topic(lab, state)
            return


def _latest_poll(lake: str) -> str | None:
    from backend.store.readers import latest_poll_id

    try:
        return latest_poll_id(lake)
    except Exception:  # noqa: BLE001 - a lake being written is simply "not yet"
        return None


def _recreate_topic(lab: object, state: DemoState) -> None:
    """Delete and recreate one topic after the first poll, so the next poll sees a new topic id (KIP-516)."""
    cluster, topic = RECREATED_TOPIC
    try:
        old = lab.topic_id(cluster, topic)  # type: ignore[attr-defined]
        new = lab.recreate_topic(cluster, topic)  # type: ignore[attr-defined]
        print(f"  scenario: recreated topic {topic} on {cluster} ({old} -> {new.topic_id})", flush=True)
    except KeyError:
        print(f"  scenario: lab has no topic {topic} on {cluster}; no recreation shown", flush=True)
    state.recreated = True


def _shutdown(state: DemoState) -> None:
    state.stop.set()
    stopped = state.children
    if state.lab is not None:
        state.lab.stop()  # type: ignore[attr-defined]
    if state.zookeeper is not None:
        state.zookeeper.stop()
        stopped += 1
    print(f"Demo stopped: {stopped} processes and the lab fleet.", flush=True)
