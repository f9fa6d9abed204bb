"""The policy file: `[[policies]]` (id, title, severity, a tag selector and one check) and `[[waivers]]`.

`load_policies(path)` / `parse_policies(text, source=)` return a `PolicySet` or raise `PolicyFileError` whose
message names the file, the line, the policy (or waiver) and the key, and says why (docs/standards.md has the
format). Nothing here reads the lake or a cluster.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from backend.standards.values import RF_TOKEN, Requirement, number, version_bounds

SEVERITIES = ("critical", "warning", "info")
CHECKS = ("broker_config", "topic_config", "topic_shape", "cluster", "consumer_groups", "client_config",
          "client_software")
MODES = ("kraft", "zookeeper")
CLIENT_TYPES = ("producer", "consumer", "share_consumer", "admin", "streams")
GROUP_FIELDS = ("group_type", "state", "status", "protocol_type")
TOPIC_FIELDS = ("replication_factor", "partitions")
OUTCOME_CHOICES = ("unknown", "pass", "violation")
SOFTWARE_SOURCES = ("client_configs", "inventory")
MAX_POLICIES = 1_000
MAX_WAIVERS = 10_000
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
_REQUIREMENT_KEYS = ("equals", "not_equals", "one_of", "not_one_of", "min", "max", "unset")
_COMMON_KEYS = ("id", "title", "severity", "description", "doc_url", "effective", "select", "check")
_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "broker_config": ("config", "require"),
    "topic_config": ("config", "require", "where", "topics", "exclude_topics", "include_internal"),
    "topic_shape": ("replication_factor", "partitions", "where", "topics", "exclude_topics", "include_internal"),
    "cluster": ("mode", "version_min", "version_max"),
    "consumer_groups": ("group_type", "state", "status", "protocol_type", "groups", "exclude_groups"),
    "client_config": ("client_type", "key", "require", "unreported"),
    "client_software": ("floors", "source", "unnamed", "client_type"),
}
_WAIVER_KEYS = ("policy", "cluster", "topic", "group", "owner", "reason", "expires")


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the file, line, policy or waiver, key and why."""


# -------------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class TagTerm:
    """One tag of a selector: the values it may have (None: any value, the tag present), or may not have."""

    tag: str
    values: frozenset[str] | None
    negate: bool = False

    def matches(self, tags: Mapping[str, str]) -> bool:
        """Whether a cluster's tags satisfy this term."""
        value = tags.get(self.tag)
        hit = value is not None and (self.values is None or str(value) in self.values)
        return not hit if self.negate else hit


@dataclass(frozen=True)
class TagSelector:
    """Every term must hold; no term selects every cluster."""

    terms: tuple[TagTerm, ...] = ()

    def matches(self, tags: Mapping[str, str]) -> bool:
        """Whether a cluster with these tags is held to the policy."""
        return all(t.matches(tags) for t in self.terms)

    def text(self) -> str:
        """The selector in words (e.g. 'env = prod, team not in {sandbox}'); 'every cluster' when empty."""
        parts = []
        for t in self.terms:
            if t.values is None:
                parts.append(f"no tag {t.tag}" if t.negate else f"tag {t.tag} set")
            else:
                shown = next(iter(t.values)) if len(t.values) == 1 else "{" + ", ".join(sorted(t.values)) + "}"
                op = ("!=" if t.negate else "=") if len(t.values) == 1 else ("not in" if t.negate else "in")
                parts.append(f"{t.tag} {op} {shown}")
        return ", ".join(parts) or "every cluster"


