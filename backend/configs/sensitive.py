"""The KIP-1324 sensitive-configuration filter, applied at ingest whatever the source.

A key is sensitive (its value is never stored) when any of these holds:

- its type is PASSWORD or CLASS (as sent, or as Kafka's ConfigDef declares the key);
- it starts with ``sasl.``, ``security.`` or ``ssl.``, or contains ``.sasl.``, ``.security.``
  or ``.ssl.``;
- it ends with ``.class`` or ``.classes``;
- it is a custom key: not in the allow-list of known keys for the client type
  (``backend.configs.known_keys``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from backend.configs.known_keys import known_type

SENSITIVE_TYPES = frozenset({"PASSWORD", "CLASS"})
_PREFIXES = ("sasl.", "security.", "ssl.")
_SEGMENTS = (".sasl.", ".security.", ".ssl.")
_SUFFIXES = (".class", ".classes")
REDACTED = "[REDACTED]"


def kip1324_rule(key: str, config_type: str | None) -> str | None:
    """Which KIP-1324 rule makes ``key`` sensitive by its type or name ('type', 'prefix', 'segment', 'suffix'), or None.

    Shared by the ingest filter here and the lab's KIP-1324 client side (backend.lab.clients).
    """
    if config_type in SENSITIVE_TYPES:
        return "type"
    lowered = key.lower()
    if lowered.startswith(_PREFIXES):
        return "prefix"
    if any(seg in lowered for seg in _SEGMENTS):
        return "segment"
    if lowered.endswith(_SUFFIXES):
        return "suffix"
    return None


def sensitive_reason(
    key: str, config_type: str | None, client_type: str | None = None, librdkafka: bool = True
) -> str | None:
    """Why ``key`` is sensitive ('type', 'prefix', 'segment', 'suffix', 'custom'), or None."""
    rule = kip1324_rule(key, config_type)
    if rule is not None:
        return rule
    declared = known_type(key, client_type, librdkafka)
    if declared is None:
        return "custom"
    if declared in SENSITIVE_TYPES:
        return "type"
    return None


def is_sensitive(
    key: str, config_type: str | None, client_type: str | None = None, librdkafka: bool = True
) -> bool:
    """True when the value of ``key`` must never be stored."""
    return sensitive_reason(key, config_type, client_type, librdkafka) is not None


@dataclass
class DroppedKeys:
    """Counts of dropped sensitive keys, by key name only (never a value)."""

    by_key: Counter[str] = field(default_factory=Counter)

    def add(self, key: str) -> None:
        """Count one dropped occurrence of ``key``."""
        self.by_key[key] += 1

    @property
    def total(self) -> int:
        """All dropped occurrences."""
        return sum(self.by_key.values())


def redact_object(obj: object) -> object:
    """A copy of a parsed record with every sensitive or custom config value redacted."""
    if isinstance(obj, dict):
        out: dict[object, object] = {}
        key = obj.get("key")
        entry_is_config = isinstance(key, str) and "value" in obj
        for k, v in obj.items():
            if entry_is_config and k == "value":
                typ = obj.get("type")
                sensitive = is_sensitive(key, typ if isinstance(typ, str) else None)  # type: ignore[arg-type]
                out[k] = REDACTED if sensitive and v is not None else v
            elif isinstance(k, str) and isinstance(v, (str, int, float)) and is_secretish_name(k):
                out[k] = REDACTED
            else:
                out[k] = redact_object(v)
        return out
    if isinstance(obj, list):
        return [redact_object(v) for v in obj]
    return obj


_SECRET_WORDS = re.compile(r"password|passwd|secret|token|jaas|credential|api[._-]?key", re.IGNORECASE)


def is_secretish_name(name: str) -> bool:
    """True for names that look like they hold a credential (used for free-text redaction)."""
    return bool(_SECRET_WORDS.search(name)) or is_sensitive(name, None) and (
        name.lower().startswith(_PREFIXES) or any(s in name.lower() for s in _SEGMENTS)
    )


# {"key": "x", ... "value": "..."} objects, complete or cut off at the end of the excerpt.
_CONFIG_OBJ = re.compile(r"\{[^{}]*\}|\{[^{}]*$")
_KEY_FIELD = re.compile(r'"key"\s*:\s*"((?:[^"\\]|\\.)*)"')
_VALUE_FIELD = re.compile(r'("value"\s*:\s*)("(?:[^"\\]|\\.)*("|$)|[^,}\s]+)')
# key = value / key: value / "key": "value" pairs whose name looks secret.
_SECRET_PAIR = re.compile(
    r'(?P<name>[\w.\-]*(?:password|passwd|secret|token|jaas|credential|api[._-]?key)[\w.\-]*"?)'
    r'(?P<sep>\s*[=:]\s*)(?P<val>"(?:[^"\\]|\\.)*("|$)|[^\s,}]+)',
    re.IGNORECASE,
)


def redact_text(text: str) -> str:
    """Redact sensitive values from raw text that may not parse (JSON, properties, log lines)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, (dict, list)):
        return json.dumps(redact_object(parsed), ensure_ascii=False)

    def redact_obj(match: re.Match[str]) -> str:
        chunk = match.group(0)
        key_match = _KEY_FIELD.search(chunk)
        if key_match is None:
            return _VALUE_FIELD.sub(lambda m: m.group(1) + f'"{REDACTED}"', chunk)
        if not is_sensitive(key_match.group(1), None):
            return chunk
        return _VALUE_FIELD.sub(lambda m: m.group(1) + f'"{REDACTED}"', chunk)

    text = _CONFIG_OBJ.sub(redact_obj, text)
    return _SECRET_PAIR.sub(lambda m: m.group("name") + m.group("sep") + REDACTED, text)
