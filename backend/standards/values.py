"""Values and versions as a policy compares them: requirements (equals, one of, range, unset) and release bounds.

Config values are compared as the pipeline counts them (docs/normalisation.md): surrounding blanks dropped,
booleans in any case as lower case, lists as `a,b` without blanks or brackets, and acks `-1` as `all`; two values
that both read as numbers compare as numbers (`2` equals `2.0`). A test of the pipeline's own
`normalize_value` holds this module to the same spellings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_BRACKETS = re.compile(r"^\[(.*)\]$", re.DOTALL)
_COMMA = re.compile(r"\s*,\s*")
_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")
INFINITE = 10**9
RF_TOKEN = "replication_factor"
# Keys where -1 means "no limit": compared as larger than any bound.
UNLIMITED_KEYS = frozenset({"retention.ms", "retention.bytes", "local.retention.ms", "local.retention.bytes",
                            "log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.retention.bytes",
                            "log.local.retention.ms", "log.local.retention.bytes"})


def normalize(key: str | None, value: object) -> str | None:
    """A value's comparable spelling (None stays None); see the module docstring."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    lowered = text.lower()
    if key == "acks" and lowered in ("-1", "all"):
        return "all"
    if lowered in ("true", "false"):
        return lowered
    bracketed = _BRACKETS.match(text)
    if bracketed is not None or "," in text:
        inner = bracketed.group(1) if bracketed is not None else text
        return ",".join(part for part in _COMMA.split(inner.strip())) if inner.strip() else ""
    return text


def number(value: object) -> float | None:
    """A value as a finite number, or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(str(value).strip())
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def same(key: str | None, a: object, b: object) -> bool:
    """Whether two values are the same setting (normalised; numbers as numbers)."""
    left, right = normalize(key, a), normalize(key, b)
    if left == right:
        return True
    x, y = number(left), number(right)
    return x is not None and y is not None and x == y


def shown(value: object) -> str:
    """A bound or value as policy text shows it (2, not 2.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: a memo key of the verdict per value
class Requirement:
    """What a value must be: equals / not_equals / one_of / not_one_of / min / max / unset (any combination)."""

    equals: str | None = None
    not_equals: str | None = None
    one_of: tuple[str, ...] | None = None
    not_one_of: tuple[str, ...] | None = None
    min: float | str | None = None  # a number, or "replication_factor" (topic configs)
    max: float | str | None = None
    unset: bool | None = None  # true: must not be set (Kafka's default); false: must be set explicitly

    def text(self, key: str = "value") -> str:
        """The requirement in words, e.g. 'min.insync.replicas >= 2'."""
        parts = []
        if self.unset is True:
            parts.append(f"{key} unset (default)")
        if self.unset is False:
            parts.append(f"{key} set explicitly")
        if self.equals is not None:
            parts.append(f"{key} = {self.equals}")
        if self.not_equals is not None:
            parts.append(f"{key} != {self.not_equals}")
        if self.one_of is not None:
            parts.append(f"{key} one of {', '.join(self.one_of)}")
        if self.not_one_of is not None:
            parts.append(f"{key} not one of {', '.join(self.not_one_of)}")
        if self.min is not None:
            parts.append(f"{key} >= {shown(self.min)}")
        if self.max is not None:
            parts.append(f"{key} <= {shown(self.max)}")
        return " and ".join(parts) or f"{key}: anything"

    @property
    def needs_value(self) -> bool:
        """Whether the requirement reads the value (not only whether it is set)."""
        return any(v is not None for v in (self.equals, self.not_equals, self.one_of, self.not_one_of, self.min,
                                           self.max))

    def test(self, key: str | None, value: object, *, is_set: bool = True, rf: int | None = None) -> tuple[bool, str]:
        """(passes, why it fails) for a present value; ``is_set`` False: at Kafka's default (not set anywhere)."""
        if self.unset is True and is_set:
            return False, "set explicitly, wanted unset"
        if self.unset is False and not is_set:
            return False, "at its default, wanted set explicitly"
        if self.equals is not None and not same(key, value, self.equals):
            return False, f"wanted {self.equals}"
        if self.not_equals is not None and same(key, value, self.not_equals):
            return False, f"must not be {self.not_equals}"
        if self.one_of is not None and not any(same(key, value, v) for v in self.one_of):
            return False, f"wanted one of {', '.join(self.one_of)}"
        if self.not_one_of is not None and any(same(key, value, v) for v in self.not_one_of):
            return False, f"must not be one of {', '.join(self.not_one_of)}"
        for bound, low in ((self.min, True), (self.max, False)):
            if bound is None:
                continue
            limit = float(rf) if bound == RF_TOKEN and rf is not None else number(bound)
            if limit is None:
                return False, f"{bound} is not known for this topic"
            seen = number(value)
            if seen is None:
                return False, "not a number"
            if seen == -1 and key in UNLIMITED_KEYS:
                seen = math.inf
            if (seen < limit) if low else (seen > limit):
                return False, f"wanted {'>=' if low else '<='} {shown(limit)}"
        return True, ""


# ------------------------------------------------------------------------------------------------ versions


def version_bounds(text: str | None) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """The releases a version text covers: '3.9.2' -> (3.9.2, 3.9.2); '3.9' -> (3.9.0, 3.9.inf); None if unparsable."""
    match = _VERSION.match((text or "").strip())
    if match is None:
        return None
    major = int(match.group(1))
    minor, patch = match.group(2), match.group(3)
    low = (major, int(minor or 0), int(patch or 0))
    high = (major, int(minor) if minor is not None else INFINITE, int(patch) if patch is not None else INFINITE)
    return low, high


def version_text(bound: tuple[int, int, int]) -> str:
    """A bound as text ('3.9.2'; an open part as 'x')."""
    return ".".join("x" if part >= INFINITE else str(part) for part in bound)


@dataclass(frozen=True)
class VersionVerdict:
    """Where a version (or a guessed range) stands against a floor or ceiling: pass, violation or unknown."""

    outcome: str  # pass / violation / unknown
    reason: str


def against_floor(low: tuple[int, int, int], high: tuple[int, int, int] | None,
                  floor: tuple[int, int, int], label: str) -> VersionVerdict:
    """A range [low, high] (high None: open) against a floor: all above passes, all below violates, else unknown."""
    if low >= floor:
        return VersionVerdict("pass", "")
    if high is not None and high < floor:
        return VersionVerdict("violation", f"{label} is below the floor {version_text(floor)}")
    return VersionVerdict("unknown", f"{label} straddles the floor {version_text(floor)}: it may be below it")


def against_ceiling(low: tuple[int, int, int], high: tuple[int, int, int] | None,
                    ceiling: tuple[int, int, int], label: str) -> VersionVerdict:
    """A range [low, high] against a ceiling (the highest release allowed)."""
    if high is not None and high <= ceiling:
        return VersionVerdict("pass", "")
    if low > ceiling:
        return VersionVerdict("violation", f"{label} is above the ceiling {version_text(ceiling)}")
    return VersionVerdict("unknown", f"{label} straddles the ceiling {version_text(ceiling)}: it may be above it")
