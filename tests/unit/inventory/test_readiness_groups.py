"""Upgrade readiness's consumer-group item reads the stored groups (backend.store.group_readers.read_groups)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from backend.store import group_readers
from backend.views import readiness as R
from tests.unit.dashboard.group_lake import build_group_lake

NO_INVENTORY = pd.DataFrame(columns=["cluster_name", "kind", "connections", "software_name", "software_version"])
NO_RUNS = pd.DataFrame(columns=["cluster_name", "status"])
ITEM = "consumer groups on the classic protocol"


def _item(report: R.Readiness, cluster: str) -> tuple[str, str]:
    row = report.items[(report.items["cluster_name"] == cluster) & (report.items["item"] == ITEM)].iloc[0]
    return str(row["status"]), str(row["detail"])


def test_classic_groups_warn_a_read_cluster_without_them_passes_and_an_unread_one_is_unknown(tmp_path: Path) -> None:
    lake = build_group_lake(tmp_path / "lake")
    groups = group_readers.read_groups(lake, ["eu", "us"])
    clusters = pd.DataFrame({"cluster_name": ["eu", "us", "staging", "new"], "zk_cluster_id": [None] * 4})
    brokers = pd.DataFrame(columns=["cluster_name", "software_version", "version_provenance", "version_min",
                                    "version_max", "reachable"])
    no_classic = groups[(groups["cluster_name"] == "eu") & (groups["group_type"] != "classic")]
    report = R.readiness(clusters, brokers, NO_INVENTORY, NO_RUNS,
                         groups=pd.concat([groups[groups["cluster_name"] == "us"], no_classic]),
                         groups_read={"eu", "us", "staging"}, target="4.0")
    status, detail = _item(report, "us")
    assert status == R.WARN and "3 consumer groups still on the classic protocol" in detail
    assert _item(report, "eu")[0] == R.PASS
    assert _item(report, "staging")[0] == R.PASS  # read, no groups in the frame given: none on classic
    assert _item(report, "new") == (R.UNKNOWN, "consumer groups not read yet (group_interval_s, or reading them "
                                               "failed)")
    unread = R.readiness(clusters, brokers, NO_INVENTORY, NO_RUNS, groups=None, target="4.0")
    assert _item(unread, "eu") == (R.UNKNOWN, "consumer groups not collected")
