"""`python -m backend demo` end to end, in the order a user meets it, with its lake in S3.

One demo runs for the module, `--lake s3://bucket/demo` on moto's S3 server with the standard AWS variables set (the
poller, ingest, the warm Spark driver reading s3a:// and the UI all on the bucket, nothing in a local lake): every page
shows data in Chromium with the four alert families; then faults (a stopped broker, malformed frames, broken snapshot
files) show on their own rows and clear; finally one SIGINT stops every process the demo started, and the AWS secret
key (a canary value) is nowhere in the bucket, the logs, the pages or the exports.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import psutil
import pytest

from backend.store.group_readers import read_groups
from backend.store.readers import alerts as read_alerts
from backend.store.readers import latest_clusters, latest_topics
from backend.store.tables import read_table
from tests.conftest import ARTIFACTS, page_errors, wait_for_streamlit
from tests.rig.objectstores import S3Server
from tests.rig.procs import REPO, free_port, log_tail

FLEET_FAMILIES = {"misrouted cluster": "zk_cluster_id_mismatch", "topic recreated": "topic_recreated", "version skew": "version_skew"}
READY_TIMEOUT_S = 420
PAGES = {"": "Fleet", "cluster": "Cluster", "compare": "Compare", "consumer_groups": "Consumer groups",
         "client_configs": "Client configs", "clients": "Clients", "upgrade": "Upgrade readiness", "alerts": "Alerts",
         "export": "Export"}
# The lab's prod-eu groups (lab.toml) and the status each must reach: a healthy, a lagging, a stalled and an empty one.
DEMO_GROUPS = {"orders-consumers": "ok", "payments-consumers": "lagging", "fraud-consumers": "stalled",
               "notifications-consumers": "empty_with_lag"}
EMPTY_STATE_MARKERS = ("No poll snapshots", "not run yet", "No client-config results", "No cluster has a broker metrics source")


def _config_alerts(lake: str) -> pd.DataFrame:
    return read_table(lake, "results/config_alerts").to_pandas()  # a switched table: old or new, never half


def _families_present(lake: str) -> set[str]:
    found = set()
    fleet = read_alerts(lake)
    rules = set(fleet["rule"]) if not fleet.empty else set()
    found |= {family for family, rule in FLEET_FAMILIES.items() if rule in rules}
    if len(_config_alerts(lake)):
        found.add("misconfiguration")
    return found


def _descendants(pid: int) -> set[int]:
    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive



@dataclass
class DemoRun:
    """The demo subprocess and where it keeps things."""

    proc: subprocess.Popen[bytes]
    port: int
    lake: str
    lab_file: Path
    log: Path
    home: Path  # the demo's working directory: lab state, sink, the service's logs (and no lake)
    s3: S3Server
    bucket: str
    started_pids: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        """The UI's address."""
        return f"http://127.0.0.1:{self.port}"

    def track(self) -> None:
        """Remember every process the demo has started so far."""
        self.started_pids |= _descendants(self.proc.pid)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `python -m backend ...` as a user would, next to the running demo (the same AWS variables)."""
        return subprocess.run([sys.executable, "-m", "backend", *args], cwd=self.home, capture_output=True, text=True,
                              timeout=timeout, env=_demo_env(self.s3))


def _demo_env(s3: S3Server) -> dict[str, str]:
    return {**os.environ, **s3.env(), "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, moto_s3: S3Server) -> Iterator[DemoRun]:
    """`python -m backend demo --lake s3://<bucket>/demo` on a free port, with its own lab state dir, run from a
    directory of its own (where a local lake would go); this process reads the bucket with the same variables."""
    tmp = tmp_path_factory.mktemp("demo")
    lab_file = tmp / "lab.toml"
    text = (REPO / "lab.toml").read_text(encoding="utf-8")
    lab_file.write_text(re.sub(r'(?m)^state_dir = .*$', f"state_dir = {json.dumps(str(tmp / 'state'))}", text, count=1))
    bucket = moto_s3.new_bucket("demo")
    lake = f"s3://{bucket}/demo"
    port, log = free_port(), tmp / "demo.log"
    cmd = [sys.executable, "-m", "backend", "demo", "--port", str(port), "--lake", lake, "--lab", str(lab_file),
           "--clients", "240", "--poll-interval", "5", "--analyze-interval", "600", "--api-port", "0"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=_demo_env(moto_s3))
    run = DemoRun(proc, port, lake, lab_file, log, tmp, moto_s3, bucket)
    patch = pytest.MonkeyPatch()
    for key, value in moto_s3.env().items():
        patch.setenv(key, value)
    try:
        yield run
    finally:
        patch.undo()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in _alive(run.started_pids):
                os.kill(pid, signal.SIGKILL)


def _open(page: Any, url: str) -> str:
    page.goto(url)
    wait_for_streamlit(page, timeout_ms=90000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=60000)
    page.wait_for_timeout(1500)
    assert page_errors(page) == [], url
    return str(page.inner_text("[data-testid='stMain']"))


def _caption_count(page: Any) -> str:
    return str(page.get_by_text(" alerts", exact=False).filter(has_text=" of ").first.inner_text())


@pytest.mark.slow
def test_every_page_shows_data_with_the_four_alert_families(demo: DemoRun, browser: Any) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    families: set[str] = set()
    while time.monotonic() < deadline:
        assert demo.proc.poll() is None, f"demo exited early:\n{log_tail(demo.log)}"
        demo.track()
        families = _families_present(demo.lake)
        if len(families) == 4:
            break
        time.sleep(2)
    assert families == {*FLEET_FAMILIES, "misconfiguration"}, f"after {READY_TIMEOUT_S}s: {families}\n{log_tail(demo.log)}"
    print(f"demo: all four alert families in the lake after {READY_TIMEOUT_S - (deadline - time.monotonic()):.0f}s")

    # The lab's groups show each status (the stalled one needs its window of reads: group_window = 5 in the demo).
    statuses: dict[str, str] = {}
    while time.monotonic() < deadline + 120:
        groups = read_groups(demo.lake, ["prod-eu"])
        statuses = dict(zip(groups["group_id"], groups["status"], strict=True))
        if all(statuses.get(g) == s for g, s in DEMO_GROUPS.items()):
            break
        time.sleep(2)
    assert {g: statuses.get(g) for g in DEMO_GROUPS} == DEMO_GROUPS, f"{statuses}\n{log_tail(demo.log)}"

    # The seeded broker and topic config differences of lab.toml are incidents (configs are read at the first poll).
    fleet = read_alerts(demo.lake)
    seeded = set(zip(fleet["cluster_name"], fleet["rule"], fleet["subject"], strict=True))
    assert {("prod-us", "config_min_isr_above_rf", "topic payments"),
            ("prod-us", "config_static_disagreement", "log.retention.hours"),
            ("legacy-zk", "config_unclean_leader_election", "brokers")} <= seeded, sorted(seeded)

    # The banner names the poller's Prometheus endpoint, and it serves every lab cluster.
    found = re.search(r"metrics: (http://127\.0\.0\.1:\d+/metrics)", demo.log.read_text(errors="replace"))
    assert found, log_tail(demo.log)
    with urllib.request.urlopen(found.group(1), timeout=10) as response:
        exposition = response.read().decode("utf-8")
    assert 'kafka_fleet_cluster_up{cluster="prod-eu"} 1.0' in exposition, exposition[:2000]
    assert 'kafka_fleet_cluster_status{cluster="staging-zk",status="misrouted"} 1.0' in exposition
    assert 'kafka_fleet_group_status{cluster="prod-eu",group="fraud-consumers",status="stalled"} 1.0' in exposition

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    for path, heading in PAGES.items():
        main = _open(page, f"{demo.url}/{path}")
        assert heading in main
        assert not any(marker in main for marker in EMPTY_STATE_MARKERS), f"{path}: {main[:400]}"
        # A table or chart may arrive after the skeletons are gone (a loaded CI machine); wait for the first one.
        page.locator("[data-testid='stDataFrame'], [data-testid='stPlotlyChart']").first.wait_for(timeout=30000)
        # The screenshots go to docs/: no path of this machine (repo, lake, temp dirs) may show on a page.
        shown = page.inner_text("body")
        for machine_path in (str(REPO), str(demo.home), "/tmp/", "/home/", "/root/"):
            assert machine_path not in shown, f"{path}: {machine_path} is visible"
        if path == "upgrade":  # the expanders' labels are text (the tables are drawn on a canvas)
            # (the page may still be drawing its verdicts after its first table: wait for them, bounded)
            page.get_by_text(re.compile(r"analytics-zk\s*·\s*blocked")).first.wait_for(timeout=90000)
        page.screenshot(path=str(shots / f"demo-{path or 'fleet'}.png"), full_page=True)
        assert demo.s3.secret_key not in page.content(), path  # the AWS secret key (a canary) on no page
        html = ARTIFACTS / "demo-pages"
        html.mkdir(parents=True, exist_ok=True)
        (html / f"{path or 'fleet'}.html").write_text(page.content(), encoding="utf-8")

    # The same readiness as CSV through the export command: the lab's old reporting job (a 0.10 producer: no software
    # name, Produce v2) blocks analytics-zk by name.
    out = demo.home / "exports" / "readiness.csv"
    out.parent.mkdir(exist_ok=True)
    done = demo.cli("export", "--report", "readiness", "--lake", str(demo.lake), "--out", str(out))
    assert done.returncode == 0, done.stderr
    checklist = pd.read_csv(out)
    protocol = checklist[(checklist["cluster_name"] == "analytics-zk") & (checklist["item"] == "removed protocol versions")]
    assert protocol["status"].iloc[0] == "fail" and "Produce v2 by unknown unknown" in protocol["detail"].iloc[0]

    # Search (issue 38): the CLI finds the lab clusters' payments topics with the ids the lake holds, over the index
    # the demo's poller keeps; the Search page and the sidebar box find them too.
    done = demo.cli("search", "payments", "--kind", "topic", "--current-only", "--format", "json", "--lake", str(demo.lake))
    assert done.returncode == 0, done.stderr
    topics = latest_topics(demo.lake, with_data=True)
    expected = {(r.cluster_name, r.topic_id) for r in topics[topics["topic"] == "payments"].itertuples()}
    found_ids = {(h["cluster"], h["id"]) for h in json.loads(done.stdout) if h["name"] == "payments"}
    assert len(expected) >= 2 and found_ids == expected, (found_ids, expected)
    main = _open(page, f"{demo.url}/search?q=payments")
    assert re.search(r"\d+ matches in \d+ clusters", main), main[:600]
    box = page.locator("[data-testid='stSidebar'] input[aria-label='Search the fleet']")
    box.fill("payments")
    box.press("Enter")
    page.get_by_role("link", name=re.compile(r"^All \d+ results")).wait_for(timeout=30000)
    suggestions = page.locator("[data-testid='stSidebar']").inner_text()
    assert "payments" in suggestions and "prod-eu" in suggestions, suggestions

    # The Alerts page shows each family (over the whole history): filter by its rule and count what remains.
    _open(page, f"{demo.url}/alerts")
    current_only = page.get_by_text("current only", exact=False).first  # history: every poll
    if current_only.count():
        current_only.click()
        wait_for_streamlit(page)
    box = page.get_by_label("Rule or subject contains")
    for family, rule in FLEET_FAMILIES.items():
        box.fill(rule)
        box.press("Enter")
        wait_for_streamlit(page)
        assert not _caption_count(page).startswith("0 of"), family
    box.fill("")
    box.press("Enter")
    wait_for_streamlit(page)
    page.get_by_test_id("stMultiSelect").filter(has_text="Source").click()
    page.get_by_role("option", name="client config").click()
    page.keyboard.press("Escape")
    wait_for_streamlit(page)
    assert not _caption_count(page).startswith("0 of"), "misconfiguration"
    context.close()


def _status(lake: str, cluster: str) -> tuple[str, str]:
    rows = latest_clusters(lake)
    row = rows[rows["cluster_name"] == cluster]
    return (str(row["status"].iloc[0]), str(row["error"].iloc[0] or "")) if len(row) else ("", "")


def _wait_status(demo: DemoRun, cluster: str, wanted: set[str], timeout_s: float = 90) -> tuple[str, str]:
    deadline = time.monotonic() + timeout_s
    status = ("", "")
    while time.monotonic() < deadline:
        status = _status(demo.lake, cluster)
        if status[0] in wanted:
            return status
        time.sleep(1)
    raise AssertionError(f"{cluster} never reached {wanted}; last {status}\n{log_tail(demo.log)}")


def _grid_text(page: Any) -> list[str]:
    return [str(cell.inner_text()) for cell in page.query_selector_all("[role=gridcell]")]


@pytest.mark.slow
def test_faults_show_on_their_own_rows_and_clear(demo: DemoRun, browser: Any, tmp_path: Path) -> None:
    assert demo.proc.poll() is None, log_tail(demo.log)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()

    # A lab broker goes away and comes back.
    assert demo.cli("lab", "--config", str(demo.lab_file), "--set-fault", "prod-eu:2:stopped=true").returncode == 0
    assert _wait_status(demo, "prod-eu", {"degraded"})[0] == "degraded"
    # Malformed frames from every broker of another cluster.
    for broker in (0, 1, 2):
        assert demo.cli("lab", "--config", str(demo.lab_file), "--set-fault", f"edge-rp:{broker}:malformed=true").returncode == 0
    edge_status, edge_error = _wait_status(demo, "edge-rp", {"down", "degraded"})
    assert edge_error, "a misbehaving cluster carries its error text"
    assert _status(demo.lake, "prod-us")[0] == "ok" and _status(demo.lake, "batch-43")[0] == "ok"

    # The UI caches lake reads for a few seconds; within a bounded wait it shows both rows.
    deadline = time.monotonic() + 90
    while True:
        _open(page, demo.url)
        cells = _grid_text(page)
        if any("degraded" in c for c in cells) and any(edge_status in c for c in cells):
            break
        assert time.monotonic() < deadline, cells
        time.sleep(3)
    assert any(c.endswith("ok") for c in cells)

    # A directory of broken snapshot files is quarantined with reasons; nothing else is lost.
    broken = tmp_path / "broken-sink"
    broken.mkdir()
    good = {"snapshot_id": "s-good", "received_at": "2026-11-21T00:00:00Z", "cluster_id": "QUJDREVGR0hJSktMTU5PUA",
            "broker_id": 1, "client_instance_id": "6f1c1f7e-1d5e-4a3e-9a2c-1b2c3d4e5f60", "client_id": "ok-client",
            "client_type": "producer", "client_software_name": "apache-kafka-java", "client_software_version": "3.9.0",
            "principal": None, "client_address": None,
            "configs": [{"key": "acks", "value": "all", "type": "STRING", "is_default": True}]}  # fmt: skip
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({k: v for k, v in good.items() if k != "cluster_id"}),
        json.dumps({**good, "snapshot_id": "s-types", "broker_id": "one"}),
        json.dumps({**good, "snapshot_id": "s-big", "client_id": "x" * 11000}),
    ]
    (broker_file := broken / "broken.jsonl").write_text("\n".join(lines) + "\n")
    ingest = demo.cli("ingest", "--sink", str(broken), "--lake", str(demo.lake))
    assert ingest.returncode in (0, 1), ingest.stdout + ingest.stderr
    assert re.search(r"quarantined:\s+4\b", ingest.stdout), ingest.stdout
    quarantine = read_table(demo.lake, "quarantine").to_pandas()
    mine = quarantine[quarantine["position"].astype(str).str.startswith(f"{broker_file.name}:")]
    assert sorted(mine["position"]) == [f"{broker_file.name}:{n}" for n in (2, 3, 4, 5)]
    assert set(mine["reason"]) == {"malformed_json", "missing_field", "wrong_type", "too_large"}
    deadline = time.monotonic() + 90  # the page's cached reads and a loaded machine: within a bounded wait
    while "quarantined" not in (main := _open(page, f"{demo.url}/client_configs")):
        assert time.monotonic() < deadline, main
        time.sleep(3)

    # Faults clear: the rows return to ok.
    assert demo.cli("lab", "--config", str(demo.lab_file), "--set-fault", "prod-eu:2:stopped=false").returncode == 0
    for broker in (0, 1, 2):
        assert demo.cli("lab", "--config", str(demo.lab_file), "--set-fault", f"edge-rp:{broker}:malformed=false").returncode == 0
    assert _wait_status(demo, "prod-eu", {"ok"})[0] == "ok"
    assert _wait_status(demo, "edge-rp", {"ok"})[0] == "ok"
    assert demo.proc.poll() is None, "the demo survived every fault"
    context.close()


@pytest.mark.slow
def test_one_sigint_stops_every_process_the_demo_started(demo: DemoRun) -> None:
    assert demo.proc.poll() is None, log_tail(demo.log)
    demo.track()
    assert demo.started_pids, "the demo started no child process?"
    os.kill(demo.proc.pid, signal.SIGINT)
    try:
        code = demo.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"demo did not stop within 90s of SIGINT:\n{log_tail(demo.log)}") from None
    assert code == 0, log_tail(demo.log)
    assert "Demo stopped" in demo.log.read_text()
    time.sleep(1)
    left = _alive(demo.started_pids)
    assert left == set(), f"left behind: {[psutil.Process(p).cmdline() for p in left]}"


@pytest.mark.slow
def test_the_lake_is_in_the_bucket_and_the_secret_key_nowhere(demo: DemoRun) -> None:
    assert demo.proc.poll() is not None, "runs after the demo stopped (its last writes are in)"
    keys = demo.s3.keys(demo.bucket, "demo/")
    areas = {k.split("/")[1] for k in keys}
    assert {"cluster_snapshots", "changes", "client_configs", "results", "_state"} <= areas, areas
    assert any(k.startswith("demo/_state/pipeline/") for k in keys)  # the warm driver's state, committed in S3
    assert any(k.startswith("demo/results/config_alerts/") for k in keys)
    # Nothing of a lake on the local disk: no Parquet file and no lake directory where the demo ran.
    assert not list(demo.home.rglob("*.parquet")), list(demo.home.rglob("*.parquet"))[:5]
    assert not (demo.home / "lake").exists() and not (REPO / "lake" / demo.bucket).exists()
    # The AWS secret key (a canary) never reaches the bucket, a log, a status file or an export.
    canary = demo.s3.secret_key.encode()
    for key, data in demo.s3.read_all(demo.bucket, keys).items():
        assert canary not in data, key
    for path in demo.home.rglob("*"):
        if path.is_file():
            assert canary not in path.read_bytes(), path
    for shot in (ARTIFACTS / "demo-pages").glob("*.html"):
        assert canary not in shot.read_bytes(), shot
