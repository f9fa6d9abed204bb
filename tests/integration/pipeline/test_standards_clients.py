"""Client policies judged on the real Spark job's results: sink -> ingest -> analyze -> `check` and the poller's
engine, with the pipeline's own normalisation (acks -1 is all) and instances that do not report a key; then the
instances behind each finding: the policy file's keys filled in by the next analysis, named by the page's view, the
API, `check` (text, JSON, SARIF, JUnit), gone once fixed, and never one of a hidden cluster."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fastapi.testclient import TestClient
from junitparser import Failure, JUnitXml

from backend.api.app import ApiSettings, create_app
from backend.api.tokens import Provider, TokenVerifier
from backend.auth.scope import Scope
from backend.cli import main
from backend.configs.ingest import ingest_sink
from backend.pipeline.job import run_analysis
from backend.standards.engine import StandardsEngine
from backend.store.fleet_writer import FleetWriter
from backend.store.lake import Lake, new_poll_id, poll_id_time
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll
from backend.store.tables import read_table
from backend.views import standards_views
from tests.unit.api.test_tokens import AUDIENCE, ISSUER, Idp
from tests.unit.configs.helpers import cfg, record, write_jsonl
from tests.unit.standards.test_check import _schema

POLICIES = """
[[policies]]
id = "no-acks-0"
title = "No producer fires and forgets"
severity = "critical"
check = "client_config"
client_type = "producer"
key = "acks"
require = { not_equals = "0" }

[[policies]]
id = "acks-all"
title = "Producers wait for all replicas"
check = "client_config"
client_type = "producer"
key = "acks"
require = "all"
unreported = "pass"

[[policies]]
id = "java-floor"
title = "Java clients 3.0 or later, librdkafka 2.0 or later"
check = "client_software"
floors = { "apache-kafka-java" = "3.0", librdkafka = "2.0" }

[[policies]]
id = "consumer-poll"
title = "Consumers poll at most 1000 records"
check = "client_config"
client_type = "consumer"
key = "max.poll.records"
require = { max = 1000 }
"""
FLEET = """
[auth]
required = true

[[clusters]]
name = "east-cluster"
bootstrap_servers = ["east:9092"]
access = { view = ["group:east"] }

[[clusters]]
name = "west-cluster"
bootstrap_servers = ["west:9092"]
access = { view = ["group:west"] }
"""
HOSTILE = "app-6\u202e\x1b[2J=cmd|' /C calc'!A0"  # a client.id that is a bidi override, an escape and a formula
HIDDEN = "west-secret-app"
METADATA = f"{ISSUER}/.well-known/openid-configuration"


def iid(name: str) -> str:
    """A stable client instance id (KIP-714 ids are UUIDs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"fleetview-test/{name}"))


def _name(i: int) -> str:
    return HOSTILE if i == 6 else f"app-{i}"


def _records(at: datetime) -> list[dict[str, Any]]:
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    out = []
    for i in range(12):
        acks = ["all", "-1", "0", "1"][i % 4]  # -1 and all are one value for the pipeline and the policy
        configs = [cfg("acks", acks), cfg("client.id", _name(i))] if i != 11 else [cfg("client.id", "app-11")]
        software = ("apache-kafka-java", "2.8.1") if i in (0, 5) else (
            ("confluent-kafka-python", "1.9.2-rdkafka-1.9.2") if i == 7 else ("apache-kafka-java", "3.9.1"))
        out.append(record(configs, cluster_id="east", client_id=_name(i), received_at=stamp, software=software,
                          instance=iid(f"east-{i}")))
    out.append(record([cfg("acks", "0"), cfg("client.id", HIDDEN)], cluster_id="west", client_id=HIDDEN,
                      received_at=stamp, instance=iid("west-0")))
    return out


def _judge(engine: StandardsEngine, lake: str) -> FleetPoll:
    """One poll of both clusters judged by the poller's engine and written by the poller's writer."""
    poll_id = new_poll_id(datetime.now(UTC))
    at = poll_id_time(poll_id)
    clusters = [ClusterSnapshot(f"{c}-cluster", "ok", at, poll_id, cluster_id=c,
                                brokers=[BrokerSnapshot(1, "b1", 9092, reachable=True)]) for c in ("east", "west")]
    poll = FleetPoll(poll_id, at, clusters, [], 1.0)
    engine.evaluate(poll)
    FleetWriter(Lake(lake)).write(poll)
    return poll


def _chase(lake: str, policy: str, scope: Scope | None = None) -> list[str | None]:
    """The client ids the Standards page lists under "Instances to chase" for a policy (violations first)."""
    named = standards_views.drill_down_instances(standards_views.load(lake, scope), policy)
    return list(named["client_id"])


