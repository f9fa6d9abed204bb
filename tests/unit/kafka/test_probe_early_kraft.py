"""Real ApiVersions answers of early KRaft brokers (2.8-3.2) through the probe and its command line.

The answers in fixtures/kraft_api_versions.json were printed by `python -m backend probe --json`
against real Apache Kafka 2.8.2, 3.0.2, 3.1.2 and 3.2.3 brokers in KRaft combined mode. They differ
from the message JSON of their releases (no DescribeQuorum in 3.0-3.2, Envelope up to 3.1).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from backend.kafka import probe_cli
from backend.kafka import protocol as P
from backend.kafka import versions as V
from tests.unit.kafka.scripted_broker import ScriptedBroker, api_versions_body

ANSWERS: dict[str, dict[int, tuple[int, int]]] = {
    release: {int(k): (v[0], v[1]) for k, v in table.items()}
    for release, table in json.loads(
        (Path(__file__).parent / "fixtures" / "kraft_api_versions.json").read_text(encoding="utf-8"))["answers"].items()
}


def _serving(table: dict[int, tuple[int, int]]) -> Any:
    def handler(header: P.RequestHeader, body: dict[str, Any], conn: socket.socket) -> bytes:
        if header.api_key == P.API_API_VERSIONS:
            return P.encode_response(header.api_key, header.api_version, header.correlation_id,
                                     api_versions_body(table))
        if header.api_key == P.API_DESCRIBE_CLUSTER:
            return P.encode_response(header.api_key, header.api_version, header.correlation_id, {
                "cluster_id": "MkU3OEVBNTcwNTJENDM2Qg", "controller_id": 1,
                "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": 1}]})
        return b""
    return handler


def _probe(table: dict[int, tuple[int, int]], capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    parser = argparse.ArgumentParser()
    probe_cli.add_probe_arguments(parser)
    with ScriptedBroker(_serving(table)) as broker:
        code = probe_cli.run_probe_command(parser.parse_args([f"127.0.0.1:{broker.port}", "--timeout", "5", *flags]))
    assert code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("version", sorted(ANSWERS))
def test_real_early_kraft_answers_are_named_apache_kafka(version: str) -> None:
    release = ".".join(version.split(".")[:2])
    guess = V.guess(ANSWERS[version])
    assert guess.software == V.APACHE, guess.evidence
    assert guess.family == "kraft"
    assert guess.version_min == release and guess.version_max == release, guess.label()
    assert not any("Redpanda" in e or "not Apache" in e for e in guess.evidence)


@pytest.mark.parametrize("version", sorted(ANSWERS))
def test_table_rows_are_what_the_real_brokers_advertise(version: str) -> None:
    release = ".".join(version.split(".")[:2])
    row = next(r for r in V.release_rows() if r.release == release and r.family == "kraft")
    assert row.apis == ANSWERS[version]


def test_probe_of_a_real_kraft_3_2_answer_says_apache_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    answer = ANSWERS["3.2.3"]
    assert V._DESCRIBE_QUORUM not in answer  # the finding: 3.2 brokers do not offer DescribeQuorum
    line = _probe(answer, capsys)
    assert "ok  cluster=MkU3OEVBNTcwNTJENDM2Qg  Apache Kafka 3.2 (guessed)" in line, line
    (summary,) = json.loads(_probe(answer, capsys, "--json"))
    assert summary["software_name"] == "Apache Kafka"
    assert (summary["version_min"], summary["version_max"]) == ("3.2", "3.2")


def test_a_kraft_3_3_like_table_without_describe_quorum_is_still_not_apache() -> None:
    row = dict(next(r for r in V.release_rows() if r.release == "3.5" and r.family == "kraft").apis)
    row.pop(V._DESCRIBE_QUORUM)
    guess = V.guess(row)
    assert guess.software != V.APACHE and guess.confidence <= 0.4


def test_evidence_names_apis_not_key_numbers() -> None:
    for row in V.release_rows():
        for line in V.guess(row.apis).evidence:
            assert not re.search(r"\bkey \d+", line), (row.release, row.family, line)
    evidence = " ".join(V.guess(ANSWERS["3.2.3"]).evidence)
    assert "DescribeAcls max v3" in evidence  # was "key 29 max v3"
    assert V.api_name(38) == "CreateDelegationToken" and V.api_label(9999) == "key 9999"


def test_plain_probe_output_gives_the_reason_for_a_missing_cluster_id(capsys: pytest.CaptureFixture[str]) -> None:
    old = next(r for r in V.release_rows() if r.release == "2.7" and r.family == "zk").apis
    assert P.API_DESCRIBE_CLUSTER not in old
    (summary,) = json.loads(_probe(dict(old), capsys, "--json"))
    assert summary["cluster_id"] is None
    (reason,) = [w for w in summary["warnings"] if "DescribeCluster" in w]
    line = _probe(dict(old), capsys)
    assert f"cluster=unknown ({reason})" in line, line
    assert "cluster=None" not in line
