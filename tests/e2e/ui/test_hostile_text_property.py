"""Property: random hostile strings in every broker-, ZooKeeper-, client- and URL-controlled field render as text.

Hypothesis mixes Markdown, HTML, formula prefixes and plain noise into strings; each example writes a lake
through the real poll writer (brokers, topics, ZooKeeper nodes, errors) plus client-config results (keys,
values, spellings, client and group ids, software, alert evidence), serves it with `streamlit run`, and
visits every page in real Chromium. No link, image or element may come from the strings (checked in the
DOM), the browser may fetch nothing from the hostile host, and the marker text must still be visible.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.collect.checks import run_checks
from backend.store.fleet_writer import FleetWriter
from backend.store.inventory_model import DeprecatedUse, InventorySnapshot, SoftwareConnections
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot
from tests.conftest import StreamlitServer, page_errors, wait_for_streamlit
from tests.unit.dashboard.lake_fixture import write_result

EVIL = "evil.invalid"
MARK = "zq"  # every generated string starts with it, so the test can find it as text
FRAGMENTS = [
    f"[click](https://{EVIL}/l)", f"![i](https://{EVIL}/i.png)", f"<a href='https://{EVIL}/a'>a</a>",
    f"<img src='https://{EVIL}/x.png'>", "<b id='injected'>b</b>", "<script>window.pwned=1</script>",
    f"<iframe src='https://{EVIL}/f'></iframe>", "**bold**", "_em_", "$x^2$", ":red[alarm]", "`code`", "``",
    f"https://{EVIL}/auto", f"www.{EVIL}", "=HYPERLINK(\"http://evil.invalid\")", "+1+1", "-2", "@SUM(A1)",
    "\t", "\n", "|a|b|", "# head", "> quote", "&lt;", "&amp;", "\\", "'", '"', "{{x}}", "${x}", "%{x}",
    "<br>", "<span style='color:red'>s</span>",
    # bidi overrides and isolates, terminal escapes, bell, separators, zero-width (issue 32): shown, never obeyed
    "\u202e", "\u2066", "\x1b[31m", "\x07", "\r", "\u2028", "\u200b",
]
HIDDEN_IN_DOM = "\u202e\u2066\x1b\x07\u2028\u200b"
hostile = st.lists(st.sampled_from(FRAGMENTS) | st.text(alphabet="abc <>[]()!*_:=", max_size=6),
                   min_size=1, max_size=4).map(lambda parts: MARK + "".join(parts))
PAGES = ["", "cluster?cluster=prod", "cluster?cluster=edge", "compare", "consumer_groups", "client_configs", "clients",
         "upgrade", "alerts", "export"]


def _inventory(at: datetime, s: list[str]) -> InventorySnapshot:
    """What the brokers' metrics say about the clients: software names and versions the clients chose."""
    return InventorySnapshot(
        collected_at=at, source="metrics_url", source_label=f"http://{{host}}:7071/metrics {s[3]}", status="ok",
        kip896="reported", window_s=3600.0, message=s[4], endpoints={f"b0.{EVIL}:7071": None},
        connections=tuple(SoftwareConnections(1, f"b0.{EVIL}:7071", s[i], s[i + 1], s[i + 2], 2) for i in range(3)),
        deprecated=(DeprecatedUse(1, f"b0.{EVIL}:7071", "Produce", 2, s[5], s[6], 5.0, at, at),))


def _lake(root: Path, s: list[str]) -> Path:
    writer = FleetWriter(Lake(root))
    previous: dict[str, ClusterSnapshot] = {}
    start = datetime.now(UTC) - timedelta(minutes=5)
    ids = {"prod": "PRODclusterAAAAAAAAAAA", "edge": "EDGEclusterBBBBBBBBBBB"}
    for round_no in range(2):
        poll_id = new_poll_id(start + timedelta(minutes=round_no))
        at = poll_id_time(poll_id)
        clusters = []
        for n, name in enumerate(ids):
            brokers = [BrokerSnapshot(i + 1, f"b{i}.{EVIL}", 9092, rack=s[i % 8], reachable=i != 2,
                                      software_name=s[(i + 1) % 8], software_version=s[(i + 2 + round_no) % 8],
                                      version_provenance="reported", error=s[3] if i == 2 else None)
                       for i in range(3)]
            topics = [TopicSnapshot(f"t{i}{s[(i + n) % 8]}", f"ID{n}{i}{round_no}", partitions=3,
                                    replication_factor=3) for i in range(4)]
            clusters.append(ClusterSnapshot(
                name, "degraded", at, poll_id, cluster_id=ids[name], controller_id=1, error=s[4],
                zk_cluster_id=s[5] if name == "edge" else None, zk_nodes=[(f"/brokers/{s[6]}", s[7])],
                brokers=brokers, topics=topics, inventory=_inventory(at, s)))
        writer.write(FleetPoll(poll_id, at, clusters, run_checks(previous, clusters), 1.0))
        previous = {c.cluster_name: c for c in clusters}
    writer.close(start + timedelta(minutes=2))
    _results(root, s, list(ids.values()))
    return root


