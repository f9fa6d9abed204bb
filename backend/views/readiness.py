"""Upgrade readiness per cluster: a pure function of what the lake holds -> a verdict with its reasons.

For a target release (default: the newest 4.x of backend/kafka/versions_table.json), each cluster gets a
checklist; every item is `pass`, `fail` (blocks the upgrade), `warn` (worth doing, does not block) or
`unknown` (the product cannot tell: never "ready" by omission). The verdict is `blocked` when an item
fails, else `unverified` when an item is unknown, else `ready`. Pages, the CSV export and the drift report
all call `readiness()`; docs/client-inventory.md says how each item is decided. The client-config items read the
keys and defaults of known_keys.json (`key_changes`), generated from the real client jars.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pandas as pd

from backend.configs import known_keys
from backend.kafka import client_floors
from backend.kafka.versions import detect_family, family_rows, release_key, release_rows
from backend.pipeline.rules import JMX_REPORTERS_RULE, REMOVED_KEY_RULES
from backend.views import fleet_views

PASS, FAIL, WARN, UNKNOWN = "pass", "fail", "warn", "unknown"
READY, BLOCKED, UNVERIFIED = "ready", "blocked", "unverified"
# Kafka 4.x brokers upgrade from 3.3 or later, in KRaft mode (Apache Kafka's 4.0 upgrade notes).
MIN_UPGRADE_FROM = (3, 3)
KIP896_SINCE = (3, 7)  # brokers count DeprecatedRequestsPerSec since 3.7
ITEMS = ("broker versions", "ZooKeeper mode", "removed protocol versions", "client software floor",
         "consumer groups on the classic protocol", "client config keys removed", "client config defaults changed")
GROUP_COLUMNS = ("cluster_name", "group_id", "group_type", "protocol_type", "state")
SAMPLE = 8
REMOVED, CHANGED = "removed", "default changed"
KEY_COLUMNS = ("cluster_name", "item", "client_type", "key", "default_before", "default_after", "instances_reporting",
               "at_old_default", "at_new_default", "set_otherwise", "not_reporting", "flagged_default", "affected",
               "instances", "java_instances", "set_by")
# The instances the pipeline's per-instance rules name (config_alerts): removed keys set to something other than
# their old default (REMOVED_KEY_RULES), metric.reporters set without JmxReporter (JMX_REPORTERS_RULE).
INSTANCE_COLUMNS = ("cluster_name", "item", "client_type", "key", "value", "client_id", "group_id",
                    "client_instance_id", "rule_id")
NAMED = 3  # instances named in a checklist detail and a keys row; the instances table has them all
JMX_REPORTER = "org.apache.kafka.common.metrics.jmxreporter"


@dataclass(frozen=True)
class Readiness:
    """The verdict per cluster (`verdicts`) and the checklist behind it (`items`)."""

    target: str
    verdicts: pd.DataFrame  # cluster_name, verdict, reasons (text), failed, unknown, warnings (counts)
    items: pd.DataFrame  # cluster_name, item, status, detail
    # The client-config keys behind the two config items, per cluster and client type (KEY_COLUMNS): how many
    # instances report each removed or changed key, at its old default, at the new one, set otherwise, not at all.
    keys: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(KEY_COLUMNS)))
    # Every instance behind a keys row that a rule names (INSTANCE_COLUMNS), so their owners can be found.
    instances: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(INSTANCE_COLUMNS)))


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
    found = cluster_mode(cluster.get("zk_cluster_id"), brokers)
    if found == "zookeeper":
        mode = (FAIL, "the cluster runs in ZooKeeper mode: migrate it to KRaft first (ZooKeeper mode is gone in 4.0; "
                      "migrate on a 3.x bridge release, then upgrade)")
    elif found == "kraft":
        mode = (PASS, "KRaft mode")
    else:
        mode = (UNKNOWN, "the brokers' mode could not be told from their ApiVersions")
    return [("broker versions", *versions), ("ZooKeeper mode", *mode)]


def cluster_mode(zk_cluster_id: object, brokers: pd.DataFrame) -> str:
    """"zookeeper" (an id in ZooKeeper, or a broker advertising ZooKeeper-only APIs), "kraft" (every broker's
    ApiVersions says KRaft) or "unknown": the one reading of a cluster's mode (readiness, the API)."""
    families = set()
    for text in brokers.get("api_versions_json", pd.Series(dtype=object)).dropna():
        try:
            table = {int(k): (int(v[0]), int(v[1])) for k, v in json.loads(text).items()}
        except (ValueError, TypeError, AttributeError, IndexError):
            continue
        families.add(detect_family(table))
    if (isinstance(zk_cluster_id, str) and zk_cluster_id) or "zk" in families:
        return "zookeeper"
    return "kraft" if families == {"kraft"} else "unknown"


