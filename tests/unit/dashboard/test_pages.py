"""AppTest of every page on a fixture lake: expected rows, filters, empty and failed states."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.unit.dashboard.lake_fixture import CLUSTERS, SECRET_VALUE, T1

PAGES = ("fleet", "cluster", "compare", "client_configs", "clients", "upgrade", "alerts", "export")
OpenPage = Callable[..., AppTest]


# AppTest exposes keys only of selectable dataframes, so tables are found by their columns.
TABLE_COLUMNS = {
    "fleet_table": {"cluster", "software", "provenance"},
    "cluster_brokers": {"broker_id", "address", "provenance"},
    "cluster_topics": {"topic", "topic_id", "replication_factor"},
    "cluster_zk": {"path", "value"},
    "cluster_changes": {"change", "subject", "before", "after"},
    "compare_versions": {"version", "prod-eu"},
    "compare_overlap": {"topic", "clusters", "same_id"},
    "compare_side": {"value", "prod-eu", "prod-us"},
    "client_configs_versions_table": {"client_software_name", "instances"},
    "alerts_table": {"severity", "rule", "evidence", "rationale"},
    "alerts_by_rule": {"rule", "title", "open", "clusters", "subjects", "longest"},
    "alerts_resolved": {"rule", "resolved", "evidence_at_opening"},
    "client_configs_group_drift": {"group_id", "members", "value_counts_json"},
    "client_configs_shares": {"value", "reported as"},
    "cluster_broker_configs": {"config", "value", "source", "brokers_disagree", "non_default"},
    "cluster_config_split": {"config", "broker 1", "broker 3"},
    "cluster_topic_overrides": {"topic", "config", "value", "type"},
    "compare_broker_configs": {"config", "differs", "all_default", "prod-eu", "prod-us"},
    "upgrade_keys": {"key", "default_before", "default_after", "at_old_default", "affected"},
}


def _frame(app: AppTest, key: str) -> pd.DataFrame:
    wanted = TABLE_COLUMNS[key]
    for element in app.dataframe:
        frame = element.value
        if wanted <= {*map(str, frame.columns), str(frame.index.name)}:
            return frame
    raise AssertionError(f"no table like {key!r} on the page")


def _page_text(app: AppTest) -> str:
    parts = [str(e.value) for kind in ("markdown", "caption", "info", "error", "warning", "code", "metric")
             for e in getattr(app, kind)]
    parts += [e.value.to_csv() if hasattr(e.value, "to_csv") else str(e.value) for e in app.dataframe]
    parts += [chart.proto.spec for chart in app.get("plotly_chart")]
    return "\n".join(parts)


def test_fleet_lists_every_cluster_with_versions_status_and_errors(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake)
    table = _frame(app, "fleet_table").set_index("cluster")
    assert list(table.index) == ["prod-eu", "prod-us", "staging"]
    assert table.loc["prod-eu", "software"] == "Apache Kafka 3.9.1 ×3"
    assert table.loc["prod-eu", "cluster_id"] == CLUSTERS["prod-eu"]["id"]
    assert table.loc["prod-us", "software"].startswith("mixed: ")
    assert "3.7.0–3.9.1 (guessed) ×1" in table.loc["prod-us", "software"]
    assert "unknown ×1" in table.loc["prod-us", "provenance"]
    assert "down" in table.loc["staging", "status"]
    assert "connection refused" in table.loc["staging", "error"]
    assert table.loc["prod-us", "under_replicated"] == 2
    assert table.loc["prod-eu", "page"] == "./cluster?cluster=prod-eu"
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Brokers reachable"] == "5/6"
    assert metrics["Open incidents"] == "3"  # broker_missing (fleet) + two client-config alerts; events are resolved


def test_sidebar_tag_filter_narrows_the_fleet(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake)
    app.multiselect(key="app_tag_region").select("us").run()
    assert list(_frame(app, "fleet_table")["cluster"]) == ["prod-us"]
    app.multiselect(key="app_tag_region").unselect("us").run()
    app.multiselect(key="app_tag_team").select("core").run()
    assert list(_frame(app, "fleet_table")["cluster"]) == ["prod-eu", "staging"]


@pytest.mark.parametrize("page", PAGES)
def test_missing_lake_explains_what_to_do_on_every_page(tmp_path: Path, open_page: OpenPage, page: str) -> None:
    app = open_page(tmp_path / "no-lake-here", page)
    text = " ".join(i.value for i in app.info)
    assert "python -m backend" in text
    assert "no-lake-here" in text


def test_pipeline_not_run_says_press_recompute(snapshots_only_lake: Path, open_page: OpenPage) -> None:
    app = open_page(snapshots_only_lake, "client_configs")
    assert "Recompute" in app.info[0].value and "python -m backend analyze" in app.info[0].value
    fleet = open_page(snapshots_only_lake)
    assert len(_frame(fleet, "fleet_table")) == 3


def test_cluster_page_from_query_param_shows_brokers_and_changes(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "prod-us"})
    assert app.selectbox(key="cluster_name").value == "prod-us"
    brokers = _frame(app, "cluster_brokers")
    assert list(brokers["broker_id"]) == [5, 4, 6]  # controller first
    assert list(brokers["version"]) == ["3.7.0–3.9.1 (guessed)", "3.9.1", "unknown"]
    changes = _frame(app, "cluster_changes")
    assert changes.iloc[0]["change"] == "controller moved"
    assert (changes.iloc[0]["before"], changes.iloc[0]["after"]) == ("4", "5")


def test_cluster_topics_are_searched_and_paginated_server_side(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "prod-eu"})
    assert len(_frame(app, "cluster_topics")) == 33
    app.text_input(key="cluster_topic_query").input("events-01").run()
    assert list(_frame(app, "cluster_topics")["topic"]) == [f"events-01{i}" for i in range(10)]
    app.text_input(key="cluster_topic_query").input("").run()
    app.toggle(key="cluster_topic_internal").set_value(False).run()
    assert "__consumer_offsets" not in set(_frame(app, "cluster_topics")["topic"])
    changes = _frame(app, "cluster_changes")
    recreated = changes[changes["change"] == "topic recreated"].iloc[0]
    assert (recreated["subject"], recreated["before"], recreated["after"]) == ("orders", "tid-orders-1", "tid-orders-2")
    assert "broker upgraded" in set(changes["change"])


def test_cluster_page_lists_only_that_clusters_alerts(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "prod-eu"})
    alerts = _frame(app, "alerts_table")
    assert set(alerts["cluster"]) == {"prod-eu"}
    assert set(alerts["rule"]) == {"topic_recreated", "consumer_short_commit_interval"}


def test_cluster_page_shows_zookeeper_nodes(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "staging"})
    zk = _frame(app, "cluster_zk")
    assert "/cluster/id" in set(zk["path"])
    assert any("connection refused" in c.value for c in app.caption)


def test_compare_shows_overlap_and_same_name_different_id(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "compare")
    assert app.multiselect(key="compare_clusters").value == ["prod-eu", "prod-us"]
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["same name, different topic id"] == "2"
    overlap = _frame(app, "compare_overlap")
    assert set(overlap["topic"]) == {"orders", "payments"}
    versions = _frame(app, "compare_versions").set_index("version")
    assert versions.loc["Apache Kafka 3.9.1", "prod-eu"] == 3
    assert app.selectbox(key="compare_key").value == "compression.type"  # most drifting first
    side = _frame(app, "compare_side").set_index("value")
    assert side.loc["zstd", "prod-eu"] == pytest.approx(0.6) and side.loc["none", "prod-us"] == pytest.approx(1.0)
    app.selectbox(key="compare_key").select("acks").run()
    assert _frame(app, "compare_side").set_index("value").loc["0", "prod-us"] == pytest.approx(0.2)
    app.selectbox(key="compare_key").select("linger.ms").run()  # numeric: boxes, no share table
    assert not app.exception and '"name":"prod-us' in app.get("plotly_chart")[-1].proto.spec.replace(" ", "")


def test_client_configs_filters_and_counts(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "client_configs")
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["quarantined · last ingest run"] == "3"
    assert metrics["sensitive keys dropped · last ingest run"] == "7"
    assert metrics["records read · since the lake began"] == "2,500"  # both runs, labelled as totals
    assert metrics["quarantined · since the lake began"] == "5"
    table = _frame(app, "client_configs_versions_table")
    assert len(table) == 3
    groups = _frame(app, "client_configs_group_drift")
    assert list(zip(groups["cluster"], groups["group_id"], strict=True)) == [("prod-eu", "reporting")]
    charts_before = len(app.get("plotly_chart"))
    app.multiselect(key="client_configs_clusters").select("prod-us").run()
    assert list(_frame(app, "client_configs_versions_table")["cluster"]) == ["prod-us"]
    assert not any(set(t.value.columns) >= {"group_id", "members"} for t in app.dataframe)  # prod-eu's group gone
    app.multiselect(key="client_configs_keys").select("acks").run()
    assert app.selectbox(key="client_configs_key").options == ["acks"]
    assert len(app.get("plotly_chart")) == charts_before  # overview, one key, defaults, software
    app.multiselect(key="client_configs_software").select("apache-kafka-java").run()
    assert _frame(app, "client_configs_versions_table").empty


def test_alerts_show_open_incidents_by_rule_then_resolved_ones_in_the_window(fixture_lake: Path,
                                                                            open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "alerts")
    table = _frame(app, "alerts_table")
    assert set(table["state"]) == {"open"}
    assert set(table["source"]) == {"fleet", "client config"}
    assert set(table["rule"]) == {"broker_missing", "producer_acks_zero", "consumer_short_commit_interval"}
    assert list(table["severity"][:2]) == ["critical", "critical"]
    missing = table.set_index("rule").loc["broker_missing"]
    assert missing["evidence"] == "error = connection refused"  # readable text, not JSON
    assert missing["for"].endswith(("d 0 h", "h", "min")) and missing["for"][0].isdigit()
    by_rule = _frame(app, "alerts_by_rule").set_index("rule")
    assert by_rule.loc["broker_missing", "open"] == 1 and by_rule.loc["broker_missing", "clusters"] == 1
    assert by_rule.loc["producer_acks_zero", "title"] == "Producer with acks=0"  # the title beside the code
    assert [m.value for m in app.metric][:3] == ["2", "1", "0"]
    # The fixture's events are two days old: resolved, outside 24 hours, inside 7 days.
    assert not [f for f in app.dataframe if "resolved" in f.value.columns and (f.value["state"] == "resolved").any()]
    app.selectbox(key="alerts_window").select("last 7 days").run()
    resolved = _frame(app, "alerts_resolved").set_index("rule")
    assert set(resolved.index) == {"topic_recreated", "controller_changed"}
    assert resolved.loc["topic_recreated", "evidence"] == "new_topic_id = tid-orders-2; old_topic_id = tid-orders-1"
    app.multiselect(key="alerts_severity").select("critical").run()
    assert set(_frame(app, "alerts_table")["rule"]) == {"broker_missing", "producer_acks_zero"}
    app.text_input(key="alerts_text").input("acks").run()
    assert list(_frame(app, "alerts_table")["subject"]) == ["client billing-writer"]


def test_export_page_offers_report_for_chosen_clusters(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "export")
    assert app.selectbox(key="export_chart").value == "Broker versions by cluster"
    options = app.selectbox(key="export_chart").options
    assert "Value shares · acks" in options and "Numeric spread · linger.ms" in options
    assert not any("sasl" in o for o in options)
    app.selectbox(key="export_chart").select("Value shares · acks").run()
    assert not app.exception and '"name":"all"' in app.get("plotly_chart")[0].proto.spec.replace(" ", "")
    app.multiselect(key="export_report_clusters").select("prod-eu").select("prod-us").run()
    assert not app.exception
    assert not app.error
    labels = [b.proto.label for b in app.get("download_button")]
    assert {"Download readiness checklist (CSV)", "Download client-config keys (CSV)",
            "Download instances that set them (CSV)"} <= set(labels)
    assert "3 clusters: 3 unverified" in [c.value for c in app.caption]


def test_upgrade_page_names_the_config_keys_whose_default_changed(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "upgrade")
    keys = _frame(app, "upgrade_keys")
    linger = keys[(keys["cluster_name"] == "prod-eu") & (keys["key"] == "linger.ms")].iloc[0]
    assert (linger["at_old_default"], linger["default_after"], linger["affected"]) == (40, "5 (4.4)", 40)
    us = keys[keys["cluster_name"] == "prod-us"]
    assert "producer" not in set(us["client_type"])  # its producers are librdkafka: the Java defaults do not apply
    assert not us.empty and us["java_instances"].isna().all()  # its consumers' software is not known: kept


@pytest.mark.parametrize("page", PAGES)
def test_no_page_shows_a_sensitive_key_or_value(fixture_lake: Path, open_page: OpenPage, page: str) -> None:
    app = open_page(fixture_lake, page)
    text = _page_text(app)
    assert SECRET_VALUE not in text
    assert "sasl.jaas.config" not in text or page == "client_configs"  # named only as a dropped key


def test_poll_now_starts_a_background_job_and_shows_its_outcome(
    fixture_lake: Path, open_page: OpenPage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Valid for the UI (which never resolves cluster passwords), refused by the poll CLI: the password is not set.
    broken = tmp_path / "clusters.toml"
    broken.write_text('[[clusters]]\nname = "secured"\nbootstrap_servers = "127.0.0.1:9"\n'
                      'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\nsasl_username = "u"\n'
                      'sasl_password_env = "FLEETVIEW_TEST_UNSET_PASSWORD"\n', encoding="utf-8")
    monkeypatch.delenv("FLEETVIEW_TEST_UNSET_PASSWORD", raising=False)
    monkeypatch.setenv("FLEETVIEW_FLEET", str(broken))
    app = open_page(fixture_lake)
    app.button(key="app_poll").click().run()
    assert not app.exception
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        app.run()
        captions = [c.value for c in app.sidebar.caption]
        if any("poll: failed" in c for c in captions):
            break
        time.sleep(0.5)
    assert any("poll: failed" in c for c in captions), captions
    assert str(broken) in " ".join(c.value for c in app.sidebar.code)  # the CLI's own error, last lines


def test_a_corrupt_result_file_is_skipped_and_named(fixture_lake: Path, open_page: OpenPage, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(fixture_lake, lake)
    bad = lake / "results" / "client_versions" / "part-00001.parquet"
    bad.write_bytes(b"PAR1 this is not a parquet file")
    app = open_page(lake, "client_configs")
    assert any("part-00001.parquet" in w.value and "Recompute" in w.value for w in app.warning)
    assert len(_frame(app, "client_configs_versions_table")) == 3  # the good file is still shown
    assert bad.read_bytes().startswith(b"PAR1 this")  # nothing deleted or rewritten


def test_cluster_choice_and_links_both_win_in_turn(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "prod-us"})
    app.selectbox(key="cluster_name").select("staging").run()
    assert app.selectbox(key="cluster_name").value == "staging"  # the user's pick sticks
    assert app.query_params["cluster"] == "staging"  # the URL follows the pick
    app.query_params["cluster"] = "prod-eu"  # a link to another cluster, same session
    app.switch_page("../pages/cluster.py")
    app.run()
    assert app.selectbox(key="cluster_name").value == "prod-eu"
    assert len(_frame(app, "cluster_topics")) == 33


def test_sidebar_tag_filters_apply_on_every_page(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake)
    app.multiselect(key="app_tag_region").select("us").run()
    app.switch_page("../pages/cluster.py")
    app.run()
    assert app.selectbox(key="cluster_name").options == ["prod-us"]
    app.switch_page("../pages/alerts.py")
    app.run()
    assert set(_frame(app, "alerts_table")["cluster"]) == {"prod-us"}
    app.switch_page("../pages/compare.py")
    app.run()
    assert "at least two" in app.info[0].value


@pytest.mark.parametrize("page", PAGES)
def test_a_lake_uri_that_cannot_be_opened_is_explained(open_page: OpenPage, page: str) -> None:
    app = open_page("nosuchscheme://bucket/lake", page)
    assert any("cannot open the lake" in e.value for e in app.sidebar.error)
    assert app.info  # the page's own empty state, no exception


def test_compare_defaults_to_clusters_that_have_client_configs(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake)
    app.multiselect(key="app_tag_team").select("core").run()  # prod-eu (configs) and staging (none)
    app.switch_page("../pages/compare.py")
    app.run()
    assert app.multiselect(key="compare_clusters").value == ["prod-eu", "staging"]
    assert not app.exception
    assert app.selectbox(key="compare_key").options  # keys still listed without any drift pair


def test_compare_leaves_identity_keys_out_of_drift_unless_asked(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "compare")
    app.multiselect(key="compare_clusters").set_value(["prod-eu", "prod-us"]).run()
    assert "client.id" not in app.selectbox(key="compare_key").options
    assert app.selectbox(key="compare_key").value == "compression.type"
    app.toggle(key="compare_identity").set_value(True).run()
    assert app.selectbox(key="compare_key").options[0] == "client.id"  # TVD 1.0, ranked first once included


def test_identity_keys_include_keys_unique_per_instance() -> None:
    from backend.views.config_views import drop_keys, identity_keys

    drift_keys = pd.DataFrame({"key": ["trace.tag", "acks", "small.unique"], "instances": [100, 100, 5],
                               "distinct_values": [95, 3, 5]})
    found = identity_keys(drift_keys)
    assert {"trace.tag", "client.id", "group.id", "bootstrap.servers"} <= found
    assert "acks" not in found and "small.unique" not in found  # too few instances to call it unique
    frame = pd.DataFrame({"key": ["client.id", "acks", "trace.tag"]})
    assert list(drop_keys(frame, found)["key"]) == ["acks"]


def test_client_configs_opens_on_an_overview_then_one_key_least_agreed_first(fixture_lake: Path,
                                                                            open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "client_configs")
    assert not app.exception
    overview = app.get("plotly_chart")[0].proto.spec
    assert "dominant" in overview and "client.id" not in overview  # identity keys stay out by default
    assert len(app.get("plotly_chart")) == 4  # not one chart per key
    keys = app.selectbox(key="client_configs_key").options
    assert keys[0] == "acks" and "linger.ms" in keys  # prod-us agrees on acks least (50 % on "1")
    shares = _frame(app, "client_configs_shares").set_index("value")
    assert shares.loc["all", "reported as"] == "-1, all"  # the raw spellings counted as acks=all
    app.selectbox(key="client_configs_key").select("linger.ms").run()
    assert not app.exception and "linger.ms" in app.get("plotly_chart")[1].proto.spec


def test_compare_folds_rare_values_into_other_and_names_the_spellings(fixture_lake: Path,
                                                                      open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "compare")
    app.toggle(key="compare_identity").set_value(True).run()
    app.selectbox(key="compare_key").select("client.id").run()
    spec = app.get("plotly_chart")[-1].proto.spec
    assert "other (42 values)" in spec  # 50 one-instance values: 8 drawn, the rest one grey bar
    assert len(json.loads(spec)["data"]) == 9
    app.selectbox(key="compare_key").select("acks").run()
    assert _frame(app, "compare_side").set_index("value").loc["all", "reported as"] == "-1, all"
    assert "reported as -1, all" in app.get("plotly_chart")[-1].proto.spec


def test_cluster_page_lists_broker_configs_disagreements_first_with_source_and_topic_overrides(
    fixture_lake: Path, open_page: OpenPage
) -> None:
    app = open_page(fixture_lake, "cluster", {"cluster": "prod-eu"})
    table = _frame(app, "cluster_broker_configs")
    first = table.iloc[0]
    assert (first["config"], bool(first["brokers_disagree"])) == ("log.retention.hours", True)
    assert first["value"] == "168 (broker 1, 2) · 72 (broker 3)"
    assert first["source"] == "static (server.properties)"
    assert list(table["config"]) == ["log.retention.hours", "auto.create.topics.enable", "min.insync.replicas"]
    assert table.set_index("config").loc["min.insync.replicas", "source"] == "dynamic (cluster default)"
    split = _frame(app, "cluster_config_split").set_index("config")
    assert split.loc["log.retention.hours", "broker 3"] == "72 [static (server.properties)]"
    assert any("disagree on 1 config" in w.value for w in app.warning)
    app.toggle(key="cluster_config_defaults").set_value(True).run()
    everything = _frame(app, "cluster_broker_configs").set_index("config")
    assert everything.loc["ssl.keystore.password", "value"] == "(withheld: sensitive)"
    assert len(everything) == 6
    overrides = _frame(app, "cluster_topic_overrides")
    assert list(zip(overrides["topic"], overrides["config"], overrides["value"], strict=True)) == [
        ("orders", "retention.ms", "86400000"), ("payments", "min.insync.replicas", "4")]
    changes = _frame(app, "cluster_changes")
    change = changes[changes["change"] == "config changed"].iloc[0]
    assert (change["subject"], change["before"], change["after"]) == (
        "broker 3: log.retention.hours", "168 [STATIC_BROKER_CONFIG]", "72 [STATIC_BROKER_CONFIG]")


def test_cluster_page_says_when_configs_were_not_read(fixture_lake: Path, open_page: OpenPage) -> None:
    us = open_page(fixture_lake, "cluster", {"cluster": "prod-us"})
    captions = " ".join(c.value for c in us.caption)
    assert f"Read {T1:%Y-%m-%d %H:%M} UTC from 3 brokers (DescribeConfigs v4)" in captions
    assert "connection refused: prod-us-b6.example:9092" in captions  # as plain text
    staging = open_page(fixture_lake, "cluster", {"cluster": "staging"})
    assert any(c.value.startswith("Not read yet") for c in staging.caption)


def test_compare_puts_broker_config_differences_first_and_hides_defaults_behind_a_toggle(
    fixture_lake: Path, open_page: OpenPage
) -> None:
    app = open_page(fixture_lake, "compare")
    table = _frame(app, "compare_broker_configs")
    assert list(table["config"]) == ["log.retention.hours", "min.insync.replicas", "unclean.leader.election.enable",
                                     "auto.create.topics.enable"]
    assert list(table["differs"]) == [True, True, True, False]
    row = table.set_index("config").loc["log.retention.hours"]
    assert row["prod-eu"] == "differs within the cluster: 168 | 72" and row["prod-us"] == "168"
    assert table.set_index("config").loc["unclean.leader.election.enable", "prod-us"] == "true"
    app.toggle(key="compare_config_defaults").set_value(True).run()
    everything = _frame(app, "compare_broker_configs")
    assert {"log.cleaner.threads", "ssl.keystore.password"} <= set(everything["config"])
    assert not everything.set_index("config").loc["log.cleaner.threads", "differs"]
