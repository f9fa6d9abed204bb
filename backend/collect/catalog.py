"""Render the fleet rule catalog as Markdown (docs/fleet-rules.md is generated from this).

Run: ``python -m backend.collect.catalog > docs/fleet-rules.md``
"""

from __future__ import annotations

from backend.collect import checks
from backend.collect.client_checks import RULES as CLIENT_RULES
from backend.collect.config_checks import RULES as CONFIG_RULES
from backend.collect.group_checks import RULES as GROUP_RULES
from backend.store.incidents import ONE_OFF_RULES


def _first_line(name: str) -> str:
    doc = getattr(checks, name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def render_fleet_rules_markdown() -> str:
    """The fleet rules (cluster, broker and topic checks, broker/topic config rules, consumer-group rules) as Markdown."""
    lines = [
        "# Fleet rules",
        "",
        ("Generated from `backend/collect/checks.py`, `backend/collect/config_checks.py`, "
         "`backend/collect/group_checks.py` and `backend/collect/client_checks.py` by "
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
        "## Consumer-group rules",
        "",
        ("They run on clusters whose consumer groups have been read (ListGroups, DescribeGroups / "
         "ConsumerGroupDescribe / ShareGroupDescribe, OffsetFetch, ListOffsets, every `group_interval_s`). A group's "
         "status is judged Burrow-style from a sliding window of its last `group_window` reads "
         "(`backend/collect/group_status.py`); each status but ok is one incident per group, and a group moving from "
         "lagging to stalled resolves the one and opens the other. The KIP-848 candidates are one incident per "
         "cluster."),
        "",
        "| rule | severity | title | fires when | reference |",
        "|---|---|---|---|---|",
    ]
    for group_rule in GROUP_RULES:
        lines.append(f"| {group_rule.id} | {group_rule.severity} | {group_rule.title} | {group_rule.when} | "
                     f"<{group_rule.doc_url}> |")
    lines.append("")
    for group_rule in GROUP_RULES:
        lines += [
            f"### {group_rule.id}: {group_rule.title}",
            "",
            f"- severity: {group_rule.severity}",
            f"- fires when: {group_rule.when}",
            f"- reference: <{group_rule.doc_url}>",
            "",
            group_rule.rationale,
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
