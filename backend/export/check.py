"""`fleetview check` / `python -m backend check`: a policy file judged against the fleet, as an exit code for CI.

    fleetview check --policies policies.toml [--clusters a,b] [--lake PATH | --poll] [--config clusters.toml]
                    [--claims claims.json] [--format text|json|sarif|junit] [--out FILE]

It reads the lake (the poller's latest state, configs, groups, client inventory and the analysis' client results)
or, with --poll, polls every cluster of the fleet file once (read-only requests) and judges the given policy file
with the same evaluator the service runs. Exit 0: every policy passes (waived and upcoming findings included);
1: violations; 2: it could not evaluate (a bad policy file, no lake, an unknown cluster, or a policy without the
evidence to judge it, never a pass by omission). `run_check` is the door-independent core (an API can call it with
the caller's Scope): a cluster outside the scope is not judged, counted or named.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from backend.auth.grants import grants_for
from backend.auth.scope import Scope
from backend.config import Fleet, FleetConfigError, configured_lake, default_fleet_file, load_fleet
from backend.export.check_formats import FORMATS, render
from backend.export.check_report import EXIT_UNKNOWN, CheckReport
from backend.standards.client_facts import ClientFacts, read_client_facts
from backend.standards.engine import StandardsEngine, policies_path
from backend.standards.policy import PolicyFileError, PolicySet, load_policies
from backend.store.lake import LakeError
from backend.store.location import LAKE_HELP, LakeLocationError
from backend.store.model import ClusterSnapshot
from backend.store.snapshots import current_snapshots
from backend.store.standards_model import PolicyResult, StandardsSnapshot


class CheckError(ValueError):
    """The check cannot run (bad input): exit 2 with this message."""


def run_check(policies: PolicySet, snapshots: Mapping[str, ClusterSnapshot],
              facts: Mapping[str, ClientFacts] | None, *, scope: Scope | None = None,
              clusters: list[str] | None = None, now: datetime | None = None,
              stored: Mapping[str, StandardsSnapshot] | None = None, source: str = "") -> CheckReport:
    """Judge every policy on the clusters the scope may view (``clusters``: only these; an unknown or hidden name is
    a CheckError naming it, the same for both). ``stored``: the service's results, whose `since` dates carry over
    for policies of the same definition."""
    scope = scope or Scope()
    now = now or datetime.now(UTC)
    visible = {name: s for name, s in snapshots.items() if scope.may_view(name)}
    if clusters:
        unknown = [c for c in clusters if c not in visible]
        if unknown:
            raise CheckError(f"unknown cluster(s): {', '.join(unknown)}; known: {', '.join(sorted(visible)) or 'none'}")
        visible = {name: visible[name] for name in clusters}
    if not visible:
        raise CheckError("no cluster to judge: the lake holds no polled cluster you may view" if not snapshots
                         else "no cluster to judge within your grants")
    engine = StandardsEngine(None)
    engine.use_policies(policies)
    if stored:
        engine.seed({name: snap for name, snap in stored.items() if name in visible})
    results: list[PolicyResult] = []
    evidence: dict[str, datetime | None] = {}
    for name in sorted(visible):
        snapshot = visible[name]
        cluster_facts = facts.get(snapshot.cluster_id or "") if facts is not None else None
        judged = engine.evaluate_cluster(snapshot, cluster_facts, facts is not None, now)
        results += [judged[p.id] for p in policies.policies if p.id in judged]
        evidence[name] = snapshot.polled_at
    notes = []
    unmatched = [p.id for p in policies.policies if not any(r.policy_id == p.id for r in results)]
    if unmatched:
        notes.append(f"{len(unmatched)} policies select none of the judged clusters: {', '.join(unmatched)}")
    return CheckReport(policies, results, sorted(visible), source, now, evidence, notes)


# ----------------------------------------------------------------------------------------------------- the CLI


def _csv(text: str) -> list[str]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the check sub-command's arguments to parser."""
    parser.add_argument("--policies", default=None,
                        help="policy file (TOML; default: the fleet file's, else policies.toml beside it)")
    parser.add_argument("--clusters", type=_csv, default=None, help="comma-separated cluster names (default: all)")
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--poll", action="store_true",
                        help="poll every cluster of the fleet file once (read-only) instead of reading the lake")
    parser.add_argument("--config", default=None, help="fleet file (TOML): its lake, its clusters for --poll, and "
                                                        "their grants for --claims")
    parser.add_argument("--secrets", default=None, help="secrets.toml for --poll (default: the fleet file's)")
    parser.add_argument("--claims", type=Path, default=None,
                        help="JSON file of ID-token claims: judge only the clusters those claims may view (the "
                             "fleet file's [auth] and access grants)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--out", type=Path, default=None, help="write the output to this file (default: stdout)")


