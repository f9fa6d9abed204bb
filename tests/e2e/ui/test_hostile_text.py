"""Strings that brokers and URLs control reach the pages as plain text: no link, image or element comes of them."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from backend.collect.checks import run_checks
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import (
    BrokerSnapshot,
    ClusterSnapshot,
    ConfigSnapshot,
    ConfigValue,
    FleetPoll,
    TopicSnapshot,
)
from tests.conftest import StreamlitServer, page_errors, wait_for_streamlit

EVIL = "evil.invalid"
LINK = f"[upgrade now](https://{EVIL}/a)"
IMAGE = f"![x](https://{EVIL}/pixel.png)"
HTML = f'<a href="https://{EVIL}/h">h</a><img src="https://{EVIL}/i.png"><b id="injected">b</b>'
HOSTILE = [f"4.2.0 {LINK}", f"{IMAGE} :red[alarm] **bold**", HTML, f"https://{EVIL}/autolink www.{EVIL}"]


def _hostile_lake(root: Path) -> Path:
    """Two polls through the real writer; every broker-controlled string carries Markdown, HTML or a URL."""
    writer = FleetWriter(Lake(root))
    previous: dict[str, ClusterSnapshot] = {}
    start = datetime.now(UTC) - timedelta(minutes=5)
    for round_no in range(2):
        poll_id = new_poll_id(start + timedelta(minutes=round_no))
        at = poll_id_time(poll_id)
        brokers = [BrokerSnapshot(i + 1, f"b{i}.{EVIL}", 9092, rack=HOSTILE[i % 4], reachable=i != 2,
                                  software_name=HOSTILE[(i + 1) % 4], software_version=HOSTILE[i % 4],
                                  version_provenance="reported", error=HOSTILE[2] if i == 2 else None)
                   for i in range(3)]
        topics = [TopicSnapshot(f"t{i} {HOSTILE[i % 4]}", f"ID{i}{round_no}", partitions=3, replication_factor=3)
                  for i in range(4)]
        # Broker config values, a topic override and a read error the brokers control (config names are
        # checked against a name pattern by the collector; values are not).
        configs = ConfigSnapshot(
            collected_at=at,
            brokers={b.broker_id: {"log.retention.hours": ConfigValue(HOSTILE[(b.broker_id + round_no) % 4],
                                                                      "STATIC_BROKER_CONFIG"),
                                   "message.max.bytes": ConfigValue(HOSTILE[1], "DYNAMIC_BROKER_CONFIG")}
                     for b in brokers},
            topics={topics[0].topic: {"cleanup.policy": ConfigValue(HOSTILE[2], "DYNAMIC_TOPIC_CONFIG")}},
            errors={"broker 3": HOSTILE[0]}, version=4)
        clusters = [ClusterSnapshot(name, "degraded", at, poll_id, cluster_id=f"CID {LINK} {name}", controller_id=1,
                                    error=f"broker 3 unreachable: {HOSTILE[0]} {HOSTILE[2]}", brokers=brokers,
                                    topics=topics, configs=configs) for name in ("prod", "prod-b")]
        writer.write(FleetPoll(poll_id, at, clusters, run_checks(previous, clusters), 1.0))
        previous = {c.cluster_name: c for c in clusters}
    writer.close(start + timedelta(minutes=2))
    return root


@pytest.fixture(scope="module")
def hostile_server(streamlit_app: Callable[..., StreamlitServer], tmp_path_factory: pytest.TempPathFactory
                   ) -> StreamlitServer:
    """The app on the hostile lake."""
    return streamlit_app(_hostile_lake(tmp_path_factory.mktemp("hostile-lake")))


def _injected(page: Any) -> dict[str, int]:
    return page.evaluate(f"""() => ({{
        links: [...document.querySelectorAll('a[href]')].filter(a => a.href.includes('{EVIL}')).length,
        images: [...document.querySelectorAll('img[src]')].filter(i => i.src.includes('{EVIL}')).length,
        elements: document.querySelectorAll('#injected').length,
    }})""")


@pytest.mark.parametrize("path", ["", "cluster", "cluster?cluster=" + urllib.parse.quote(f"nope {LINK} {IMAGE}"),
                                  "alerts", "compare", "consumer_groups", "clients", "upgrade"])
def test_hostile_strings_render_as_text(hostile_server: StreamlitServer, page: Any, path: str) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url)
            if (urllib.parse.urlsplit(request.url).hostname or "").endswith(EVIL) else None)
    page.goto(f"{hostile_server.url}/{path}")
    wait_for_streamlit(page)
    page.wait_for_timeout(1500)
    assert page_errors(page) == []
    assert _injected(page) == {"links": 0, "images": 0, "elements": 0}
    assert requested == []  # the browser fetched nothing from the hostile host
    if path.startswith("cluster"):
        text = page.inner_text("body")
        assert "upgrade now" in text  # still shown, as text
        if "?cluster=" in path:
            assert "is not in the lake" in text
        else:  # the broker configs were drawn, with the brokers' read error as text
            assert "could not read (last known values kept)" in text and "Topic overrides" in text
    if path == "compare":
        assert "configs differ; differences first" in page.inner_text("body")