def _newest(broker: object) -> tuple[int, ...] | None:
    """The newest version a broker row may run (its reported version, or the top of its guessed range)."""
    if getattr(broker, "version_provenance", None) in ("reported", "zookeeper"):
        return _version(getattr(broker, "software_version", None))
    return _version(getattr(broker, "version_max", None))


def _oldest(broker: object) -> tuple[int, ...] | None:
    """The oldest version a broker row may run (its reported version, or the bottom of its guessed range)."""
    if getattr(broker, "version_provenance", None) in ("reported", "zookeeper"):
        return _version(getattr(broker, "software_version", None))
    return _version(getattr(broker, "version_min", None))


def _target_min_versions(target: str) -> dict[str, int]:
    """Request name -> the oldest version the target release serves (from the versions table)."""
    from backend.kafka.versions import api_name

    rows = [r for r in family_rows("kraft") if r.release == target]
    if not rows:
        return {}
    return {api_name(k): lo for k, (lo, _hi) in rows[0].apis.items() if api_name(k)}


UNNAMED_WHY = "a client before 2.4, or one that does not send ApiVersions v3"
UNNAMED = f"no name sent ({UNNAMED_WHY})"
KIP896_REMOVED_IN = (4, 0)  # the release that removed the versions KIP-896 lists


def _time(value: object, default: datetime | None = None) -> datetime | None:
    if value is None or (not isinstance(value, datetime) and pd.isna(value)):  # type: ignore[call-overload]
        return default
    return pd.Timestamp(value).to_pydatetime()


def _where(row: object) -> str:
    broker = getattr(row, "broker_id", None)
    return str(int(broker)) if broker is not None and not pd.isna(broker) else str(getattr(row, "endpoint", ""))


