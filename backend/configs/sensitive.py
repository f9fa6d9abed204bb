"""The KIP-1324 sensitive-configuration filter, applied at ingest whatever the source.

A key is sensitive (its value is never stored) when any of these holds:

- its type is PASSWORD or CLASS: as sent, or as the ConfigDef of any Java client release declares
  the key (``backend.configs.known_keys``, generated from the real definitions); a key sent as
  PASSWORD is dropped whatever the definitions say;
- it starts with ``sasl.``, ``security.`` or ``ssl.``, or contains ``.sasl.``, ``.security.``
  or ``.ssl.``;
- it ends with ``.class`` or ``.classes``;
- it is a custom key: not in the allow-list of known keys for the client type
  (``backend.configs.known_keys``).

A value is dropped whatever its key when it is shaped like a credential (``credential_shape``):
a JAAS login module line, ``password=`` and similar pairs, userinfo in a URL or host list
(``user:pass@host``), a bearer token, a JWT or a PEM block.

This module is the one policy: ingest (``backend.configs.record``), quarantine excerpts
(``safe_excerpt`` / ``unparsed_excerpt``), the views and exports (``is_sensitive_key``), the lab broker
(``broker_refuses_type``) and the logs (``SecretFilter``) call it; a test checks that no other module
under backend/ compiles its own secret regex.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import overload

from backend.configs.known_keys import java_types, known_type
from backend.plain_text import utf8_safe, visible

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
    if declared in SENSITIVE_TYPES or java_types(key) & SENSITIVE_TYPES:
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


_CREDENTIAL_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("jaas", re.compile(r"LoginModule\b|\b(?:username|password)\s*=\s*[\"']", re.IGNORECASE)),
    ("secret_pair", re.compile(
        r"\b(?:password|passwd|pwd|secret|client[._-]?secret|token|api[._-]?key|access[._-]?key)\s*[=:]\s*\S+",
        re.IGNORECASE)),
    ("userinfo", re.compile(r"(?:^|[\s,;/=])[^\s/:@,;=]+:[^\s/@,;]+@[^\s/@,;]+", re.IGNORECASE)),
    ("bearer", re.compile(r"\bbearer\s+[a-z0-9\-._~+/]{8,}", re.IGNORECASE)),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")),
    ("pem", re.compile(r"-----BEGIN [A-Z0-9 ]+-----")),
)


def credential_shape(value: object) -> str | None:
    """Which credential shape ``value`` has ('jaas', 'secret_pair', 'userinfo', 'bearer', 'jwt', 'pem'), or None."""
    if not isinstance(value, str) or not value:
        return None
    for name, pattern in _CREDENTIAL_SHAPES:
        if pattern.search(value):
            return name
    return None


# One entry of a list of broker addresses: host:port, optionally behind a listener or protocol name ("SSL://").
_ADDRESS = re.compile(r"^(?:[A-Za-z0-9_]+://)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):\d{1,5}$")


def address_list_shape(key: str, value: object) -> str | None:
    """'not_addresses' when a broker-address list (bootstrap.servers) holds an entry that is not host:port.

    A truncated ``user:secret@host:9092`` (a line cut short, a record damaged on the way) no longer has the '@' that
    makes it a userinfo credential, yet its "port" is the secret: such an entry is withheld, not stored.
    """
    if not isinstance(value, str) or not key.lower().endswith("bootstrap.servers"):
        return None
    entries = [e.strip() for e in value.strip().strip("[]").split(",") if e.strip()]
    return "not_addresses" if any(not _ADDRESS.match(e) for e in entries) else None


def redact_shapes(text: str) -> str:
    """``text`` with every credential-shaped span replaced by [REDACTED] (log lines, error messages)."""
    for _, pattern in _CREDENTIAL_SHAPES:
        text = pattern.sub(REDACTED, text)
    return text


MAX_ERROR_CHARS = 4096


@overload
def safe_error_text(text: str, limit: int = MAX_ERROR_CHARS) -> str: ...
@overload
def safe_error_text(text: None, limit: int = MAX_ERROR_CHARS) -> None: ...
@overload
def safe_error_text(text: str | None, limit: int = MAX_ERROR_CHARS) -> str | None: ...
def safe_error_text(text: str | None, limit: int = MAX_ERROR_CHARS) -> str | None:
    """An error text a broker (or ZooKeeper, or a client) controls, fit for the lake, the logs and the UI: secret pairs
    and credential-shaped spans redacted by the rules that withhold values (and clean the logs), cut to `limit`
    characters, valid UTF-8. Only the first 2 x `limit` characters are read, so a 16 MiB message costs no more."""
    if text is None:
        return None
    head = text[: limit * 2]
    cleaned = utf8_safe(redact_shapes(redact_text(head)))
    if len(text) <= len(head) and len(cleaned) <= limit:
        return cleaned
    keep = cleaned[: max(0, limit - 48)]
    return keep + f"… [{len(text) - len(keep):,} more characters cut]"


_SENSITIVE_KEY_NAME = re.compile(
    r"password|passwd|secret|jaas|token|credential|api[._-]?key|\.key$|keystore|truststore", re.IGNORECASE)


def is_sensitive_key(key: str) -> bool:
    """True for a key name that may carry a secret, by its name alone (views and exports never show one)."""
    if not key:
        return False
    return bool(_SENSITIVE_KEY_NAME.search(key)) or kip1324_rule(key, None) in ("prefix", "segment")


def broker_refuses_type(config_type: str | None) -> bool:
    """KIP-1324's broker side: a pushed config of a sensitive ConfigType is refused and its value dropped."""
    return config_type in SENSITIVE_TYPES


