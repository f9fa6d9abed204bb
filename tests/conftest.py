"""Shared pytest fixtures: the real test rig (ZooKeeper, Kafka 3.9 and 4.x, Spark, Streamlit + Chromium)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.rig.kafka import KafkaKraftCluster, KafkaZkCluster, ZooKeeperServer
from tests.rig.objectstores import S3Server, start_moto, start_seaweedfs
from tests.rig.procs import LOG_FILES, REPO, free_port, log_tail

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = REPO / "artifacts"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    """Attach rig log tails to failures; in CI, turn skips into failures."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        # In CI a missing component is a failure, never a silent skip.
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {report.longrepr}"
    if report.failed and LOG_FILES:
        for log in LOG_FILES:
            report.sections.append((f"rig log {log.parent.name}/{log.name}", log_tail(log, 40)))


# The fixtures that start a broker, ZooKeeper, Spark's JVM, Streamlit or Chromium. `--pure-only` keeps the tests that
# use none of them: the ones `make test` runs again under a wall clock moved ahead (`--clock-shift`).
RIG_FIXTURES = frozenset({"zookeeper", "kafka39", "kafka4", "kafka4_all_up", "spark", "streamlit_app", "app_server",
                          "browser", "page", "moto_s3", "seaweed_s3", "s3_server"})