def _client_items(name: str, run: pd.Series | None, rows: pd.DataFrame, brokers: pd.DataFrame, target: str,
                  now: datetime) -> list[tuple[str, str, str]]:
    """The two client items, from the stored inventory (docs/client-inventory.md, "How absence is judged").

    Evidence seen within the window (a count that grew between two reads of the same broker process, a client seen
    connected) holds until the window ends, even when its series went away; absence is proven only by a whole read
    whose rules are known to export the KIP-896 meter. Anything less is `unknown`, with what to do about it.
    """
    if run is None:
        why = "no broker metrics source for this cluster ([clusters.broker_metrics] in the fleet file)"
        return [("removed protocol versions", UNKNOWN, why), ("client software floor", UNKNOWN, why)]
    window = float(run.get("window_s") or 3600.0)
    window_text = fleet_views.duration_text(window)
    since = now - timedelta(seconds=window)
    read_at = _time(run.get("collected_at"), now) or now
    deprecated = rows[rows["kind"] == "deprecated"]
    mins = _target_min_versions(target)
    in_use: dict[str, set[str]] = {}
    last_used: dict[str, datetime] = {}
    gone: set[str] = set()
    undetermined: list[str] = []
    table_lists = set()
    for d in deprecated.itertuples(index=False):
        subject = f"{d.request} v{int(d.version)} by {d.software_name} {d.software_version}"
        last = _time(d.last_increase_at)
        first = _time(d.first_seen_at, read_at) or read_at
        seen_last = _time(getattr(d, "last_seen_at", None), read_at) or read_at
        if last is not None and last >= since:
            served_from = mins.get(str(d.request))
            if served_from is not None and d.version >= served_from:
                # The broker's own count is the authority (KIP-896 lists what 4.0 refuses); the message definitions
                # the versions table is built from keep some removed versions (e.g. Produce v0-v2) in their range.
                table_lists.add(f"{d.request} v{int(d.version)}")
            in_use.setdefault(subject, set()).add(_where(d))
            last_used[subject] = max(last, last_used.get(subject, last))
            if seen_last < read_at:
                gone.add(subject)
        elif (d.count or 0) > 0 and (last is None or last < first) and first >= since:
            undetermined.append(f"{subject} (broker {_where(d)}: {int(d.count)} counted before the product's first "
                                f"read {fleet_views.duration_text((now - first).total_seconds())} ago)")
    connections = rows[rows["kind"] == "connections"]
    if "role" in connections:
        connections = connections[connections["role"].fillna("client") != "broker"]
    recent = []
    either = 0  # unnamed connections on an inter-broker listener clients share (maybe the brokers' replica fetchers)
    for c in connections.itertuples(index=False):
        seen_when = _time(getattr(c, "last_seen_at", None))
        if (c.connections or 0) > 0 or (seen_when is not None and seen_when >= since):
            recent.append((str(c.software_name), str(c.software_version), int(c.connections or 0)))
            if getattr(c, "role", None) == "either":
                either += int(c.connections or 0)
    below, unnamed, named = [], 0, 0
    unnamed_seen = False
    by_software: dict[tuple[str, str], int] = {}
    for sw, version, count in recent:
        by_software[(sw, version)] = by_software.get((sw, version), 0) + count
    for (sw, version), count in sorted(by_software.items()):
        check = client_floors.check(sw, version)
        if check.below:
            below.append(f"{sw} {version} ({count} connections; floor {check.family} {check.floor_text})")
        elif check.family == "unnamed":
            unnamed += count
            unnamed_seen = True
        else:
            named += count
    unnamed_text = (f"{unnamed} connections from clients that sent no name ({UNNAMED_WHY})" if unnamed else
                    f"clients that sent no name ({UNNAMED_WHY}), connected within the last {window_text}")
    newest = [_newest(b) for b in brokers.itertuples()] if not brokers.empty else []
    if run["status"] == "error":  # nothing read now; what was seen within the window still holds
        why = f"the brokers' metrics could not be read: {run['message']}"
        if not in_use:
            return [("removed protocol versions", UNKNOWN, why), ("client software floor", UNKNOWN, why)]
    oldest = [_oldest(b) for b in brokers.itertuples()] if not brokers.empty else []
    on_4x = bool(oldest) and all(v is not None and v >= KIP896_REMOVED_IN for v in oldest)
    partial = run["status"] in ("partial", "error")
    kip896_ok = False
    if in_use:
        note = (f" (the versions table still lists {', '.join(sorted(table_lists))} in {target}'s range: the message "
                "definitions keep them, the broker refuses them)") if table_lists else ""
        parts = []
        for subject, where in sorted(in_use.items()):
            ago = fleet_views.duration_text((now - last_used[subject]).total_seconds())
            kept = "; its series went away since (a broker restart or other exporter rules), the use is kept" \
                if subject in gone else ""
            parts.append(f"{subject} (brokers {', '.join(sorted(where))}; last counted {ago} ago{kept})")
        protocol = (FAIL, _joined(parts) + f": {target} no longer serves these versions (KIP-896){note}; a use "
                    f"blocks until {window_text} (client_metrics_window_s) after it was last counted")
    elif on_4x:
        if run["status"] == "no_kip511":
            protocol = (UNKNOWN, str(run["message"]))
        elif unnamed_seen or below or partial:
            reasons: list[str] = []
            if unnamed_seen:
                reasons.append(unnamed_text + (
                    f" ({either} of them on an inter-broker listener that clients share: the brokers' own replica "
                    "fetchers send no software name either (checked on 4.3.1), so they cannot be told apart there; "
                    "a listener of the brokers' own would)" if either else ""))
            if below:
                reasons.append("named clients below the software floor are connected")
            if partial:
                reasons.append(f"not every broker's metrics were read ({run['message']})")
            protocol = (UNKNOWN, "; ".join(reasons) + ": the brokers run Kafka 4.x, which refuse the removed versions and "
                        "count no such request (DeprecatedRequestsPerSec stays empty; checked on 4.3.1, a refused "
                        "request closes the connection and the broker logs UnsupportedVersionException), so only the "
                        "brokers' logs can tell whether these clients fail")
        else:
            protocol = (PASS, f"the brokers run Kafka 4.x, which refuse the removed versions (and count no such "
                              f"request); every client connection seen within {window_text} sent a software name, "
                              "and named clients are judged by the software floor")
            kip896_ok = True
    elif undetermined:
        protocol = (UNKNOWN, _joined(undetermined) + f": whether these uses fall within the window shows once the "
                    f"product has watched them for {window_text} (client_metrics_window_s)")
    elif partial:
        protocol = (UNKNOWN, f"not every broker's metrics were read, so absence cannot be proven: {run['message']}")
    elif run["kip896"] == "not_exported":
        protocol = (UNKNOWN, str(run["message"] or "no KIP-896 series"))
    elif run["kip896"] == "unavailable" or run["status"] == "no_kip511":
        protocol = (UNKNOWN, str(run["message"] or "the KIP-896 series could not be read"))
    elif newest and all(v is not None and v < KIP896_SINCE for v in newest):
        protocol = (UNKNOWN, "brokers before 3.7 do not count requests on removed versions (KIP-896)")
    else:
        counted = deprecated[(deprecated["count"].fillna(0) > 0)] if not deprecated.empty else deprecated
        earlier = (f"; {len(counted)} series counted earlier, none grown since" if len(counted) else "")
        protocol = (PASS, f"no client used a removed protocol version in the last {window_text} (the window: a use "
                          f"blocks until {window_text} after it was last counted){earlier}")
        kip896_ok = True
    if run["status"] == "no_kip511":
        floor = (UNKNOWN, str(run["message"]))
    elif below:
        floor = (FAIL, _joined(below) + ": older than Kafka 4.x serves (KIP-896)")
    elif unnamed_seen and any(" by unknown " in subject for subject in in_use):
        floor = (FAIL, f"{unnamed_text}: they use protocol versions Kafka 4.0 removed (see removed protocol versions)")
    elif partial:
        floor = (UNKNOWN, f"not every broker's metrics were read, so their clients are not known: {run['message']}")
    elif unnamed_seen and not kip896_ok:
        floor = (UNKNOWN, f"{unnamed_text}: they may be 2.1-2.3 Java clients (fine) or older ones, and what would tell "
                          "(removed protocol versions) is not known")
    elif unnamed_seen:
        floor = (PASS, f"{named} named connections at or above the floor; {unnamed_text}: they use no removed protocol "
                       "version")
    else:
        floor = (PASS, f"{named} client connections, every software at or above the floor")
    return [("removed protocol versions", *protocol), ("client software floor", *floor)]


