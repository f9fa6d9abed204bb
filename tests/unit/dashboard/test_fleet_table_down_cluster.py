"""A down cluster has no counts (NaN in Parquet): the fleet table shows it on its own row instead of failing."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd

from backend.views.fleet_views import fleet_table


def test_down_cluster_row_next_to_an_ok_one() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    latest = pd.DataFrame({
        "cluster_name": ["up", "gone"], "cluster_id": ["QUJDREVGR0hJSktMTU5PUA", None], "status": ["ok", "down"],
        "error": [None, "no broker answered within 30 s"], "controller_id": [1.0, np.nan],
        "brokers_reachable": [3.0, np.nan], "broker_count": [3.0, np.nan], "topic_count": [12.0, np.nan],
        "under_replicated": [0.0, np.nan], "polled_at": [pd.Timestamp(now)] * 2,
    })  # fmt: skip
    brokers = pd.DataFrame(columns=["cluster_name", "software_name", "software_version", "version_provenance"])
    table = fleet_table(latest, brokers, now=now).set_index("cluster")
    assert table.loc["up", "brokers"] == "3/3" and table.loc["up", "topics"] == 12
    assert table.loc["gone", "status"] == "down" and table.loc["gone", "brokers"] == "—"
    assert table.loc["gone", "error"] == "no broker answered within 30 s"
    assert table.loc["gone", "cluster_id"] == "" and table.loc["gone", "topics"] == 0
