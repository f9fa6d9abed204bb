"""Guess a broker's software and release range from its ApiVersions table.

The release table (versions_table.json, built by versions_build.py) holds, per Apache Kafka
release 0.10.0-4.4 and per broker family ("zk" = ZooKeeper mode, "kraft" = KRaft broker),
the (min, max) version of every api key a broker advertises. A guess is always a range of
releases with evidence; it is never presented as a reported version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ApiTable = Mapping[int, tuple[int, int]]

TABLE_PATH = Path(__file__).with_name("versions_table.json")

# Inter-broker keys only ZooKeeper-mode brokers advertise (LeaderAndIsr, StopReplica,
# UpdateMetadata); Kafka 4.0 removed them with ZooKeeper mode.
_ZK_ONLY_KEYS = (4, 5, 6)
_DESCRIBE_QUORUM = 55
# Keys a broker advertises only when a feature or plugin is enabled (consumer/share/streams
# group protocols, client telemetry). Having one is evidence; lacking one is not.
GATED_KEYS = frozenset({68, 69, 71, 72, 76, 77, 78, 79, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93})
_API_VERSIONS = 18

APACHE = "Apache Kafka"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class ReleaseRow:
    """One release's advertised api table in one broker family."""

    release: str
    family: str
    apis: dict[int, tuple[int, int]]
    source: str


@dataclass(frozen=True)
class VersionGuess:
    """A fingerprint guess: a release range, never a fact.

    ``version_max`` None with ``version_min`` set means "this release or newer".
    """

    software: str
    version_min: str | None
    version_max: str | None
    confidence: float
    evidence: tuple[str, ...] = field(default_factory=tuple)
    family: str | None = None
    provenance: str = "guessed"

    def label(self) -> str:
        """Human range such as "3.7–3.9", "≥ 4.4" or "3.9" (still a guess)."""
        if self.version_min is None:
            return "unknown"
        if self.version_max is None:
            return f"≥ {self.version_min}"
        if self.version_min == self.version_max:
            return self.version_min
        return f"{self.version_min}–{self.version_max}"


@lru_cache(maxsize=1)
def release_rows() -> tuple[ReleaseRow, ...]:
    """All rows of versions_table.json, oldest release first."""
    data = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    rows = []
    for row in data["releases"]:
        apis = {int(k): (int(v[0]), int(v[1])) for k, v in row["apis"].items()}
        rows.append(ReleaseRow(row["release"], row["family"], apis, row["source"]))
    return tuple(rows)


def release_key(release: str) -> tuple[int, ...]:
    """Sort key for release strings like "0.10.2" or "3.9"."""
    return tuple(int(p) for p in release.split("."))


@lru_cache(maxsize=2)
def family_rows(family: str) -> tuple[ReleaseRow, ...]:
    """Rows of one family in release order; KRaft starts from the ZooKeeper rows before 2.8."""
    rows = [r for r in release_rows() if r.family == family]
    if family == "kraft":
        first = rows[0]
        older = [
            ReleaseRow(r.release, "kraft", {k: v for k, v in r.apis.items() if k in first.apis},
                       r.source)
            for r in release_rows()
            if r.family == "zk" and release_key(r.release) < release_key(first.release)
        ]
        rows = older + rows
    return tuple(sorted(rows, key=lambda r: release_key(r.release)))


def _introduced(prev: ReleaseRow | None, row: ReleaseRow) -> list[tuple[int, str, int]]:
    """Changes a release brought: (key, "max"|"min", version) checks."""
    out: list[tuple[int, str, int]] = []
    for key, (lo, hi) in sorted(row.apis.items()):
        before = prev.apis.get(key) if prev else None
        if before is None or hi > before[1]:
            out.append((key, "max", hi))
        if before is not None and lo > before[0]:
            out.append((key, "min", lo))
    return out


def _meets(table: ApiTable, key: int, kind: str, version: int) -> bool:
    have = table.get(key)
    if have is None:
        return False
    return have[1] >= version if kind == "max" else have[0] >= version


def detect_family(table: ApiTable) -> str:
    """"zk" when the broker advertises ZooKeeper-only inter-broker keys, else "kraft"."""
    return "zk" if any(k in table for k in _ZK_ONLY_KEYS) else "kraft"