def _group_item(name: str, groups: pd.DataFrame | None, groups_read: Collection[str] | None = None
                ) -> tuple[str, str, str]:
    item = "consumer groups on the classic protocol"
    if groups is None:
        return item, UNKNOWN, "consumer groups not collected"
    if groups_read is not None and name not in groups_read:
        return item, UNKNOWN, "consumer groups not read yet (group_interval_s, or reading them failed)"
    mine = groups[groups["cluster_name"] == name]
    live = mine[~mine["state"].fillna("").str.lower().isin(["dead"])]
    # classic groups of subscribing consumers; assign-only groups (protocol type "") use no rebalance protocol at all
    classic = live[(live["group_type"] == "classic") & (live["protocol_type"].fillna("consumer") == "consumer")]
    unknown = live[live["group_type"].fillna("unknown") == "unknown"]
    if not classic.empty:
        ids = sorted(classic["group_id"].astype(str))
        return item, WARN, (f"{len(ids)} consumer groups still on the classic protocol (KIP-848's consumer protocol is "
                            f"the 4.x default for new consumers): {_joined(ids)}")
    if not unknown.empty:
        return item, UNKNOWN, f"{len(unknown)} groups of unknown type"
    return item, PASS, f"{len(live)} groups, none on the classic consumer protocol"


@dataclass(frozen=True)
class KeyChange:
    """A Java client key that the target's clients no longer define, or whose default the target changed."""

    client_type: str
    key: str
    kind: str  # REMOVED | CHANGED
    before_release: str  # the release line `before` is the default of (the key's last one, or the last 3.x)
    before: str | None  # the default there (None: a null default)
    after_release: str  # the target's line in the known-keys table
    after: str | None  # the target's default (None for a removed key)


def _same(a: object, b: object) -> bool:
    """Whether two config values are the same default (a null and an empty default are the same: 'none')."""
    def norm(v: object) -> str:
        return "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v).strip().lower()
    return norm(a) == norm(b)