def _fleet(args: argparse.Namespace, *, required: bool) -> Fleet | None:
    path = args.config or default_fleet_file()
    if path is None:
        if required:
            raise CheckError("no fleet file: pass --config clusters.toml (or set $FLEETVIEW_FLEET)")
        return None
    try:
        return load_fleet(path, args.secrets, resolve_secrets=bool(args.poll))
    except FleetConfigError as exc:
        raise CheckError(str(exc)) from None


def _scope(args: argparse.Namespace, fleet: Fleet | None) -> Scope:
    if args.claims is None:
        return Scope()
    if fleet is None:
        raise CheckError("--claims needs the fleet file whose grants apply (--config)")
    try:
        claims = json.loads(args.claims.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckError(f"{args.claims}: cannot read the claims: {exc}") from None
    if not isinstance(claims, dict):
        raise CheckError(f"{args.claims}: claims must be a JSON object")
    return Scope(frozenset(grants_for(claims, fleet)))


def _policies(args: argparse.Namespace, fleet: Fleet | None) -> PolicySet:
    path = Path(args.policies) if args.policies else (policies_path(fleet) if fleet is not None else None)
    if path is None:
        raise CheckError("no policy file: pass --policies policies.toml")
    try:
        return load_policies(path)
    except PolicyFileError as exc:
        raise CheckError(f"policy file refused: {exc}") from None


def check_command(args: argparse.Namespace) -> CheckReport:
    """Load what the arguments name and run the check (CheckError on bad input)."""
    fleet = _fleet(args, required=args.poll or args.claims is not None)
    policies = _policies(args, fleet)
    scope = _scope(args, fleet)
    try:
        lake = configured_lake(args.lake, fleet_file=args.config)
    except (FleetConfigError, LakeLocationError, LakeError) as exc:
        raise CheckError(str(exc)) from None
    if args.poll:
        from backend.collect.poller import poll_fleet

        assert fleet is not None
        wanted = [c for c in fleet.clusters if scope.may_view(c.name) and (not args.clusters or c.name in args.clusters)]
        if args.clusters:
            missing = [c for c in args.clusters if c not in {w.name for w in wanted}]
            if missing:
                raise CheckError(f"unknown cluster(s): {', '.join(missing)}; known: "
                                 f"{', '.join(sorted(c.name for c in fleet.clusters if scope.may_view(c.name)))}")
        poll = poll_fleet(fleet.model_copy(update={"clusters": wanted}))
        snapshots = {s.cluster_name: s for s in poll.clusters}
        facts = _facts(lake)
        return run_check(policies, snapshots, facts, scope=scope, clusters=args.clusters,
                         source=f"one poll of {fleet.source}")
    try:
        snapshots = current_snapshots(lake)
    except (OSError, LakeError, ValueError) as exc:
        raise CheckError(f"cannot read the lake {lake}: {exc}") from None
    if not snapshots:
        raise CheckError(f"no polled cluster in the lake {lake}: run `python -m backend poll` (or serve) first, or "
                         "pass --poll")
    from backend.store.standards_readers import load_standards

    return run_check(policies, snapshots, _facts(lake), scope=scope, clusters=args.clusters,
                     stored=load_standards(lake), source=f"lake {lake}")


def _facts(lake: str) -> dict[str, ClientFacts] | None:
    try:
        return read_client_facts(lake)
    except (OSError, LakeError, ValueError):
        return None


def run_check_command(args: argparse.Namespace) -> int:
    """Run the check and print (or write) it; the exit code says pass (0), violations (1), could not evaluate (2)."""
    try:
        report = check_command(args)
    except CheckError as exc:
        print(f"check: {exc}", file=sys.stderr)
        if args.format in ("sarif", "json", "junit"):
            _write(args.out, render(None, args.format, error=str(exc)))
        return EXIT_UNKNOWN
    _write(args.out, render(report, args.format))
    if args.out is not None:
        print(f"check: {report.verdict} ({report.count('violation')} violated, {report.count('unknown')} unknown, "
              f"{report.count('pass')} passed of {len(report.results)}); wrote {args.out}", file=sys.stderr)
    return report.exit_code


def _write(out: Path | None, text: str) -> None:
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, out)
