"""Render the fleet rule catalog as Markdown (docs/fleet-rules.md is generated from this).

Run: ``python -m backend.collect.catalog > docs/fleet-rules.md``
"""

from __future__ import annotations

from backend.collect import checks
from backend.collect.client_checks import RULES as CLIENT_RULES
from backend.collect.config_checks import RULES as CONFIG_RULES
from backend.store.incidents import ONE_OFF_RULES


def _first_line(name: str) -> str:
    doc = getattr(checks, name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def render_fleet_rules_markdown() -> str:
    """The fleet rules (cluster, broker and topic checks, and the broker/topic config rules) as Markdown."""
    lines = [
        "# Fleet rules",
        "",
        ("Generated from `backend/collect/checks.py` and `backend/collect/config_checks.py` by "
         "`python -m backend.collect.catalog > docs/fleet-rules.md`; do not edit by hand."),
        "",
        ("Every poll runs these rules over each cluster that answered; a condition that lasts is one incident "
         "(opened, last seen, resolved), an event is an incident opened and resolved by the same poll. "
         "Client-configuration rules (KIP-1324) are in [rules.md](rules.md)."),
        "",
        "## Cluster, broker and topic checks",
        "",
        "| rule | kind | what it finds |",
        "|---|---|---|",
    ]
    for name in checks.RULES:
        kind = "event" if name in ONE_OFF_RULES else "standing"
        lines.append(f"| {name} | {kind} | {_first_line(name)} |")
    lines += [
        "",
        "## Broker and topic configuration rules",
        "",
        ("They run on clusters whose configuration has been read (DescribeConfigs, every `config_interval_s`). "
         "A topic override is one incident per topic; topics that inherit a risky broker value are one incident "
         "per cluster (\"topics inheriting ...\")."),
        "",
        "| rule | severity | title | fires when | reference |",
        "|---|---|---|---|---|",
    ]
    for rule in CONFIG_RULES:
        lines.append(f"| {rule.id} | {rule.severity} | {rule.title} | {rule.when} | <{rule.doc_url}> |")
    lines.append("")
    for rule in CONFIG_RULES:
        lines += [
            f"### {rule.id}: {rule.title}",
            "",
            f"- severity: {rule.severity}",
            f"- fires when: {rule.when}",
            f"- reference: <{rule.doc_url}>",
            "",
            rule.rationale,
            "",
        ]
    lines += [
        "## Client inventory rules",
        "",
        ("They run on clusters whose brokers' JMX metrics are read ([clusters.broker_metrics], every "
         "`client_metrics_interval_s`): see [client-inventory.md](client-inventory.md)."),
        "",
        "| rule | kind | severity | title | fires when |",
        "|---|---|---|---|---|",
    ]
    for client_rule in CLIENT_RULES:
        lines.append(f"| {client_rule.id} | {client_rule.kind} | {client_rule.severity} | {client_rule.title} | "
                     f"{client_rule.when} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_fleet_rules_markdown(), end="")