def _reporters_without_jmx(value: object) -> bool:
    """A metric.reporters value that lists reporters but not JmxReporter ('' and '[]' list none)."""
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value).strip().strip("[]")
    return bool(text.strip()) and JMX_REPORTER not in text.lower()


def _shown(value: str | None) -> str:
    return "null" if value is None else '""' if value == "" else value


def _table_line(target: str) -> str | None:
    """The newest release line of the known-keys table at or before ``target``."""
    lines = [r for r in known_keys.releases() if release_key(r) <= release_key(target)]
    return max(lines, key=release_key) if lines else None


def key_changes(target: str) -> list[KeyChange]:
    """The Java client keys removed on the way to ``target``, and those whose default the target changed.

    From known_keys.json (generated from the real client jars): removed = a 3.x release defines the key for that
    client type and the target does not; changed = the last 3.x release and the target both define it, with
    different defaults (a null and an empty default count as the same).
    """
    line = _table_line(target)
    threes = [r for r in known_keys.releases() if (3, 0) <= release_key(r) < (4, 0)]
    if line is None or not threes:
        return []
    base = max(threes, key=release_key)
    at = release_key(line)
    out: list[KeyChange] = []
    for client_type in known_keys.JAVA_CLIENT_TYPES:
        for key in known_keys.java_keys(client_type):
            spans = known_keys.key_releases(key, client_type)
            if not spans:
                continue
            defined_now = any(release_key(lo) <= at <= release_key(hi) for lo, hi in spans)
            last = spans[-1][1]
            if not defined_now and (3, 0) <= release_key(last) < at:
                _, before = known_keys.default_in(key, client_type, last)
                out.append(KeyChange(client_type, key, REMOVED, last, before, line, None))
                continue
            had, before = known_keys.default_in(key, client_type, base)
            has, after = known_keys.default_in(key, client_type, line)
            if had and has and not _same(before, after):
                out.append(KeyChange(client_type, key, CHANGED, base, before, line, after))
    return sorted(out, key=lambda c: (c.kind, c.key, c.client_type))


def removed_keys(target: str) -> dict[str, tuple[str, ...]]:
    """Java client keys that a release before `target` defines and `target` no longer does, with their client types."""
    out: dict[str, set[str]] = {}
    for change in key_changes(target):
        if change.kind == REMOVED:
            out.setdefault(change.key, set()).add(change.client_type)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


def changed_defaults(target: str) -> dict[str, tuple[str, str | None, str | None]]:
    """Java client keys whose default changed on the way to `target` (key -> (client type, before, after))."""
    out: dict[str, tuple[str, str | None, str | None]] = {}
    for change in key_changes(target):
        if change.kind == CHANGED:
            out.setdefault(change.key, (change.client_type, change.before, change.after))
    return out


def _rule_key(change: KeyChange) -> str | None:
    """The rule naming the instances a key change affects (None: naming them would be noise)."""
    if change.kind == REMOVED:
        return REMOVED_KEY_RULES.get(change.key)
    return JMX_REPORTERS_RULE if change.key == "metric.reporters" else None


def _instance_rows(name: str, alerts: pd.DataFrame | None, changes: list[KeyChange]) -> list[dict[str, object]]:
    """The instances of one cluster that the rules behind ``changes`` name (config_alerts with a cluster column)."""
    if alerts is None or alerts.empty or "cluster" not in alerts:
        return []
    wanted = {(rule, change.client_type): change for change in changes if (rule := _rule_key(change)) is not None}
    mine = alerts[(alerts["cluster"] == name) & alerts["rule_id"].isin({rule for rule, _ in wanted})]
    rows: list[dict[str, object]] = []
    for a in mine.itertuples(index=False):
        change = wanted.get((str(a.rule_id), str(a.client_type)))
        if change is None:
            continue
        try:
            value = json.loads(str(a.observed_json)).get(change.key)
        except (ValueError, AttributeError):
            value = None
        rows.append({"cluster_name": name,
                     "item": "client config keys removed" if change.kind == REMOVED else "client config defaults changed",
                     "client_type": change.client_type, "key": change.key, "value": value,
                     "client_id": _text(a.client_id), "group_id": _text(a.group_id),
                     "client_instance_id": _text(a.client_instance_id),
                     "rule_id": a.rule_id})
    return sorted(rows, key=lambda r: (str(r["key"]), str(r["client_type"]), not r["client_id"],  # unnamed last
                                       str(r["client_id"] or ""), str(r["client_instance_id"] or "")))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _who(rows: list[dict[str, object]]) -> str:
    """'a, b, c and 4 more': the first instances by client.id (their instance id when they have none)."""
    shown = [str(r["client_id"]) if r["client_id"] else f"instance {r['client_instance_id']}" for r in rows[:NAMED]]
    return ", ".join(shown) + (f" and {len(rows) - NAMED} more" if len(rows) > NAMED else "")