@dataclass(frozen=True)
class NamePatterns:
    """Topic or group name patterns: shell globs, or regular expressions written as 're:<expression>'."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    _compiled: tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]] = field(
        default=((), ()), compare=False, repr=False)

    @staticmethod
    def build(include: tuple[str, ...], exclude: tuple[str, ...]) -> NamePatterns:
        """Compile the patterns (a bad regular expression raises re.error)."""
        def one(p: str) -> re.Pattern[str]:
            return re.compile(p[3:]) if p.startswith("re:") else re.compile(r"\A" + fnmatch.translate(p))
        return NamePatterns(include, exclude, (tuple(map(one, include)), tuple(map(one, exclude))))

    def matches(self, name: str) -> bool:
        """Included (every name when no include pattern) and not excluded (globs match whole names, a regular
        expression anywhere in the name unless it anchors itself)."""
        inc, exc = self._compiled
        if inc and not any(p.search(name) for p in inc):
            return False
        return not exc or not any(p.search(name) for p in exc)

    def text(self) -> str:
        """The patterns in words ('' when they select every name)."""
        parts = []
        if self.include:
            parts.append("names " + ", ".join(self.include))
        if self.exclude:
            parts.append("except " + ", ".join(self.exclude))
        return "; ".join(parts)


@dataclass(frozen=True)
class Policy:
    """One policy of the file: who it applies to, what it checks, and how bad a violation is."""

    id: str
    title: str
    severity: str
    check: str
    select: TagSelector
    params: Mapping[str, Any]  # the check's own keys, validated (Requirement, NamePatterns, ... as values)
    description: str = ""
    doc_url: str = ""
    effective: datetime | None = None  # before it, findings are "upcoming" (not violations yet)
    line: int = 0
    digest: str = ""  # of the policy's definition: results computed with another definition are stale

    @property
    def rule(self) -> str:
        """The incident rule id of this policy."""
        return f"policy:{self.id}"

    @functools.cached_property
    def wanted_text(self) -> str:
        """What the policy wants, in one line (computed once)."""
        return self.wanted()

    def wanted(self) -> str:
        """What the policy wants, in one line."""
        p = self.params
        if self.check in ("broker_config", "topic_config", "client_config"):
            key = p.get("config") or p.get("key")
            text = p["require"].text(str(key))
            if self.check == "topic_config" and p.get("where"):
                text += " where " + " and ".join(r.text(k) for k, r in p["where"])
            if self.check == "client_config":
                text = f"{'/'.join(p['client_type'])}: {text}"
            return text
        if self.check == "topic_shape":
            parts = [r.text(k) for k in TOPIC_FIELDS if (r := p.get(k)) is not None]
            text = " and ".join(parts)
            return text + (" where " + " and ".join(r.text(k) for k, r in p["where"]) if p.get("where") else "")
        if self.check == "cluster":
            parts = []
            if p.get("mode"):
                parts.append(f"{'KRaft' if p['mode'] == 'kraft' else 'ZooKeeper'} mode")
            if p.get("version_min"):
                parts.append(f"brokers at {p['version_min'][0]} or later")
            if p.get("version_max"):
                parts.append(f"brokers at {p['version_max'][0]} or earlier")
            return " and ".join(parts)
        if self.check == "consumer_groups":
            return " and ".join(p[k].text(k) for k in GROUP_FIELDS if p.get(k) is not None)
        floors = ", ".join(f"{name} >= {text}" for name, (text, _b) in sorted(p["floors"].items()))
        return f"client software {floors}"


@dataclass(frozen=True)
class Waiver:
    """A policy waived for a cluster, or one topic or group of it, by an owner, for a reason, until a date."""

    policy: str
    cluster: str
    owner: str
    reason: str
    expires: datetime
    topic: str | None = None
    group: str | None = None
    line: int = 0

    def covers(self, cluster: str, subject_kind: str, name: str | None) -> bool:
        """Whether this waiver names the cluster and (when it names one) the topic or group of an item."""
        if cluster != self.cluster:
            return False
        if self.topic is not None:
            return subject_kind == "topic" and name is not None and fnmatch.fnmatchcase(name, self.topic)
        if self.group is not None:
            return subject_kind == "group" and name == self.group
        return True

    def active(self, now: datetime) -> bool:
        """In force (now before its expiry)."""
        return now < self.expires

    def text(self) -> str:
        """'owner: reason (until 2026-09-30)'."""
        return f"{self.owner}: {self.reason} (until {self.expires:%Y-%m-%d %H:%M} UTC)"

    @property
    def scope_text(self) -> str:
        """What it waives: 'cluster c', 'topic t on c' or 'group g on c'."""
        if self.topic is not None:
            return f"topic {self.topic} on {self.cluster}"
        if self.group is not None:
            return f"group {self.group} on {self.cluster}"
        return f"cluster {self.cluster}"


@dataclass(frozen=True)
class PolicySet:
    """A validated policy file."""

    policies: tuple[Policy, ...] = ()
    waivers: tuple[Waiver, ...] = ()
    source: str = ""
    digest: str = ""
    text: str = ""

    def policy(self, policy_id: str) -> Policy:
        """The policy with this id."""
        for p in self.policies:
            if p.id == policy_id:
                return p
        raise KeyError(policy_id)

    def waivers_for(self, policy_id: str, cluster: str) -> tuple[Waiver, ...]:
        """The waivers (in force or not) of one policy on one cluster."""
        return tuple(w for w in self.waivers if w.policy == policy_id and w.cluster == cluster)

    def catalog(self) -> list[dict[str, Any]]:
        """The policies as plain rows (id, title, severity, check, selector, wanted, description, doc_url, effective)."""
        return [{"policy_id": p.id, "title": p.title, "severity": p.severity, "check": p.check,
                 "selector": p.select.text(), "wanted": p.wanted(), "description": p.description,
                 "doc_url": p.doc_url, "effective": p.effective.isoformat() if p.effective else None, "line": p.line}
                for p in self.policies]


EMPTY = PolicySet()


# ------------------------------------------------------------------------------------------------ the parser


def load_policies(path: str | Path) -> PolicySet:
    """Read and validate a policy file; raise PolicyFileError naming file, line, key and why."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PolicyFileError(f"{path}: cannot read the policy file: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PolicyFileError(f"{path}:{line}: the policy file is not UTF-8 text (byte {exc.start + 1}); save it as "
                              "UTF-8") from None
    return parse_policies(text, source=str(path))


