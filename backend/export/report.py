"""One-file HTML config-drift report (plotly.js inlined, no external URLs), rendered without Streamlit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from backend.auth.scope import Scope
from backend.export.csv_safe import safe_csv
from backend.store import group_readers
from backend.views import (
    broker_config_views,
    charts,
    config_views,
    fleet_views,
    frames,
    group_views,
    readiness,
    standards_views,
)
from backend.views.display import visible_frame

DEFAULT_TOP_KEYS = 10
_CSS = """
body{font-family:Inter,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1200px;color:#222}
h1{margin-bottom:.2rem}.meta{color:#666}table{border-collapse:collapse;margin:1rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.3rem .6rem;text-align:left}th{background:#f4f6f8}
.note{background:#fff8e1;border-left:4px solid #ef8f00;padding:.5rem 1rem}
"""


class ReportError(ValueError):
    """Raised when a report cannot be built from the given lake, clusters or keys."""


@dataclass(frozen=True)
class DriftReportData:
    """Everything the drift report shows, already filtered to the chosen clusters and keys."""

    clusters: pd.DataFrame
    drift: pd.DataFrame
    heatmap: pd.DataFrame
    distributions: pd.DataFrame
    numeric: pd.DataFrame
    keys: list[str]
    broker_configs: pd.DataFrame  # broker configs side by side (differences first, defaults left out)
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)  # the chosen clusters' consumer groups
    readiness: readiness.Readiness | None = None  # upgrade readiness of the chosen clusters (backend.views.readiness)
    standards: standards_views.Standards | None = None  # the policies' results on the chosen clusters


def _refuse_unknown(clusters: list[str], known: set[str]) -> None:
    unknown = [c for c in clusters if c not in known]
    if unknown:
        raise ReportError(f"unknown cluster(s) {', '.join(unknown)}; known: {', '.join(sorted(known)) or 'none'}")


def _require_polled(location: str, clusters: list[str], scope: Scope) -> None:
    """Raise ReportError unless ``clusters`` names at least one cluster, each polled and within ``scope``."""
    if not clusters:
        raise ReportError("choose at least one cluster")
    _refuse_unknown(clusters, set(fleet_views.latest_clusters(scope.by_name(frames.known_clusters(location)))[
        "cluster_name"]))


def load_drift_data(location: str, clusters: list[str], keys: list[str] | None = None, *,
                    include_identity: bool = False, scope: Scope | None = None) -> DriftReportData:
    """Read the lake and results for the chosen clusters; raise ReportError on bad input.

    Identity keys (client.id, group.id, keys unique per instance) are left out of the ranking and the
    default keys unless ``include_identity``; keys named explicitly are always reported. ``scope`` (the UI's
    logged-in user) limits every table read to the clusters it may view, and the ids they report.
    """
    scope = scope or Scope()
    if len(clusters) < 1:
        raise ReportError("choose at least one cluster")
    history = scope.by_name(frames.known_clusters(location))
    latest = fleet_views.latest_clusters(history)
    names = config_views.id_to_name(history)
    known = set(latest["cluster_name"]) | set(names.values())

    def result(name: str) -> pd.DataFrame:
        frame = frames.read_result(location, name)
        return scope.by_id(frame, "cluster_a", "cluster_b") if name == "drift_clusters" else scope.by_id(frame)

    dist = config_views.name_clusters(config_views.drop_sensitive(result("distributions")), names)
    known |= set(dist["cluster"])
    _refuse_unknown(clusters, known)
    if dist.empty:
        raise ReportError(f"no pipeline results in {location}: run python -m backend analyze --lake {location}")
    numeric = config_views.name_clusters(config_views.drop_sensitive(result("numeric_summary")), names)
    drift = config_views.name_drift(config_views.drop_sensitive(result("drift_clusters")), names)
    if not include_identity:
        identity = config_views.identity_keys(result("drift_keys"))
        drift = config_views.drop_keys(drift, identity - set(keys or []))
    heat = config_views.drift_matrix(drift, clusters if len(clusters) > 1 else None, top=50)
    chosen_keys = keys or _top_keys(heat, dist)
    sensitive = [k for k in chosen_keys if config_views.is_sensitive_key(k)]
    if sensitive:
        raise ReportError(f"sensitive keys are never reported: {', '.join(sensitive)}")
    if keys:
        missing = sorted(set(keys) - set(dist["key"]) - set(numeric["key"]))
        if missing:
            raise ReportError(f"no results for key(s) {', '.join(missing)}")
        heat = heat[[k in keys for k in heat.index.str.replace(r" \(.*\)$", "", regex=True)]]
    pair_ok = drift["cluster_a_name"].isin(clusters) & drift["cluster_b_name"].isin(clusters)
    viewable = [c for c in clusters if scope.may_view(c)]
    broker_configs = broker_config_views.compare_broker_configs(
        scope.by_name(frames.broker_configs(location, viewable)), viewable)
    groups = scope.by_name(group_readers.read_groups(location, viewable))
    polled = [c for c in viewable if c in set(latest["cluster_name"])]  # a results-only cluster has no readiness
    ready = load_readiness(location, polled, scope=scope) if polled else None
    return DriftReportData(
        readiness=ready,
        standards=load_standards(location, viewable, scope=scope),
        clusters=latest[latest["cluster_name"].isin(clusters)],
        drift=drift[pair_ok & drift["key"].isin(chosen_keys)].sort_values("tvd", ascending=False),
        heatmap=heat,
        distributions=dist[dist["cluster"].isin(clusters) & dist["key"].isin(chosen_keys)],
        numeric=numeric[numeric["cluster"].isin(clusters) & numeric["key"].isin(chosen_keys)],
        keys=chosen_keys,
        broker_configs=broker_configs,
        groups=groups,
    )


def _top_keys(heat: pd.DataFrame, dist: pd.DataFrame) -> list[str]:
    return (config_views.keys_by_drift(heat) or sorted(dist["key"].unique()))[:DEFAULT_TOP_KEYS]


def _table(frame: pd.DataFrame) -> str:
    # Cells HTML-escaped with their hidden characters (bidi overrides, controls) shown first, as on the pages.
    return visible_frame(frame).to_html(index=False, escape=True, border=0, na_rep="—", float_format=lambda v: f"{v:.3f}")


def _figure(fig: go.Figure, first: bool) -> str:
    # plotly.js goes into the first figure only; the others reuse it.
    return pio.to_html(fig, include_plotlyjs=first, full_html=False,
                       config={"displaylogo": False})


def render_drift_report(data: DriftReportData, *, lake_label: str = "", now: datetime | None = None) -> str:
    """Self-contained HTML: cluster table, drift heatmap, drift table and per-key distributions."""
    charts.register_template()
    now = now or datetime.now(UTC)
    names = list(data.clusters["cluster_name"]) or sorted(data.distributions["cluster"].unique())
    summary = pd.DataFrame({
        "cluster": data.clusters["cluster_name"], "cluster id": data.clusters["cluster_id"],
        "status": data.clusters["status"], "env": data.clusters["env"], "region": data.clusters["region"],
        "team": data.clusters["team"],
    })
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Config drift: {charts.esc(', '.join(names))}</title><style>{_CSS}</style></head><body>",
        f"<h1>Client config drift</h1><p class='meta'>clusters: {charts.esc(', '.join(names))} · "
        f"keys: {charts.esc(', '.join(data.keys))} · generated {now:%Y-%m-%d %H:%M} UTC"
        + (f" · lake {charts.esc(lake_label)}" if lake_label else "") + "</p>",
        "<h2>Clusters</h2>", _table(summary),
        *_broker_config_section(data.broker_configs),
        *_groups_section(data.groups, names),
        *_readiness_section(data.readiness),
        *_standards_section(data.standards),
        "<h2>Drift by key and cluster pair</h2>",
        ("<p>Total variation distance between the value distributions of the latest client instances "
        "(0 = identical, 1 = disjoint).</p>"),
        _figure(charts.drift_heatmap(data.heatmap), first=True),
    ]
    if data.drift.empty:
        parts.append("<p class='note'>No drift rows for these clusters (pick two or more clusters).</p>")
    else:
        drift = data.drift[["key", "client_type", "cluster_a_name", "cluster_b_name", "tvd",
                            "dominant_value_a", "dominant_value_b"]].rename(
            columns={"cluster_a_name": "cluster a", "cluster_b_name": "cluster b"})
        parts.append(_table(drift))
    parts.append("<h2>Distributions per key</h2>")
    numeric_keys = set(data.numeric["key"])
    for key in data.keys:
        parts.append(f"<h3>{charts.esc(key)}</h3>")
        if key in numeric_keys:
            parts.append(_figure(charts.numeric_distribution(data.numeric, key=key), first=False))
            cols = ["cluster", "client_type", "instances", "min", "p50", "p90", "max"]
            parts.append(_table(data.numeric.loc[data.numeric["key"] == key, cols]))
        else:
            parts.append(_figure(charts.categorical_distribution(
                config_views.top_values(data.distributions, key), key=key,
                spellings=config_views.spellings(data.distributions, key)), first=False))
            cols = ["cluster", "client_type", "value", "instance_count", "share"]
            table = data.distributions.loc[data.distributions["key"] == key, cols]
            said = config_views.spellings(data.distributions, key)
            if said:
                table = table.assign(reported_as=table["value"].astype(str).map(said).fillna(""))
            parts.append(_table(table))
    parts.append("</body></html>")
    return "\n".join(parts)


def _broker_config_section(table: pd.DataFrame) -> list[str]:
    parts = ["<h2>Broker configs</h2>"]
    if table.empty:
        return parts + ["<p class='note'>No broker configs differ from their defaults, or none were read yet for "
                        "these clusters (the poller reads them every config_interval_s).</p>"]
    differing = int(table["differs"].sum())
    parts.append(f"<p>The value the brokers of each cluster report (DescribeConfigs); {differing} of {len(table)} "
                 "configs set somewhere differ, differences first; configs at their default everywhere are left "
                 "out; values the brokers mark sensitive are never stored.</p>")
    return parts + [_table(table.drop(columns=["all_default"]))]


GROUP_ROWS = 50


def _groups_section(groups: pd.DataFrame, clusters: list[str]) -> list[str]:
    parts = ["<h2>Consumer groups</h2>"]
    if groups.empty:
        return parts + ["<p class='note'>No consumer groups read for these clusters yet (the poller reads them every "
                        "group_interval_s).</p>"]
    parts.append("<p>Groups by type and by Burrow-style status (judged from each group's window of reads), and the "
                 "total lag, per cluster.</p>")
    parts.append(_table(group_views.report_summary(groups, clusters)))
    worst = group_views.worst_first(groups[groups["status"].isin(group_views.PROBLEMS)]).head(GROUP_ROWS)
    if worst.empty:
        parts.append("<p>No group is lagging, stalled, stopped or empty with lag.</p>")
    else:
        rows = group_views.list_rows(worst)[["cluster", "group", "status", "type", "state", "members", "lag",
                                             "status_since"]]
        parts += [f"<h3>Groups with a problem (worst {len(rows)})</h3>", _table(rows)]
    return parts


def build_groups_csv(location: str, clusters: list[str], *, scope: Scope | None = None) -> str:
    """The chosen clusters' groups and their lag per partition (within ``scope``) as CSV (formula cells neutralised)."""
    scope = scope or Scope()
    _require_polled(location, clusters, scope)
    groups = scope.by_name(group_readers.read_groups(location, clusters))
    if groups.empty:
        raise ReportError(f"no consumer groups stored for {', '.join(clusters)} in {location} yet")
    frame = group_views.export_frame(groups, scope.by_name(group_readers.group_offsets(location, clusters)),
                                     scope.by_name(group_readers.group_members(location, clusters)))
    return safe_csv(frame)
def _readiness_section(report: readiness.Readiness | None) -> list[str]:
    parts = ["<h2>Upgrade readiness</h2>"]
    if report is None or report.verdicts.empty:
        return parts + ["<p class='note'>No readiness for these clusters.</p>"]
    parts.append(f"<p>Target {charts.esc(report.target)}: blocked when an item fails, unverified when the product "
                 "cannot tell an item (never ready by omission); see docs/client-inventory.md.</p>")
    parts += [_table(report.verdicts), _table(report.items)]
    if not report.keys.empty:
        parts += ["<h3>Client-config keys removed or with a changed default</h3>",
                  "<p>Per cluster and client type: instances that report the key, at its old default, at the new one, "
                  "set otherwise, or not reporting it (from the known-keys table built from the real client jars).</p>",
                  _table(report.keys)]
    if not report.instances.empty:
        parts += ["<h3>Instances to chase</h3>",
                  "<p>Every instance that sets a removed key to something other than its old default, or "
                  "metric.reporters without JmxReporter, as the rules CC019–CC022 name it.</p>",
                  _table(report.instances)]
    return parts


STANDARDS_FINDINGS = 100


def load_standards(location: str, clusters: list[str], *, scope: Scope | None = None) -> standards_views.Standards:
    """The policies' results and findings on the chosen clusters (within ``scope``), as the Standards page shows."""
    found = standards_views.load(location, scope)
    return found.only(clusters=set(clusters))


def _standards_section(found: standards_views.Standards | None) -> list[str]:
    parts = ["<h2>Standards</h2>"]
    if found is None or found.empty:
        return parts + ["<p class='note'>No policy results for these clusters (no policy file, or the poller has "
                        "not judged it yet; see docs/standards.md).</p>"]
    summary = standards_views.fleet_summary(found)
    parts.append(f"<p>{summary['percent_passing']}% of {summary['pairs']} policy/cluster pairs pass "
                 f"({summary['violation']} violated, {summary['unknown']} unknown, {summary['waived']} waived); "
                 "unknown never counts as passing. Policy file "
                 f"{charts.esc(found.file.get('path') or '?')}, digest {charts.esc(found.file.get('digest') or '?')}."
                 "</p>")
    if found.file.get("error"):
        parts.append(f"<p class='note'>The policy file on disk was refused: {charts.esc(found.file['error'])}; the "
                     "last good one is in use.</p>")
    parts += ["<h3>Per cluster</h3>", _table(standards_views.by_cluster(found)),
              "<h3>Per policy</h3>", _table(standards_views.by_policy(found).drop(columns=["check", "selector"],
                                                                                   errors="ignore"))]
    findings = standards_views.drill_down(found, outcomes=("violation", "unknown"))
    if not findings.empty:
        shown = findings.head(STANDARDS_FINDINGS)[["cluster_name", "policy_id", "outcome", "kind", "name", "seen",
                                                   "wanted", "since", "reason"]]
        parts += [f"<h3>Findings ({len(shown)} of {len(findings)}: violations, then unknowns)</h3>", _table(shown)]
    named = standards_views.drill_down_instances(found, outcomes=("violation", "unknown"))
    if not named.empty:
        shown = named.head(STANDARDS_FINDINGS)[["cluster_name", "policy_id", "finding", "outcome", "client_id",
                                                "group_id", "client_instance_id", "software_name", "software_version",
                                                "principal", "client_address", "last_seen"]]
        parts += [f"<h3>Client instances to chase ({len(shown)} of {len(named)})</h3>",
                  "<p>The instances behind the client findings above, as their latest pushed configuration names "
                  "them.</p>", _table(shown)]
    return parts


def load_readiness(location: str, clusters: list[str] | None = None, target: str | None = None, *,
                   scope: Scope | None = None) -> readiness.Readiness:
    """Upgrade readiness of the chosen clusters (default: every cluster) within ``scope``, from the lake.

    The same inputs the Upgrade readiness page reads: the latest clusters and brokers, the client inventory, and the
    pipeline's default_share, distributions, client_versions and config_alerts (named by cluster; sensitive keys left
    out).
    """
    scope = scope or Scope()
    if target is not None and target not in readiness.known_targets():
        raise ReportError(f"unknown target {target}; known: {', '.join(readiness.known_targets())}")
    history = scope.by_name(frames.known_clusters(location))
    latest = fleet_views.latest_clusters(history)
    if clusters:
        _refuse_unknown(clusters, set(latest["cluster_name"]))
        latest = latest[latest["cluster_name"].isin(clusters)]
    if latest.empty:
        raise ReportError(f"no polled clusters in {location}: run python -m backend poll first")
    names = list(latest["cluster_name"])
    ids = config_views.id_to_name(history)
    results: dict[str, pd.DataFrame | None] = dict.fromkeys(("default_share", "distributions", "client_versions",
                                                             "config_alerts"))
    if frames.results_exist(location):
        for name in results:
            frame = config_views.drop_sensitive(scope.by_id(frames.read_result(location, name)))
            results[name] = config_views.name_clusters(frame, ids)
    brokers = scope.by_name(frames.latest_rows(location, "broker_snapshots", with_data=True))
    runs = scope.by_name(group_readers.group_runs(location, names))
    groups = scope.by_name(group_readers.read_groups(location, names)) if not runs.empty else None
    return readiness.readiness(latest, brokers[brokers["cluster_name"].isin(names)],
                               scope.by_name(frames.inventory_rows(location, names)),
                               scope.by_name(frames.inventory_runs(location, names)),
                               default_share=results["default_share"], distributions=results["distributions"],
                               client_versions=results["client_versions"], alerts=results["config_alerts"],
                               groups=groups,
                               groups_read=frozenset(runs["cluster_name"]), target=target)


def readiness_checklist(report: readiness.Readiness) -> pd.DataFrame:
    """The checklist rows with each cluster's verdict and the target: the readiness CSV's table."""
    table = report.items.merge(report.verdicts[["cluster_name", "verdict"]], on="cluster_name")
    return table.assign(target=report.target)[["cluster_name", "verdict", "target", "item", "status", "detail"]]


def build_readiness_csv(location: str, target: str | None = None, *, clusters: list[str] | None = None,
                        keys: bool = False, instances: bool = False, scope: Scope | None = None) -> str:
    """The readiness checklist (with ``keys``, the client-config keys behind it; with ``instances``, the instances
    that set them) of the chosen clusters (within ``scope``) for the target, as CSV (formula cells neutralised)."""
    report = load_readiness(location, clusters, target, scope=scope)
    if instances:
        return safe_csv(report.instances.assign(target=report.target))
    if keys:
        return safe_csv(report.keys.assign(target=report.target))
    return safe_csv(readiness_checklist(report))


def build_broker_config_csv(location: str, clusters: list[str], *, include_defaults: bool = False,
                            scope: Scope | None = None) -> str:
    """The broker-config comparison of the chosen clusters (within ``scope``) as CSV (formula cells neutralised)."""
    scope = scope or Scope()
    _require_polled(location, clusters, scope)
    table = broker_config_views.compare_broker_configs(scope.by_name(frames.broker_configs(location, clusters)),
                                                       clusters, include_defaults=include_defaults)
    if table.empty:
        raise ReportError(f"no broker configs stored for {', '.join(clusters)} in {location} yet")
    return safe_csv(table)


def build_drift_report(location: str, clusters: list[str], keys: list[str] | None = None, *,
                       include_identity: bool = False, scope: Scope | None = None) -> str:
    """Load the data for the chosen clusters and keys (within ``scope``) and render the HTML report."""
    data = load_drift_data(location, clusters, keys, include_identity=include_identity, scope=scope)
    return render_drift_report(data, lake_label=location)
