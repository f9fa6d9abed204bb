"""The visible scope of a lake: names, the ids they report, and other clusters' names hidden in text."""

from __future__ import annotations

import pandas as pd

from backend.auth.scope import HIDDEN_CLUSTER, Scope, scope_for

KNOWN = pd.DataFrame({
    "cluster_name": ["eu", "us", "us", "eu-2", "old"],
    "cluster_id": ["ID-EU", "ID-US-OLD", "ID-US", "ID-EU", None],
    "polled_at": pd.to_datetime(["2026-01-01", "2026-01-01", "2026-01-02", "2026-01-01", "2026-01-01"], utc=True),
})


def test_ids_are_each_visible_clusters_latest_id() -> None:
    scope = scope_for(["us"], KNOWN, ["eu", "us", "ap"])
    assert scope.ids == {"ID-US"}  # not the id us reported before
    assert scope.hidden_names == {"eu", "eu-2", "old", "ap"}
    assert not scope.everything


def test_results_of_an_id_no_visible_cluster_reports_are_hidden() -> None:
    scope = scope_for(["eu"], KNOWN)
    frame = pd.DataFrame({"cluster_id": ["ID-EU", "ID-US", "bootstrap:x:9092", None], "v": [1, 2, 3, 4]})
    assert list(scope.by_id(frame)["v"]) == [1]
    drift = pd.DataFrame({"cluster_a": ["ID-EU", "ID-EU"], "cluster_b": ["ID-EU", "ID-US"], "v": [1, 2]})
    assert list(scope.by_id(drift, "cluster_a", "cluster_b")["v"]) == [1]


def test_hidden_names_are_replaced_only_where_they_stand_alone() -> None:
    scope = scope_for(["eu-2"], KNOWN)
    text = "Clusters eu, eu-2 all report cluster id ID-EU (eu)."
    assert scope.redact(text) == f"Clusters {HIDDEN_CLUSTER}, eu-2 all report cluster id ID-EU ({HIDDEN_CLUSTER})."
    assert scope.redact(None) is None
    frame = pd.DataFrame({"cluster_name": ["eu-2"], "error": ['{"clusters": ["eu", "eu-2"]}']})
    assert scope.redact_columns(frame, ["error"])["error"][0] == f'{{"clusters": ["{HIDDEN_CLUSTER}", "eu-2"]}}'


def test_no_login_sees_everything() -> None:
    scope = scope_for(None, KNOWN)
    frame = pd.DataFrame({"cluster_name": ["x"], "cluster_id": ["y"]})
    assert scope == Scope() and scope.everything and scope.may_view("anything")
    assert scope.by_name(frame).equals(frame) and scope.by_id(frame).equals(frame)


def test_a_user_who_sees_every_known_cluster_sees_everything() -> None:
    assert scope_for(["eu", "us", "eu-2", "old"], KNOWN).everything
    assert not scope_for(["eu", "us", "eu-2", "old"], KNOWN, ["new-in-fleet-file"]).everything
