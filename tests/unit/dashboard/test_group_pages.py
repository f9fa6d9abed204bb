"""The Consumer groups page and the group additions of Fleet, Cluster, Compare and Export, through dashboard/app.py:
worst first, server-side filters and pages, a group's detail, hostile ids only as plain text, and grants."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from backend.auth.scope import Scope
from backend.export import report
from backend.views import group_views
from tests.unit.dashboard.conftest import APP
from tests.unit.dashboard.group_lake import HOSTILE_CLIENT, HOSTILE_IDS, MANY, build_group_lake
from tests.unit.dashboard.test_auth_gate import SECRETS

Open = Callable[..., AppTest]
GROUP_PAGES = ("consumer_groups", "fleet", "cluster", "compare", "export")
FLEET = """[auth]
required = true

[[clusters]]
name = "eu"
bootstrap_servers = "127.0.0.1:9"
access = {{ view = ["group:team"] }}

[[clusters]]
name = "us"
bootstrap_servers = "127.0.0.1:9"
access = {{ view = ["group:team"] }}

[[clusters]]
name = "staging"
bootstrap_servers = "127.0.0.1:9"
access = {{ view = ["group:{staging_group}"] }}
"""
TEAM_USER = {"is_logged_in": True, "email": "t@example.com", "sub": "t", "groups": ["team"]}
MARKDOWN_KINDS = ("title", "subheader", "markdown", "caption", "info", "warning", "error")


@pytest.fixture(scope="module")
def group_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The groups fixture lake (written once per module)."""
    return build_group_lake(tmp_path_factory.mktemp("group-lake"))


@pytest.fixture
def open_app(group_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Open]:
    """Run the app on the groups lake (login off, or on as a user granted eu and us), switched to a page."""

    def run(page: str = "consumer_groups", query: dict[str, str] | None = None, *,
            user: dict[str, Any] | None = None) -> AppTest:
        monkeypatch.setenv("FLEETVIEW_LAKE", str(group_lake))
        if user is not None:
            fleet = tmp_path / "clusters.toml"
            fleet.write_text(FLEET.format(staging_group="other"), encoding="utf-8")
            monkeypatch.setenv("FLEETVIEW_FLEET", str(fleet))
        else:
            monkeypatch.setenv("FLEETVIEW_FLEET", str(tmp_path / "none.toml"))
        app = AppTest.from_file(str(APP), default_timeout=60)
        if user is not None:
            app.secrets.update(SECRETS)
            app.user = {"iat": int(time.time()) - 60, **user}
        for key, value in (query or {}).items():
            app.query_params[key] = value
        app.run()
        if page != "fleet":
            app.switch_page(f"../pages/{page}.py")
            app.run()
        assert not app.exception, [e.value for e in app.exception]
        return app

    yield run


def _table(app: AppTest, *columns: str) -> pd.DataFrame:
    for element in app.dataframe:
        if set(columns) <= set(map(str, element.value.columns)):
            return element.value
    raise AssertionError(f"no table with {columns}")


def _text(app: AppTest) -> str:
    parts = [str(e.value) for kind in (*MARKDOWN_KINDS, "metric") for e in getattr(app, kind)]
    parts += [e.value.to_csv() for e in app.dataframe]
    return "\n".join(parts)


def test_the_list_is_worst_first_filtered_and_paged_server_side(open_app: Open) -> None:
    app = open_app()
    table = _table(app, "cluster", "group", "status", "open")
    assert len(table) == 50  # one page reaches the browser
    ranks = [group_views.STATUS_RANK[s] for s in table["status"]]
    assert ranks == sorted(ranks) and table["status"].iloc[0] == "stalled"
    captions = " ".join(c.value for c in app.caption)
    assert f"{MANY + 4:,} matching groups of {MANY + 4:,}" in captions and "page 1 of 3" in captions
    app.number_input(key="consumer_groups_page").set_value(3).run()
    assert len(_table(app, "cluster", "group", "status")) == MANY + 4 - 100
    app.multiselect(key="consumer_groups_clusters").select("us").run()
    only_us = _table(app, "cluster", "group", "status")
    assert set(only_us["cluster"]) == {"us"} and list(only_us["status"]) == ["empty_with_lag", "lagging", "ok"]
    app.text_input(key="consumer_groups_query").input("billing").run()
    assert list(_table(app, "cluster", "group")["group"]) == ["billing-consumers"]
    migration = _table(app, "broker versions", "classic", "consumer").set_index("cluster")
    assert migration.loc["eu", "consumer"] == 1 and migration.loc["us", "to migrate"] == 3


def test_a_groups_detail_has_members_partitions_window_incidents_changes_and_configs(open_app: Open) -> None:
    key = group_views.group_key("eu", "fraud-consumers")
    app = open_app(query={"cluster": "eu", "group": key})
    text = _text(app)
    assert "fraud-consumers" in text and "stalled" in text
    members = _table(app, "client_id", "host", "member_id", "assignment")
    assert len(members) == 2 and members.loc[0, "assignment"] == "orders: 0"
    parts = _table(app, "topic", "partition", "committed_offset", "end_offset", "lag")
    assert list(parts["lag"]) == ["450", "450"]  # as the tool prints them, "-" where it prints "-", never "None"
    for shown in (members, parts):
        assert not {"None", "nan", "<NA>"} & set(shown.astype(str).to_numpy().ravel())
    incidents = _table(app, "rule", "subject", "evidence")
    assert {"group_lagging", "group_stalled"} <= set(incidents["rule"])
    assert len(app.get("plotly_chart")) == 1
    orders = open_app(query={"cluster": "eu", "group": group_views.group_key("eu", "orders-consumers")})
    configs = _table(orders, "key", "value", "instances")
    assert set(configs["key"]) == {"partition.assignment.strategy", "session.timeout.ms"}
    assert list(_table(orders, "key", "members", "distinct_values")["key"]) == ["max.poll.records"]
    changes = _table(open_app(query={"cluster": "eu", "group": group_views.group_key("eu", "payments-consumers")}),
                     "at", "change", "subject")
    assert isinstance(changes, pd.DataFrame)


