"""Incident views: open first with since / for how long, resolved in a window, grouped by rule."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from backend.views import config_views, incident_views

NOW = pd.Timestamp("2026-11-23 12:00", tz="UTC")


def _row(rule: str, severity: str, cluster: str, subject: str, opened: str, resolved: str | None = None,
         **evidence: object) -> dict[str, object]:
    return {"raised_at": pd.Timestamp(opened, tz="UTC"), "severity": severity, "source": "fleet", "rule": rule,
            "cluster": cluster, "subject": subject, "evidence": json.dumps(evidence),
            "latest_evidence": json.dumps({**evidence, "latest": True}), "rationale": "r", "doc_url": None,
            "poll_id": "p", "status": "resolved" if resolved else "open",
            "last_seen_at": pd.Timestamp(resolved or "2026-11-23 11:59", tz="UTC"),
            "resolved_at": pd.Timestamp(resolved, tz="UTC") if resolved else pd.NaT}


ALERTS = pd.DataFrame([
    _row("version_skew", "warning", "a", "cluster a", "2026-11-20 12:00", versions=["3.9.1", "4.3.1"]),
    _row("under_replicated", "critical", "b", "topic t", "2026-11-23 09:30", partitions=3),
    _row("under_replicated", "critical", "c", "topic u", "2026-11-23 11:00", partitions=1),
    _row("topic_recreated", "warning", "a", "topic x", "2026-11-22 18:00", "2026-11-22 18:00", old_id="o"),
    _row("broker_missing", "critical", "a", "broker 2", "2026-11-10 08:00", "2026-11-10 09:00", broker=2),
])


@pytest.mark.parametrize(("seconds", "text"), [(45, "45 s"), (720, "12 min"), (3 * 3600 + 300, "3 h 05 min"),
                                               (2 * 86_400 + 4 * 3600 + 59, "2 d 4 h"), (-5, "0 s")])
def test_duration_text(seconds: int, text: str) -> None:
    assert incident_views.duration_text(pd.Timedelta(seconds=seconds)) == text


def test_open_first_most_severe_and_oldest_first_then_resolved_newest_first() -> None:
    board = incident_views.alert_board(ALERTS, now=NOW)
    assert list(board["state"]) == ["open", "open", "open", "resolved", "resolved"]
    assert list(board["subject"]) == ["topic t", "topic u", "cluster a", "topic x", "broker 2"]
    assert list(board["for"][:3]) == ["2 h 30 min", "1 h 00 min", "3 d 0 h"]
    assert board.loc[4, "for"] == "1 h 00 min"  # resolved: how long it was open
    assert board.loc[2, "evidence"] == "latest = True; versions = 3.9.1, 4.3.1"
    assert board.loc[2, "evidence_at_opening"] == "versions = 3.9.1, 4.3.1"


def test_resolved_in_window_and_grouped_by_rule() -> None:
    board = incident_views.alert_board(ALERTS, now=NOW)
    day = incident_views.resolved_incidents(board, NOW - pd.Timedelta(days=1))
    month = incident_views.resolved_incidents(board, NOW - pd.Timedelta(days=30))
    assert list(day["subject"]) == ["topic x"] and list(month["subject"]) == ["topic x", "broker 2"]
    grouped = incident_views.by_rule(board, now=NOW).set_index("rule")
    assert list(grouped.index) == ["under_replicated", "version_skew"]
    assert grouped.loc["under_replicated", ["open", "clusters", "subjects"]].tolist() == [2, 2, 2]
    assert grouped.loc["under_replicated", "longest"] == "2 h 30 min"
    assert incident_views.open_counts(board) == {"critical": 2, "warning": 1, "info": 0}


def test_client_config_rules_show_their_title_beside_the_code() -> None:
    config = pd.DataFrame({"computed_at": [NOW - pd.Timedelta(hours=1)] * 2, "severity": ["critical", "critical"],
                           "rule_id": ["CC001", "CC001"], "title": ["Idempotent producer without acks=all"] * 2,
                           "cluster_id": ["id-a", "id-b"], "client_id": ["w1", "w2"], "client_instance_id": ["i1", "i2"],
                           "group_id": [None, None], "client_type": ["producer"] * 2,
                           "observed_json": ['{"acks": "1"}'] * 2, "explanation": ["e"] * 2, "doc_url": [None] * 2})
    alerts = config_views.unified_alerts(ALERTS.drop(columns=["latest_evidence"]).rename(
        columns={"cluster": "cluster_name", "evidence": "evidence_json", "rationale": "explanation"}), config,
        {"id-a": "a", "id-b": "b"})
    grouped = incident_views.by_rule(incident_views.alert_board(alerts, now=NOW), now=NOW).set_index("rule")
    assert list(grouped.columns[:2]) == ["title", "severity"]
    assert grouped.loc["CC001", "title"] == "Idempotent producer without acks=all"
    assert grouped.loc["CC001", ["open", "clusters"]].tolist() == [2, 2]
    assert grouped.loc["under_replicated", "title"] == ""  # fleet rules are named by their code


def test_an_empty_frame_gives_empty_views() -> None:
    board = incident_views.alert_board(pd.DataFrame())
    assert board.empty and incident_views.by_rule(board).empty
    assert incident_views.open_counts(board) == {"critical": 0, "warning": 0, "info": 0}