def _type_totals(mine: pd.DataFrame, versions: pd.DataFrame | None) -> dict[str, tuple[int, int | None]]:
    """Per client type in one cluster: (instances, Java client instances or None when unknown).

    From the client_versions result where it has the type (Java: the software name KIP-511 gives the Java client,
    apache-kafka-java); else the most instances any key of that type was reported by, Java share unknown.
    """
    out: dict[str, tuple[int, int | None]] = {
        str(t): (int(n), None) for t, n in mine.groupby("client_type")["instances"].max().items()}
    if versions is not None and not versions.empty and {"client_type", "instances"} <= set(versions.columns):
        names = versions.get("client_software_name", pd.Series([None] * len(versions), index=versions.index))
        java = versions.assign(_java=names.fillna("").astype(str).str.lower().str.contains("java"))
        for t, group in java.groupby("client_type"):
            out[str(t)] = (int(group["instances"].sum()), int(group.loc[group["_java"], "instances"].sum()))
    return out


def _key_rows(name: str, mine: pd.DataFrame, dist: pd.DataFrame | None, versions: pd.DataFrame | None,
              changes: list[KeyChange], named: list[dict[str, object]] | None) -> list[dict[str, object]]:
    """One row per (key change, client type present in the cluster): how many instances set it or rely on it.

    ``named``: the instances the rules name (None: the rules' results are not there).
    """
    totals = _type_totals(mine, versions)
    shares = {(str(t), str(k)): (int(i), int(d)) for t, k, i, d in
              zip(mine["client_type"], mine["key"], mine["instances"], mine["default_count"], strict=True)}
    values: dict[tuple[str, str], list[tuple[object, int]]] = {}
    if dist is not None and not dist.empty:
        for t, k, v, n in zip(dist["client_type"], dist["key"], dist["value"], dist["instance_count"], strict=True):
            values.setdefault((str(t), str(k)), []).append((v, int(n)))
    rows: list[dict[str, object]] = []
    for change in changes:
        total, java = totals.get(change.client_type, (0, None))
        if total <= 0 or java == 0:
            continue  # no instance of this client type, or none a Java client (the table holds the Java defaults)
        reporting, flagged = shares.get((change.client_type, change.key), (0, 0))
        spread = values.get((change.client_type, change.key))
        at_old: int | None
        at_new: int | None
        if not reporting:
            at_old = at_new = other = 0
        elif spread is None:
            at_old = at_new = None
            other = reporting - flagged  # without the values, what is not flagged default is set
        else:
            at_old = sum(n for v, n in spread if _same(v, change.before))
            at_new = sum(n for v, n in spread if change.kind == CHANGED and _same(v, change.after))
            other = sum(n for v, n in spread) - at_old - at_new
        who = [r for r in named or [] if r["key"] == change.key and r["client_type"] == change.client_type]
        if change.kind == REMOVED:
            affected = other  # a value other than its old default: a setting the target's clients ignore
        elif change.key == "metric.reporters":
            # 4.x run only the reporters listed (default JmxReporter): a list set without it loses JMX; the old
            # empty default is fine. The rule (which also knows auto.include.jmx.reporter) counts when it ran.
            if named is not None:
                affected = len(who)
            elif spread is not None:
                affected = sum(n for v, n in spread if _reporters_without_jmx(v))
            else:
                affected = other  # set, with or without JmxReporter: the values are not there
        else:
            affected = at_old if at_old is not None else flagged  # on the old default: a target client changes it
        rows.append({
            "cluster_name": name,
            "item": "client config keys removed" if change.kind == REMOVED else "client config defaults changed",
            "client_type": change.client_type, "key": change.key,
            "default_before": f"{_shown(change.before)} ({change.before_release})",
            "default_after": "(removed)" if change.kind == REMOVED else f"{_shown(change.after)} ({change.after_release})",
            "instances_reporting": reporting, "at_old_default": at_old, "at_new_default": at_new,
            "set_otherwise": other, "not_reporting": max(total - reporting, 0), "flagged_default": flagged,
            "affected": affected, "instances": total, "java_instances": java, "set_by": _who(who),
        })
    return rows