def test_fleet_cluster_compare_and_export_show_the_groups(open_app: Open) -> None:
    fleet = _table(open_app("fleet"), "cluster", "groups", "lagging_groups").set_index("cluster")
    assert fleet.loc["eu", "groups"] == MANY and fleet.loc["us", "lagging_groups"] == 2
    cluster = open_app("cluster", {"cluster": "us"})
    listed = _table(cluster, "group", "status", "open")
    assert list(listed["group"]) == ["audit", "billing-consumers", "orders-consumers"]
    compare = open_app("compare")
    compare.multiselect(key="compare_clusters").set_value(["eu", "us"]).run()
    side = _table(compare, "type", "state", "eu", "us")
    assert side["eu"].sum() == MANY and side["us"].sum() == 3
    export = open_app("export")
    export.multiselect(key="export_groups_clusters").set_value(["us"]).run()
    assert any(b.label == "Download groups (CSV)" for b in export.get("download_button"))


def _plain_only(app: AppTest, needles: tuple[str, ...]) -> None:
    """Every Markdown-rendering element that carries a hostile string carries it inside a code span only."""
    for kind in MARKDOWN_KINDS:
        for element in getattr(app, kind):
            value = str(element.value)
            for needle in needles:
                if needle[:30] not in value:
                    continue
                spans = re.findall(r"(`+) (.*?) \1", value)
                assert any(needle[:30] in body for _fence, body in spans), (kind, value[:200])
                outside = re.sub(r"(`+) .*? \1", "", value)
                assert needle[:30] not in outside, (kind, value[:200])


def test_hostile_group_and_client_ids_reach_pages_only_as_plain_text(open_app: Open) -> None:
    needles = (*HOSTILE_IDS, HOSTILE_CLIENT)
    app = open_app()
    _plain_only(app, needles)
    table = _table(app, "cluster", "group", "status")
    app.number_input(key="consumer_groups_page").set_value(1).run()
    assert any(g.startswith("<script>") for g in table["group"])  # data in a dataframe: shown as text
    for gid in HOSTILE_IDS:
        detail = open_app(query={"cluster": "eu", "group": group_views.group_key("eu", gid)})
        _plain_only(detail, needles)
        members = _table(detail, "client_id", "host")
        assert set(members["client_id"]) == {HOSTILE_CLIENT}
    long_detail = open_app(query={"cluster": "eu", "group": group_views.group_key("eu", HOSTILE_IDS[3])})
    assert any(t.value == HOSTILE_IDS[3] for t in long_detail.text_area)  # the whole 10 KB id, in a text box


def test_csv_and_the_report_section_neutralise_and_escape_hostile_ids(group_lake: Path) -> None:
    text = report.build_groups_csv(str(group_lake), ["eu"])
    frame = pd.read_csv(pd.io.common.StringIO(text), dtype=str, keep_default_na=False)
    assert "'" + HOSTILE_IDS[2] in set(frame["group_id"])
    assert not any(cell.startswith(("=", "+", "@")) for col in frame.columns for cell in frame[col])
    assert HOSTILE_IDS[3] in set(frame["group_id"])  # whole, in a CSV cell
    section = "\n".join(report._groups_section(frame.assign(cluster_name=frame["cluster"]).iloc[0:0], ["eu"]))
    assert "No consumer groups" in section
    from backend.store import group_readers
    groups = group_readers.read_groups(str(group_lake), ["eu"])
    html = "\n".join(report._groups_section(groups, ["eu"]))
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html and "<img src=x" not in html


def test_a_user_granted_two_clusters_sees_only_their_groups_on_every_page_and_export(open_app: Open,
                                                                                    group_lake: Path) -> None:
    for page in GROUP_PAGES:
        app = open_app(page, user=TEAM_USER)
        text = _text(app) + " ".join(str(o) for box in app.multiselect for o in box.options)
        assert "staging-tests" not in text and "staging" not in " ".join(
            str(o) for box in app.multiselect for o in box.options), page
    groups = _table(open_app(user=TEAM_USER), "cluster", "group")
    assert set(groups["cluster"]) <= {"eu", "us"}
    hidden = open_app(query={"cluster": "staging", "group": group_views.group_key("staging", "staging-tests")},
                      user=TEAM_USER)
    assert "No access to cluster" in _text(hidden) and "staging-tests" not in _text(hidden)
    scope = Scope(names=frozenset({"eu", "us"}))
    with pytest.raises(report.ReportError):
        report.build_groups_csv(str(group_lake), ["staging"], scope=scope)
    both = report.build_groups_csv(str(group_lake), ["eu", "us"], scope=scope)
    assert "staging-tests" not in both and "billing-consumers" in both