def _results(root: Path, s: list[str], ids: list[str]) -> None:
    """Client-config results whose keys, values and ids come from clients."""
    dist, numeric, drift, versions, alerts, groups, shares = [], [], [], [], [], [], []
    for n, cid in enumerate(ids):
        for v in range(3):
            dist.append({"cluster_id": cid, "client_type": "producer", "key": "acks" if v else s[v],
                         "value": s[(v + n) % 8], "instance_count": 3 + v, "total_instances": 12,
                         "share": (3 + v) / 12, "raw_values": [s[(v + 1) % 8], s[(v + 2) % 8]]})
        numeric.append({"cluster_id": cid, "client_type": "producer", "key": "linger.ms", "type": "INT",
                        "instances": 5, "unparsable": 0, "min": 0.0, "p50": 5.0, "p90": 9.0, "max": 10.0})
        versions.append({"cluster_id": cid, "client_type": "producer", "client_software_name": s[n],
                         "client_software_version": s[n + 1], "instances": 4})
        versions.append({"cluster_id": cid, "client_type": "producer", "client_software_name": "apache-kafka-java",
                         "client_software_version": "3.9.0", "instances": 2})
        shares.append({"cluster_id": cid, "client_type": "producer", "key": "auto.include.jmx.reporter", "instances": 2,
                       "default_count": 0, "overridden_count": 2, "default_share": 0.0})
        # Upgrade readiness names the instances the rules name: a removed key set (CC019), reporters without JMX
        for rule, key, value in (("CC019", "auto.include.jmx.reporter", "false"), ("CC020", "metric.reporters", s[7])):
            alerts.append({"alert_id": f"{rule}-{n}", "rule_id": rule, "severity": "info", "title": s[0],
                           "cluster_id": cid, "client_instance_id": s[1], "client_id": s[2 + n], "group_id": s[3],
                           "client_type": "producer", "keys": key, "observed_json": json.dumps({key: value}),
                           "explanation": s[4], "doc_url": "https://kafka.apache.org/documentation/"})
        alerts.append({"alert_id": f"a{n}", "rule_id": "CC004", "severity": "warning", "title": "acks=0",
                       "cluster_id": cid, "client_instance_id": f"ci-{n}", "client_id": s[2], "group_id": s[3],
                       "client_type": "producer", "keys": "acks", "observed_json": json.dumps({"acks": s[4]}),
                       "explanation": "records can be lost", "doc_url": "https://kafka.apache.org/documentation/"})
        groups.append({"cluster_id": cid, "group_id": s[5], "key": "acks", "members": 2, "distinct_values": 2,
                       "value_counts_json": json.dumps({s[6]: 1, s[7]: 1})})
    drift.append({"cluster_a": ids[0], "cluster_b": ids[1], "client_type": "producer", "key": "acks", "tvd": 0.5,
                  "instances_a": 12, "instances_b": 12, "dominant_value_a": s[0], "dominant_value_b": s[1]})
    # Identity keys (the toggles' help= tooltips) and dropped sensitive key names (the ingest tile's help=)
    drift_keys = [{"client_type": "producer", "key": s[2], "cluster_id": ids[0], "instances": 40, "distinct_values": 40,
                   "dominant_value": "x", "dominant_share": 0.025, "max_tvd": 0.0, "distinct_share": 1.0}]
    stats = [{"run_id": "r1", "ran_at": datetime.now(UTC), "source": "sink", "location": s[6], "metric": metric,
              "detail": detail, "count": 1}
             for metric, detail in (("records_read", ""), ("sensitive_dropped", s[0]), ("sensitive_dropped", s[1]))]
    for name, rows in (("distributions", dist), ("numeric_summary", numeric), ("drift_clusters", drift),
                       ("client_versions", versions), ("config_alerts", alerts), ("group_drift", groups),
                       ("drift_keys", drift_keys), ("ingest_stats", stats), ("default_share", shares)):
        write_result(root, name, rows)


def _injected(page: Any) -> dict[str, int]:
    return page.evaluate(f"""() => ({{
        links: [...document.querySelectorAll('a[href]')].filter(a => a.href.includes('{EVIL}')).length,
        images: [...document.querySelectorAll('img[src], iframe[src]')].filter(i => i.src.includes('{EVIL}')).length,
        elements: document.querySelectorAll('#injected').length,
        scripts: window.pwned ? 1 : 0,
    }})""")


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(strings=st.lists(hostile, min_size=8, max_size=8))
def test_random_hostile_strings_render_as_text_on_every_page(
        strings: list[str], streamlit_app: Callable[..., StreamlitServer], browser: Any,
        tmp_path_factory: Any) -> None:
    server = streamlit_app(_lake(tmp_path_factory.mktemp("hostile-property") / "lake", strings))
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url)
            if (urllib.parse.urlsplit(request.url).hostname or "").endswith(EVIL) else None)
    try:
        for path in [*PAGES, "cluster?cluster=" + urllib.parse.quote(strings[0])]:
            page.goto(f"{server.url}/{path}")
            wait_for_streamlit(page)
            page.wait_for_timeout(500)
            assert page_errors(page) == [], path
            if path == "client_configs":  # every help= tooltip, hovered: they render Markdown
                icons = page.locator("[data-testid='stTooltipHoverTarget']")
                for i in range(icons.count()):
                    if icons.nth(i).is_visible():
                        icons.nth(i).hover(force=True)
                        page.wait_for_timeout(100)
                        assert _injected(page) == {"links": 0, "images": 0, "elements": 0, "scripts": 0}, (i, strings)
            assert _injected(page) == {"links": 0, "images": 0, "elements": 0, "scripts": 0}, (path, strings)
            text = page.evaluate("() => document.body.innerText")
            assert not any(c in text for c in HIDDEN_IN_DOM), (path, [hex(ord(c)) for c in HIDDEN_IN_DOM if c in text])
            if path.startswith("cluster?cluster=prod"):
                assert MARK in page.inner_text("body"), path  # shown, as text
            if path == "upgrade":  # the hostile client ids, software and values reached the page's tables
                assert "Instances to chase" in page.inner_text("body")
    finally:
        context.close()
    assert requested == []  # the browser fetched nothing from the hostile host