def _beyond_newest(table: ApiTable, newest: ReleaseRow) -> list[int]:
    return sorted(
        k for k, (_lo, hi) in table.items()
        if k not in newest.apis or hi > newest.apis[k][1]
    )


def _vendor_hint(table: ApiTable, family: str, matched: list[ReleaseRow]) -> tuple[str, str] | None:
    """Modest non-Apache recognition; returns (software, evidence) or None.

    ``matched`` are the Apache releases the table resembles.
    """
    api_max = table.get(_API_VERSIONS, (0, 0))[1]
    produce_max = table.get(0, (0, 0))[1]
    offers_quorum = all(_DESCRIBE_QUORUM in row.apis for row in matched)
    if family == "kraft" and _DESCRIBE_QUORUM not in table and produce_max >= 9 and offers_quorum:
        # Apache KRaft brokers offer DescribeQuorum from 3.3 on (2.8 too; 3.0-3.2 forward it
        # and do not offer it): a table like 3.3+ without it is another implementation.
        if api_max <= 3:
            return ("Redpanda or another Kafka-compatible broker",
                    "no DescribeQuorum and no ZooKeeper inter-broker keys, ApiVersions ≤ v3: "
                    "the pattern of Redpanda, not of an Apache Kafka broker")
        return ("Kafka-compatible broker (not Apache Kafka)",
                "no DescribeQuorum and no ZooKeeper inter-broker keys with Produce "
                f"v{produce_max}: no Apache Kafka release advertises this")
    if family == "kraft" and produce_max > 0 and produce_max < 9:
        # KRaft brokers appeared with Produce v9 (2.8); older Produce without ZK keys is not Apache.
        return ("Kafka-compatible broker (not Apache Kafka)",
                f"Produce max v{produce_max} (pre-2.8) without ZooKeeper inter-broker keys: "
                "no Apache Kafka broker of that age lacks them (e.g. Event Hubs, kfake, Tansu)")
    return None