def parse_policies(text: str, *, source: str = "<policies>") -> PolicySet:
    """Validate policy-file text; see load_policies."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_of_message(str(exc))
        raise PolicyFileError(f"{source}:{line}: not valid TOML: {exc}") from None
    lines = _Lines(text)
    unknown = sorted(set(raw) - {"policies", "waivers"})
    if unknown:
        raise PolicyFileError(f"{source}:{lines.top(unknown[0])}: key '{unknown[0]}': unknown key (a policy file holds "
                              "[[policies]] and [[waivers]] tables)")
    policies_raw = raw.get("policies", [])
    waivers_raw = raw.get("waivers", [])
    for name, value in (("policies", policies_raw), ("waivers", waivers_raw)):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise PolicyFileError(f"{source}:{lines.top(name)}: key '{name}': must be [[{name}]] tables")
    if len(policies_raw) > MAX_POLICIES:
        raise PolicyFileError(f"{source}: {len(policies_raw)} policies; at most {MAX_POLICIES} are allowed")
    if len(waivers_raw) > MAX_WAIVERS:
        raise PolicyFileError(f"{source}: {len(waivers_raw)} waivers; at most {MAX_WAIVERS} are allowed")
    policies: list[Policy] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(policies_raw):
        ctx = _Ctx(source, lines, "policies", index, table)
        policy = _policy(ctx)
        if policy.id in seen:
            raise ctx.error("id", f"duplicate policy id (first defined in policy #{seen[policy.id] + 1})")
        seen[policy.id] = index
        policies.append(policy)
    waivers = []
    for index, table in enumerate(waivers_raw):
        ctx = _Ctx(source, lines, "waivers", index, table)
        waivers.append(_waiver(ctx, seen))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return PolicySet(tuple(policies), tuple(waivers), source, digest, text)


def _line_of_message(message: str) -> int | str:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else "?"


class _Lines:
    """The line of each key of each [[policies]] / [[waivers]] table (inline tables and sub-tables included)."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?$")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=")

    def __init__(self, text: str) -> None:
        self.keys: dict[tuple[str | None, int, str], int] = {}
        self.starts: dict[tuple[str, int], int] = {}
        counts: dict[str, int] = {}
        table: str | None = None
        index = -1
        prefix = ""
        for lineno, line in enumerate(text.splitlines(), start=1):
            header = self._HEADER.match(line)
            if header:
                name = _unquote(header.group(2))
                if header.group(1) == "[[" and name in ("policies", "waivers"):
                    table, prefix = name, ""
                    index = counts[name] = counts.get(name, -1) + 1
                    self.starts[(name, index)] = lineno
                elif table is not None and name.startswith(table + "."):
                    prefix = name[len(table) + 1:] + "."
                    self.keys.setdefault((table, index, prefix[:-1]), lineno)
                else:
                    table, prefix, index = None, name + ".", -1
                continue
            key = self._KEY.match(line)
            if not key:
                continue
            full = prefix + _unquote(key.group(1))
            self.keys.setdefault((table, index, full), lineno)
            for sub in re.findall(r"([A-Za-z0-9_-]+|\"[^\"]*\")\s*=", line.split("=", 1)[1]):
                self.keys.setdefault((table, index, f"{full}.{_unquote(sub)}"), lineno)

    def find(self, table: str, index: int, key: str) -> int | str:
        """The line of a (dotted) key in one table, else of its nearest parent key, else the table's header."""
        parts = key.split(".")
        for n in range(len(parts), 0, -1):
            found = self.keys.get((table, index, ".".join(parts[:n])))
            if found is not None:
                return found
        return self.starts.get((table, index), "?")

    def top(self, key: str) -> int | str:
        """The line of a top-level key or table."""
        for (table, _i, name), line in self.keys.items():
            if table is None and (name == key or name.startswith(key + ".")):
                return line
        return self.starts.get((key, 0), "?")


