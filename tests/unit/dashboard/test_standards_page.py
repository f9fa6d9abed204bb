"""The Standards page, its drift-report section and its /metrics series, on the fixture lake judged by a policy file."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from backend.collect.standards_metrics import standards_families
from backend.export.report import build_drift_report
from backend.pipeline.heads import HEAD_SCHEMA
from backend.pipeline.results import client_instances
from backend.pipeline.state_store import VALUE_SCHEMA
from backend.standards.engine import StandardsEngine
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id
from backend.store.model import ClusterSnapshot, FleetPoll
from backend.store.snapshots import current_snapshots
from backend.store.standards_model import PolicyResult, StandardsSnapshot
from backend.store.tables import replace_table
from tests.unit.dashboard.lake_fixture import CLUSTERS
from tests.unit.dashboard.test_pages import OpenPage, _page_text

HOSTILE_CLIENT = "=HYPERLINK(\"http://x\")\u202eppa\x1b[2J"

POLICIES = """
[[policies]]
id = "prod-rf"
title = "Production topics keep three replicas"
severity = "critical"
select = { env = "prod" }
check = "topic_shape"
replication_factor = { min = 3 }

[[policies]]
id = "floor"
title = "Brokers at 3.9 or later"
check = "cluster"
version_min = "3.9"

