"""The one-file drift report and `python -m backend export` through its real entry point."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.export.report import ReportError, build_drift_report
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
