"""Fleet alerts (UTC-aware, from the poller) and config alerts (naive UTC, from Spark) sort together."""

from __future__ import annotations

import pandas as pd

from backend.views.config_views import unified_alerts


def test_aware_and_naive_times_merge_newest_first() -> None:
    fleet = pd.DataFrame({
        "raised_at": pd.to_datetime(["2026-11-21T10:00:00Z"], utc=True), "severity": ["critical"], "rule": ["topic_recreated"],
        "cluster_name": ["a"], "subject": ["t"], "evidence_json": ["{}"], "explanation": ["x"], "doc_url": [""], "poll_id": ["p1"],
    })  # fmt: skip
    config = pd.DataFrame({
        "computed_at": pd.to_datetime(["2026-11-21T11:00:00"]), "severity": ["critical"], "rule_id": ["CC001"],
        "cluster_id": ["cid"], "client_id": ["c"], "client_instance_id": ["i"], "group_id": [None], "keys": [["acks"]],
        "observed_json": ['{"acks": "1"}'], "title": ["t"], "explanation": ["e"], "doc_url": [""],
    })  # fmt: skip
    merged = unified_alerts(fleet, config, {"cid": "b"})
    assert list(merged["rule"]) == ["CC001", "topic_recreated"]
    assert str(merged["raised_at"].dt.tz) == "UTC"
