"""The one-file drift report and `python -m backend export` through its real entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from backend.export.csv_safe import safe_csv
from backend.export.report import ReportError, build_drift_report
from backend.views.broker_config_views import compare_broker_configs
from tests.unit.dashboard.lake_fixture import SECRET_VALUE

ROOT = Path(__file__).resolve().parents[3]
_SCRIPT_BODY = re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL | re.IGNORECASE)


def external_references(html_text: str) -> list[str]:
    """src/href attributes pointing at http(s) hosts, outside inline script bodies."""
    markup = _SCRIPT_BODY.sub("<script></script>", html_text)
    return re.findall(r"""(?:src|href)\s*=\s*["']?(https?:[^"' >]+)""", markup, re.IGNORECASE)


def test_report_is_self_contained_and_has_the_drift(fixture_lake: Path) -> None:
    text = build_drift_report(str(fixture_lake), ["prod-eu", "prod-us"])
    assert text.startswith("<!DOCTYPE html>")
    assert external_references(text) == []
    assert not re.search(r"<script[^>]+src=", text, re.IGNORECASE)
    assert text.count("plotly.js v") >= 1  # the library is inlined once
    assert "compression.type" in text and "0.600" in text
    assert SECRET_VALUE not in text and "sasl.jaas.config" not in text


def test_report_with_chosen_keys_only(fixture_lake: Path) -> None:
    text = build_drift_report(str(fixture_lake), ["prod-eu", "prod-us"], ["linger.ms"])
    assert "<h3>linger.ms</h3>" in text and "<h3>acks</h3>" not in text


@pytest.mark.parametrize(("clusters", "keys", "message"), [
    (["prod-eu", "nowhere"], None, "unknown cluster"),
    (["prod-eu"], ["no.such.setting"], "no results for key"),
    (["prod-eu"], ["sasl.jaas.config"], "sensitive keys are never reported"),
    ([], None, "at least one cluster"),
])
def test_report_rejects_bad_input_clearly(fixture_lake: Path, clusters: list[str], keys: list[str] | None, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        build_drift_report(str(fixture_lake), clusters, keys)


def test_report_without_pipeline_results_says_run_analyze(snapshots_only_lake: Path) -> None:
    with pytest.raises(ReportError, match="python -m backend analyze"):
        build_drift_report(str(snapshots_only_lake), ["prod-eu"])


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "backend", "export", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def test_cli_writes_the_report(fixture_lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    done = _export("--report", "drift", "--clusters", "prod-eu,prod-us", "--keys", "acks,linger.ms",
                   "--lake", str(fixture_lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert "<h3>acks</h3>" in text and external_references(text) == []


def test_cli_bad_cluster_exits_2_and_writes_nothing(fixture_lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = _export("--report", "drift", "--clusters", "nope", "--lake", str(fixture_lake), "--out", str(out))
    assert done.returncode == 2
    assert "unknown cluster(s) nope" in done.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_report_leaves_identity_keys_out_unless_asked_and_names_spellings(fixture_lake: Path, tmp_path: Path) -> None:
    text = build_drift_report(str(fixture_lake), ["prod-eu", "prod-us"])
    assert "<h3>client.id</h3>" not in text and "<h3>compression.type</h3>" in text
    assert "reported as -1, all" in text  # hover of the acks chart; the table has a reported_as column
    out = tmp_path / "with-identity.html"
    done = _export("--report", "drift", "--clusters", "prod-eu,prod-us", "--include-identity",
                   "--lake", str(fixture_lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    with_identity = out.read_text(encoding="utf-8")
    assert "<h3>client.id</h3>" in with_identity and "other (42 values)" in with_identity


def test_report_has_the_broker_config_comparison_differences_first(fixture_lake: Path) -> None:
    text = build_drift_report(str(fixture_lake), ["prod-eu", "prod-us"])
    section = text.split("<h2>Broker configs</h2>", 1)[1].split("<h2>", 1)[0]
    assert "3 of 4 configs set somewhere differ" in section
    rows = re.findall(r"<tr>\s*<td>([^<]+)</td>", section)
    assert rows == ["log.retention.hours", "min.insync.replicas", "unclean.leader.election.enable",
                    "auto.create.topics.enable"]
    assert "differs within the cluster: 168 | 72" in section
    assert "ssl.keystore.password" not in section  # at its default (withheld) everywhere: left out


def test_cli_exports_the_broker_config_comparison_as_csv(fixture_lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "broker-configs.csv"
    done = _export("--report", "broker-configs", "--clusters", "prod-eu,prod-us", "--lake", str(fixture_lake),
                   "--out", str(out))
    assert done.returncode == 0, done.stderr
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["config", "differs", "all_default", "prod-eu", "prod-us"]
    assert frame["config"].iloc[0] == "log.retention.hours" and bool(frame["differs"].iloc[0])
    everything = tmp_path / "all.csv"
    assert _export("--report", "broker-configs", "--clusters", "prod-eu,prod-us", "--include-defaults",
                   "--lake", str(fixture_lake), "--out", str(everything)).returncode == 0
    withheld = pd.read_csv(everything).set_index("config").loc["ssl.keystore.password"]
    assert (withheld["prod-eu"], withheld["prod-us"]) == ("(withheld: sensitive)", "(withheld: sensitive)")
    bad = _export("--report", "broker-configs", "--clusters", "prod-eu,nope", "--lake", str(fixture_lake),
                  "--out", str(tmp_path / "x.csv"))
    assert bad.returncode == 2 and "unknown cluster(s) nope" in bad.stderr
    never_read = _export("--report", "broker-configs", "--clusters", "staging", "--lake", str(fixture_lake),
                         "--out", str(tmp_path / "y.csv"))
    assert never_read.returncode == 2 and "no broker configs stored for staging" in never_read.stderr


def test_broker_config_csv_neutralises_formulas_a_broker_could_send() -> None:
    rows = pd.DataFrame([{"cluster_name": c, "resource_type": "broker", "resource": "1", "config_name": "x.y",
                          "value": v, "source": "STATIC_BROKER_CONFIG", "withheld": None, "read_only": True,
                          "config_type": "STRING"} for c, v in (("a", "=HYPERLINK(\"http://evil\")"), ("b", "1"))])
    csv = safe_csv(compare_broker_configs(rows, ["a", "b"]))
    assert "'=HYPERLINK" in csv and ",=HYPERLINK" not in csv


def test_a_scoped_report_names_no_other_cluster(fixture_lake: Path) -> None:
    from backend.auth.scope import scope_for
    from backend.views import frames
    from tests.unit.dashboard.lake_fixture import CLUSTERS

    scope = scope_for(["prod-eu"], frames.known_clusters(str(fixture_lake)))
    text = build_drift_report(str(fixture_lake), ["prod-eu"], scope=scope)  # one cluster: the heatmap takes all pairs
    assert "prod-eu" in text
    others = ["prod-us", "staging", CLUSTERS["prod-us"]["id"], CLUSTERS["staging"]["id"]]
    assert [o for o in others if o in text] == []
    unscoped = build_drift_report(str(fixture_lake), ["prod-eu"])
    assert "prod-us" in unscoped  # without a scope the heatmap pairs prod-eu with every cluster
    with pytest.raises(ReportError) as caught:
        build_drift_report(str(fixture_lake), ["prod-us"], scope=scope)
    assert "prod-us" in str(caught.value) and "staging" not in str(caught.value)  # "known" lists only prod-eu


def test_a_scoped_broker_config_comparison_names_no_other_cluster(fixture_lake: Path) -> None:
    from backend.auth.scope import scope_for
    from backend.export.report import build_broker_config_csv
    from backend.views import frames

    scope = scope_for(["prod-eu"], frames.known_clusters(str(fixture_lake)))
    csv = build_broker_config_csv(str(fixture_lake), ["prod-eu"], scope=scope)
    assert "prod-eu" in csv and "prod-us" not in csv
    with pytest.raises(ReportError, match="unknown cluster"):
        build_broker_config_csv(str(fixture_lake), ["prod-eu", "prod-us"], scope=scope)
    text = build_drift_report(str(fixture_lake), ["prod-eu"], scope=scope)
    section = text.split("<h2>Broker configs</h2>", 1)[1].split("<h2>", 1)[0]
    assert "log.retention.hours" in section and "prod-us" not in section


def test_cli_exports_upgrade_readiness_and_its_config_keys_as_csv(fixture_lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "readiness.csv"
    done = _export("--report", "readiness", "--lake", str(fixture_lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    checklist = pd.read_csv(out, dtype={"target": str})
    assert list(checklist.columns) == ["cluster_name", "verdict", "target", "item", "status", "detail"]
    assert set(checklist["cluster_name"]) == {"prod-eu", "prod-us", "staging"}  # every polled cluster by default
    changed = checklist[(checklist["cluster_name"] == "prod-eu") & (checklist["item"] == "client config defaults changed")]
    assert changed["status"].iloc[0] == "warn" and "linger.ms (producer): 40 of 100 instances on the old default 0" in (
        changed["detail"].iloc[0])
    assert (checklist["target"] == "4.4").all()
    keys_out = tmp_path / "keys.csv"
    done = _export("--report", "readiness-keys", "--clusters", "prod-eu", "--target", "4.0", "--lake",
                   str(fixture_lake), "--out", str(keys_out))
    assert done.returncode == 0, done.stderr
    keys = pd.read_csv(keys_out, dtype={"target": str})
    linger = keys[keys["key"] == "linger.ms"].iloc[0]
    assert (linger["cluster_name"], linger["default_before"], linger["default_after"]) == ("prod-eu", "0 (3.9)", "5 (4.0)")
    assert (linger["at_old_default"], linger["set_otherwise"], linger["java_instances"]) == (40, 60, 70)
    assert set(keys["cluster_name"]) == {"prod-eu"} and (keys["target"] == "4.0").all()
    for bad, message in ((("--target", "3.9"), "unknown --target 3.9"), (("--clusters", "nope"), "unknown cluster(s) nope")):
        failed = _export("--report", "readiness", *bad, "--lake", str(fixture_lake), "--out", str(tmp_path / "x.csv"))
        assert failed.returncode == 2 and message in failed.stderr
    needs = _export("--report", "drift", "--lake", str(fixture_lake), "--out", str(tmp_path / "x.html"))
    assert needs.returncode == 2 and "needs --clusters" in needs.stderr


def test_a_scoped_readiness_csv_names_no_other_cluster(fixture_lake: Path) -> None:
    from backend.auth.scope import scope_for
    from backend.export.report import build_readiness_csv
    from backend.views import frames

    scope = scope_for(["prod-eu"], frames.known_clusters(str(fixture_lake)))
    for keys in (False, True):
        csv = build_readiness_csv(str(fixture_lake), keys=keys, scope=scope)
        assert "prod-eu" in csv and "prod-us" not in csv and "staging" not in csv
    with pytest.raises(ReportError) as caught:
        build_readiness_csv(str(fixture_lake), clusters=["prod-us"], scope=scope)
    assert "staging" not in str(caught.value)
    assert "Upgrade readiness" in build_drift_report(str(fixture_lake), ["prod-eu"], scope=scope)


def test_readiness_instances_csv_names_who_sets_removed_keys(fixture_lake: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from backend.export.report import build_readiness_csv
    from tests.unit.dashboard.lake_fixture import CLUSTERS, write_result

    lake = tmp_path / "lake"
    shutil.copytree(fixture_lake, lake)
    eu, us = CLUSTERS["prod-eu"]["id"], CLUSTERS["prod-us"]["id"]
    hostile = '=HYPERLINK("http://evil.example","x")'

    def alert(n: int, cid: str, rule: str, client_id: str, observed: dict[str, str]) -> dict[str, object]:
        return {"alert_id": f"a{n}", "rule_id": rule, "severity": "info", "title": rule, "cluster_id": cid,
                "client_instance_id": f"ci-{n}", "client_id": client_id, "group_id": None, "client_type": "producer",
                "keys": ",".join(observed), "observed_json": json.dumps(observed), "explanation": "", "doc_url": ""}

    write_result(lake, "config_alerts", [
        alert(1, eu, "CC019", hostile, {"auto.include.jmx.reporter": "false"}),
        alert(2, eu, "CC020", "statsd-app", {"metric.reporters": "com.example.StatsdReporter"}),
        alert(3, us, "CC019", "us-app", {"auto.include.jmx.reporter": "false"}),  # prod-us producers are librdkafka
        alert(4, eu, "CC004", "acks-zero", {"acks": "0"})])  # not a readiness rule
    out = tmp_path / "instances.csv"
    done = _export("--report", "readiness-instances", "--lake", str(lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    named = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert list(named.columns) == ["cluster_name", "item", "client_type", "key", "value", "client_id", "group_id",
                                   "client_instance_id", "rule_id", "target"]
    assert sorted(zip(named["cluster_name"], named["rule_id"], named["key"], strict=True)) == [
        ("prod-eu", "CC019", "auto.include.jmx.reporter"), ("prod-eu", "CC020", "metric.reporters")]
    assert "'" + hostile in set(named["client_id"])  # a formula cell is neutralised, the name kept whole
    keys = pd.read_csv(__import__("io").StringIO(build_readiness_csv(str(lake), keys=True, clusters=["prod-eu"])))
    reporters = keys[(keys["key"] == "metric.reporters") & (keys["client_type"] == "producer")].iloc[0]
    assert (reporters["affected"], reporters["set_by"]) == (1, "statsd-app")
    from backend.export.report import build_drift_report as drift

    section = drift(str(lake), ["prod-eu"]).split("<h2>Upgrade readiness</h2>", 1)[1]
    assert "Instances to chase" in section and "statsd-app" in section and "us-app" not in section
    assert 'HYPERLINK(' in section and 'href="http://evil.example' not in section  # text, no link
