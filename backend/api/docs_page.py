"""The API's docs page: plain HTML made from its own OpenAPI document (no script, nothing fetched from elsewhere)."""

from __future__ import annotations

import html
import json
from typing import Any


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items', {}))}"
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"])
    return str(schema.get("type", "object"))


def docs_html(openapi: dict[str, Any]) -> str:
    """Every endpoint with its parameters and answers, and every schema, as one HTML page."""
    esc = html.escape
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(openapi['info']['title'])}</title>",
           "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}code,pre{background:#f4f4f4}"
           "td,th{text-align:left;padding:2px 8px;vertical-align:top}</style></head><body>",
           f"<h1>{esc(openapi['info']['title'])}</h1><p>{esc(openapi['info'].get('description', ''))}</p>",
           "<p>Machine-readable: <a href='openapi.json'>openapi.json</a> (OpenAPI "
           f"{esc(openapi.get('openapi', ''))}). Authentication: <code>Authorization: Bearer &lt;JWT&gt;</code> "
           "when the fleet file turns login on. Errors are <code>application/problem+json</code> (RFC 9457).</p>"]
    for path, ops in sorted(openapi.get("paths", {}).items()):
        for method, op in ops.items():
            out.append(f"<h2 id='{esc(op.get('operationId', ''))}'><code>{esc(method.upper())} {esc(path)}</code></h2>")
            out.append(f"<p><b>{esc(op.get('summary', ''))}</b>. {esc(op.get('description', ''))}</p>")
            params = op.get("parameters", [])
            if params:
                out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>about</th></tr>")
                for p in params:
                    out.append(f"<tr><td><code>{esc(p['name'])}</code></td><td>{esc(p['in'])}</td>"
                               f"<td>{esc(_schema_name(p.get('schema', {})))}</td>"
                               f"<td>{esc(p.get('description', '') or p.get('schema', {}).get('description', ''))}"
                               "</td></tr>")
                out.append("</table>")
            answers = ", ".join(f"{esc(code)} {esc(r.get('description', ''))}"
                                for code, r in sorted(op.get("responses", {}).items()))
            out.append(f"<p>Answers: {answers}</p>")
    out.append("<h2>Schemas</h2>")
    for name, schema in sorted(openapi.get("components", {}).get("schemas", {}).items()):
        out.append(f"<h3 id='{esc(name)}'>{esc(name)}</h3><p>{esc(schema.get('description', ''))}</p>")
        out.append(f"<pre>{esc(json.dumps(schema.get('properties', {}), indent=1))}</pre>")
    out.append("</body></html>")
    return "".join(out)