def pytest_addoption(parser: pytest.Parser) -> None:
    """--pure-only: only the tests that need no broker, browser or JVM; --clock-shift: the wall clock moved ahead."""
    parser.addoption("--pure-only", action="store_true",
                     help="only the tests that start no broker, ZooKeeper, JVM, Streamlit server or browser")
    parser.addoption("--clock-shift", default=None, metavar="DAYS",
                     help="run with the wall clock (time.time, datetime.now, pandas' now) this many days ahead, e.g. 45")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the rig marker; with --clock-shift, move the wall clock before any test module is imported.

    time-machine moves the wall clock only: monotonic clocks, sleeps and timeouts run as they are (libfaketime, which
    also shifts the monotonic clock, hangs Python's timed waits on Debian 12).
    """
    config.addinivalue_line("markers", "rig: starts a real component (JVM, broker, browser) without a rig fixture")
    shift = config.getoption("--clock-shift")
    if shift:
        import datetime as dt

        import time_machine

        traveller = time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=float(shift)), tick=True)
        traveller.start()
        config.add_cleanup(traveller.stop)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With --pure-only, deselect every test that uses a rig fixture or carries the rig marker."""
    if not config.getoption("--pure-only"):
        return
    keep, drop = [], []
    for item in items:
        uses_rig = RIG_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.get_closest_marker("rig")
        (drop if uses_rig else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# Start-up time of each rig component, printed at the end of the run.
RIG_TIMINGS: dict[str, float] = {}


def _timed_start(name: str, start: Callable[[], None]) -> None:
    began = time.monotonic()
    start()
    RIG_TIMINGS[name] = time.monotonic() - began


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how long each real component took to start."""
    if RIG_TIMINGS:
        parts = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in RIG_TIMINGS.items())
        terminalreporter.write_line(f"rig start-up: {parts}")


@pytest.fixture(scope="session")
def rig_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the rig keeps data and logs for this run (pytest keeps the last runs' folders)."""
    return tmp_path_factory.mktemp("rig")


@pytest.fixture(scope="session")
def zookeeper(rig_dir: Path) -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper server on a free 127.0.0.1 port."""
    server = ZooKeeperServer(rig_dir / "zookeeper")
    try:
        _timed_start("zookeeper", server.start)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def kafka39(rig_dir: Path, zookeeper: ZooKeeperServer) -> Iterator[KafkaZkCluster]:
    """A real Apache Kafka 3.9 broker in ZooKeeper mode, registered under /kafka39."""
    cluster = KafkaZkCluster(rig_dir / "kafka39", zookeeper)
    try:
        _timed_start("kafka39 (1 broker, ZooKeeper mode)", cluster.start)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka4(rig_dir: Path) -> Iterator[KafkaKraftCluster]:
    """A real Apache Kafka 4.x KRaft cluster of 3 combined broker+controller nodes, each with the Prometheus JMX exporter
    agent (`make inventory-jars`) on its own `metrics_port`."""
    agent = REPO / ".cache" / "inventory" / "agent" / "jmx_prometheus_javaagent-1.0.1.jar"
    assert agent.is_file(), "the JMX exporter agent is missing: run `make inventory-jars`"
    cluster = KafkaKraftCluster(rig_dir / "kafka4", exporter_agent=agent)
    try:
        _timed_start("kafka4 (3 KRaft nodes)", cluster.start)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kafka4_all_up(kafka4: KafkaKraftCluster) -> Iterator[KafkaKraftCluster]:
    """kafka4, with every node restarted after the test if the test stopped one."""
    yield kafka4
    for broker in kafka4.brokers:
        if not broker.proc.alive():
            kafka4.start_broker(broker.node_id)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One real local Spark session for the whole run, built by the product's get_spark()."""
    from backend.pipeline.spark import get_spark

    began = time.monotonic()
    session = get_spark("local[2]", app_name="fleetview-tests")
    RIG_TIMINGS["spark"] = time.monotonic() - began
    yield session
    session.stop()


@pytest.fixture(scope="session")
def moto_s3(rig_dir: Path) -> Iterator[S3Server]:
    """moto's S3 server on a free 127.0.0.1 port (the reference for AWS's answers), shared by the run."""
    began = time.monotonic()
    server = start_moto(rig_dir / "moto")
    RIG_TIMINGS["moto"] = time.monotonic() - began
    yield server
    server.stop()


@pytest.fixture(scope="session")
def seaweed_s3(rig_dir: Path) -> Iterator[S3Server]:
    """SeaweedFS (`weed mini`) on free 127.0.0.1 ports, telemetry off, one S3 identity; shared by the run."""
    began = time.monotonic()
    server = start_seaweedfs(rig_dir / "seaweedfs")
    RIG_TIMINGS["seaweedfs"] = time.monotonic() - began
    yield server
    server.stop()


@pytest.fixture(params=["moto", "seaweedfs"])
def s3_server(request: pytest.FixtureRequest) -> S3Server:
    """Each S3-compatible server in turn (a test taking it runs on both)."""
    return request.getfixturevalue("moto_s3" if request.param == "moto" else "seaweed_s3")  # type: ignore[no-any-return]


@dataclass
class StreamlitServer:
    """A running `streamlit run dashboard/app.py`."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path


def stop_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group, then SIGKILL after 15 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def streamlit_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., StreamlitServer]]:
    """A factory that serves the app on a free port for a given lake; every server stops at the end."""
    servers: list[StreamlitServer] = []

    def start(lake: Path | str, extra_env: dict[str, str] | None = None, timeout_s: float = 90.0, *,
              port: int | None = None, extra_args: list[str] | None = None) -> StreamlitServer:
        port = port or free_port()
        log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
        env = {**os.environ, "FLEETVIEW_LAKE": str(lake), "PYTHONPATH": str(REPO), **(extra_env or {})}
        cmd = [
            sys.executable, "-m", "streamlit", "run", str(REPO / "dashboard" / "app.py"),
            "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none", *(extra_args or []),
        ]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        server = StreamlitServer(f"http://127.0.0.1:{port}", proc, log)
        servers.append(server)
        LOG_FILES.append(log)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{log_tail(log)}")
            try:
                with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        return server
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"streamlit did not become healthy in {timeout_s:.0f}s:\n{log_tail(log)}")

    yield start
    for server in servers:
        stop_process_group(server.proc)


@pytest.fixture(scope="session")
def app_server(streamlit_app: Callable[..., StreamlitServer], tmp_path_factory: pytest.TempPathFactory) -> StreamlitServer:
    """The app served on an empty lake (the first-run state)."""
    return streamlit_app(tmp_path_factory.mktemp("empty-lake") / "lake")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium driven by Playwright, per test module.

    Playwright's sync API keeps an event loop running on the main thread while it is open,
    so a session-wide browser would break later tests that call asyncio.run().
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh browser page (own context, downloads allowed)."""
    context = browser.new_context(accept_downloads=True, viewport={"width": 1400, "height": 1000})
    new_page = context.new_page()
    yield new_page
    context.close()


def wait_for_streamlit(page: Any, timeout_ms: int = 60000) -> None:
    """Wait until Streamlit has rendered the current page's main area and stopped running the script."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout_ms)
    page.wait_for_function(
        """() => {
            const main = document.querySelector('[data-testid="stMain"]');
            const running = document.querySelector('[data-testid="stStatusWidget"]');
            return main && main.innerText.trim().length > 0 && !running;
        }""",
        timeout=timeout_ms,
    )
    page.wait_for_timeout(300)


def page_errors(page: Any) -> list[str]:
    """Exception boxes and tracebacks shown on the page."""
    found = [el.inner_text() for el in page.query_selector_all("[data-testid='stException']")]
    body = page.inner_text("body")
    if "Traceback (most recent call last)" in body:
        found.append("Traceback text on page")
    return found