def _unquote(text: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in text.split("."))


class _Ctx:
    """Where one table of the file is, to name it in errors."""

    def __init__(self, source: str, lines: _Lines, table: str, index: int, raw: dict[str, Any]) -> None:
        self.source, self.lines, self.table, self.index, self.raw = source, lines, table, index, raw
        ident = raw.get("id") if table == "policies" else raw.get("policy")
        shown = f"'{ident}' " if isinstance(ident, str) and len(ident) <= 64 else ""
        self.where = (f"policy {shown}(#{index + 1})" if table == "policies" else f"waiver {'of ' + shown if shown else ''}"
                      f"(#{index + 1})")

    def error(self, key: str, why: str) -> PolicyFileError:
        line = self.lines.find(self.table, self.index, key) if key else self.lines.starts.get((self.table, self.index), "?")
        return PolicyFileError(f"{self.source}:{line}: {self.where}: key '{key or '(table)'}': {why}")

    @property
    def header(self) -> int:
        line = self.lines.starts.get((self.table, self.index), 0)
        return line if isinstance(line, int) else 0


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, datetime | date | time):
        return "a date/time"
    return type(value).__name__


def _string(ctx: _Ctx, key: str, value: object, *, required: bool = True, max_len: int = 500) -> str | None:
    if value is None:
        if required:
            raise ctx.error(key, "required")
        return None
    if not isinstance(value, str):
        raise ctx.error(key, f"must be a string, got {_type_name(value)}")
    if required and not value.strip():
        raise ctx.error(key, "must not be empty")
    if len(value) > max_len:
        raise ctx.error(key, f"longer than {max_len} characters")
    return value