# Fields of a client-config record whose values say where a record came from, never what it configures.
SAFE_RECORD_FIELDS = ("snapshot_id", "received_at", "cluster_id", "broker_id", "client_instance_id",
                      "client_type", "client_software_name", "client_software_version")
_RECORD_FIELDS = (*SAFE_RECORD_FIELDS, "client_id", "principal", "client_address", "configs",
                  "key", "value", "type", "is_default")
WITHHELD = "[withheld]"
_NAME = re.compile(r'"([A-Za-z][A-Za-z0-9_.\-]{0,120})"\s*:')


def _safe_scalar(value: object) -> object:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and len(value) <= 200 and credential_shape(value) is None:
        return value
    return WITHHELD


def _known_name(name: str) -> bool:
    return name in _RECORD_FIELDS or known_type(name) is not None


def safe_excerpt(obj: object, limit: int = 512) -> str:
    """A quarantine excerpt built from an allow-list: field names, and values only of known-safe fields.

    Config entries keep their key (when it is a known key) and type; a value is kept only for a known,
    non-sensitive key whose value is not credential-shaped. Anything else is [withheld].
    """
    if not isinstance(obj, dict):
        return json.dumps({"record": type(obj).__name__, "values": WITHHELD})
    out: dict[str, object] = {}
    for name, value in obj.items():
        if not isinstance(name, str) or not _known_name(name):
            out["(unknown field)"] = WITHHELD
        elif name in SAFE_RECORD_FIELDS:
            out[name] = _safe_scalar(value)
        elif name == "configs":
            out[name] = _safe_configs(value)
        else:
            out[name] = WITHHELD
    return json.dumps(out, ensure_ascii=False)[:limit]


def _safe_configs(configs: object) -> object:
    if isinstance(configs, dict):  # not the documented list: names of known keys only, no values
        return {str(k) if isinstance(k, str) and _known_name(k) else "(unknown key)": WITHHELD for k in configs}
    if not isinstance(configs, list):
        return WITHHELD
    entries: list[object] = []
    for item in configs[:50]:
        if not isinstance(item, dict):
            entries.append(WITHHELD)
            continue
        key, typ = item.get("key"), item.get("type")
        known = isinstance(key, str) and known_type(key) is not None
        entry: dict[str, object] = {"key": key if known else "(unknown key)"}
        if isinstance(typ, str) and typ.isupper() and len(typ) <= 10:
            entry["type"] = typ
        value = item.get("value")
        safe = (isinstance(key, str) and known and not is_sensitive(key, typ if isinstance(typ, str) else None)
                and not is_sensitive_key(key) and address_list_shape(key, value) is None)
        entry["value"] = _safe_scalar(value) if safe and (value is None or isinstance(value, str)) else WITHHELD
        entries.append(entry)
    return entries


def unparsed_excerpt(text: str) -> str:
    """For text that does not parse: its size and the known field names it mentions, no value at all."""
    names = list(dict.fromkeys(n for n in _NAME.findall(text[:65536]) if _known_name(n)))[:40]
    return f"unparsable, {len(text.encode('utf-8', 'replace'))} bytes; no values kept; fields seen: " + (
        ", ".join(names) or "none")


LOG_CONTINUATION = "\n    "


class SecretFilter(logging.Filter):
    """A logging filter that redacts credential-shaped text and secret pairs from every record it passes, shows
    control and bidi characters visibly, and indents the lines after a line break (`LOG_CONTINUATION`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Replace the record's message by its redacted text; never drops a record."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        # Secrets redacted; hidden characters shown (ESC cannot drive the terminal that tails the log, CR cannot
        # overwrite a line), and the lines after a line break indented, so no text can forge a record of its own.
        cleaned = LOG_CONTINUATION.join(map(visible, redact_shapes(redact_text(message)).split("\n"))) if message \
            else message
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Attach one SecretFilter to every handler of ``logger`` (the root logger by default) and to logging's
    last-resort handler, which prints warnings when no handler is configured."""
    target = logger or logging.getLogger()
    handlers = [*target.handlers, *([logging.lastResort] if logging.lastResort is not None else [])]
    for handler in handlers:
        if not any(isinstance(f, SecretFilter) for f in handler.filters):
            handler.addFilter(SecretFilter())
