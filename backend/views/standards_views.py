"""Standards as every door shows them: compliance per cluster and per policy, the 30-day trend, the drill-down.

Pure functions over the lake (the poller's stored policy results, `backend.store.standards_readers`) that take the
caller's `Scope`: a cluster outside it does not exist here, not in a row, a count or a percentage. A cluster whose
latest poll reached nothing counts as `unknown` (its stored results are the last ones judged, shown as such). The
pages, the drift report, /metrics and `fleetview check` share the same meaning of "passing": pass, waived and
upcoming pass; violation and unknown do not (never pass by omission).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

from backend.auth.scope import Scope
from backend.store import readers, standards_readers
from backend.store.model import NO_DATA_STATUSES
from backend.store.standards_model import STATUS_ORDER, PolicyResult

PASSING = ("pass", "waived", "upcoming")
STATUSES = ("violation", "unknown", "upcoming", "waived", "pass")
TREND_DAYS = 30
RESULT_COLUMNS = ["cluster_name", "policy_id", "title", "severity", "status", "checked", "passing", "violating",
                  "unknown", "waived", "upcoming", "reason", "since", "evaluated_at", "evidence_at", "stale"]
ITEM_COLUMNS = ["cluster_name", "policy_id", "kind", "name", "outcome", "seen", "wanted", "reason", "count", "since",
                "waiver"]
# The instances behind client findings, joined with their finding (outcome, value seen, wanted).
INSTANCE_COLUMNS = ["cluster_name", "policy_id", "finding", "outcome", "seen", "wanted", "client_instance_id",
                    "client_type", "client_id", "group_id", "software_name", "software_version", "principal",
                    "client_address", "last_seen"]


def _no_instances() -> pd.DataFrame:
    return pd.DataFrame(columns=INSTANCE_COLUMNS)


@dataclass(frozen=True)
class Standards:
    """What one caller sees of the standards: results, findings, the policies, where the policy file stands."""

    results: pd.DataFrame  # one row per (policy, visible cluster): RESULT_COLUMNS
    items: pd.DataFrame  # the findings (not passing) of those pairs: ITEM_COLUMNS
    policies: pd.DataFrame  # the catalog: policy_id, title, severity, check, selector, wanted, description, ...
    waivers: pd.DataFrame  # the waivers of visible clusters, with `active` as of `now`
    file: dict[str, Any] = field(default_factory=dict)  # path, digest, loaded_at, using, error, error_at
    instances: pd.DataFrame = field(default_factory=_no_instances)  # behind the client findings: INSTANCE_COLUMNS

    def only(self, clusters: Iterable[str] | None = None, policies: Iterable[str] | None = None) -> Standards:
        """The same standards narrowed to some clusters and/or policies (results, findings and instances alike)."""
        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            if clusters is not None:
                frame = frame[frame["cluster_name"].isin(list(clusters))]
            if policies is not None:
                frame = frame[frame["policy_id"].isin(list(policies))]
            return frame

        return Standards(results=keep(self.results), items=keep(self.items), policies=self.policies,
                         waivers=self.waivers, file=self.file, instances=keep(self.instances))

    @property
    def empty(self) -> bool:
        """No result to show (no policy file, or nothing evaluated yet)."""
        return self.results.empty


def percent(passing: int, total: int) -> float | None:
    """Share passing in % (None when nothing was judged)."""
    return round(100.0 * passing / total, 1) if total else None


def load(location: str, scope: Scope | None = None, *, now: datetime | None = None) -> Standards:
    """The stored standards of the clusters ``scope`` may view (see the module docstring)."""
    scope = scope or Scope()
    now = now or datetime.now(UTC)
    file = standards_readers.policy_file_state(location)
    catalog = pd.DataFrame(file.get("policies") or [], columns=["policy_id", "title", "severity", "check", "selector",
                                                                  "wanted", "description", "doc_url", "effective",
                                                                  "line"])
    visible = None if scope.names is None else sorted(scope.names)
    results = scope.by_name(standards_readers.policy_results(location, visible))
    items = scope.by_name(standards_readers.policy_items(location, visible))
    latest = scope.by_name(readers.latest_clusters(location)) if not results.empty else pd.DataFrame()
    results = _current(results, latest, catalog, file)
    items = items[items.set_index(["cluster_name", "policy_id"]).index.isin(
        results.set_index(["cluster_name", "policy_id"]).index)] if not items.empty else items
    items = items.reindex(columns=ITEM_COLUMNS).reset_index(drop=True)
    instances = _instances(scope.by_name(standards_readers.policy_instances(location, visible)), items)
    waivers = pd.DataFrame(file.get("waivers") or [], columns=["policy", "cluster", "topic", "group", "owner",
                                                                 "reason", "expires"])
    if not waivers.empty:
        waivers = waivers[[scope.may_view(c) for c in waivers["cluster"]]].copy()
        expires = pd.to_datetime(waivers["expires"], utc=True)
        waivers["active"] = expires > pd.Timestamp(now)
    return Standards(results=results, items=items, policies=catalog, waivers=waivers.reset_index(drop=True),
                     file={k: file.get(k) for k in ("path", "digest", "loaded_at", "using", "error", "error_at")},
                     instances=instances)


def _instances(named: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """The stored instances of the shown findings, with each finding's outcome, value seen and wanted."""
    if named.empty or items.empty:
        return _no_instances()
    findings = items.loc[items["kind"] == "clients", ["cluster_name", "policy_id", "name", "outcome", "seen", "wanted"]]
    out = named.rename(columns={"instance_id": "client_instance_id"}).merge(
        findings.rename(columns={"name": "finding"}), on=["cluster_name", "policy_id", "finding"], how="inner")
    return out.reindex(columns=INSTANCE_COLUMNS).reset_index(drop=True)