def _scalar_text(ctx: _Ctx, key: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value
    raise ctx.error(key, f"must be a string, number or boolean, got {_type_name(value)}")


def _requirement(ctx: _Ctx, key: str, value: object, *, allow_rf: bool = False) -> Requirement:
    """A requirement table, or a bare value meaning `equals`."""
    if not isinstance(value, dict):
        if isinstance(value, list):
            raise ctx.error(key, "a list needs a word: { one_of = [...] } or { not_one_of = [...] }")
        return Requirement(equals=_scalar_text(ctx, key, value))
    unknown = sorted(set(value) - set(_REQUIREMENT_KEYS))
    if unknown:
        raise ctx.error(f"{key}.{unknown[0]}", f"unknown key (a requirement takes {', '.join(_REQUIREMENT_KEYS)})")
    if not value:
        raise ctx.error(key, f"empty requirement (give one of {', '.join(_REQUIREMENT_KEYS)})")
    out: dict[str, Any] = {}
    for word in ("equals", "not_equals"):
        if word in value:
            out[word] = _scalar_text(ctx, f"{key}.{word}", value[word])
    for word in ("one_of", "not_one_of"):
        if word in value:
            items = value[word]
            if not isinstance(items, list) or not items:
                raise ctx.error(f"{key}.{word}", "must be a non-empty list")
            out[word] = tuple(_scalar_text(ctx, f"{key}.{word}", v) for v in items)
    for word in ("min", "max"):
        if word in value:
            bound = value[word]
            if allow_rf and bound == RF_TOKEN:
                out[word] = RF_TOKEN
            elif isinstance(bound, bool) or number(bound) is None or isinstance(bound, str):
                hint = f" or \"{RF_TOKEN}\"" if allow_rf else ""
                raise ctx.error(f"{key}.{word}", f"must be a number{hint}, got {_type_name(bound)}")
            else:
                out[word] = float(bound)
    if isinstance(out.get("min"), float) and isinstance(out.get("max"), float) and out["min"] > out["max"]:
        raise ctx.error(f"{key}.min", f"min {out['min']:g} is above max {out['max']:g}: nothing can pass")
    if "unset" in value:
        if not isinstance(value["unset"], bool):
            raise ctx.error(f"{key}.unset", f"must be true or false, got {_type_name(value['unset'])}")
        out["unset"] = value["unset"]
    return Requirement(**out)


def _patterns(ctx: _Ctx, include_key: str, exclude_key: str) -> NamePatterns:
    lists = []
    for key in (include_key, exclude_key):
        value = ctx.raw.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ctx.error(key, "must be a list of name patterns (globs such as \"orders.*\", or \"re:<regex>\")")
        for pattern in value:
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as exc:
                    raise ctx.error(key, f"{pattern!r} is not a regular expression: {exc}") from None
        lists.append(tuple(value))
    return NamePatterns.build(lists[0], lists[1])


def _where(ctx: _Ctx, fields_allowed: tuple[str, ...] | None) -> tuple[tuple[str, Requirement], ...]:
    value = ctx.raw.get("where")
    if value is None:
        return ()
    if not isinstance(value, dict) or not value:
        raise ctx.error("where", "must be a table of conditions, e.g. where = { replication_factor = { min = 3 } }")
    out = []
    for name, cond in value.items():
        if fields_allowed is not None and name not in fields_allowed:
            raise ctx.error(f"where.{name}", f"unknown condition (allowed: {', '.join(fields_allowed)})")
        if name not in TOPIC_FIELDS and not _CONFIG_NAME.match(name):
            raise ctx.error(f"where.{name}", "not a config name")
        out.append((name, _requirement(ctx, f"where.{name}", cond)))
    return tuple(out)


def _config_name(ctx: _Ctx, key: str) -> str:
    name = _string(ctx, key, ctx.raw.get(key), max_len=200) or ""
    if not _CONFIG_NAME.match(name):
        raise ctx.error(key, f"{name!r} is not a config name")
    return name


def _selector(ctx: _Ctx) -> TagSelector:
    value = ctx.raw.get("select", {})
    if not isinstance(value, dict):
        raise ctx.error("select", "must be a table of tags, e.g. select = { env = \"prod\" }")
    terms = []
    for tag, want in value.items():
        key = f"select.{tag}"
        negate = False
        if isinstance(want, dict):
            if set(want) != {"not"}:
                raise ctx.error(key, "a table here takes one key: not (e.g. { not = \"sandbox\" } or { not = [...] })")
            want, negate = want["not"], True
        if want == "*":
            values: frozenset[str] | None = None
        elif isinstance(want, str):
            values = frozenset({want})
        elif isinstance(want, list) and want and all(isinstance(v, str) for v in want):
            values = frozenset(want)
        else:
            raise ctx.error(key, "must be a tag value, a list of values, \"*\" (any value) or { not = ... }")
        terms.append(TagTerm(str(tag), values, negate))
    return TagSelector(tuple(terms))


def _effective(ctx: _Ctx, key: str, value: object) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ctx.error(key, "a date-time needs a time zone (e.g. 2026-06-01T00:00:00Z), or give a date")
        return value.astimezone(UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(0, 0), tzinfo=UTC)
    if isinstance(value, str):
        try:
            return _effective(ctx, key, datetime.fromisoformat(value)) if "T" in value else datetime.combine(
                date.fromisoformat(value), time(0, 0), tzinfo=UTC)
        except ValueError:
            pass
    raise ctx.error(key, f"must be a date such as 2026-06-30 (TOML date, no quotes), got {_type_name(value)}")


def _choice(ctx: _Ctx, key: str, choices: tuple[str, ...], default: str) -> str:
    value = ctx.raw.get(key, default)
    if value not in choices:
        raise ctx.error(key, f"must be one of {', '.join(choices)} (got {value!r})")
    return str(value)


def _policy(ctx: _Ctx) -> Policy:
    raw = ctx.raw
    policy_id = _string(ctx, "id", raw.get("id"), max_len=64) or ""
    if not _ID.match(policy_id):
        raise ctx.error("id", "an id is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    check = raw.get("check")
    if check is None:
        raise ctx.error("check", f"required: one of {', '.join(CHECKS)}")
    if check not in CHECKS:
        raise ctx.error("check", f"unknown check {check!r}; one of {', '.join(CHECKS)}")
    allowed = set(_COMMON_KEYS) | set(_KIND_KEYS[check])
    unknown = [k for k in raw if k not in allowed]
    if unknown:
        raise ctx.error(unknown[0], f"unknown key for a {check} check (it takes {', '.join(_KIND_KEYS[check])})")
    title = _string(ctx, "title", raw.get("title")) or ""
    severity = raw.get("severity", "warning")
    if severity not in SEVERITIES:
        raise ctx.error("severity", f"must be one of {', '.join(SEVERITIES)} (got {severity!r})")
    params = _params(ctx, check)
    effective = _effective(ctx, "effective", raw["effective"]) if "effective" in raw else None
    definition = json.dumps({k: v for k, v in raw.items()}, sort_keys=True, default=str)
    return Policy(
        id=policy_id, title=title, severity=severity, check=check, select=_selector(ctx), params=params,
        description=_string(ctx, "description", raw.get("description"), required=False, max_len=4000) or "",
        doc_url=_string(ctx, "doc_url", raw.get("doc_url"), required=False) or "",
        effective=effective, line=ctx.header,
        digest=hashlib.sha256(definition.encode("utf-8")).hexdigest()[:16])


def _params(ctx: _Ctx, check: str) -> dict[str, Any]:
    raw = ctx.raw
    if check == "broker_config":
        return {"config": _config_name(ctx, "config"), "require": _require(ctx)}
    if check == "topic_config":
        return {"config": _config_name(ctx, "config"), "require": _require(ctx, allow_rf=True),
                "where": _where(ctx, None), "topics": _patterns(ctx, "topics", "exclude_topics"),
                "include_internal": _bool(ctx, "include_internal", False)}
    if check == "topic_shape":
        out: dict[str, Any] = {k: _requirement(ctx, k, raw[k]) for k in TOPIC_FIELDS if k in raw}
        if not out:
            raise ctx.error("", "a topic_shape check needs replication_factor and/or partitions")
        out.update(where=_where(ctx, TOPIC_FIELDS), topics=_patterns(ctx, "topics", "exclude_topics"),
                   include_internal=_bool(ctx, "include_internal", False))
        return out
    if check == "cluster":
        out = {}
        if "mode" in raw:
            if raw["mode"] not in MODES:
                raise ctx.error("mode", f"must be one of {', '.join(MODES)} (got {raw['mode']!r})")
            out["mode"] = raw["mode"]
        for key in ("version_min", "version_max"):
            if key in raw:
                text = _string(ctx, key, raw[key], max_len=32) or ""
                bounds = version_bounds(text)
                if bounds is None:
                    raise ctx.error(key, f"{text!r} is not a release such as 3.9.2 or 4.1")
                out[key] = (text, bounds[0] if key == "version_min" else bounds[1])
        if not out:
            raise ctx.error("", "a cluster check needs mode, version_min and/or version_max")
        if "version_min" in out and "version_max" in out and out["version_min"][1] > out["version_max"][1]:
            raise ctx.error("version_min", "version_min is above version_max: nothing can pass")
        return out
    if check == "consumer_groups":
        out = {k: _requirement(ctx, k, raw[k]) for k in GROUP_FIELDS if k in raw}
        if not out:
            raise ctx.error("", f"a consumer_groups check needs one of {', '.join(GROUP_FIELDS)}")
        out["groups"] = _patterns(ctx, "groups", "exclude_groups")
        return out
    if check == "client_config":
        return {"client_type": _client_types(ctx), "key": _config_name(ctx, "key"), "require": _require(ctx),
                "unreported": _choice(ctx, "unreported", OUTCOME_CHOICES, "unknown")}
    floors_raw = raw.get("floors")
    if not isinstance(floors_raw, dict) or not floors_raw:
        raise ctx.error("floors", "required: a table of software name = lowest version, e.g. "
                                  "{ \"apache-kafka-java\" = \"3.0\", librdkafka = \"1.8.2\" }")
    floors = {}
    for name, text in floors_raw.items():
        if not isinstance(text, str) or version_bounds(text) is None:
            raise ctx.error(f"floors.{name}", f"must be a version such as \"3.0\" or \"1.8.2\", got {text!r}")
        bounds = version_bounds(text)
        assert bounds is not None
        floors[str(name)] = (text, bounds[0])
    return {"floors": floors, "source": _choice(ctx, "source", SOFTWARE_SOURCES, "client_configs"),
            "unnamed": _choice(ctx, "unnamed", OUTCOME_CHOICES, "unknown"),
            "client_type": _client_types(ctx, required=False)}


def _require(ctx: _Ctx, *, allow_rf: bool = False) -> Requirement:
    if "require" not in ctx.raw:
        raise ctx.error("require", "required: what the value must be, e.g. require = { min = 2 } or require = false")
    return _requirement(ctx, "require", ctx.raw["require"], allow_rf=allow_rf)


def _bool(ctx: _Ctx, key: str, default: bool) -> bool:
    value = ctx.raw.get(key, default)
    if not isinstance(value, bool):
        raise ctx.error(key, f"must be true or false, got {_type_name(value)}")
    return value


def _client_types(ctx: _Ctx, *, required: bool = True) -> tuple[str, ...]:
    value = ctx.raw.get("client_type")
    if value is None:
        if required:
            raise ctx.error("client_type", f"required: one of {', '.join(CLIENT_TYPES)} (or a list)")
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(v in CLIENT_TYPES for v in values):
        raise ctx.error("client_type", f"must be one of {', '.join(CLIENT_TYPES)} or a list of them (got {value!r})")
    return tuple(values)


def _waiver(ctx: _Ctx, policies: Mapping[str, int]) -> Waiver:
    raw = ctx.raw
    unknown = [k for k in raw if k not in _WAIVER_KEYS]
    if unknown:
        raise ctx.error(unknown[0], f"unknown key (a waiver takes {', '.join(_WAIVER_KEYS)})")
    policy = _string(ctx, "policy", raw.get("policy"), max_len=64) or ""
    if policy not in policies:
        raise ctx.error("policy", f"no policy has the id {policy!r}")
    cluster = _string(ctx, "cluster", raw.get("cluster"), max_len=100) or ""
    topic = _string(ctx, "topic", raw.get("topic"), required=False, max_len=300)
    group = _string(ctx, "group", raw.get("group"), required=False, max_len=32_767)
    if topic is not None and group is not None:
        raise ctx.error("group", "a waiver names a topic or a group, not both")
    owner = _string(ctx, "owner", raw.get("owner"), max_len=200) or ""
    reason = _string(ctx, "reason", raw.get("reason"), max_len=2000) or ""
    if "expires" not in raw:
        raise ctx.error("expires", "required: every waiver ends (a date such as 2026-09-30)")
    return Waiver(policy=policy, cluster=cluster, owner=owner, reason=reason,
                  expires=_effective(ctx, "expires", raw["expires"]), topic=topic, group=group, line=ctx.header)
