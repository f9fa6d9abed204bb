"""View models of the client inventory (brokers' JMX metrics): software per cluster and fleet-wide, the deprecated
requests, and the side-by-side with what the client-config sources report. Pure pandas, no Streamlit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from backend.kafka import client_floors
from backend.views.fleet_views import duration_text

OWN_SOFTWARE = frozenset({"fleetview-probe"})  # this product's own connections (backend/kafka/probe.py)
UNNAMED = "no name sent (a client before 2.4, or one that does not send ApiVersions v3)"


def _floor(name: object, version: object) -> str:
    check = client_floors.check(str(name), str(version))
    if check.family == "unnamed":
        return UNNAMED
    if check.below:
        return f"below the Kafka 4.x floor ({check.family} {check.floor_text})"
    if check.below is False:
        return "ok"
    return "no known floor"


def software_by_cluster(rows: pd.DataFrame, *, role: str = "client") -> pd.DataFrame:
    """One row per (cluster, software, version): connections, brokers and listeners; present connections only.

    `role`: "client" (the default) for the clients' connections (with the unnamed ones on an inter-broker listener
    clients share, which may be the brokers' replica fetchers: role "either"), "broker" for the brokers' own
    (controller and inter-broker listeners), "" for all.
    """
    columns = ["cluster_name", "software_name", "software_version", "connections", "brokers", "listeners", "floor",
               "this_product"]
    conn = rows[(rows["kind"] == "connections") & (rows["connections"].fillna(0) > 0)] if not rows.empty else rows
    if role and not conn.empty:
        roles = conn["role"].fillna("client") if "role" in conn else pd.Series("client", index=conn.index)
        conn = conn[roles.isin([role, "either"] if role == "client" else [role])]
    if conn.empty:
        return pd.DataFrame(columns=columns)
    out = conn.groupby(["cluster_name", "software_name", "software_version"], dropna=False).agg(
        connections=("connections", "sum"),
        brokers=("broker_id", lambda s: ", ".join(str(int(b)) for b in sorted(set(s.dropna())))),
        listeners=("listener", lambda s: ", ".join(sorted(set(s.dropna().astype(str)))))).reset_index()
    out["floor"] = [_floor(n, v) for n, v in zip(out["software_name"], out["software_version"], strict=True)]
    out["this_product"] = out["software_name"].isin(OWN_SOFTWARE)
    out["connections"] = out["connections"].astype("int64")
    return out.sort_values(["cluster_name", "connections"], ascending=[True, False])[columns].reset_index(drop=True)


def fleet_software(by_cluster: pd.DataFrame) -> pd.DataFrame:
    """Software × version over the fleet: clusters it connects to and connections."""
    columns = ["software_name", "software_version", "clusters", "connections", "floor"]
    if by_cluster.empty:
        return pd.DataFrame(columns=columns)
    out = by_cluster.groupby(["software_name", "software_version"], dropna=False).agg(
        clusters=("cluster_name", lambda s: ", ".join(sorted(set(s)))), connections=("connections", "sum"),
        floor=("floor", "first")).reset_index()
    return out.sort_values("connections", ascending=False)[columns].reset_index(drop=True)


def deprecated_requests(rows: pd.DataFrame, runs: pd.DataFrame, now: datetime | None = None) -> pd.DataFrame:
    """Deprecated requests (KIP-896) per cluster, broker, request, version and software, with `in_use` at `now`, when
    each was last counted and how long it stays a blocker (the cluster's window), in words."""
    columns = ["cluster_name", "broker_id", "request", "version", "software_name", "software_version", "count",
               "rate_per_s", "first_seen_at", "last_increase_at", "in_use", "last_counted", "blocks_for", "series"]
    dep = rows[rows["kind"] == "deprecated"] if not rows.empty else rows
    if dep.empty:
        return pd.DataFrame(columns=columns)
    now = now or datetime.now(UTC)
    windows = dict(zip(runs["cluster_name"], runs["window_s"], strict=True)) if not runs.empty else {}
    read_at = dict(zip(runs["cluster_name"], runs["collected_at"], strict=True)) if not runs.empty else {}
    out = dep.copy()
    window = [float(windows.get(c) or 3600.0) for c in out["cluster_name"]]
    since = [pd.Timestamp(now - timedelta(seconds=w)) for w in window]
    last = pd.to_datetime(out["last_increase_at"], utc=True)
    out["in_use"] = [bool(pd.notna(t) and t >= s) for t, s in zip(last, since, strict=True)]
    out["last_counted"] = ["not seen growing" if pd.isna(t) else f"{duration_text((now - t.to_pydatetime()).total_seconds())} ago"
                           for t in last]
    out["blocks_for"] = [
        (f"{duration_text(max(0.0, w - (now - t.to_pydatetime()).total_seconds()))} more (window {duration_text(w)})"
         if use else f"no (window {duration_text(w)})") for t, use, w in zip(last, out["in_use"], window, strict=True)]
    seen = out["last_seen_at"] if "last_seen_at" in out else pd.Series([None] * len(out), index=out.index)
    out["series"] = ["on the page" if pd.isna(s) or (c in read_at and pd.Timestamp(s) >= pd.Timestamp(read_at[c]))
                     else "gone from the page (kept as evidence until the window ends)"
                     for s, c in zip(seen, out["cluster_name"], strict=True)]
    return out[columns].sort_values(["cluster_name", "in_use", "request"], ascending=[True, False, True]).reset_index(
        drop=True)


def compare_with_configs(by_cluster: pd.DataFrame, client_versions: pd.DataFrame) -> pd.DataFrame:
    """Broker-reported software (connections) beside the client-config sources' (instances), per cluster.

    `client_versions`: the pipeline's results with a `cluster` name column. `agreement`: both / brokers only /
    config sources only.
    """
    columns = ["cluster_name", "software_name", "software_version", "connections", "config_instances", "agreement"]
    left = by_cluster[["cluster_name", "software_name", "software_version", "connections"]] if not by_cluster.empty \
        else pd.DataFrame(columns=["cluster_name", "software_name", "software_version", "connections"])
    if client_versions is None or client_versions.empty:
        right = pd.DataFrame(columns=["cluster_name", "software_name", "software_version", "config_instances"])
    else:
        right = client_versions.rename(columns={"cluster": "cluster_name", "client_software_name": "software_name",
                                                "client_software_version": "software_version"})
        right = right.groupby(["cluster_name", "software_name", "software_version"], dropna=False)["instances"].sum() \
            .reset_index().rename(columns={"instances": "config_instances"})
    out = left.merge(right, on=["cluster_name", "software_name", "software_version"], how="outer")
    has_b = pd.to_numeric(out["connections"], errors="coerce").fillna(0) > 0
    has_c = pd.to_numeric(out["config_instances"], errors="coerce").fillna(0) > 0
    out["agreement"] = ["both" if b and c else "brokers only" if b else "config sources only"
                        for b, c in zip(has_b, has_c, strict=True)]
    return out[columns].sort_values(["cluster_name", "agreement", "software_name"]).reset_index(drop=True)


def status_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """The last read of each cluster: status, KIP-896 status, exporter rules, message."""
    columns = ["cluster_name", "collected_at", "status", "kip896", "dialect", "source", "source_label", "message"]
    return runs[columns].sort_values("cluster_name").reset_index(drop=True) if not runs.empty else pd.DataFrame(
        columns=columns)
