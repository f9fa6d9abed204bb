"""The standards (issue 39) as the API and the MCP tool show them: the Standards page's view functions
(backend.views.standards_views) over the caller's ScopedLake, shaped into typed models.

A cluster outside the caller's scope is not in a result, a finding, a count or a percentage (the views take the
caller's Scope); texts the poller wrote (reasons, values seen, the policy file's refusal) have hidden cluster names
replaced, as every other reader of the API does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

import pandas as pd

from backend.api import models as m
from backend.api.queries import NotFound, _int, _str, among, clusters_frame, value
from backend.views import standards_views as sv
from backend.views.scoped import ScopedLake

CLIENT_FIELDS = ("client_type", "client_id", "group_id", "software_name", "software_version", "principal",
                 "client_address")


def _text(sl: ScopedLake, x: Any) -> str | None:
    text = _str(x)
    return None if text is None else str(sl.seen.redact(text))


def standards(sl: ScopedLake, *, clusters: Sequence[str] = (), tags: Sequence[str] = ()) -> sv.Standards:
    """The caller's standards, narrowed to the clusters named and the tag selectors (every one must hold)."""
    found = sl.standards()
    if not clusters and not tags:
        return found
    chosen = set(clusters_frame(sl, tags=tags, names=clusters)["cluster_name"])
    return found.only(clusters=chosen)


def compliance(row: pd.Series | dict[str, Any]) -> m.Compliance:
    """The counts of a by-cluster or by-policy row (or of the fleet summary)."""
    return m.Compliance(pairs=int(row.get("pairs", row.get("policies", row.get("clusters", 0))) or 0),
                        passing=int(row.get("passing") or 0), percent_passing=value(row.get("percent_passing")),
                        statuses={s: int(row.get(s) or 0) for s in sv.STATUSES})  # type: ignore[misc]


def overview(sl: ScopedLake, *, clusters: Sequence[str] = (), tags: Sequence[str] = (),
             policies: Sequence[str] = ()) -> m.StandardsOverview:
    """The tiles of the Standards page, over the clusters (and policies) asked for, and the policy file's state."""
    found = standards(sl, clusters=clusters, tags=tags)
    if policies:
        found = sv.Standards(results=found.results[found.results["policy_id"].isin(list(policies))],
                             items=found.items, policies=found.policies, waivers=found.waivers, file=found.file,
                             instances=found.instances)
    summary = sv.fleet_summary(found)
    summary["passing"] = sum(summary[s] for s in sv.PASSING)
    file = found.file or {}
    path = file.get("path")
    return m.StandardsOverview(
        file=m.PolicyFile(name=PurePath(str(path)).name if path else None, digest=_str(file.get("digest")),
                          loaded_at=_str(file.get("loaded_at")), using=_str(file.get("using")),
                          error=_text(sl, file.get("error")), error_at=_str(file.get("error_at"))),
        policies=summary["policies"], clusters=summary["clusters"], compliance=compliance(summary))


def by_cluster(found: sv.Standards) -> pd.DataFrame:
    """Per visible cluster, worst first (the page's table)."""
    return sv.by_cluster(found)


def cluster_compliance(row: pd.Series) -> m.ClusterCompliance:
    """A by-cluster row."""
    return m.ClusterCompliance(cluster=str(row["cluster_name"]), policies=int(row["policies"]),
                               compliance=compliance({**row.to_dict(), "pairs": row["policies"]}))


def by_policy(found: sv.Standards, *, policies: Sequence[str] = (), severities: Sequence[str] = ()) -> pd.DataFrame:
    """Per policy that applies to a visible cluster, worst first (the page's table), with the filters."""
    frame = sv.by_policy(found)
    frame = among(frame, "policy_id", policies)
    frame = among(frame, "severity", severities)
    return frame


def policy_compliance(sl: ScopedLake, row: pd.Series) -> m.PolicyCompliance:
    """A by-policy row."""
    return m.PolicyCompliance(policy_id=str(row["policy_id"]), title=_str(row.get("title")),
                              severity=_str(row.get("severity")), check=_str(row.get("check")),
                              selector=_text(sl, row.get("selector")), wanted=_text(sl, row.get("wanted")),
                              clusters=int(row["clusters"]),
                              compliance=compliance({**row.to_dict(), "pairs": row["clusters"]}))


def results(found: sv.Standards, *, policies: Sequence[str] = (), statuses: Sequence[str] = (),
            severities: Sequence[str] = ()) -> pd.DataFrame:
    """The (policy, cluster) results that pass the filters."""
    frame = found.results
    frame = among(frame, "policy_id", policies)
    frame = among(frame, "status", statuses)
    frame = among(frame, "severity", severities)
    return frame


