"""`python -m backend probe`: probe brokers from the command line and print what each says."""

from __future__ import annotations

import json
import sys
from typing import Any

from backend.kafka import versions
from backend.kafka.probe import ProbeResult, ProbeSecurity, probe_brokers


def result_summary(result: ProbeResult) -> dict[str, Any]:
    """A JSON-ready view of a ProbeResult (no secrets: the result never holds any)."""
    return {
        "broker": f"{result.host}:{result.port}", "ok": result.ok, "error_kind": result.error_kind,
        "error": result.error, "cluster_id": result.cluster_id, "controller_id": result.controller_id,
        "software_name": result.software_name, "software_version": result.software_version,
        "provenance": result.provenance, "version_min": result.version_min,
        "version_max": result.version_max, "confidence": result.confidence,
        "evidence": list(result.evidence), "warnings": result.warnings,
        "api_versions_request_version_used": result.api_versions_request_version_used,
        "describe_cluster_version_used": result.describe_cluster_version_used,
        "api_versions": {str(k): list(v) for k, v in sorted(result.api_versions.items())},
        "timings_ms": result.timings_ms,
    }


def add_probe_arguments(parser: Any) -> None:
    """CLI arguments of `python -m backend probe`."""
    parser.add_argument("brokers", nargs="*", metavar="HOST:PORT", help="brokers to probe")
    parser.add_argument("--fleet", help="fleet file: probe the bootstrap servers of --cluster with its security")
    parser.add_argument("--cluster", help="cluster name in the fleet file")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds for each probe (default 10)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of one line per broker")


def run_probe_command(args: Any) -> int:
    """Probe brokers and print what each says; exit 1 when any probe failed, 2 on bad input."""
    security = ProbeSecurity()
    targets: list[tuple[str, int]] = []
    if args.fleet:
        from backend.config import FleetConfigError, load_fleet

        try:
            fleet = load_fleet(args.fleet)
            cluster = fleet.cluster(args.cluster) if args.cluster else fleet.clusters[0]
        except (FleetConfigError, KeyError, IndexError) as exc:
            print(f"probe: {exc}", file=sys.stderr)
            return 2
        security = ProbeSecurity.from_cluster(cluster)
        targets += [_host_port(s) for s in cluster.bootstrap_servers]
    try:
        targets += [_host_port(b) for b in args.brokers]
    except ValueError as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    if not targets:
        print("probe: give HOST:PORT arguments or --fleet", file=sys.stderr)
        return 2
    results = probe_brokers(targets, security=security, timeout_s=args.timeout)
    if args.json:
        print(json.dumps([result_summary(r) for r in results], indent=2))
    else:
        for r in results:
            if r.ok:
                version = r.software_version or versions.VersionGuess(
                    r.software_name or "", r.version_min, r.version_max, r.confidence).label()
                print(f"{r.host}:{r.port}  ok  {_cluster_text(r)}  {r.software_name or '?'} {version} "
                      f"({r.provenance})  {r.timings_ms.get('total', 0):.1f} ms")
            else:
                print(f"{r.host}:{r.port}  {r.error_kind}  {r.error}")
    return 0 if all(r.ok for r in results) else 1


def _cluster_text(result: ProbeResult) -> str:
    """``cluster=<id>``, or why there is none (the warning --json prints, e.g. no DescribeCluster before 2.8)."""
    if result.cluster_id:
        return f"cluster={result.cluster_id}"
    reason = next((w for w in result.warnings if "DescribeCluster" in w), "the broker did not report one")
    return f"cluster=unknown ({reason})"


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a HOST:PORT: {text!r}")
    return host.strip("[]"), int(port)