def _config_items(name: str, defaults: pd.DataFrame | None, dist: pd.DataFrame | None,
                  versions: pd.DataFrame | None, alerts: pd.DataFrame | None, target: str
                  ) -> tuple[list[tuple[str, str, str]], list[dict[str, object]], list[dict[str, object]]]:
    mine = defaults[defaults["cluster"] == name] if defaults is not None and not defaults.empty else None
    if mine is None or mine.empty:
        why = ("no client-config results for this cluster (no config source, or the analysis has not run)"
               if mine is None else "no client-config results for this cluster")
        return [("client config keys removed", UNKNOWN, why), ("client config defaults changed", UNKNOWN, why)], [], []
    changes = key_changes(target)
    mine_dist = dist[dist["cluster"] == name] if dist is not None and "cluster" in dist else None
    mine_versions = versions[versions["cluster"] == name] if versions is not None and "cluster" in versions else None
    named = _instance_rows(name, alerts, changes) if alerts is not None else None
    rows = _key_rows(name, mine, mine_dist, mine_versions, changes, named)
    frame = pd.DataFrame(rows, columns=list(KEY_COLUMNS))
    listed = {(r["client_type"], r["key"]) for r in rows}  # instances of a type the keys table skips are left out
    named = [r for r in named or [] if (r["client_type"], r["key"]) in listed]

    def by(r: pd.Series) -> str:
        return f" (set by {r['set_by']})" if r["set_by"] else ""

    def who(r: pd.Series) -> str:
        mixed = pd.notna(r["java_instances"]) and r["java_instances"] < r["instances"]
        return (f" ({int(r['java_instances'])} of the {int(r['instances'])} {r['client_type']} instances are Java "
                "clients)") if mixed else ""

    removed = frame[(frame["item"] == "client config keys removed") & (frame["instances_reporting"] > 0)]
    setting = [f"{r['key']} ({r['client_type']}, default {r['default_before']}): {int(r['affected'])} of "
               f"{int(r['instances_reporting'])} instances set it{who(r)}{by(r)}"
               for _, r in removed.iterrows() if r["affected"]]
    if setting:
        keys_item = (WARN, _joined(setting) + f" (gone in {target} clients: the setting is ignored there)")
    elif not removed.empty:
        keys_item = (PASS, f"{int(removed['instances_reporting'].sum())} reports of keys {target} clients no longer "
                           "define, all at their old default (nothing is lost): "
                           + ", ".join(sorted(set(removed["key"]))))
    else:
        keys_item = (PASS, f"no instance reports a key {target} clients no longer define "
                           f"({len({c.key for c in changes if c.kind == REMOVED})} such keys)")
    changed = frame[frame["item"] == "client config defaults changed"]
    reporters = changed[changed["key"] == "metric.reporters"]
    changed = changed[changed["key"] != "metric.reporters"]
    losing = [f"metric.reporters ({r['client_type']}): {int(r['affected'])} of {int(r['instances_reporting'])} "
              f"instances set it without JmxReporter{who(r)}{by(r)}: {target} clients run only the listed reporters, "
              "so their JMX metrics stop (add org.apache.kafka.common.metrics.JmxReporter to the list)"
              for _, r in reporters.iterrows() if r["affected"]]
    relying = losing + [f"{r['key']} ({r['client_type']}): {int(r['affected'])} of {int(r['instances_reporting'])} instances on "
               f"the old default {r['default_before']}, {target} clients default to {r['default_after']}{who(r)}"
               + (f"; {int(r['not_reporting'])} do not report it" if r["not_reporting"] else "")
               for _, r in changed.iterrows() if r["affected"]]
    keys_changed = sorted({c.key for c in changes if c.kind == CHANGED})
    if not keys_changed:
        default_item = (PASS, "no client default changes known for this target")
    elif relying:
        default_item = (WARN, _joined(relying) + " (they change when those clients move to the target; set the old "
                                                 "value explicitly to keep it)")
    elif changed.empty and reporters.empty:
        default_item = (PASS, "no Java client instance of a type whose defaults changed reports to this cluster "
                              f"({', '.join(keys_changed)}: the defaults of Apache Kafka's Java clients)")
    else:
        silent = int(changed["not_reporting"].sum())
        default_item = (PASS, "no instance reports the old default of a key whose default changed, nor sets "
                              f"metric.reporters without JmxReporter ({', '.join(keys_changed)})"
                              + (f"; {silent} instance-keys not reported" if silent else ""))
    return [("client config keys removed", *keys_item), ("client config defaults changed", *default_item)], rows, named


