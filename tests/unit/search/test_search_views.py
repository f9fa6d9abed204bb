"""The views every door calls: links of hits, a topic and a group across the fleet (MirrorMaker 2 copies, configs
that differ, groups and lag), under grants; CSV of both with hostile names as plain text."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from backend.auth.scope import Scope
from backend.export.csv_safe import safe_csv
from backend.search.reader import IndexReader
from backend.search.updates import FleetIndexer
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake
from backend.views import search_views as V
from backend.views.group_views import group_key
from tests.unit.search.fleet import START, cluster, configs, groups, poll, topics

RTL = "pay\u202eroll"
FORMULA = "=cmd|' /C calc'!A0"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """eu holds orders (retention.ms overridden) read by two groups; us its MirrorMaker 2 copy eu.orders and a topic
    named like a formula; secret another orders; a hostile topic name on eu."""
    root = tmp_path_factory.mktemp("views") / "lake"
    at = START + timedelta(minutes=1)
    eu = cluster("eu", at, "", topics=topics("orders", RTL),
                 configs=configs(at, overrides={"orders": {"retention.ms": "1000", "min.insync.replicas": "3"}}),
                 groups=groups(at, {"billing": ["svc-a"], "audit": ["svc-b"]}, lags={"billing": 42}))
    us = cluster("us", at, "", topics=topics("eu.orders", FORMULA), configs=configs(at, retention="72"),
                 groups=groups(at, {"billing": ["svc-a"]}, lags={"billing": 7}, topic="eu.orders"))
    secret = cluster("secret", at, "", topics=topics("orders", "secret.orders"),
                     groups=groups(at, {"billing": ["svc-s"]}))
    writer, index = FleetWriter(Lake(root)), FleetIndexer(Lake(root))
    index.apply_write(writer.write(poll(at, [eu, us, secret])))
    index.close()
    return root


EU_US = Scope(names=frozenset({"eu", "us"}), ids=frozenset({"CID-eu", "CID-us"}), hidden_names=frozenset({"secret"}))


def test_hits_link_to_their_pages(lake: Path) -> None:
    snapshot = IndexReader(str(lake)).snapshot()
    links = {(h.kind, h.cluster, h.name): h.link for h in V.search(snapshot, "billing", scope=EU_US).hits}
    assert links[("group", "eu", "billing")] == f"./consumer_groups?cluster=eu&group={group_key('eu', 'billing')}"
    topic = V.search(snapshot, "orders", scope=EU_US, kinds=["topic"]).hits[0]
    assert topic.link == "./across?topic=orders"
    hostile = V.search(snapshot, "roll", scope=EU_US, kinds=["topic"]).hits[0]
    assert hostile.name == RTL and hostile.link == "./across?topic=" + V.ref(RTL) and V.ref(RTL).startswith("~")
    assert V.resolve_ref(snapshot, V.ref(RTL), "topic", EU_US) == RTL
    assert V.resolve_ref(snapshot, V.ref("secret.orders"), "topic", EU_US) is None or V.ref("secret.orders") == \
        "secret.orders"
    assert V.link_target("./consumer_groups?cluster=eu&group=abc") == ("consumer_groups", {"cluster": "eu",
                                                                                           "group": "abc"})
    config = V.search(snapshot, "log.retention", scope=EU_US).hits[0]
    assert config.link == "./cluster?cluster=eu" or config.link == "./cluster?cluster=us"


def test_a_topic_across_the_fleet_with_its_mirror_configs_and_groups(lake: Path) -> None:
    snapshot = IndexReader(str(lake)).snapshot()
    view = V.topic_across(lake, snapshot, "orders", scope=EU_US)
    assert [(c.cluster, c.topic, c.relation) for c in view.copies] == [
        ("eu", "orders", "source of the remote copies"),
        ("us", "eu.orders", "remote copy (MirrorMaker 2, source alias eu)")]
    eu, us = view.copies
    assert (eu.topic_id, eu.partitions, eu.replication_factor) == ("id-orders", 3, 3)
    assert (eu.min_insync_replicas, eu.min_isr_source) == ("3", "topic override")
    assert (us.min_insync_replicas, us.min_isr_source) == ("2", "broker")
    assert view.differing == ("retention.ms",)
    assert eu.configs["retention.ms"] == "1000 (topic override)"
    assert us.configs["retention.ms"] == str(72 * 3_600_000) + " (broker)"  # log.retention.hours, in ms
    assert [(g.cluster, g.group_id, g.lag, g.status) for g in view.groups if g.group_id == "billing"] == [
        ("eu", "billing", 42, "ok"), ("us", "billing", 7, "ok")]
    assert (eu.groups, eu.lag) == (2, 42)
    # The same view from the copy's name, and nothing of the hidden cluster's orders or secret.orders.
    assert [c.cluster for c in V.topic_across(lake, snapshot, "eu.orders", scope=EU_US).copies] == ["eu", "us"]
    everything = V.topic_across(lake, snapshot, "orders")  # login off: every cluster, and its name as an alias
    assert [(c.cluster, c.topic) for c in everything.copies] == [("eu", "orders"), ("secret", "orders"),
                                                                 ("secret", "secret.orders"), ("us", "eu.orders")]
    scoped = V.topic_across(lake, snapshot, "orders", scope=EU_US)
    assert "secret" not in scoped.copies_frame().to_csv() + scoped.groups_frame().to_csv()
    nothing = V.topic_across(lake, snapshot, "secret.orders", scope=Scope(names=frozenset({"us"})))
    assert nothing.copies == () and nothing.notes[0].startswith("No cluster you may view")


def test_a_group_across_the_fleet(lake: Path) -> None:
    snapshot = IndexReader(str(lake)).snapshot()
    view = V.group_across(lake, snapshot, "billing", scope=EU_US)
    assert [(c.cluster, c.lag, c.members, c.topics) for c in view.copies] == [("eu", 42, 1, ("orders",)),
                                                                              ("us", 7, 1, ("eu.orders",))]
    frame = view.frame()
    assert list(frame["cluster"]) == ["eu", "us"] and "secret" not in frame.to_csv()
    assert len(V.group_across(lake, snapshot, "billing").copies) == 3


def test_csv_of_hits_and_views_keeps_hostile_names_as_plain_text(lake: Path) -> None:
    snapshot = IndexReader(str(lake)).snapshot()
    hits = V.hits_frame(V.search(snapshot, "cmd", scope=EU_US))
    assert list(hits["name"]) == [FORMULA]
    text = safe_csv(hits)
    assert "'=cmd" in text and "\n=cmd" not in text and ",=cmd" not in text  # the formula is neutralised
    frame = pd.read_csv(io.StringIO(safe_csv(V.topic_across(lake, snapshot, RTL, scope=EU_US).copies_frame())))
    assert list(frame["topic"]) == ["pay<U+202E>roll"]  # the override shown, never obeyed
