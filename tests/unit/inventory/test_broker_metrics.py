"""The reader of exporter pages, on pages the real jmx_prometheus_javaagent 1.0.1 served for a real 3.9.2 broker
(tests/fixtures/exporter: the KIP-511/KIP-896 lines and some others of each page; clients 0.10.2.2 and 2.8.2 were
connected), and the fleet file's [clusters.broker_metrics]."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import FleetConfigError, parse_fleet
from backend.kafka.broker_metrics import read_page, recognise
from backend.kafka.client_floors import check
from backend.kafka.metrics_fetch import fill_template, prometheus_query

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "exporter"
EXPECTED = {("apache-kafka-java", "3.9.2"): 3, ("apache-kafka-java", "2.8.2"): 2, ("unknown", "unknown"): 2}


def _software(page: str) -> dict[tuple[str, str], int]:
    reading = read_page((FIXTURES / page).read_bytes(), "http://b0:7071/metrics")
    out: dict[tuple[str, str], int] = {}
    for c in reading.connections:
        if c.connections:
            out[(c.software_name, c.software_version)] = out.get((c.software_name, c.software_version), 0) + c.connections
    return out


@pytest.mark.parametrize(("page", "dialect", "kip896"), [
    ("jmx-default.txt", "jmx-default", 1), ("strimzi-style.txt", "strimzi", 0),
    ("strimzi-style-with-kip896-rule.txt", "strimzi", 1), ("confluent-style.txt", "confluent", 1)])
def test_every_dialect_gives_the_same_inventory(page: str, dialect: str, kip896: int) -> None:
    reading = read_page((FIXTURES / page).read_bytes(), "e")
    assert reading.dialect == dialect
    assert _software(page) == EXPECTED
    assert reading.kip896_series == kip896
    for d in reading.deprecated:
        assert (d.request, d.version, d.software_name, d.software_version, d.count) == ("Produce", 2, "unknown",
                                                                                         "unknown", 50.0)


def test_rates_and_unrelated_series_are_not_counted() -> None:
    samples = [
        ("kafka_network_RequestMetrics_OneMinuteRate", {"name": "DeprecatedRequestsPerSec", "request": "Produce",
         "version": "2", "clientSoftwareName": "x", "clientSoftwareVersion": "1"}, 9.0),
        ("kafka_network_RequestMetrics_Count", {"name": "RequestsPerSec", "request": "Produce", "version": "2"}, 5.0),
        ("kafka_server_socket_server_metrics_connection_count", {"listener": "PLAINTEXT"}, 3.0),
    ]
    reading = recognise(samples, "e")
    assert reading.deprecated == [] and reading.connections == [] and reading.kip511_series == 0


def test_hostile_label_values_stay_data() -> None:
    hostile = 'x"><script>alert(1)</script>\n=HYPERLINK("http://evil")'
    page = ('kafka_server_socket_server_metrics_connections{clientSoftwareName="' + hostile.replace("\\", "\\\\")
            .replace('"', '\\"').replace("\n", "\\n") + '",clientSoftwareVersion="1",listener="P",networkProcessor="0"} 2.0\n')
    reading = read_page(page.encode(), "e")
    assert [(c.software_name, c.connections) for c in reading.connections] == [(hostile, 2)]


def test_floors() -> None:
    assert check("apache-kafka-java", "2.0.1").below is True
    assert check("apache-kafka-java", "2.1.0").below is False
    assert check("confluent-kafka-python", "2.6.1-rdkafka-2.6.1").below is False
    assert check("librdkafka", "1.8.0").below is True
    assert check("unknown", "unknown").family == "unnamed" and check("unknown", "unknown").below is None
    assert check("sarama", "1.40").below is None


def test_template_and_query() -> None:
    assert fill_template("https://{host}:7071/b/{broker_id}/metrics", host="k1", broker_id=3, port=9092) == \
        "https://k1:7071/b/3/metrics"
    assert fill_template("http://{host}:1/", host="::1", broker_id=0, port=1) == "http://[::1]:1/"
    query = prometheus_query('job="kafka"')
    assert 'kafka_server_socket_server_metrics_connections{job="kafka"}' in query
    assert 'name="DeprecatedRequestsPerSec",job="kafka"' in query


BASE = '[[clusters]]\nname = "a"\nbootstrap_servers = "h:9092"\n[clusters.broker_metrics]\n'


@pytest.mark.parametrize(("body", "says"), [
    ('metrics_url = "http://{hst}:1/m"', "unknown template field"),
    ('metrics_url = "http://u:p@h:1/m"', "must not hold credentials"),
    ('prometheus = "http://p:9090"\nmatchers = "job=kafka"', "label matchers"),
    ('metrics_url = "http://h/m"\nprometheus = "http://p:9090"', "exactly one"),
    ('metrics_url = "http://h/m"\npassword = "hunter2"', "never written in the fleet file"),
    ('metrics_url = "http://h/m"\nusername = "u"\npassword_env = "NO_SUCH_ENV_30"', "no password found"),
])
def test_bad_sources_name_line_and_key(body: str, says: str) -> None:
    with pytest.raises(FleetConfigError) as err:
        parse_fleet(BASE + body, secrets_path="/nonexistent")
    assert says in str(err.value) and "cluster 'a'" in str(err.value) and "hunter2" not in str(err.value)


def test_password_from_secrets_toml_never_shows(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('[metrics_passwords]\na = "s3cr3t-metrics"\n', encoding="utf-8")
    fleet = parse_fleet(BASE + 'metrics_url = "https://{host}:7071/metrics"\nusername = "scraper"',
                        secrets_path=secrets)
    source = fleet.clusters[0].broker_metrics
    assert source is not None and source.password() == "s3cr3t-metrics"
    assert "s3cr3t" not in repr(source) and "s3cr3t" not in repr(fleet.clusters[0])
