"""Evidence of an alert or incident as readable `key = value` lines instead of raw JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _flat(prefix: str, value: Any, out: list[str]) -> None:
    if isinstance(value, Mapping):
        if not value:
            out.append(f"{prefix} = (none)")
        for key in sorted(value, key=str):
            _flat(f"{prefix}.{key}" if prefix else str(key), value[key], out)
    elif isinstance(value, (list, tuple)):
        if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
            out.append(f"{prefix} = {', '.join('null' if v is None else str(v) for v in value) or '(none)'}")
        else:
            for i, item in enumerate(value):
                _flat(f"{prefix}[{i}]", item, out)
    else:
        out.append(f"{prefix} = {'null' if value is None else value}")


def evidence_text(evidence: Mapping[str, Any] | str | None, *, separator: str = "\n") -> str:
    """Render evidence (a mapping or its JSON text) as sorted `key = value` lines; plain text, never markup."""
    if evidence is None:
        return ""
    value: Any = evidence
    if isinstance(evidence, str):
        if not evidence.strip():
            return ""
        try:
            value = json.loads(evidence)
        except ValueError:
            return evidence
    if not isinstance(value, Mapping):
        return str(value)
    lines: list[str] = []
    _flat("", value, lines)
    return separator.join(lines)
