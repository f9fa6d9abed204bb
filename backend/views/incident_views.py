"""Alerts as incidents for the pages: open first with since / for how long, resolved ones in a window, by rule."""

from __future__ import annotations

import pandas as pd

from backend.views.config_views import SEVERITY_RANK
from backend.views.evidence import evidence_text

BOARD_COLUMNS = ["state", "severity", "source", "rule", "title", "cluster", "subject", "since", "for", "last_seen",
                 "resolved", "evidence", "evidence_at_opening", "rationale", "doc_url"]
# A client-config rule is a code (CC001): its title stands beside it. Fleet rules are named by their code.
BY_RULE_COLUMNS = ["rule", "title", "severity", "source", "open", "clusters", "subjects", "open_since", "longest"]


def duration_text(delta: pd.Timedelta | None) -> str:
    """A duration as an SRE reads it: '45 s', '12 min', '3 h 05 min', '2 d 4 h'."""
    if delta is None or pd.isna(delta):
        return ""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


def _utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True)


def alert_board(alerts: pd.DataFrame, *, now: pd.Timestamp | None = None) -> pd.DataFrame:
    """One row per incident or client-config alert: open ones first (most severe, oldest first), then resolved.

    `alerts` is the frame of backend.views.config_views.unified_alerts; evidence becomes `key = value` text.
    """
    if alerts.empty:
        return pd.DataFrame(columns=BOARD_COLUMNS)
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    since = _utc(alerts["raised_at"])
    resolved = _utc(alerts["resolved_at"]) if "resolved_at" in alerts else pd.Series(pd.NaT, index=alerts.index)
    status = alerts["status"] if "status" in alerts else pd.Series(None, index=alerts.index, dtype="object")
    # A v1 lake has no status: its alerts are per-poll rows, shown as open only when nothing says otherwise.
    state = status.where(status.notna(), "open").where(resolved.isna(), "resolved")
    last_seen = _utc(alerts["last_seen_at"]) if "last_seen_at" in alerts else since
    ended = resolved.where(resolved.notna(), now)
    latest = alerts["latest_evidence"] if "latest_evidence" in alerts else alerts["evidence"]
    board = pd.DataFrame({
        "state": state,
        "severity": alerts["severity"],
        "source": alerts["source"],
        "rule": alerts["rule"],
        "title": alerts["title"].fillna("") if "title" in alerts else "",
        "cluster": alerts["cluster"],
        "subject": alerts["subject"].fillna(""),
        "since": since,
        "for": [duration_text(end - start) for start, end in zip(since, ended, strict=True)],
        "last_seen": last_seen.where(last_seen.notna(), since),
        "resolved": resolved,
        "evidence": [evidence_text(v, separator="; ") for v in latest.fillna("")],
        "evidence_at_opening": [evidence_text(v, separator="; ") for v in alerts["evidence"].fillna("")],
        "rationale": alerts["rationale"].fillna(""),
        "doc_url": alerts["doc_url"],
    })
    board["_open"] = (board["state"] != "open").astype(int)
    board["_rank"] = board["severity"].map(SEVERITY_RANK).fillna(9)
    board = board.sort_values(["_open", "_rank", "since"], kind="stable")
    open_part = board[board["state"] == "open"]
    resolved_part = board[board["state"] != "open"].sort_values(["resolved", "since"], ascending=False, kind="stable")
    ordered = pd.concat([open_part, resolved_part]).drop(columns=["_open", "_rank"])
    return ordered[BOARD_COLUMNS].reset_index(drop=True)


def open_incidents(board: pd.DataFrame) -> pd.DataFrame:
    """The open rows of a board (standing conditions and client-config alerts of the latest run)."""
    return board[board["state"] == "open"].reset_index(drop=True)


def resolved_incidents(board: pd.DataFrame, since: pd.Timestamp) -> pd.DataFrame:
    """Rows resolved at or after `since`, newest resolution first."""
    done = board[(board["state"] == "resolved") & (_utc(board["resolved"]) >= since)]
    return done.reset_index(drop=True)


def by_rule(board: pd.DataFrame, *, now: pd.Timestamp | None = None) -> pd.DataFrame:
    """Open rows grouped by rule: how many, across how many clusters and subjects, open since when, longest."""
    rows = open_incidents(board)
    if rows.empty:
        return pd.DataFrame(columns=BY_RULE_COLUMNS)
    now = now if now is not None else pd.Timestamp.now(tz="UTC")
    grouped = rows.groupby(["rule", "severity", "source"], sort=False).agg(
        title=("title", "first"), open=("rule", "size"), clusters=("cluster", "nunique"),
        subjects=("subject", "nunique"), open_since=("since", "min")).reset_index()
    grouped["longest"] = [duration_text(now - start) for start in _utc(grouped["open_since"])]
    grouped["_rank"] = grouped["severity"].map(SEVERITY_RANK).fillna(9)
    grouped = grouped.sort_values(["_rank", "open", "rule"], ascending=[True, False, True])
    return grouped[BY_RULE_COLUMNS].reset_index(drop=True)


def open_counts(board: pd.DataFrame) -> dict[str, int]:
    """Open rows by severity, for the fleet tiles."""
    counts = open_incidents(board)["severity"].value_counts()
    return {s: int(counts.get(s, 0)) for s in SEVERITY_RANK}
