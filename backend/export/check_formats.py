"""The outputs of `fleetview check`: text for people, JSON, SARIF 2.1.0 and JUnit XML for CI servers.

Every string that came from a broker, a client or the policy file's authors (topic and group names, values,
reasons) reaches text and JUnit only through `backend.plain_text.visible` (control and bidi characters shown, never
acted on; XML 1.0 cannot carry most controls at all); JSON and SARIF carry them JSON-escaped. SARIF: one rule per
policy; per (policy, cluster) a result per finding (a topic, broker, group or client value): violations are `fail`
at the policy's level (critical: error, warning: warning, info: note), waived ones `fail` with an accepted external
suppression, findings without evidence `open`, findings of a policy not yet in force `review`, and a `pass` result
for a pair where everything passed. Each result points at the policy's line in the policy file and names the
cluster and subject as a logical location. A client finding is one result per client instance behind it (up to
SARIF_INSTANCES per policy and cluster, violations first), and one more for the instances it counts but does not name;
text and JUnit name up to TEXT_INSTANCES per finding and count the rest; JSON carries every instance named.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import quote

from backend.export.check_report import CheckReport
from backend.plain_text import visible
from backend.standards.policy import Policy
from backend.store.standards_model import STATUS_ORDER, ClientInstance, PolicyItem, PolicyResult

FORMATS = ("text", "json", "sarif", "junit")
SARIF_INSTANCES = 200  # instance results per (policy, cluster); the rest are counted in their finding's result
TEXT_INSTANCES = 20  # instances named per finding in text and JUnit; the rest are counted
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {"critical": "error", "warning": "warning", "info": "note"}
OUTCOME_KIND = {"violation": "fail", "waived": "fail", "unknown": "open", "upcoming": "review"}
JSON_VERSION = 1


def render(report: CheckReport | None, fmt: str, *, error: str | None = None) -> str:
    """The report in one of FORMATS; without a report (the check could not run), the error in that format."""
    if fmt == "text":
        return _text(report) if report is not None else f"check: {error}\n"
    if fmt == "json":
        return json.dumps(_json(report, error), indent=2, sort_keys=False, default=str) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(report, error), indent=2) + "\n"
    if fmt == "junit":
        return junit(report, error)
    raise ValueError(f"unknown format {fmt!r}")


# --------------------------------------------------------------------------------------------------------- text


def _text(report: CheckReport) -> str:
    lines = [f"fleetview check: {len(report.policies.policies)} policies ({visible(report.policies.source)}), "
             f"{len(report.clusters)} clusters, {visible(report.source)}"]
    order = {"violation": 0, "unknown": 1, "upcoming": 2, "waived": 3, "pass": 4}
    for r in sorted(report.results, key=lambda r: (order.get(r.status, 9), r.policy_id, r.cluster_name)):
        policy = report.policies.policy(r.policy_id)
        lines.append(f"{r.status.upper():<10} {r.severity:<8} {r.policy_id}  {visible(r.cluster_name)}: "
                     f"{visible(r.reason)}")
        if r.status == "pass":
            continue
        for item in r.items:
            lines.append(f"    {item.outcome:<9} {visible(item.subject)}: {visible(item.reason)}"
                         + (f" [waiver: {visible(item.waiver)}]" if item.waiver else "")
                         + (f" (since {item.since:%Y-%m-%d %H:%M} UTC)" if item.since else ""))
            lines += [f"        {visible(line)}" for line in instance_lines(item)]
        if r.items_omitted:
            lines.append(f"    ... and {r.items_omitted} more")
        if r.status == "violation":
            lines.append(f"    wanted: {visible(policy.wanted())}")
    lines += [f"note: {visible(n)}" for n in report.notes]
    lines.append(f"{report.count('violation')} violated, {report.count('unknown')} unknown, "
                 f"{report.count('upcoming')} upcoming, {report.count('waived')} waived, {report.count('pass')} passed "
                 f"({len(report.results)} policy/cluster pairs): {report.verdict}, exit {report.exit_code}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------------- JSON


def instance_lines(item: PolicyItem, limit: int = TEXT_INSTANCES) -> list[str]:
    """The instances behind a client finding, one line each (up to ``limit``), and how many more it counts."""
    if item.kind != "clients":
        return []
    lines = [f"instance: {c.label()}" for c in item.instances[:limit]]
    rest = item.count - min(len(item.instances), limit)
    if rest > 0:
        lines.append(f"... and {rest} more instance(s)" if lines else f"{rest} instance(s), not named")
    return lines


def client_json(c: ClientInstance) -> dict[str, Any]:
    """A client instance as plain JSON."""
    return {"instance_id": c.instance_id, "client_type": c.client_type, "client_id": c.client_id,
            "group_id": c.group_id, "software_name": c.software_name, "software_version": c.software_version,
            "principal": c.principal, "client_address": c.client_address,
            "last_seen": c.last_seen.isoformat() if c.last_seen else None}


def _item_json(i: PolicyItem) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": i.kind, "name": i.name, "outcome": i.outcome, "seen": i.seen, "wanted": i.wanted,
           "reason": i.reason, "count": i.count, "since": i.since.isoformat() if i.since else None,
           "waiver": i.waiver}
    if i.kind == "clients":
        out["instances"] = [client_json(c) for c in i.instances]
        out["unnamed"] = i.unnamed
    return out


def result_json(r: PolicyResult) -> dict[str, Any]:
    """One result as plain JSON (also what an API door can return)."""
    return {"policy_id": r.policy_id, "cluster": r.cluster_name, "status": r.status, "severity": r.severity,
            "checked": r.checked, "passing": r.passing, "violating": r.violating, "unknown": r.unknown,
            "waived": r.waived, "upcoming": r.upcoming, "reason": r.reason,
            "since": r.since.isoformat() if r.since else None,
            "evidence_at": r.evidence_at.isoformat() if r.evidence_at else None,
            "items": [_item_json(i) for i in r.items], "items_omitted": r.items_omitted}


def _json(report: CheckReport | None, error: str | None) -> dict[str, Any]:
    if report is None:
        return {"version": JSON_VERSION, "exit_code": 2, "verdict": "could not evaluate", "error": error, "results": []}
    return {
        "version": JSON_VERSION, "generated_at": report.evaluated_at.isoformat(), "source": report.source,
        "policy_file": {"path": report.policies.source, "digest": report.policies.digest},
        "exit_code": report.exit_code, "verdict": report.verdict,
        "summary": {s: report.count(s) for s in ("violation", "unknown", "upcoming", "waived", "pass")},
        "clusters": report.clusters, "notes": report.notes,
        "policies": report.policies.catalog(),
        "results": [result_json(r) for r in report.results],
    }


# -------------------------------------------------------------------------------------------------------- SARIF


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else quote(p.as_posix())


def _rule(policy: Policy) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": policy.id, "name": "".join(part.capitalize() for part in policy.id.replace(".", "-").split("-")),
        "shortDescription": {"text": policy.title},
        "fullDescription": {"text": policy.description or f"{policy.title}: {policy.wanted()}"},
        "defaultConfiguration": {"level": LEVELS[policy.severity]},
        "help": {"text": f"Wanted: {policy.wanted()}. Applies to: {policy.select.text()}."},
        "properties": {"check": policy.check, "severity": policy.severity, "selector": policy.select.text(),
                       "wanted": policy.wanted(), "tags": ["kafka", "fleetview", policy.check]},
    }
    if policy.doc_url.startswith(("https://", "http://")):
        rule["helpUri"] = policy.doc_url
    return rule


def _location(report: CheckReport, policy: Policy, cluster: str, item: PolicyItem | None,
              client: ClientInstance | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(report.policies.source)}}
    if policy.line > 0:
        physical["region"] = {"startLine": policy.line}
    logical = [{"name": cluster, "kind": "cluster", "fullyQualifiedName": cluster}]
    if item is not None and item.kind != "cluster":
        logical.append({"name": item.name, "kind": item.kind,
                        "fullyQualifiedName": f"{cluster}/{item.kind}/{item.name}"})
    if client is not None:
        logical.append({"name": client.instance_id, "kind": "instance",
                        "fullyQualifiedName": f"{cluster}/instance/{client.instance_id}"})
    return {"physicalLocation": physical, "logicalLocations": logical}


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


def _sarif_result(report: CheckReport, index: int, policy: Policy, r: PolicyResult, item: PolicyItem | None,
                  client: ClientInstance | None = None, rest: int | None = None) -> dict[str, Any]:
    """One result: a pair, a finding, a client instance behind a finding (``client``), or the ``rest`` of a client
    finding's instances that no result of their own names."""
    outcome = item.outcome if item is not None else r.status
    kind = OUTCOME_KIND.get(outcome, "pass")
    seen = f" (seen {item.seen if item.seen is not None else 'nothing'}; wanted {item.wanted})" \
        if item is not None and outcome in ("violation", "waived") else ""
    if item is None:
        text = f"{policy.title} on {r.cluster_name}: {r.reason}"
    elif client is not None:
        text = f"{policy.title} on {r.cluster_name}: {item.subject}: {client.label()}{seen}"
    elif rest is not None and rest != item.count:
        text = f"{policy.title} on {r.cluster_name}: {item.subject}: {rest} more instance(s) of {item.count}{seen}"
    else:
        text = f"{policy.title} on {r.cluster_name}: {item.subject}: {item.reason}{seen}"
    properties: dict[str, Any] = {"cluster": r.cluster_name, "status": r.status, "outcome": outcome,
                                  "severity": r.severity}
    if item is None:
        properties.update(checked=r.checked, passing=r.passing)
    else:
        properties.update(subject=item.subject, seen=item.seen, wanted=item.wanted,
                          count=1 if client is not None else (rest if rest is not None else item.count),
                          since=item.since.isoformat() if item.since else None)
    if client is not None:
        properties.update(finding=item.name if item is not None else None, client=client_json(client))
    result: dict[str, Any] = {
        "ruleId": policy.id, "ruleIndex": index, "kind": kind,
        "level": LEVELS[policy.severity] if kind == "fail" else "none",
        "message": {"text": text},
        "locations": [_location(report, policy, r.cluster_name, item, client)],
        "partialFingerprints": {"fleetviewFinding/v1": _fingerprint(
            policy.id, r.cluster_name, "instance" if client is not None else (item.kind if item else ""),
            client.instance_id if client is not None else (item.name if item else ""))},
        "properties": properties,
    }
    if outcome == "waived" and item is not None:
        result["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": item.waiver or "waived in the policy file"}]
    if item is not None and item.waiver and outcome == "violation":
        result["properties"]["expiredWaiver"] = item.waiver
    return result