[[policies]]
id = "no-acks-0"
title = "No fire and forget"
check = "client_config"
client_type = "producer"
key = "acks"
require = { not_equals = "0" }
unreported = "pass"
"""


@pytest.fixture(scope="module")
def judged_lake(fixture_lake: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FleetPoll]:
    """A copy of the fixture lake after one poll judged by POLICIES (the poller's engine and writer)."""
    root = tmp_path_factory.mktemp("standards")
    lake = root / "lake"
    shutil.copytree(fixture_lake, lake)
    (root / "policies.toml").write_text(POLICIES)
    _instances_of_prod_us(lake, datetime.now(UTC))
    now = datetime.now(UTC)
    snapshots = current_snapshots(lake)
    poll = FleetPoll(new_poll_id(now), now, list(snapshots.values()), [], 0.0)
    for s in poll.clusters:
        s.polled_at = now
    StandardsEngine(root / "policies.toml", str(lake)).evaluate(poll)
    FleetWriter(Lake(lake)).write(poll)
    return lake, poll


def test_the_page_shows_compliance_per_cluster_and_policy_and_the_findings(judged_lake: tuple[Path, FleetPoll],
                                                                           open_page: OpenPage) -> None:
    lake, poll = judged_lake
    app = open_page(lake, "standards")
    metrics = {m.label: m.value for m in app.metric}
    expected = sum(len(s.standards.results) for s in poll.clusters if s.standards)
    assert metrics["Policies × clusters"].startswith("3 × ") and expected > 0
    tables = {tuple(df.value.columns[:3]): df.value for df in app.dataframe}
    per_cluster = next(v for k, v in tables.items() if k[0] == "cluster_name" and "percent_passing" in v.columns)
    per_policy = next(v for k, v in tables.items() if k[0] == "policy_id")
    assert set(per_policy["policy_id"]) == {"prod-rf", "floor", "no-acks-0"}
    assert set(per_cluster["cluster_name"]) <= {"prod-eu", "prod-us", "staging"}
    text = _page_text(app)
    assert "Policy file" in text and "digest" in text
    findings = next(v for v in tables.values() if "outcome" in v.columns and "seen" in v.columns)
    assert len(findings) >= 1 and set(findings["outcome"].str.split(" ").str[-1]) <= {"violation", "unknown"}


def _instances_of_prod_us(lake: Path, now: datetime) -> None:
    """results/client_instances as the analysis writes it: prod-us's producers, one with acks=0 and a hostile
    client.id, one not reporting acks (the policy passes those), one with acks=all."""
    cid = CLUSTERS["prod-us"]["id"]
    heads = pa.Table.from_pylist([
        {"client_instance_id": f"ci-{i}", "snapshot_id": f"s-{i}", "received_at": now, "cluster_id": cid,
         "broker_id": 1, "client_id": name, "client_type": "producer", "client_software_name": "apache-kafka-java",
         "client_software_version": "3.9.1", "principal": "User:billing", "client_address": "/10.1.2.3",
         "group_id": None, "cfg_client_id": name, "rows": 2, "files": []}
        for i, name in enumerate([HOSTILE_CLIENT, "quiet-writer", "good-writer"])], schema=HEAD_SCHEMA)
    values = pa.Table.from_pylist([{"client_instance_id": "ci-0", "key": "acks", "value": "0"},
                                   {"client_instance_id": "ci-2", "key": "acks", "value": "all"}], schema=VALUE_SCHEMA)
    replace_table(str(lake), "results/client_instances", client_instances(heads, values, ["acks"], now))


def test_the_page_lists_the_instances_behind_client_findings_as_plain_text(judged_lake: tuple[Path, FleetPoll],
                                                                          open_page: OpenPage) -> None:
    lake, poll = judged_lake
    result = poll.cluster("prod-us").standards.results["no-acks-0"]
    assert (result.violating, result.passing, result.checked) == (1, 2, 3)  # judged per instance, unreported pass
    assert [c.client_id for c in result.items[0].instances] == [HOSTILE_CLIENT]
    app = open_page(lake, "standards")
    assert "Instances to chase" in [h.value for h in app.subheader]
    assert "1 of 1 named" in _page_text(app)
    named = next(df.value for df in app.dataframe if "client_instance_id" in df.value.columns)
    assert list(named["client_instance_id"]) == ["ci-0"] and list(named["principal"]) == ["User:billing"]
    shown = named["client_id"].iloc[0]
    assert "<U+202E>" in shown and "\u202e" not in shown and "\x1b" not in shown


def test_the_drift_report_has_a_standards_section(judged_lake: tuple[Path, FleetPoll]) -> None:
    lake, _ = judged_lake
    text = build_drift_report(str(lake), ["prod-eu", "prod-us"])
    section = text[text.index("<h2>Standards</h2>"):text.index("<h2>Drift by key")]
    assert "Per cluster" in section and "Per policy" in section and "prod-rf" in section
    assert "staging" not in section  # only the chosen clusters


def test_metrics_per_policy_and_cluster_are_bounded_and_plain(judged_lake: tuple[Path, FleetPoll]) -> None:
    _, poll = judged_lake
    families = {f.name: f for f in standards_families(poll, {"error": "p.toml:3: bad", "using": "last_good"})}
    statuses = families["kafka_fleet_policy_status"].samples
    pairs = sum(len(s.standards.results) for s in poll.clusters if s.standards)
    assert len(statuses) == pairs and all(s.value == 1.0 for s in statuses)
    assert families["kafka_fleet_policy_file_refused"].samples[0].value == 1.0
    assert {s.labels["policy"] for s in families["kafka_fleet_policy_passing_ratio"].samples} == {
        "prod-rf", "floor", "no-acks-0"}
    bounded = {f.name: f for f in standards_families(poll, {}, max_pairs=2)}
    assert len(bounded["kafka_fleet_policy_status"].samples) == 2
    assert bounded["kafka_fleet_policy_series_dropped"].samples[0].value == pairs - 2
    worst = bounded["kafka_fleet_policy_status"].samples[0].labels["status"]
    assert worst in ("violation", "unknown")
    hostile = PolicyResult(policy_id="p\u202e\n" + "x" * 300, cluster_name="c\x1b", status="violation",
                           severity="info", violating=1)
    snapshot = ClusterSnapshot("c\x1b", "ok", poll.polled_at,
                               standards=StandardsSnapshot(poll.polled_at, "d", {"p": hostile}))
    labels = [v for s in standards_families(FleetPoll("x", poll.polled_at, [snapshot], [], 0.0))[0].samples
              for v in s.labels.values()]
    assert labels and all("\u202e" not in v and "\n" not in v and "\x1b" not in v and len(v) <= 128 for v in labels)