def test_client_policies_from_the_spark_results(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    assert spark is not None  # the shared session; run_analysis reuses it
    sink, lake = tmp_path / "sink", str(tmp_path / "lake")
    first_at = datetime.now(UTC) - timedelta(minutes=5)
    write_jsonl(sink / "east" / "broker-1.jsonl", _records(first_at))
    assert ingest_sink(lake, sink).records_written == 13
    assert run_analysis(lake).watched_keys == []  # no policy file judged yet: no key kept per instance
    policies = tmp_path / "policies.toml"
    policies.write_text(POLICIES)
    engine = StandardsEngine(policies, lake)  # the poller's engine reads the results the job wrote
    engine.clients.every_s = 0.0  # type: ignore[union-attr]  # read the results again at every poll
    poll = _judge(engine, lake)
    results = poll.cluster("east-cluster").standards.results
    assert results["no-acks-0"].status == "violation" and results["no-acks-0"].violating == 3
    assert results["acks-all"].passing == 6 + 1  # all and -1 (3 each), and the one not reporting acks (pass)
    assert results["consumer-poll"].status == "unknown"  # no consumer reported its configuration
    # acks is not kept per instance yet: the finding counts its instances and says why it does not name them
    assert results["no-acks-0"].items[0].instances == () and "instances not named" in results["no-acks-0"].items[0].reason

    code = main(["check", "--policies", str(policies), "--lake", lake, "--format", "json", "--clusters", "east-cluster"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    by_policy = {r["policy_id"]: r for r in doc["results"]}
    acks0 = by_policy["no-acks-0"]
    assert [(i["name"], i["outcome"], i["count"]) for i in acks0["items"]] == [
        ("producer acks=0", "violation", 3), ("producer acks not reported", "unknown", 1)]
    assert acks0["checked"] == 12 and acks0["passing"] == 8  # all, -1 and 1
    floor = by_policy["java-floor"]
    assert {(i["name"], i["count"]) for i in floor["items"]} == {
        ("apache-kafka-java 2.8.1", 2), ("confluent-kafka-python 1.9.2-rdkafka-1.9.2", 1)}
    assert floor["items"][0]["since"] is not None
    assert by_policy["consumer-poll"]["status"] == "unknown"

    # The next analysis keeps the policy file's keys per instance: nothing new to count, every instance read again
    # for acks and max.poll.records only.
    filled = run_analysis(lake)
    assert filled.watched_keys == ["acks", "max.poll.records"] and filled.instances_refilled == 13
    assert (filled.files_processed, filled.instances_changed, filled.rows_added) == (0, 0, 0)
    table = read_table(lake, "results/client_instances")
    kept = {r["client_instance_id"]: {c["key"]: c["value"] for c in r["configs"]} for r in table.to_pylist()}
    assert kept[iid("east-1")] == {"acks": "all"} and kept[iid("east-2")] == {"acks": "0"} and kept[iid("east-11")] == {}
    assert len(kept) == 13

    poll = _judge(engine, lake)
    east = poll.cluster("east-cluster").standards.results
    violating, unreported = east["no-acks-0"].items
    assert (violating.count, [c.client_id for c in violating.instances]) == (3, ["app-10", "app-2", HOSTILE])
    assert [c.instance_id for c in unreported.instances] == [iid("east-11")] and unreported.outcome == "unknown"
    assert {c.software for c in violating.instances} == {"apache-kafka-java 3.9.1"}
    assert all(c.principal == "User:app" and c.last_seen is not None for c in violating.instances)
    # the same counts as the distributions gave: per instance, nothing passes by omission
    assert (east["no-acks-0"].checked, east["no-acks-0"].passing, east["acks-all"].passing) == (12, 8, 7)
    floor_named = {i.name: sorted(c.instance_id for c in i.instances) for i in east["java-floor"].items}
    assert floor_named == {"apache-kafka-java 2.8.1": sorted([iid("east-0"), iid("east-5")]),
                           "confluent-kafka-python 1.9.2-rdkafka-1.9.2": [iid("east-7")]}
    assert poll.cluster("west-cluster").standards.results["no-acks-0"].items[0].instances[0].client_id == HIDDEN
    incident = next(a for a in poll.alerts if a.rule == "policy:no-acks-0" and a.cluster_name == "east-cluster")
    assert incident.evidence["seen"][0]["instances"] == ["app-10", "app-2", HOSTILE]

    # The page's drill-down (the stored results) names them; a caller who may see only east never sees west's.
    assert _chase(lake, "no-acks-0") == ["app-10", "app-2", HOSTILE, HIDDEN, "app-11"]  # violations, then unknown
    east_only = Scope(frozenset({"east-cluster"}))
    assert HIDDEN not in _chase(lake, "no-acks-0", east_only)
    assert set(_chase(lake, "no-acks-0", east_only)) == {"app-10", "app-2", HOSTILE, "app-11"}

    # check: text (hostile text shown, never acted on), SARIF (one result per instance, valid), JUnit
    fleet = tmp_path / "clusters.toml"
    fleet.write_text(FLEET)
    claims = tmp_path / "east.json"
    claims.write_text(json.dumps({"sub": "e", "groups": ["east"]}))
    code = main(["check", "--policies", str(policies), "--lake", lake, "--config", str(fleet), "--claims", str(claims)])
    text = capsys.readouterr().out
    assert code == 1 and f"instance: client.id app-10 (instance {iid('east-10')}, apache-kafka-java 3.9.1, User:app" in text
    assert "app-6<U+202E>␛[2J" in text and "\u202e" not in text and "\x1b" not in text
    assert HIDDEN not in text and "west" not in text
    out = tmp_path / "check.sarif"
    assert main(["check", "--policies", str(policies), "--lake", lake, "--config", str(fleet), "--claims",
                 str(claims), "--format", "sarif", "--out", str(out)]) == 1
    log = json.loads(out.read_text())
    validator = jsonschema.Draft4Validator(_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    assert [e.message for e in validator.iter_errors(log)] == []
    per_instance = [r for r in log["runs"][0]["results"] if r["ruleId"] == "no-acks-0"]
    assert [(r["properties"].get("client", {}).get("client_id"), r["kind"]) for r in per_instance] == [
        ("app-10", "fail"), ("app-2", "fail"), (HOSTILE, "fail"), ("app-11", "open")]
    assert per_instance[0]["locations"][0]["logicalLocations"][-1] == {
        "name": iid("east-10"), "kind": "instance", "fullyQualifiedName": f"east-cluster/instance/{iid('east-10')}"}
    assert HIDDEN not in out.read_text()
    junit = tmp_path / "check.xml"
    main(["check", "--policies", str(policies), "--lake", lake, "--clusters", "east-cluster", "--format", "junit",
          "--out", str(junit)])
    capsys.readouterr()
    failure = next(r for s in JUnitXml.fromfile(str(junit)) if s.name.startswith("no-acks-0") for c in s
                   for r in c.result if isinstance(r, Failure))
    assert f"instance: client.id app-2 (instance {iid('east-2')}" in failure.text and "\u202e" not in failure.text

    # The API's findings of the policy: each client finding, then the instances behind it; none of a hidden cluster.
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'[auth]\nserver_metadata_url = "{METADATA}"\nclient_id = "{AUDIENCE}"\n', encoding="utf-8")
    app = create_app(ApiSettings(lake=lake, fleet_file=fleet, journal_dir=tmp_path / "audit",
                                 secrets_file=str(secrets), rate_per_s=1000.0, rate_burst=1000))
    idp = Idp()
    app.state.api._verifiers[(METADATA, AUDIENCE)] = TokenVerifier(Provider(METADATA, AUDIENCE), fetch=idp.fetch)
    with TestClient(app, client=("127.0.0.1", 40000)) as client:
        answer = client.get("/api/v1/standards/policies/no-acks-0/findings", params={"limit": 1000},
                            headers={"Authorization": f"Bearer {idp.token(sub='e', groups=['east'])}"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
    assert HIDDEN not in answer.text and "west" not in answer.text
    clients = [f for f in body["items"] if f["kind"] == "clients"]
    assert sorted((f["name"], f["count"], f["named"]) for f in clients) == [("producer acks not reported", 1, 1),
                                                                            ("producer acks=0", 3, 3)]
    named = {f["client"]["client_id"]: f for f in body["items"] if f["kind"] == "instance"}
    assert set(named) == {"app-10", "app-2", HOSTILE, "app-11"}
    assert named["app-2"]["finding"] == "producer acks=0" and named["app-2"]["name"] == iid("east-2")
    assert named["app-2"]["client"]["software_version"] == "3.9.1" and named["app-2"]["seen"] == "0"

    # app-2 fixes its config: the refresh reads only its snapshot, and the next poll drops it from the drill-down.
    write_jsonl(sink / "east" / "broker-1.jsonl", [record(
        [cfg("acks", "all"), cfg("client.id", "app-2")], cluster_id="east", client_id="app-2", instance=iid("east-2"),
        received_at=(first_at + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z"))])
    assert ingest_sink(lake, sink).records_written == 1
    fixed = run_analysis(lake)
    assert (fixed.instances_changed, fixed.instances_refilled) == (1, 0)
    poll = _judge(engine, lake)
    after = poll.cluster("east-cluster").standards.results["no-acks-0"].items[0]
    assert (after.count, [c.client_id for c in after.instances]) == (2, ["app-10", HOSTILE])
    assert _chase(lake, "no-acks-0", east_only) == ["app-10", HOSTILE, "app-11"]