def result_model(sl: ScopedLake, r: pd.Series) -> m.PolicyResult:
    """A result row."""
    return m.PolicyResult(
        cluster=str(r["cluster_name"]), policy_id=str(r["policy_id"]), title=_str(r.get("title")),
        severity=_str(r.get("severity")), status=str(r["status"]),  # type: ignore[arg-type]
        checked=_int(r.get("checked")), passing=_int(r.get("passing")), violating=_int(r.get("violating")),
        unknown=_int(r.get("unknown")), waived=_int(r.get("waived")), upcoming=_int(r.get("upcoming")),
        reason=_text(sl, r.get("reason")) or "", since=value(r.get("since")), evaluated_at=value(r.get("evaluated_at")),
        evidence_at=value(r.get("evidence_at")), stale=bool(value(r.get("stale")) or False))


def findings(sl: ScopedLake, policy: str, *, clusters: Sequence[str] = (), tags: Sequence[str] = (),
             outcomes: Sequence[str] = (), kinds: Sequence[str] = ()) -> pd.DataFrame:
    """The findings of one policy of the policy file on the visible clusters; NotFound for a policy it does not have."""
    found = standards(sl, clusters=clusters, tags=tags)
    known = set(found.policies["policy_id"]) if not found.policies.empty else set(found.results["policy_id"])
    if policy not in known:
        raise NotFound(f"policy {policy!r}")
    frame = sv.drill_down(found, policy, None, list(outcomes) or None)
    named = sv.drill_down_instances(found, policy, None, list(outcomes) or None)
    frame = frame.assign(named=frame.merge(
        named.groupby(["cluster_name", "finding"]).size().rename("named").reset_index().rename(
            columns={"finding": "name"}), on=["cluster_name", "name"], how="left")["named"].to_numpy())
    frame.loc[frame["kind"] == "clients", "named"] = frame.loc[frame["kind"] == "clients", "named"].fillna(0)
    rows = named.rename(columns={"client_instance_id": "name"}).assign(kind="instance", count=1, waiver=None,
                                                                        reason="")
    # each clients finding, then the instances behind it (the MCP tool shows them in this order; the API pages
    # them in its own)
    frame = frame.assign(_at=range(len(frame)), _sub=0)
    at = frame.set_index(["cluster_name", "name"])["_at"]
    rows = rows.assign(_at=[at.get((c, f), len(frame)) for c, f in zip(rows["cluster_name"], rows["finding"],
                                                                        strict=True)], _sub=range(1, len(rows) + 1))
    both = pd.concat([frame, rows], ignore_index=True) if not rows.empty else frame
    both = both.sort_values(["_at", "_sub"], kind="stable").drop(columns=["_at", "_sub"]).reset_index(drop=True)
    both = among(both, "kind", kinds)
    return both


def finding_model(sl: ScopedLake, r: pd.Series) -> m.Finding:
    """A finding row."""
    client = None
    if r["kind"] == "instance":
        client = m.FindingClient(instance_id=str(r["name"]),
                                 **{f: _text(sl, r.get(f)) for f in CLIENT_FIELDS}, last_seen=value(r.get("last_seen")))
    named = value(r.get("named")) if r["kind"] == "clients" else None
    return m.Finding(cluster=str(r["cluster_name"]), policy_id=str(r["policy_id"]), kind=str(r["kind"]),
                     name=str(r["name"]), outcome=str(r["outcome"]),  # type: ignore[arg-type]
                     seen=_text(sl, r.get("seen")), wanted=_text(sl, r.get("wanted")),
                     reason=_text(sl, r.get("reason")) or "", count=_int(r.get("count")), since=value(r.get("since")),
                     waiver=_text(sl, r.get("waiver")), named=None if named is None else int(named),
                     finding=_text(sl, r.get("finding")) if r["kind"] == "instance" else None, client=client)


def trend(sl: ScopedLake, *, days: int = sv.TREND_DAYS, scopes: Sequence[str] = (),
          names: Sequence[str] = ()) -> pd.DataFrame:
    """% passing per day over the last `days` days, fleet-wide (visible clusters), per cluster and per policy."""
    frame = sl.standards_trend(days)
    frame = among(frame, "scope", scopes)
    frame = among(frame, "name", names)
    return frame


def trend_model(r: pd.Series) -> m.StandardsTrendPoint:
    """A trend row."""
    return m.StandardsTrendPoint(day=value(r["day"]), scope=str(r["scope"]),  # type: ignore[arg-type]
                                 name=str(r["name"]), pairs=int(r["pairs"]), passing=int(r["passing"]),
                                 violation=int(r["violation"]), unknown=int(r["unknown"]),
                                 percent_passing=value(r.get("percent_passing")))
