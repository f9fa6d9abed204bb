"""Incident tracker: per-poll check results -> incidents opened, updated and resolved.

A condition (rule, cluster, subject) that lasts N polls is one incident: opened at the first poll
that raises it, `last_seen_at` moved by every poll that raises it again, resolved at the first
poll where its cluster had data and the rule did not raise it. A cluster without data (down,
auth_failed) neither refreshes nor resolves its incidents. Change rules (a topic recreated, a
broker upgraded, a controller moved...) are one-off incidents: opened and resolved by one poll.

Open incidents live in a file the fleet state's manifest names (`_state/fleet/open/...`), rewritten when one
opens or resolves; a poll that only moves `last_seen_at` rewrites it at most once per `flush_interval_s` (so a
restart loses at most that much of `last_seen_at`, never an incident). Resolved incidents are appended to the
`incidents` day table (day of resolution). The tracker only says what to write (`pending`); the fleet writer
writes it with the poll's state and commits both in one manifest (backend/store/fleet_writer.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.store.lake import Lake
from backend.store.model import Alert
from backend.store.schemas import INCIDENTS, SCHEMA_VERSION, schema_for
from backend.store.state import read_open_incidents

ONE_OFF_RULES = frozenset({"broker_upgraded", "topic_recreated", "topic_created", "topic_deleted", "controller_changed",
                           "client_unknown_software_appeared"})

Key = tuple[str, str, str]


def incident_id(rule: str, cluster_name: str, subject: str, opened_poll_id: str) -> str:
    """A stable id of an incident."""
    key = f"{opened_poll_id}\x1f{rule}\x1f{cluster_name}\x1f{subject}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:20]


def _evidence(alert: Alert) -> str:
    return json.dumps(alert.evidence, sort_keys=True, default=str)


@dataclass
class Transitions:
    """What one poll did to the incidents."""

    opened: list[dict[str, Any]] = field(default_factory=list)
    updated: int = 0
    resolved: list[dict[str, Any]] = field(default_factory=list)


class IncidentTracker:
    """Turns each poll's alerts into incident transitions and keeps the open ones in the lake."""

    def __init__(self, lake: Lake, *, flush_interval_s: float = 60.0, manifest: dict[str, Any] | None = None) -> None:
        """Load the open incidents of the lake (those the given manifest names)."""
        self.lake = lake
        self.flush_interval_s = flush_interval_s
        self.open: dict[Key, dict[str, Any]] = {}
        for row in read_open_incidents(lake, manifest).to_pylist():
            self.open[(row["rule"], row["cluster_name"], row["subject"])] = row
        self._dirty = False
        self._last_flush: datetime | None = None
        # The alert each open incident was last compared with: an alert handed over again (the policy evaluation
        # reuses unchanged ones) has the same evidence, so it is not serialised again.
        self._compared: dict[Key, Alert] = {}

    def observe(
        self, poll_id: str, at: datetime, alerts: Iterable[Alert], clusters_with_data: Iterable[str],
        hold: Iterable[tuple[str, str]] = (),
    ) -> Transitions:
        """Apply one poll's alerts; return the transitions (resolved ones still to be written).

        ``hold``: (rule, cluster) pairs the poll could not judge; their open incidents stay as they are.
        """
        out = Transitions()
        seen: set[Key] = set()
        for alert in alerts:
            key = (alert.rule, alert.cluster_name, alert.subject)
            if key in seen:
                continue
            seen.add(key)
            if alert.rule in ONE_OFF_RULES:
                row = self._new(poll_id, at, alert)
                row.update(status="resolved", one_off=True, resolved_at=at, resolved_poll_id=poll_id)
                out.resolved.append(row)
                continue
            existing = self.open.get(key)
            if existing is None:
                created = self._new(poll_id, at, alert)
                self.open[key] = created
                out.opened.append(created)
                continue
            row = existing
            row["last_seen_at"] = at
            row["last_poll_id"] = poll_id
            row["polls_seen"] = int(row["polls_seen"] or 0) + 1
            if self._compared.get(key) is alert:
                out.updated += 1
                self._dirty = True
                continue
            self._compared[key] = alert
            evidence = _evidence(alert)
            if evidence != row["latest_evidence_json"] or alert.severity != row["severity"]:
                row["latest_evidence_json"] = evidence
                row["severity"] = alert.severity
                row["explanation"] = alert.explanation
            out.updated += 1
            self._dirty = True
        with_data = set(clusters_with_data)
        held = set(hold)
        for key in [k for k in self.open if k not in seen and k[1] in with_data and (k[0], k[1]) not in held]:
            self._compared.pop(key, None)
            row = self.open.pop(key)
            row.update(status="resolved", resolved_at=at, resolved_poll_id=poll_id)
            out.resolved.append(row)
        return out

    def pending(self, at: datetime, transitions: Transitions, *, force: bool = False) -> pa.Table | None:
        """The open incidents to write with this poll: when one opened or resolved, or a flush is due (None: nothing).

        The resolved ones are ``transitions.resolved`` (appended to the `incidents` day table by the writer).
        """
        changed = bool(transitions.opened or transitions.resolved)
        due = self._dirty and (
            self._last_flush is None or (at - self._last_flush).total_seconds() >= self.flush_interval_s
        )
        if changed or due or (force and self._dirty):
            return incidents_table(list(self.open.values()))
        return None

    def flushed(self, at: datetime) -> None:
        """The open incidents given by pending() were committed."""
        self._dirty = False
        self._last_flush = at

    def unflushed(self) -> pa.Table | None:
        """The open incidents, when moved since they were last committed (the writer flushes them when it stops)."""
        return incidents_table(list(self.open.values())) if self._dirty else None

    @staticmethod
    def _new(poll_id: str, at: datetime, alert: Alert) -> dict[str, Any]:
        evidence = _evidence(alert)
        return {
            "incident_id": incident_id(alert.rule, alert.cluster_name, alert.subject, poll_id),
            "rule": alert.rule,
            "severity": alert.severity,
            "cluster_name": alert.cluster_name,
            "subject": alert.subject,
            "status": "open",
            "one_off": False,
            "opened_at": at,
            "opened_poll_id": poll_id,
            "last_seen_at": at,
            "last_poll_id": poll_id,
            "resolved_at": None,
            "resolved_poll_id": None,
            "polls_seen": 1,
            "evidence_json": evidence,
            "latest_evidence_json": evidence,
            "explanation": alert.explanation,
            "doc_url": alert.doc_url,
        }


def incidents_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Incident rows as a table of the `incidents` schema."""
    return pa.Table.from_pylist([{**r, "schema_version": SCHEMA_VERSION} for r in rows], schema=schema_for(INCIDENTS))
