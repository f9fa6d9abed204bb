"""Two configured clusters reporting one cluster id: the collision is shown, results are never given one name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.unit.dashboard import lake_fixture

OpenPage = Callable[..., AppTest]
JOINED = "prod-eu / prod-us (same cluster id)"


@pytest.fixture(scope="module")
def shared_id_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    saved = lake_fixture.CLUSTERS["prod-us"]["id"]
    lake_fixture.CLUSTERS["prod-us"]["id"] = lake_fixture.CLUSTERS["prod-eu"]["id"]
    try:
        return lake_fixture.build_lake(tmp_path_factory.mktemp("shared-id") / "lake")
    finally:
        lake_fixture.CLUSTERS["prod-us"]["id"] = saved


def _warnings(app: AppTest) -> str:
    return "\n".join(str(w.value) for w in app.warning)


def test_client_configs_shows_the_collision_and_the_joined_name(shared_id_lake: Path, open_page: OpenPage) -> None:
    app = open_page(shared_id_lake, "client_configs")
    assert not app.exception
    warning = _warnings(app)
    assert "prod-eu" in warning and "prod-us" in warning and lake_fixture.CLUSTERS["prod-eu"]["id"] in warning
    options = app.multiselect(key="client_configs_clusters").options
    assert JOINED in options and "prod-eu" not in options and "prod-us" not in options


def test_compare_shows_the_collision_and_attributes_no_results_to_one_name(shared_id_lake: Path,
                                                                            open_page: OpenPage) -> None:
    app = open_page(shared_id_lake, "compare")
    app.multiselect(key="compare_clusters").set_value(["prod-eu", "prod-us"]).run()
    assert not app.exception
    assert "share a cluster id" in _warnings(app)
    assert not any("prod-eu" == c for t in app.dataframe for c in t.value.columns if "value" in t.value.columns)


def test_distinct_ids_give_no_warning(fixture_lake: Path, open_page: OpenPage) -> None:
    app = open_page(fixture_lake, "client_configs")
    assert "share a cluster id" not in _warnings(app)
