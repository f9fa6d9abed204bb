"""Clusters without client configs have no drift rows: the compare page's key list must still work."""

from __future__ import annotations

import pandas as pd

from backend.views.config_views import drift_matrix


def test_no_drift_rows_give_an_empty_string_index() -> None:
    drift = pd.DataFrame({"cluster_a_name": ["a"], "cluster_b_name": ["b"], "key": ["acks"], "client_type": ["producer"], "tvd": [0.5]})
    heat = drift_matrix(drift, ["c", "d"])
    assert heat.empty
    assert list(heat.index.str.replace(r" \(.*\)$", "", regex=True)) == []
    full = drift_matrix(drift, ["a", "b"])
    assert list(full.index) == ["acks (producer)"] and full.iloc[0, 0] == 0.5
