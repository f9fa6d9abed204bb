"""The service block of the sidebar: each job's last run, next run and last error, as plain text lines."""

from __future__ import annotations

from datetime import datetime
from typing import Any

JOB_LABELS = (("poll", "Poll"), ("ingest", "Ingest"), ("analyze", "Analyze"))


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} d"


def _epoch(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def job_line(label: str, entry: dict[str, Any], now: float) -> str:
    """'Poll: ok 3 s ago (took 0.1 s), next in 12 s' and the like."""
    parts: list[str] = []
    if entry.get("running"):
        parts.append(f"running for {_ago(float(entry.get('running_for_s') or 0))}")
    started = _epoch(entry.get("last_started_at"))
    outcome = entry.get("last_outcome")
    if outcome and started is not None:
        took = entry.get("last_duration_s")
        parts.append(f"{outcome} {_ago(now - started)} ago" + (f" (took {float(took):.1f} s)" if took is not None else ""))
    elif not entry.get("running"):
        parts.append("no run yet")
    success = _epoch(entry.get("last_success_at"))
    if outcome and outcome != "ok" and success is not None:
        parts.append(f"last ok {_ago(now - success)} ago")
    due = _epoch(entry.get("next_due_at"))
    if due is not None and not entry.get("running"):
        parts.append("next now" if due <= now else f"next in {_ago(due - now)}")
    if not entry.get("up", True):
        parts.append("process down, restarting")
    return f"{label}: " + ", ".join(parts)


def service_lines(status: dict[str, Any], now: float, *, with_error: bool = True) -> list[str]:
    """The sidebar block for a running service's status (from status.json); plain text, never markup.

    with_error=False leaves out the last error's text, which may name any cluster of the fleet.
    """
    components = status.get("components") or {}
    lines = [f"Service running (pid {status.get('pid')})"]
    errors: list[tuple[float, str]] = []
    for job, label in JOB_LABELS:
        entry = components.get(job)
        if not isinstance(entry, dict):
            continue
        lines.append(job_line(label, entry, now))
        at = _epoch(entry.get("last_error_at"))
        if entry.get("last_error") and at is not None:
            errors.append((at, f"{label} ({_ago(now - at)} ago): {entry['last_error']}"))
    restarts = {name: e.get("restarts") for name, e in components.items() if isinstance(e, dict) and e.get("restarts")}
    if restarts:
        lines.append("Restarts: " + ", ".join(f"{name} {n}" for name, n in sorted(restarts.items())))
    if errors and with_error:
        lines.append("Last error: " + max(errors)[1][:500])
    elif errors:
        lines.append("Last error: shown to operators of every cluster")
    return lines