def guess(table: ApiTable) -> VersionGuess:
    """Match an ApiVersions table (api_key -> (min, max)) against the Apache Kafka releases."""
    if not table:
        return VersionGuess(UNKNOWN, None, None, 0.0, ("no ApiVersions answer",), None, "unknown")
    family = detect_family(table)
    rows = family_rows(family)
    statuses: list[tuple[ReleaseRow, float | None]] = []
    prev: ReleaseRow | None = None
    for row in rows:
        checks = [c for c in _introduced(prev, row) if c[0] not in GATED_KEYS or c[0] in table]
        if checks:
            met = sum(_meets(table, k, kind, v) for k, kind, v in checks)
            statuses.append((row, met / len(checks)))
        else:
            statuses.append((row, None))
        prev = row

    evidence: list[str] = [
        "ZooKeeper-mode broker (advertises LeaderAndIsr/StopReplica/UpdateMetadata)"
        if family == "zk" else "no ZooKeeper inter-broker keys: KRaft broker (or non-Apache)"
    ]
    has = [i for i, (_r, ratio) in enumerate(statuses) if ratio is not None and ratio >= 0.5]
    if not has:
        return VersionGuess(UNKNOWN, None, None, 0.05,
                            (*evidence, "matches no Apache Kafka release ≥ 0.10.0"), family,
                            "unknown")
    lo_i = has[-1]
    hi_i = len(statuses) - 1
    for j in range(lo_i + 1, len(statuses)):
        ratio = statuses[j][1]
        if ratio is not None and ratio < 0.5:
            hi_i = j - 1
            break
    else:
        hi_i = len(statuses) - 1

    low_row = statuses[lo_i][0]
    evidence.append(f"has what {low_row.release} introduced ("
                    f"{_describe(_introduced(statuses[lo_i - 1][0] if lo_i else None, low_row))})")
    if hi_i + 1 < len(statuses):
        nxt = statuses[hi_i + 1][0]
        missing = [c for c in _introduced(statuses[hi_i][0], nxt)
                   if not _meets(table, *c) and (c[0] not in GATED_KEYS or c[0] in table)]
        evidence.append(f"lacks what {nxt.release} introduced ({_describe(missing)})")

    confidence = 0.9
    ratios = [ratio for _row, ratio in statuses]
    skipped = [statuses[i][0].release for i in range(lo_i)
               if (ratio := ratios[i]) is not None and ratio < 0.5]
    if skipped:
        confidence -= 0.15 * len(skipped)
        evidence.append(f"but lacks changes of earlier releases {', '.join(skipped)}")
    partial = [statuses[i][0].release for i in range(hi_i + 1)
               if (ratio := ratios[i]) is not None and 0 < ratio < 1]
    if partial:
        confidence -= 0.03 * len(partial)
        evidence.append(f"partial match for {', '.join(partial)}")
    differing = sorted(k for k in set(table) | set(low_row.apis)
                       if table.get(k) != low_row.apis.get(k)
                       and (k not in GATED_KEYS or k in table))
    if differing:
        confidence -= min(0.3, 0.02 * len(differing))
        evidence.append(f"{len(differing)} APIs differ from {low_row.release}'s table: "
                        f"{_names(differing)}")

    version_min: str | None = low_row.release
    version_max: str | None = statuses[hi_i][0].release
    newest = rows[-1]
    if hi_i == len(statuses) - 1:
        extra = _beyond_newest(table, newest)
        if family == "zk":
            evidence.append("ZooKeeper mode ended with 3.9 (KIP-500, removed in 4.0)")
        elif extra:
            version_max = None
            evidence.append(f"advertises more than {newest.release} ({_names(extra)}): "
                            "a newer release than this table knows")
    if family == "kraft":
        evidence.extend(_kip896_evidence(table, rows))

    software = APACHE
    matched = [statuses[i][0] for i in range(lo_i, hi_i + 1)]
    hint = _vendor_hint(table, family, matched)
    if hint is not None:
        software, why = hint
        evidence.append(why)
        evidence.append("release range is the Apache Kafka API level it resembles")
        confidence = min(confidence, 0.4)
    elif len(skipped) >= 2 or len(differing) > max(8, len(table) // 3):
        software = "Kafka-compatible broker (unrecognised)"
        confidence = min(confidence, 0.3)
    return VersionGuess(software, version_min, version_max, round(max(0.05, confidence), 2),
                        tuple(evidence), family, "guessed")


def _kip896_evidence(table: ApiTable, rows: tuple[ReleaseRow, ...]) -> list[str]:
    """Kafka 4.0 stopped serving old versions of many keys (KIP-896): a strong 3.x/4.x signal."""
    first4 = next((r for r in rows if release_key(r.release) >= (4, 0)), None)
    if first4 is None:
        return []
    raised = [(k, lo) for k, (lo, _hi) in sorted(first4.apis.items()) if lo > 0 and k in table]
    if not raised:
        return []
    met = [(k, lo) for k, lo in raised if table[k][0] >= lo]
    example = ", ".join(f"{api_label(k)} min v{lo}" for k, lo in (met or raised)[:2])
    if len(met) * 2 >= len(raised):
        return [f"old protocol versions removed on {len(met)} of {len(raised)} keys ({example}): "
                "Kafka 4.0+ (KIP-896)"]
    return [f"old protocol versions still served ({example} not yet required): before 4.0 (KIP-896)"]


@lru_cache(maxsize=1)
def _api_names() -> dict[int, str]:
    data = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return {int(k): str(v) for k, v in data.get("api_names", {}).items()}


def api_name(key: int) -> str:
    """The name of a Kafka API key ('Metadata' for 3), or '' when no release in the table names it."""
    return _api_names().get(key, "")


def api_label(key: int) -> str:
    """An API key for evidence text: its name ('DescribeQuorum'), or 'key N' when no release names it."""
    return api_name(key) or f"key {key}"


def _names(keys: list[int], limit: int = 12) -> str:
    parts = [api_label(k) for k in keys[:limit]]
    if len(keys) > limit:
        parts.append(f"+{len(keys) - limit} more")
    return ", ".join(parts)


def _describe(checks: list[tuple[int, str, int]], limit: int = 4) -> str:
    parts = [f"{api_label(k)} {kind} v{v}" for k, kind, v in checks[:limit]]
    if len(checks) > limit:
        parts.append(f"+{len(checks) - limit} more")
    return ", ".join(parts) or "nothing"