def _current(results: pd.DataFrame, latest: pd.DataFrame, catalog: pd.DataFrame, file: dict[str, Any]
             ) -> pd.DataFrame:
    """Results of the policies in use, titled, with clusters that have no data now as unknown."""
    if results.empty:
        return pd.DataFrame(columns=RESULT_COLUMNS)
    out = results.copy()
    if not catalog.empty:
        out = out[out["policy_id"].isin(set(catalog["policy_id"]))]
        out = out.merge(catalog[["policy_id", "title"]], on="policy_id", how="left")
    else:
        out["title"] = out["policy_id"]
    out["stale"] = out["policy_set"].fillna("") != (file.get("digest") or "")
    if not latest.empty:
        down = latest.loc[latest["status"].isin(NO_DATA_STATUSES), ["cluster_name", "status", "error"]]
        for row in down.itertuples(index=False):
            mask = out["cluster_name"] == row.cluster_name
            out.loc[mask, "reason"] = (f"the cluster's latest poll reached nothing ({row.status}: {row.error}); "
                                       "last judged: " + out.loc[mask, "status"].astype(str))
            out.loc[mask, "status"] = "unknown"
    out = out.assign(_order=out["status"].map(STATUS_ORDER).fillna(9))
    out = out.sort_values(["_order", "severity", "cluster_name", "policy_id"], kind="stable")
    return out.reindex(columns=RESULT_COLUMNS).reset_index(drop=True)


