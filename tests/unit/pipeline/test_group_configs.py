"""results/group_configs: per group, the members reporting each value of the keys that shape a group."""

from __future__ import annotations

import pandas as pd

from backend.pipeline import results as RS
from backend.store.config_schemas import arrow_schema


def test_group_configs_keeps_the_group_shaping_keys_with_their_member_counts() -> None:
    counts = pd.DataFrame({
        "cluster_id": ["c1"] * 4,
        "group_id": ["orders", "orders", "orders", "billing"],
        "key": ["partition.assignment.strategy", "partition.assignment.strategy", "linger.ms", "group.protocol"],
        "value": ["range", "cooperative-sticky", "5", "consumer"],
        "n": [2, 1, 3, 4],
    })
    out = RS.group_configs(counts)
    assert list(out.columns) == ["cluster_id", "group_id", "key", "value", "instances"]
    assert sorted(map(tuple, out.to_numpy().tolist())) == [
        ("c1", "billing", "group.protocol", "consumer", 4),
        ("c1", "orders", "partition.assignment.strategy", "cooperative-sticky", 1),
        ("c1", "orders", "partition.assignment.strategy", "range", 2)]
    table = RS.to_arrow(out, "group_configs", pd.Timestamp.now(tz="UTC").to_pydatetime())
    assert table.schema == arrow_schema("group_configs")
    assert "group_configs" in RS.results_tables({name: frame for name, frame in {
        "value_counts": pd.DataFrame(columns=["cluster_id", "client_type", "key", "value", "raw_value", "type",
                                              "is_default", "n"]),
        "group_counts": counts, "version_counts": pd.DataFrame(columns=["cluster_id", "client_type",
                                                                        "client_software_name",
                                                                        "client_software_version", "n"]),
        "client_id_counts": pd.DataFrame(columns=["cluster_id", "client_id", "client_type", "n"])}.items()})