def sarif(report: CheckReport | None, error: str | None = None) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log (one run)."""
    driver: dict[str, Any] = {"name": "fleetview", "semanticVersion": "1.0.0", "rules": []}
    run: dict[str, Any] = {"tool": {"driver": driver}, "results": []}
    invocation: dict[str, Any] = {"executionSuccessful": report is not None}
    if report is None:
        invocation["exitCode"] = 2
        invocation["toolExecutionNotifications"] = [{"level": "error", "message": {"text": error or "check failed"}}]
        run["invocations"] = [invocation]
        return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    index = {p.id: i for i, p in enumerate(report.policies.policies)}
    driver["rules"] = [_rule(p) for p in report.policies.policies]
    for r in report.results:
        policy = report.policies.policy(r.policy_id)
        if r.status == "pass" or (not r.items and r.status != "unknown"):
            run["results"].append(_sarif_result(report, index[policy.id], policy, r, None))
            continue
        if not r.items:  # unknown for the whole cluster
            run["results"].append(_sarif_result(report, index[policy.id], policy, r, None))
            continue
        budget = SARIF_INSTANCES
        for item in sorted(r.items, key=lambda i: STATUS_ORDER.get(i.outcome, 9)):
            named = item.instances[:budget] if item.kind == "clients" else ()
            budget -= len(named)
            for client in named:
                run["results"].append(_sarif_result(report, index[policy.id], policy, r, item, client))
            rest = item.count - len(named) if item.kind == "clients" else None
            if rest is None or rest > 0:
                run["results"].append(_sarif_result(report, index[policy.id], policy, r, item, rest=rest))
    invocation.update(exitCode=report.exit_code, endTimeUtc=report.evaluated_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    unknown = [r for r in report.results if r.status == "unknown"]
    if unknown:
        invocation["toolExecutionNotifications"] = [
            {"level": "warning", "message": {"text": f"{r.policy_id} on {r.cluster_name} could not be judged: "
                                                     f"{r.reason}"}} for r in unknown[:100]]
    run["invocations"] = [invocation]
    run["automationDetails"] = {"id": f"fleetview-check/{report.evaluated_at:%Y%m%dT%H%M%SZ}"}
    run["properties"] = {"source": report.source, "clusters": report.clusters, "verdict": report.verdict,
                         "policyFileDigest": report.policies.digest}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


# -------------------------------------------------------------------------------------------------------- JUnit


def junit(report: CheckReport | None, error: str | None = None) -> str:
    """The report as JUnit XML: a testsuite per policy, a testcase per cluster it applies to."""
    root = ET.Element("testsuites", name="fleetview check")
    if report is None:
        suite = ET.SubElement(root, "testsuite", name="fleetview check", tests="1", failures="0", errors="1",
                              skipped="0")
        case = ET.SubElement(suite, "testcase", classname="fleetview", name="check")
        ET.SubElement(case, "error", message=visible(error or "check failed"), type="could not evaluate")
        root.set("tests", "1")
        root.set("errors", "1")
        return _xml(root)
    totals: dict[str, int] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for policy in report.policies.policies:
        results = [r for r in report.results if r.policy_id == policy.id]
        counts: dict[str, int] = {"tests": len(results),
                                  "failures": sum(r.status == "violation" for r in results),
                                  "errors": sum(r.status == "unknown" for r in results),
                                  "skipped": sum(r.status == "waived" for r in results)}
        suite = ET.SubElement(root, "testsuite", {"name": visible(f"{policy.id}: {policy.title}"),
                                                  **{k: str(v) for k, v in counts.items()}})
        props = ET.SubElement(suite, "properties")
        for key, value in (("severity", policy.severity), ("check", policy.check),
                           ("selector", policy.select.text()), ("wanted", policy.wanted())):
            ET.SubElement(props, "property", name=key, value=visible(value))
        for r in results:
            case = ET.SubElement(suite, "testcase", classname=f"fleetview.{policy.id}", name=visible(r.cluster_name))
            details = "\n".join(f"{i.outcome}: {i.subject}: {i.reason}" + (f" [waiver: {i.waiver}]" if i.waiver else "")
                                + "".join(f"\n    {line}" for line in instance_lines(i)) for i in r.items)
            if r.status == "violation":
                node = ET.SubElement(case, "failure", message=visible(r.reason), type="violation")
                node.text = visible(details + f"\nwanted: {policy.wanted()}")
            elif r.status == "unknown":
                node = ET.SubElement(case, "error", message=visible(r.reason), type="could not evaluate")
                node.text = visible(details)
            elif r.status == "waived":
                ET.SubElement(case, "skipped", message=visible(f"waived: {r.reason}"))
                ET.SubElement(case, "system-out").text = visible(details)
            elif r.status == "upcoming":
                ET.SubElement(case, "system-out").text = visible(f"not in force yet: {details}")
        for name, n in counts.items():
            totals[name] += n
    for name, n in totals.items():
        root.set(name, str(n))
    return _xml(root)


def _xml(root: ET.Element) -> str:
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
