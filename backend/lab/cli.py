"""`python -m backend lab`: run the lab fleet, push a generated client fleet's configs, flip faults."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections import Counter
from pathlib import Path

from backend.lab.clientgen import push_client_fleet
from backend.lab.faults import FAULT_MODES, set_fault_in_file
from backend.lab.fleet import LabFleet
from backend.lab.model import LabConfigError, load_lab_config


def add_lab_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the lab command's options to an argparse (sub)parser."""
    parser.add_argument("--config", default="lab.toml", help="lab file (default: lab.toml)")
    parser.add_argument("--clients", type=int, default=0, metavar="N",
                        help="generate N client instances and push their configs (KIP-1324)")
    parser.add_argument("--seed", type=int, default=1324, help="seed of the client fleet generator")
    parser.add_argument("--zookeeper", default=None, metavar="HOST:PORT",
                        help="ZooKeeper for ZooKeeper-mode clusters without their own connect string")
    parser.add_argument("--fleet-file", default=None, metavar="PATH",
                        help="where to write the clusters.toml pointing at the lab (default: <state_dir>/clusters.toml)")
    parser.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="stop after this long instead of waiting for Ctrl-C")
    parser.add_argument("--set-fault", default=None, metavar="CLUSTER:BROKER:MODE=VALUE",
                        help=f"flip a fault of a running lab and exit; modes: {', '.join(FAULT_MODES)}")


def _parse_fault(text: str) -> tuple[str, int, str, int | bool]:
    try:
        cluster, broker, assignment = text.split(":", 2)
        mode, _, raw = assignment.partition("=")
        broker_id = int(broker)
    except ValueError:
        raise ValueError(f"--set-fault {text!r}: expected CLUSTER:BROKER:MODE=VALUE, e.g. prod-eu:1:latency_ms=500") from None
    if mode not in FAULT_MODES:
        raise ValueError(f"--set-fault: unknown mode {mode!r} (known: {', '.join(FAULT_MODES)})")
    if mode == "latency_ms":
        if not raw.isdigit():
            raise ValueError("--set-fault: latency_ms takes a whole number of milliseconds")
        return cluster, broker_id, mode, int(raw)
    if raw.lower() not in ("true", "false", "on", "off", "1", "0"):
        raise ValueError(f"--set-fault: {mode} takes true or false")
    return cluster, broker_id, mode, raw.lower() in ("true", "on", "1")


def run_lab_command(args: argparse.Namespace) -> int:
    """Start the lab, print where everything is, push configs, run until Ctrl-C (or --duration)."""
    try:
        config = load_lab_config(args.config)
    except LabConfigError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    control = config.state_dir / "faults.json"
    if args.set_fault:
        try:
            cluster, broker, mode, value = _parse_fault(args.set_fault)
            if broker not in {b.id for b in config.cluster(cluster).brokers}:
                raise ValueError(f"--set-fault: cluster {cluster!r} has no broker {broker}")
            set_fault_in_file(control, cluster, broker, mode, value)
        except KeyError:
            print(f"lab: unknown cluster in --set-fault {args.set_fault!r}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"lab: {exc}", file=sys.stderr)
            return 2
        print(f"fault set in {control}: {cluster}/{broker} {mode}={value}")
        return 0
    if args.clients < 0:
        print("lab: --clients must be >= 0", file=sys.stderr)
        return 2

    fleet = LabFleet(config, zookeeper_connect=args.zookeeper)
    try:
        fleet.start()
    except (OSError, ValueError) as exc:
        print(f"lab: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        fleet_file = fleet.write_fleet_file(Path(args.fleet_file) if args.fleet_file else config.state_dir / "clusters.toml")
        print(f"lab state: {fleet.state.path}")
        print(f"fault control file: {control}")
        print(f"fleet file for the poller: {fleet_file}")
        for name, info in fleet.clusters.items():
            zk = f" zookeeper={info.zookeeper_connect}{info.zookeeper_chroot}" if info.zookeeper_connect else ""
            if info.zookeeper_error:
                zk = f" zookeeper: {info.zookeeper_error}"
            push = f" push_config sink={info.sink_dir}" if info.push_config else ""
            print(f"cluster {name} [{info.profile}] id={info.cluster_id} bootstrap={info.bootstrap}{zk}{push}")
        if args.clients:
            clients, outcomes = push_client_fleet(fleet, args.clients, seed=args.seed)
            if not clients:
                print("lab: no cluster has policy.push_config enabled; no configs pushed", file=sys.stderr)
            else:
                counts = Counter(o.status for o in outcomes)
                print(f"pushed {len(clients)} client configs: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        sys.stdout.flush()
        done = threading.Event()
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, lambda *_: done.set()) if in_main else None
        try:
            done.wait(args.duration)
        except KeyboardInterrupt:
            pass
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)
    finally:
        fleet.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (`python -m backend.lab.cli`), same options as `python -m backend lab`."""
    parser = argparse.ArgumentParser(prog="lab", description=__doc__)
    add_lab_arguments(parser)
    return run_lab_command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
