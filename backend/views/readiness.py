"""Upgrade readiness per cluster: a pure function of what the lake holds -> a verdict with its reasons.

For a target release (default: the newest 4.x of backend/kafka/versions_table.json), each cluster gets a
checklist; every item is `pass`, `fail` (blocks the upgrade), `warn` (worth doing, does not block) or
`unknown` (the product cannot tell: never "ready" by omission). The verdict is `blocked` when an item
fails, else `unverified` when an item is unknown, else `ready`. Pages, the CSV export and the drift report
all call `readiness()`; docs/client-inventory.md says how each item is decided.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pandas as pd

from backend.configs import known_keys
from backend.kafka import client_floors
from backend.kafka.versions import detect_family, family_rows, release_key, release_rows

PASS, FAIL, WARN, UNKNOWN = "pass", "fail", "warn", "unknown"
READY, BLOCKED, UNVERIFIED = "ready", "blocked", "unverified"
# Kafka 4.x brokers upgrade from 3.3 or later, in KRaft mode (Apache Kafka's 4.0 upgrade notes).
MIN_UPGRADE_FROM = (3, 3)
KIP896_SINCE = (3, 7)  # brokers count DeprecatedRequestsPerSec since 3.7
ITEMS = ("broker versions", "ZooKeeper mode", "removed protocol versions", "client software floor",
         "consumer groups on the classic protocol", "client config keys removed", "client config defaults changed")
GROUP_COLUMNS = ("cluster_name", "group_id", "group_type", "protocol_type", "state")
SAMPLE = 8


@dataclass(frozen=True)
class Readiness:
    """The verdict per cluster (`verdicts`) and the checklist behind it (`items`)."""

    target: str
    verdicts: pd.DataFrame  # cluster_name, verdict, reasons (text), failed, unknown, warnings (counts)
    items: pd.DataFrame  # cluster_name, item, status, detail


def default_target() -> str:
    """The newest 4.x release line the versions table knows."""
    fours = [r.release for r in release_rows() if release_key(r.release)[0] >= 4]
    return max(fours, key=release_key)


def known_targets() -> list[str]:
    """Release lines the table knows from 4.0 on, newest first."""
    lines = {r.release for r in release_rows() if release_key(r.release)[0] >= 4}
    return sorted(lines, key=release_key, reverse=True)


def _version(text: object) -> tuple[int, ...] | None:
    parsed = client_floors.parse_version(str(text)) if isinstance(text, str) and text else None
    return parsed[:2] if parsed else None


def _joined(parts: list[str]) -> str:
    return "; ".join(parts[:SAMPLE]) + (f"; +{len(parts) - SAMPLE} more" if len(parts) > SAMPLE else "")


def _broker_items(cluster: pd.Series, brokers: pd.DataFrame, target: tuple[int, ...]) -> list[tuple[str, str, str]]:
    if brokers.empty:
        return [("broker versions", UNKNOWN, "no broker of this cluster in the latest poll"),
                ("ZooKeeper mode", UNKNOWN, "no broker of this cluster in the latest poll")]
    blockers, unknowns, fine = [], [], []
    for b in brokers.itertuples(index=False):
        name = str(getattr(b, "software_name", "") or "")
        provenance = getattr(b, "version_provenance", "unknown")
        if name and "kafka" not in name.lower():
            unknowns.append(f"broker {b.broker_id} runs {name}, not Apache Kafka: its upgrade path is its vendor's")
            continue
        if provenance in ("reported", "zookeeper"):
            low = high = _version(getattr(b, "software_version", None))
        elif provenance == "guessed":
            low, high = _version(getattr(b, "version_min", None)), _version(getattr(b, "version_max", None))
        else:
            low = high = None
        shown = (getattr(b, "software_version", None) if provenance in ("reported", "zookeeper")
                 else f"{getattr(b, 'version_min', None)}–{getattr(b, 'version_max', None) or 'newer'} (guessed)")
        if low is None:
            unknowns.append(f"broker {b.broker_id}: version unknown")
        elif low >= target:
            fine.append(f"broker {b.broker_id} already runs {shown}")
        elif high is not None and high < MIN_UPGRADE_FROM:
            blockers.append(f"broker {b.broker_id} runs {shown}: upgrade to 3.3–3.9 first (Kafka 4.x upgrades start "
                            "from 3.3 or later)")
        elif low < MIN_UPGRADE_FROM:
            unknowns.append(f"broker {b.broker_id} runs {shown}: may be older than 3.3, which cannot upgrade straight "
                            "to 4.x")
        else:
            fine.append(f"broker {b.broker_id} runs {shown}")
    if blockers:
        versions = (FAIL, _joined(blockers))
    elif unknowns:
        versions = (UNKNOWN, _joined(unknowns))
    else:
        versions = (PASS, _joined(fine))
    zk = bool(cluster.get("zk_cluster_id")) if isinstance(cluster.get("zk_cluster_id"), str) else False
    families = set()
    for text in brokers.get("api_versions_json", pd.Series(dtype=object)).dropna():
        try:
            table = {int(k): (int(v[0]), int(v[1])) for k, v in json.loads(text).items()}
        except (ValueError, TypeError, AttributeError, IndexError):
            continue
        families.add(detect_family(table))
    if zk or "zk" in families:
        mode = (FAIL, "the cluster runs in ZooKeeper mode: migrate it to KRaft first (ZooKeeper mode is gone in 4.0; "
                      "migrate on a 3.x bridge release, then upgrade)")
    elif families == {"kraft"}:
        mode = (PASS, "KRaft mode")
    else:
        mode = (UNKNOWN, "the brokers' mode could not be told from their ApiVersions")
    return [("broker versions", *versions), ("ZooKeeper mode", *mode)]


def _newest(broker: object) -> tuple[int, ...] | None:
    """The newest version a broker row may run (its reported version, or the top of its guessed range)."""
    if getattr(broker, "version_provenance", None) in ("reported", "zookeeper"):
        return _version(getattr(broker, "software_version", None))
    return _version(getattr(broker, "version_max", None))


def _target_min_versions(target: str) -> dict[str, int]:
    """Request name -> the oldest version the target release serves (from the versions table)."""
    from backend.kafka.versions import api_name

    rows = [r for r in family_rows("kraft") if r.release == target]
    if not rows:
        return {}
    return {api_name(k): lo for k, (lo, _hi) in rows[0].apis.items() if api_name(k)}


def _client_items(name: str, run: pd.Series | None, rows: pd.DataFrame, brokers: pd.DataFrame, target: str,
                  now: datetime) -> list[tuple[str, str, str]]:
    if run is None:
        why = "no broker metrics source for this cluster ([clusters.broker_metrics] in the fleet file)"
        return [("removed protocol versions", UNKNOWN, why), ("client software floor", UNKNOWN, why)]
    if run["status"] == "error":
        why = f"the brokers' metrics could not be read: {run['message']}"
        return [("removed protocol versions", UNKNOWN, why), ("client software floor", UNKNOWN, why)]
    window = float(run.get("window_s") or 3600.0)
    since = now - timedelta(seconds=window)
    deprecated = rows[rows["kind"] == "deprecated"]
    mins = _target_min_versions(target)
    in_use: dict[str, set[str]] = {}
    table_lists = set()
    for d in deprecated.itertuples(index=False):
        last = d.last_increase_at
        if last is None or pd.isna(last) or pd.Timestamp(last).to_pydatetime() < since:
            continue
        subject = f"{d.request} v{int(d.version)} by {d.software_name} {d.software_version}"
        served_from = mins.get(str(d.request))
        if served_from is not None and d.version >= served_from:
            # The broker's own count is the authority (KIP-896 lists what 4.0 refuses); the message definitions
            # the versions table is built from keep some removed versions (e.g. Produce v0-v2) in their range.
            table_lists.add(f"{d.request} v{int(d.version)}")
        where = str(int(d.broker_id)) if d.broker_id is not None and not pd.isna(d.broker_id) else str(d.endpoint)
        in_use.setdefault(subject, set()).add(where)
    kip896_ok = True
    if in_use:
        note = (f" (the versions table still lists {', '.join(sorted(table_lists))} in {target}'s range: the message "
                "definitions keep them, the broker refuses them)") if table_lists else ""
        protocol = (FAIL, _joined([f"{s} (brokers {', '.join(sorted(b))})" for s, b in sorted(in_use.items())])
                    + f": {target} no longer serves these versions (KIP-896){note}")
    elif run["kip896"] == "not_exported":
        protocol, kip896_ok = (UNKNOWN, str(run["message"] or "no KIP-896 series")), False
    elif run["kip896"] == "unavailable" or run["status"] == "no_kip511":
        protocol, kip896_ok = (UNKNOWN, str(run["message"] or "the KIP-896 series could not be read")), False
    elif not brokers.empty and all(v is not None and v < KIP896_SINCE for v in map(_newest, brokers.itertuples())):
        protocol, kip896_ok = (UNKNOWN, "brokers before 3.7 do not count requests on removed versions (KIP-896)"), False
    else:
        protocol = (PASS, f"no client used a removed protocol version in the last {window / 3600:g} h")
    connections = rows[(rows["kind"] == "connections") & (rows["connections"].fillna(0) > 0)]
    below, unnamed, named = [], 0, 0
    for (sw, version), group in connections.groupby(["software_name", "software_version"], dropna=False):
        check = client_floors.check(str(sw), str(version))
        count = int(group["connections"].sum())
        if check.below:
            below.append(f"{sw} {version} ({count} connections; floor {check.family} {check.floor_text})")
        elif check.family == "unnamed":
            unnamed += count
        else:
            named += count
    if run["status"] == "no_kip511":
        floor = (UNKNOWN, str(run["message"]))
    elif below:
        floor = (FAIL, _joined(below) + ": older than Kafka 4.x serves (KIP-896)")
    elif unnamed and any(" by unknown " in subject for subject in in_use):
        floor = (FAIL, f"{unnamed} connections from clients that send no software name (older than 2.4) use protocol "
                       "versions Kafka 4.0 removed (see removed protocol versions)")
    elif unnamed and not kip896_ok:
        floor = (UNKNOWN, f"{unnamed} connections from clients that send no software name (older than 2.4): they may be "
                          "2.1–2.3 (fine) or older, and the KIP-896 series that would tell are not available")
    elif unnamed:
        floor = (PASS, f"{named} named connections at or above the floor; {unnamed} unnamed (older than 2.4) use no "
                       "removed protocol version")
    else:
        floor = (PASS, f"{named} connections, every software at or above the floor")
    return [("removed protocol versions", *protocol), ("client software floor", *floor)]


def _group_item(name: str, groups: pd.DataFrame | None) -> tuple[str, str, str]:
    item = "consumer groups on the classic protocol"
    if groups is None:
        return item, UNKNOWN, "consumer groups not collected"
    mine = groups[groups["cluster_name"] == name]
    live = mine[~mine["state"].fillna("").str.lower().isin(["dead"])]
    classic = live[(live["group_type"] == "classic") & (live["protocol_type"].fillna("consumer").isin(["consumer", ""]))]
    unknown = live[live["group_type"].fillna("unknown") == "unknown"]
    if not classic.empty:
        ids = sorted(classic["group_id"].astype(str))
        return item, WARN, (f"{len(ids)} consumer groups still on the classic protocol (KIP-848's consumer protocol is "
                            f"the 4.x default for new consumers): {_joined(ids)}")
    if not unknown.empty:
        return item, UNKNOWN, f"{len(unknown)} groups of unknown type"
    return item, PASS, f"{len(live)} groups, none on the classic consumer protocol"


def removed_keys(target: str) -> dict[str, tuple[str, ...]]:
    """Java client keys that a release before `target` defines and `target` no longer does, with their client types."""
    line = release_key(target)
    out: dict[str, set[str]] = {}
    for client_type in known_keys.JAVA_CLIENT_TYPES:
        for key in known_keys.java_keys(client_type):
            spans = known_keys.key_releases(key, client_type)
            if spans and (3, 0) <= release_key(spans[-1][1]) < line:
                out.setdefault(key, set()).add(client_type)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


def changed_defaults(target: str) -> dict[str, tuple[str, str, str]]:
    """Java client keys whose default changed on the way to `target` (key -> (client type, before, after))."""
    changes = known_keys.table().get("default_changes", {})
    out: dict[str, tuple[str, str, str]] = {}
    if not isinstance(changes, dict):
        return out
    line = release_key(target)
    for client_type, keys in changes.items():
        for key, spans in keys.items():
            before = [s for s in spans if release_key(s[1]) < (4, 0)]
            after = [s for s in spans if release_key(s[0]) >= (4, 0) and release_key(s[0]) <= line]
            if before and after and before[-1][2] != after[-1][2]:
                out.setdefault(key, (client_type, before[-1][2], after[-1][2]))
    return out


def _config_items(name: str, defaults: pd.DataFrame | None, target: str) -> list[tuple[str, str, str]]:
    if defaults is None or defaults.empty:
        why = "no client-config results for this cluster (no config source, or the analysis has not run)"
        return [("client config keys removed", UNKNOWN, why), ("client config defaults changed", UNKNOWN, why)]
    mine = defaults[defaults["cluster"] == name]
    if mine.empty:
        why = "no client-config results for this cluster"
        return [("client config keys removed", UNKNOWN, why), ("client config defaults changed", UNKNOWN, why)]
    removed = removed_keys(target)
    found = []
    for key, client_type, count in zip(mine["key"], mine["client_type"], mine["overridden_count"], strict=True):
        if key in removed and int(count or 0) > 0:
            found.append(f"{key}: {int(count)} {client_type} instances set it")
    keys_item = (WARN, _joined(found) + f" (gone in {target} clients: ignored there)") if found else (
        PASS, f"no instance sets a key {target} clients no longer define ({len(removed)} such keys)")
    changed = changed_defaults(target)
    relying = []
    for key, client_type, count in zip(mine["key"], mine["client_type"], mine["default_count"], strict=True):
        if key not in changed or not int(count or 0):
            continue
        _, before, after = changed[key]
        relying.append(f"{key}: {int(count)} {client_type} instances use the default ({before} before 4.0, {after} in "
                       f"{target} clients)")
    if not changed:
        default_item = (PASS, "no client default changes known for this target")
    else:
        default_item = (WARN, _joined(relying)) if relying else (
            PASS, f"no instance relies on a default that changed ({', '.join(sorted(changed))})")
    return [("client config keys removed", *keys_item), ("client config defaults changed", *default_item)]


def readiness(clusters: pd.DataFrame, brokers: pd.DataFrame, inventory: pd.DataFrame, runs: pd.DataFrame, *,
              default_share: pd.DataFrame | None = None, groups: pd.DataFrame | None = None,
              target: str | None = None, now: datetime | None = None) -> Readiness:
    """The readiness of every cluster in `clusters` for `target` (see the module doc).

    `clusters`: latest cluster rows (cluster_name, zk_cluster_id); `brokers`: their latest broker rows;
    `inventory` / `runs`: the stored client inventory (backend/store/inventory_readers.py); `default_share`: the
    pipeline's results with a `cluster` name column; `groups`: consumer groups (cluster_name, group_id, group_type
    classic|consumer|share|streams|unknown, protocol_type, state), None when they are not collected.
    """
    target = target or default_target()
    if release_key(target) < (4, 0):
        raise ValueError(f"target {target} is not a 4.x release")
    now = now or datetime.now(UTC)
    items: list[dict[str, str]] = []
    verdicts: list[dict[str, object]] = []
    for _, cluster in clusters.sort_values("cluster_name").iterrows():
        name = str(cluster["cluster_name"])
        mine = brokers[brokers["cluster_name"] == name] if not brokers.empty else brokers
        run_rows = runs[runs["cluster_name"] == name] if not runs.empty else runs
        run = run_rows.iloc[-1] if not run_rows.empty else None
        rows = inventory[inventory["cluster_name"] == name] if not inventory.empty else inventory
        checklist = [*_broker_items(cluster, mine, release_key(target)),
                     *_client_items(name, run, rows, mine, target, now),
                     _group_item(name, groups),
                     *_config_items(name, default_share, target)]
        for item, status, detail in checklist:
            items.append({"cluster_name": name, "item": item, "status": status, "detail": detail})
        failed = [f"{item}: {detail}" for item, status, detail in checklist if status == FAIL]
        unknown = [f"{item}: {detail}" for item, status, detail in checklist if status == UNKNOWN]
        warned = [f"{item}: {detail}" for item, status, detail in checklist if status == WARN]
        verdict = BLOCKED if failed else UNVERIFIED if unknown else READY
        reasons = failed if failed else unknown if unknown else warned
        verdicts.append({"cluster_name": name, "verdict": verdict, "reasons": " | ".join(reasons),
                         "failed": len(failed), "unknown": len(unknown), "warnings": len(warned)})
    columns = ["cluster_name", "verdict", "reasons", "failed", "unknown", "warnings"]
    return Readiness(target, pd.DataFrame(verdicts, columns=columns),
                     pd.DataFrame(items, columns=["cluster_name", "item", "status", "detail"]))


def client_items_ready(report: Readiness, cluster: str) -> bool:
    """Whether the client items (protocol versions and software floor) of one cluster pass."""
    mine = report.items[(report.items["cluster_name"] == cluster)
                        & report.items["item"].isin(["removed protocol versions", "client software floor"])]
    return not mine.empty and set(mine["status"]) <= {PASS, WARN}
