"""How absence is judged (docs/client-inventory.md): evidence seen within the window holds until the window ends,
counts are compared only between two reads of the same broker process, and no read short of a whole one whose rules
are known to export the KIP-896 meter proves that no client uses a removed protocol version.

The pages are the real exporter's (tests/fixtures/exporter/jmx-default.txt, a 3.9.2 broker with the JMX exporter
agent's default rules), with the lines that other rules drop taken out, their counts changed, and the
`process_start_time_seconds` line the agent serves whatever its rules; the readiness verdicts are judged on what
the lake stores (inventory_state's tables read back as frames).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from backend.collect.client_metrics import BrokerRoles, _fold
from backend.config import BrokerMetricsSource, Settings
from backend.kafka.admin import NodeInfo
from backend.kafka.broker_metrics import PageReading, read_page, recognise
from backend.store import inventory_state
from backend.store.inventory_model import InventorySnapshot
from backend.views import fleet_views, inventory_views
from backend.views import readiness as R

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "exporter"
PAGE = (FIXTURES / "jmx-default.txt").read_text(encoding="utf-8")
T0 = datetime(2031, 3, 4, 12, 0, tzinfo=UTC)
WINDOW = 120.0
URL = "http://b0:7071/metrics"
BROKERS = [NodeInfo(0, "b0", 9092, None)]
ZK39 = pd.DataFrame({"cluster_name": ["c"], "zk_cluster_id": [None]})


def page(*, count: float | None = 50.0, started: datetime | None = T0 - timedelta(days=3), unknown: int = 2) -> bytes:
    """The real default-rules page, with the Produce v2 count set (None: the rules drop DeprecatedRequestsPerSec)."""
    lines = []
    for line in PAGE.splitlines():
        if "DeprecatedRequestsPerSec" in line:
            if count is None:
                continue
            if line.startswith("kafka_network_RequestMetrics_Count{"):
                line = re.sub(r" [0-9.eE+-]+$", f" {count}", line)
        if 'clientSoftwareName="unknown"' in line and "connections{" in line and "PLAINTEXT" in line:
            line = re.sub(r" [0-9.eE+-]+$", f" {float(unknown)}", line)
        lines.append(line)
    if started is not None:
        lines += ["# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {started.timestamp()}"]
    return ("\n".join(lines) + "\n").encode()


def source(**kw: object) -> BrokerMetricsSource:
    return BrokerMetricsSource(metrics_url="http://{host}:7071/metrics", **kw)  # type: ignore[arg-type]


def fold(reading: PageReading | None, previous: InventorySnapshot | None, at: datetime, *,
         src: BrokerMetricsSource | None = None, error: str = "connection refused") -> InventorySnapshot:
    settings = Settings(client_metrics_window_s=WINDOW)
    if reading is None:
        return _fold(src or source(), settings, BROKERS, [], {URL: f"{URL}: {error}"}, previous, at)
    return _fold(src or source(), settings, BROKERS, [(0, reading)], {URL: None}, previous, at)


def read(body: bytes) -> PageReading:
    return read_page(body, URL)


def items(snap: InventorySnapshot, at: datetime, brokers: pd.DataFrame | None = None) -> dict[str, tuple[str, str]]:
    """The two client items, judged on what the lake stores of this inventory."""
    rows = inventory_state.state_table("p", at, "c", "id", snap).to_pandas()
    runs = inventory_state.runs_table("p", at, "c", "id", snap).to_pandas()
    if brokers is None:
        brokers = pd.DataFrame({"cluster_name": ["c"], "broker_id": [0], "software_version": ["3.9.2"],
                                "version_provenance": ["reported"], "version_min": [None], "version_max": [None]})
    report = R.readiness(ZK39, brokers, rows, runs, now=at, target="4.0")
    mine = report.items[report.items["item"].isin(["removed protocol versions", "client software floor"])]
    return {r.item: (r.status, r.detail) for r in mine.itertuples()}


def protocol(snap: InventorySnapshot, at: datetime, brokers: pd.DataFrame | None = None) -> tuple[str, str]:
    return items(snap, at, brokers)["removed protocol versions"]


def watched(start: datetime | None = T0 - timedelta(days=3)) -> tuple[InventorySnapshot, datetime]:
    """Two reads 30 s apart in which Produce v2 grew: in use at the second."""
    first = fold(read(page(count=50, started=start)), None, T0)
    at = T0 + timedelta(seconds=30)
    return fold(read(page(count=60, started=start)), first, at), at


def test_a_count_that_grew_between_two_reads_of_one_process_blocks_and_says_so_in_human_units() -> None:
    first = fold(read(page(count=50)), None, T0)
    assert first.kip896 == "reported" and first.status == "ok"
    status, detail = protocol(first, T0)
    assert status == R.UNKNOWN and "counted before the product's first read" in detail  # when unknown: not a pass
    snap, at = watched()
    status, detail = protocol(snap, at)
    assert status == R.FAIL and "Produce v2 by unknown unknown" in detail
    assert "last counted 0 s ago" in detail and "blocks until 2 min" in detail and "0.0333" not in detail
    use = snap.deprecated[0]
    assert use.rate_per_s == 10 / 30 and use.first_seen_at == T0


def test_rules_that_drop_deprecated_requests_never_pass_held_then_unknown_with_the_rule_to_add() -> None:
    snap, at = watched()
    later = at + timedelta(seconds=30)
    dropped = fold(read(page(count=None)), snap, later)  # the same process; RequestsPerSec and connections still there
    assert dropped.kip896 == "not_exported" and "DeprecatedRequestsPerSec" in (dropped.message or "")
    assert "exports_deprecated_requests = true" in (dropped.message or "")
    status, detail = protocol(dropped, later)
    assert status == R.FAIL and "went away" in detail  # seen within the window: kept
    after = later + timedelta(seconds=WINDOW)
    gone = fold(read(page(count=None)), dropped, after)
    assert not gone.deprecated  # the evidence expired with the window...
    status, detail = protocol(gone, after)
    assert status == R.UNKNOWN and "DeprecatedRequestsPerSec" in detail  # ...and absence is not proven: never pass
    assert items(gone, after)["client software floor"][0] == R.UNKNOWN


def test_an_exporter_that_cannot_be_read_keeps_its_rows_and_its_baseline() -> None:
    snap, at = watched()
    down = fold(None, snap, at + timedelta(seconds=30))
    assert down.status == "error" and down.deprecated == snap.deprecated and down.baselines == snap.baselines
    assert protocol(down, at + timedelta(seconds=30))[0] == R.FAIL  # seen within the window: still a blocker
    after = at + timedelta(seconds=WINDOW + 10)
    down_long = fold(None, down, after)
    assert protocol(down_long, after)[0] == R.UNKNOWN  # cannot be read, nothing held: unknown, never pass
    back = fold(read(page(count=60)), down_long, after + timedelta(seconds=5))
    use = back.deprecated[0]
    assert use.first_seen_at == T0 and use.last_increase_at == at  # the same count: no new use, no reset
    assert protocol(back, after + timedelta(seconds=5))[0] == R.PASS


def test_a_partial_read_cannot_prove_absence() -> None:
    brokers = [NodeInfo(0, "b0", 9092, None), NodeInfo(1, "b1", 9092, None)]
    settings = Settings(client_metrics_window_s=WINDOW)
    idle = read(page(count=50))
    first = _fold(source(), settings, brokers, [(0, idle)], {URL: None, "http://b1:7071/metrics": "refused"}, None, T0)
    later = T0 + timedelta(seconds=WINDOW * 2)
    snap = _fold(source(), settings, brokers, [(0, idle)], {URL: None, "http://b1:7071/metrics": "refused"}, first,
                 later)
    assert snap.status == "partial" and "refused" in (snap.message or "")
    status, detail = protocol(snap, later)
    assert status == R.UNKNOWN and "absence cannot be proven" in detail
    whole = _fold(source(), settings, brokers, [(0, idle), (1, read_page(page(count=None), "http://b1:7071/metrics"))],
                  {URL: None, "http://b1:7071/metrics": None}, snap, later + timedelta(seconds=1))
    assert whole.status == "ok" and protocol(whole, later + timedelta(seconds=1))[0] == R.PASS


def test_a_restart_inside_the_window_keeps_the_evidence_and_a_reset_is_new_use() -> None:
    snap, at = watched()
    restarted_at = at + timedelta(seconds=20)
    after = fold(read(page(count=None, started=restarted_at)), snap, at + timedelta(seconds=30))
    assert after.deprecated and after.deprecated[0].last_seen_at == at  # gone from the page, kept as evidence
    status, detail = protocol(after, at + timedelta(seconds=30))
    assert status == R.FAIL and "went away" in detail
    again = fold(read(page(count=3, started=restarted_at)), after, at + timedelta(seconds=60))
    assert again.deprecated[0].last_increase_at == at + timedelta(seconds=60)  # the new process counted it since
    # Without the start time, a count that went down is the reset.
    plain, t1 = watched(start=None)
    reset = fold(read(page(count=2, started=None)), plain, t1 + timedelta(seconds=WINDOW + 5))
    assert reset.deprecated[0].in_use(t1 + timedelta(seconds=WINDOW + 5), WINDOW)
    # A restart whose new process counts exactly as many as the old one did is still a restart.
    same_count = fold(read(page(count=60, started=restarted_at)), snap, at + timedelta(seconds=WINDOW + 5))
    assert same_count.deprecated[0].last_increase_at == at + timedelta(seconds=WINDOW + 5)


def test_a_stale_count_never_re_blocks() -> None:
    snap, at = watched()
    quiet = at + timedelta(seconds=WINDOW + 1)
    idle = fold(read(page(count=60)), snap, quiet)  # the first read after the window: the same count
    assert idle.deprecated[0].first_seen_at == T0 and not idle.deprecated[0].in_use(quiet, WINDOW)
    assert protocol(idle, quiet)[0] == R.PASS
    # After the product restarted: the inventory comes back from the lake, baselines included.
    rows = inventory_state.state_table("p", quiet, "c", "id", idle)
    runs = inventory_state.runs_table("p", quiet, "c", "id", idle)
    seeded = inventory_state.snapshots_from_tables(rows, runs)["c"]
    assert seeded.baselines == idle.baselines
    resumed = fold(read(page(count=60)), seeded, quiet + timedelta(seconds=60))
    assert resumed.deprecated[0].first_seen_at == T0 and protocol(resumed, quiet + timedelta(seconds=60))[0] == R.PASS
    # A read that failed in between changes nothing either.
    failed = fold(None, resumed, quiet + timedelta(seconds=90))
    after = fold(read(page(count=60)), failed, quiet + timedelta(seconds=120))
    assert after.deprecated[0].first_seen_at == T0 and protocol(after, quiet + timedelta(seconds=120))[0] == R.PASS


def test_a_first_count_is_in_use_when_the_broker_started_within_the_window_else_undetermined() -> None:
    fresh = fold(read(page(count=5, started=T0 - timedelta(seconds=30))), None, T0)
    assert protocol(fresh, T0)[0] == R.FAIL
    old = fold(read(page(count=5, started=T0 - timedelta(days=9))), None, T0)
    status, detail = protocol(old, T0)
    assert status == R.UNKNOWN and "once the product has watched them for 2 min" in detail
    watched_long = fold(read(page(count=5, started=T0 - timedelta(days=9))), old, T0 + timedelta(seconds=WINDOW + 1))
    assert protocol(watched_long, T0 + timedelta(seconds=WINDOW + 1))[0] == R.PASS
    # A meter that appears on a page whose rules showed KIP-896 series before: the broker created it since.
    second = PAGE.replace('request="Produce",version="2"', 'request="Fetch",version="3"')
    both = read((PAGE + "\n".join(line for line in second.splitlines() if "DeprecatedRequestsPerSec" in line)
                 + f"\nprocess_start_time_seconds {(T0 - timedelta(days=9)).timestamp()}\n").encode())
    grown = fold(both, watched_long, T0 + timedelta(seconds=WINDOW + 30))
    fetch = next(d for d in grown.deprecated if d.request == "Fetch")
    assert fetch.last_increase_at == T0 + timedelta(seconds=WINDOW + 30)


def test_no_series_is_none_only_when_the_fleet_file_says_the_rules_export_them() -> None:
    at = T0 + timedelta(seconds=5)
    assumed = fold(read(page(count=None)), None, at, src=source(exports_deprecated_requests=True))
    assert assumed.kip896 == "none" and protocol(assumed, at)[0] == R.PASS
    unsure = fold(read(page(count=None)), None, at)
    assert unsure.kip896 == "not_exported" and protocol(unsure, at)[0] == R.UNKNOWN


def test_prometheus_answers_name_the_brokers_they_lack() -> None:
    brokers = [NodeInfo(1, "127.0.0.1", 9092, None), NodeInfo(2, "127.0.0.1", 9093, None)]
    samples = [
        ("kafka_server_socket_server_metrics_connections",
         {"instance": "127.0.0.1:7071", "clientSoftwareName": "apache-kafka-java", "clientSoftwareVersion": "4.3.1",
          "listener": "PLAINTEXT", "networkProcessor": "0"}, 2.0),
        ("kafka_server_app_info_StartTimeMs", {"instance": "127.0.0.1:7071", "id": "1"}, 1.9e12),
        ("process_start_time_seconds", {"instance": "127.0.0.1:7071"}, 1.9e9),
    ]
    src = BrokerMetricsSource(prometheus="http://p:9090", matchers='job="kafka"')
    snap = _fold(src, Settings(client_metrics_window_s=WINDOW), brokers, [(None, recognise(samples))],
                 {"http://p:9090": None}, None, T0)
    assert snap.status == "partial" and "broker 2 (127.0.0.1:9093)" in (snap.message or "")
    assert {c.broker_id for c in snap.connections} == {1} and snap.baselines["127.0.0.1:7071"].started == 1.9e9
    assert protocol(snap, T0)[0] == R.UNKNOWN
    unmapped = [s for s in samples if "app_info" not in s[0]]
    snap = _fold(src, Settings(client_metrics_window_s=WINDOW), brokers, [(None, recognise(unmapped))],
                 {"http://p:9090": None}, None, T0)
    assert snap.status == "partial" and "1 of the 2 brokers" in (snap.message or "")


def test_on_kafka_4_an_empty_deprecated_meter_is_no_proof_unnamed_clients_are_unknown() -> None:
    four = pd.DataFrame({"cluster_name": ["c"], "broker_id": [0], "software_version": ["4.3.1"],
                         "version_provenance": ["reported"], "version_min": [None], "version_max": [None]})
    at = T0 + timedelta(seconds=5)
    with_old = fold(read(page(count=None, unknown=1)), None, at)
    status, detail = protocol(with_old, at, four)
    assert status == R.UNKNOWN and "UnsupportedVersionException" in detail and R.UNNAMED_WHY in detail
    # The unnamed client left: seen within the window, still unknown; after the window, every client is named.
    left = fold(read(page(count=None, unknown=0)), with_old, at + timedelta(seconds=30))
    assert protocol(left, at + timedelta(seconds=30), four)[0] == R.UNKNOWN
    later = at + timedelta(seconds=WINDOW + 31)
    named = fold(read(page(count=None, unknown=0)), left, later)
    status, detail = protocol(named, later, four)
    assert status == R.PASS and "sent a software name" in detail


def test_the_brokers_own_connections_are_told_apart() -> None:
    roles = BrokerRoles.of(None, ["3.9.2"])
    assert roles.role("CONTROLLER", "apache-kafka-java", "4.3.1") == "broker"
    assert roles.role("PLAINTEXT", "apache-kafka-java", "3.9.2") == "broker"
    assert roles.role("PLAINTEXT", "apache-kafka-java", "2.8.2") == "client"
    assert roles.role("PLAINTEXT", "unknown", "unknown") == "either"  # the inter-broker listener, shared
    assert roles.role("PLAINTEXT", "unknown", "unknown", shared=False) == "broker"
    assert roles.role("SSL", "unknown", "unknown") == "client"

    class V:
        def __init__(self, value: str) -> None:
            self.value = value

    configured = BrokerRoles.of({1: {"controller.listener.names": V("CTRL"), "inter.broker.listener.name": V("REPL")}},
                                ["4.3.1"])
    assert configured.role("ctrl", "x", "1") == "broker" and configured.role("CONTROLLER", "x", "1") == "client"
    assert configured.role("REPL", "apache-kafka-java", "4.3.1") == "broker"
    snap = _fold(source(), Settings(client_metrics_window_s=WINDOW), BROKERS, [(0, read(page()))], {URL: None}, None,
                 T0, roles)
    rows = inventory_state.state_table("p", T0, "c", "id", snap).to_pandas()
    clients = inventory_views.software_by_cluster(rows)
    own = inventory_views.software_by_cluster(rows, role="broker")
    assert ("apache-kafka-java", "3.9.2") in set(zip(own["software_name"], own["software_version"], strict=True))
    assert ("apache-kafka-java", "3.9.2") not in set(zip(clients["software_name"], clients["software_version"],
                                                         strict=True))
    assert set(clients.loc[clients["software_name"] == "unknown", "floor"]) == {inventory_views.UNNAMED} == {R.UNNAMED}


def test_unchanged_rows_are_not_rewritten_because_a_read_saw_them_again() -> None:
    snap, at = watched()
    idle = fold(read(page(count=60)), snap, at + timedelta(seconds=30))  # its rate fell to 0: a change
    again = fold(read(page(count=60)), idle, at + timedelta(seconds=60))
    assert not inventory_state.same_content(snap, idle) and inventory_state.same_content(idle, again)
    grown = fold(read(page(count=61)), again, at + timedelta(seconds=90))
    assert not inventory_state.same_content(again, grown)


def test_durations_read_as_people_say_them() -> None:
    assert fleet_views.duration_text(0.0333333 * 3600) == "2 min"
    assert [fleet_views.duration_text(s) for s in (6, 90, 3600, 5400, 86400 + 3600)] == \
        ["6 s", "1 min 30 s", "1 h", "1 h 30 min", "1 d 1 h"]


def test_unnamed_connections_on_a_shared_inter_broker_listener_may_be_replica_fetchers() -> None:
    """4.3.1's replica fetchers send no software name: on an inter-broker listener clients share they cannot be told
    from an old client (role `either`, the item stays unknown and says why); on a listener of the brokers' own they
    are the brokers' (role `broker`), and a 4.x cluster whose every client sent a name passes."""
    four = pd.DataFrame({"cluster_name": ["c"], "broker_id": [0], "software_version": ["4.3.1"],
                         "version_provenance": ["reported"], "version_min": [None], "version_max": [None]})
    settings = Settings(client_metrics_window_s=WINDOW)
    shared = _fold(source(), settings, BROKERS, [(0, read(page(count=None, unknown=1)))], {URL: None}, None, T0,
                   BrokerRoles(broker_versions=frozenset({"4.3.1"})))
    assert {c.role for c in shared.connections if c.software_name == "unknown" and c.listener == "PLAINTEXT"} == \
        {"either"}
    status, detail = protocol(shared, T0, four)
    assert status == R.UNKNOWN and "replica fetchers" in detail
    own = page(count=None, unknown=1).decode().replace(
        'clientSoftwareName="unknown",clientSoftwareVersion="unknown",listener="PLAINTEXT"',
        'clientSoftwareName="unknown",clientSoftwareVersion="unknown",listener="REPLICATION"')
    dedicated = _fold(source(), settings, BROKERS, [(0, read(own.encode()))], {URL: None}, None, T0,
                      BrokerRoles(inter_broker_listener="REPLICATION", broker_versions=frozenset({"4.3.1"})))
    assert {c.role for c in dedicated.connections if c.listener == "REPLICATION"} == {"broker"}
    status, detail = protocol(dedicated, T0, four)
    assert status == R.PASS and "sent a software name" in detail