def readiness(clusters: pd.DataFrame, brokers: pd.DataFrame, inventory: pd.DataFrame, runs: pd.DataFrame, *,
              default_share: pd.DataFrame | None = None, distributions: pd.DataFrame | None = None,
              client_versions: pd.DataFrame | None = None, alerts: pd.DataFrame | None = None,
              groups: pd.DataFrame | None = None,
              groups_read: Collection[str] | None = None, target: str | None = None,
              now: datetime | None = None) -> Readiness:
    """The readiness of every cluster in `clusters` for `target` (see the module doc).

    `clusters`: latest cluster rows (cluster_name, zk_cluster_id); `brokers`: their latest broker rows;
    `inventory` / `runs`: the stored client inventory (backend/store/inventory_readers.py); `default_share`: the
    pipeline's results with a `cluster` name column (`distributions` and `client_versions` too, optional: the values
    instances report, and how many instances of each client type a cluster has; `alerts`: the config_alerts result,
    whose rules name the instances that set removed keys or metric.reporters without JmxReporter); `groups`: consumer groups (cluster_name, group_id, group_type
    classic|consumer|share|streams|unknown, protocol_type, state: backend.store.group_readers.read_groups), None when
    they are not collected; `groups_read`: the clusters whose groups have been read (the others are unverified).
    """
    target = target or default_target()
    if release_key(target) < (4, 0):
        raise ValueError(f"target {target} is not a 4.x release")
    now = now or datetime.now(UTC)
    items: list[dict[str, str]] = []
    verdicts: list[dict[str, object]] = []
    key_rows: list[dict[str, object]] = []
    instance_rows: list[dict[str, object]] = []
    for _, cluster in clusters.sort_values("cluster_name").iterrows():
        name = str(cluster["cluster_name"])
        mine = brokers[brokers["cluster_name"] == name] if not brokers.empty else brokers
        run_rows = runs[runs["cluster_name"] == name] if not runs.empty else runs
        run = run_rows.iloc[-1] if not run_rows.empty else None
        rows = inventory[inventory["cluster_name"] == name] if not inventory.empty else inventory
        config_items, config_rows, named = _config_items(name, default_share, distributions, client_versions, alerts,
                                                         target)
        key_rows += config_rows
        instance_rows += named
        checklist = [*_broker_items(cluster, mine, release_key(target)),
                     *_client_items(name, run, rows, mine, target, now),
                     _group_item(name, groups, groups_read),
                     *config_items]
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
    keys = pd.DataFrame(key_rows, columns=list(KEY_COLUMNS))
    counts = list(KEY_COLUMNS[6:-1])
    keys[counts] = keys[counts].astype("Int64")  # a count the results cannot tell stays <NA>, not a float
    keys = keys.sort_values(["cluster_name", "affected", "instances_reporting", "item", "key", "client_type"],
                            ascending=[True, False, False, True, True, True], kind="stable").reset_index(drop=True)
    return Readiness(target, pd.DataFrame(verdicts, columns=columns),
                     pd.DataFrame(items, columns=["cluster_name", "item", "status", "detail"]), keys,
                     pd.DataFrame(instance_rows, columns=list(INSTANCE_COLUMNS)))


def client_items_ready(report: Readiness, cluster: str) -> bool:
    """Whether the client items (protocol versions and software floor) of one cluster pass."""
    mine = report.items[(report.items["cluster_name"] == cluster)
                        & report.items["item"].isin(["removed protocol versions", "client software floor"])]
    return not mine.empty and set(mine["status"]) <= {PASS, WARN}