def _counts(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    rows = []
    for name, group in frame.groupby(by, sort=True):
        counts = group["status"].value_counts()
        total = len(group)
        passing = int(sum(counts.get(s, 0) for s in PASSING))
        rows.append({by: name, "policies" if by == "cluster_name" else "clusters": total,
                     "percent_passing": percent(passing, total), "passing": passing,
                     **{s: int(counts.get(s, 0)) for s in STATUSES}})
    columns = [by, "policies" if by == "cluster_name" else "clusters", "percent_passing", "passing", *STATUSES]
    return pd.DataFrame(rows, columns=columns)


def by_cluster(standards: Standards) -> pd.DataFrame:
    """Per visible cluster: policies that apply, % passing, and how many are in each status (worst first)."""
    out = _counts(standards.results, "cluster_name")
    return out.sort_values(["percent_passing", "cluster_name"], na_position="first", kind="stable").reset_index(
        drop=True)


def by_policy(standards: Standards) -> pd.DataFrame:
    """Per policy: clusters it applies to (visible ones), % passing, statuses, with its title and severity."""
    out = _counts(standards.results, "policy_id")
    if not standards.policies.empty:
        out = out.merge(standards.policies[["policy_id", "title", "severity", "check", "selector", "wanted"]],
                        on="policy_id", how="left")
    cols = ["policy_id", "title", "severity", "clusters", "percent_passing", "passing", *STATUSES]
    extra = [c for c in ("check", "selector", "wanted") if c in out]
    return out.reindex(columns=cols + extra).sort_values(["percent_passing", "policy_id"], na_position="first",
                                                         kind="stable").reset_index(drop=True)


def fleet_summary(standards: Standards) -> dict[str, Any]:
    """The tiles: policies, clusters, pairs judged, % passing, and the count per status."""
    results = standards.results
    counts = results["status"].value_counts() if not results.empty else pd.Series(dtype=int)
    passing = int(sum(counts.get(s, 0) for s in PASSING))
    return {"policies": int(results["policy_id"].nunique()) if not results.empty else 0,
            "clusters": int(results["cluster_name"].nunique()) if not results.empty else 0,
            "pairs": len(results), "percent_passing": percent(passing, len(results)),
            **{s: int(counts.get(s, 0)) for s in STATUSES}}


def matrix(standards: Standards) -> pd.DataFrame:
    """Policy x cluster status (the grid of the page): index policy id, one column per visible cluster."""
    if standards.results.empty:
        return pd.DataFrame()
    return standards.results.pivot_table(index="policy_id", columns="cluster_name", values="status",
                                         aggfunc="first").fillna("")


def _chosen(frame: pd.DataFrame, policy_id: str | None, cluster: str | None,
            outcomes: Iterable[str] | None) -> pd.DataFrame:
    if policy_id is not None:
        frame = frame[frame["policy_id"] == policy_id]
    if cluster is not None:
        frame = frame[frame["cluster_name"] == cluster]
    if outcomes is not None:
        frame = frame[frame["outcome"].isin(list(outcomes))]
    return frame


def drill_down(standards: Standards, policy_id: str | None = None, cluster: str | None = None,
               outcomes: Iterable[str] | None = None) -> pd.DataFrame:
    """The findings (topics, brokers, groups, client values) of one policy and/or cluster, worst first."""
    items = _chosen(standards.items, policy_id, cluster, outcomes)
    order = items["outcome"].map(STATUS_ORDER).fillna(9)
    return items.assign(_o=order).sort_values(["_o", "cluster_name", "policy_id", "kind", "name"], kind="stable").drop(
        columns="_o").reset_index(drop=True)


def drill_down_instances(standards: Standards, policy_id: str | None = None, cluster: str | None = None,
                         outcomes: Iterable[str] | None = None) -> pd.DataFrame:
    """The client instances behind the client findings of one policy and/or cluster (the "instances to chase"),
    worst finding first, then by cluster, policy, finding and client.id."""
    named = _chosen(standards.instances, policy_id, cluster, outcomes)
    order = named["outcome"].map(STATUS_ORDER).fillna(9)
    return named.assign(_o=order, _c=named["client_id"].fillna("")).sort_values(
        ["_o", "cluster_name", "policy_id", "finding", "_c", "client_instance_id"], kind="stable").drop(
        columns=["_o", "_c"]).reset_index(drop=True)


def trend(location: str, scope: Scope | None = None, *, days: int = TREND_DAYS, now: datetime | None = None,
          policies: Iterable[str] | None = None) -> pd.DataFrame:
    """% passing per day over the last ``days`` days: fleet-wide, per cluster and per policy (long format).

    Columns: day, scope (fleet / cluster / policy), name, pairs, passing, violation, unknown, percent_passing. A
    (policy, cluster) pair counts on a day from its first row on; the day's last row wins (a day without a row keeps
    the last one before). Only the visible clusters and the given policies (default: every policy seen) count.
    """
    scope = scope or Scope()
    now = now or datetime.now(UTC)
    start = (now - timedelta(days=days - 1)).astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    visible = None if scope.names is None else sorted(scope.names)
    rows = scope.by_name(standards_readers.policy_history(location, start - timedelta(days=1), visible))
    columns = ["day", "scope", "name", "pairs", "passing", "violation", "unknown", "percent_passing"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    if policies is not None:
        rows = rows[rows["policy_id"].isin(set(policies))]
    rows = rows.assign(day=pd.to_datetime(rows["polled_at"], utc=True).dt.floor("D"))
    last = rows.groupby(["day", "cluster_name", "policy_id"], sort=True).tail(1)
    wide = last.pivot_table(index="day", columns=["cluster_name", "policy_id"], values="status", aggfunc="last")
    day_index = pd.date_range(start=start, end=pd.Timestamp(now).floor("D"), freq="D", tz="UTC")
    wide = wide.reindex(wide.index.union(day_index)).sort_index().ffill()
    wide = wide.loc[wide.index >= pd.Timestamp(start)]
    long = wide.stack(level=[0, 1], future_stack=True).dropna().rename("status").reset_index()
    long.columns = ["day", "cluster_name", "policy_id", "status"]
    out = []
    for label, keys in (("fleet", None), ("cluster", "cluster_name"), ("policy", "policy_id")):
        grouped = long.groupby(["day"] if keys is None else ["day", keys], sort=True)["status"]
        for key, statuses in grouped:
            day = key[0] if isinstance(key, tuple) else key
            name = "fleet" if keys is None else key[1]  # type: ignore[index]
            counts = statuses.value_counts()
            passing = int(sum(counts.get(s, 0) for s in PASSING))
            out.append({"day": day, "scope": label, "name": name, "pairs": len(statuses), "passing": passing,
                        "violation": int(counts.get("violation", 0)), "unknown": int(counts.get("unknown", 0)),
                        "percent_passing": percent(passing, len(statuses))})
    return pd.DataFrame(out, columns=columns)


def typed_results(location: str, scope: Scope | None = None) -> list[PolicyResult]:
    """The stored results of the visible clusters as typed PolicyResults (for an API or MCP door)."""
    scope = scope or Scope()
    visible = None if scope.names is None else sorted(scope.names)
    stored = standards_readers.load_standards(location, visible)
    return [r for name, snap in sorted(stored.items()) if scope.may_view(name)
            for r in sorted(snap.results.values(), key=lambda r: r.policy_id)]
