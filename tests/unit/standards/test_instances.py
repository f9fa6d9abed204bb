"""Client findings name the instances behind them (results/client_instances): the same counts as the distributions
give, every instance judged (one that does not report the key is "not reported", never passing), a bound on how
many are named with the rest counted, and `check`'s outputs (SARIF one result per instance up to its bound, valid)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import jsonschema
import pyarrow as pa

from backend.export.check import run_check
from backend.export.check_formats import SARIF_INSTANCES, TEXT_INSTANCES, render
from backend.pipeline.heads import HEAD_SCHEMA
from backend.pipeline.results import client_instances
from backend.pipeline.state_store import VALUE_SCHEMA
from backend.standards import evaluate as ev
from backend.standards.client_facts import ClientFacts, facts_from_tables
from backend.standards.policy import parse_policies
from backend.store.model import BrokerSnapshot, ClusterSnapshot
from backend.store.standards_model import MAX_INSTANCES
from tests.unit.standards.test_check import _schema
from tests.unit.standards.test_evaluate import cluster, policy

NOW = datetime.now(UTC).replace(microsecond=0)
ACKS_0 = 'check = "client_config"\nclient_type = "producer"\nkey = "acks"\nrequire = { not_equals = "0" }'


def fleet(clients: list[tuple[str, str | None, str | None, tuple[str, str]]], watched: list[str],
          cluster_id: str = "cid") -> dict[str, ClientFacts]:
    """ClientFacts as the poller reads them, from results/client_instances built the pipeline's way (and the
    distributions and client versions the same instances give). clients: (client.id, type, acks, software)."""
    heads = pa.Table.from_pylist([
        {"client_instance_id": f"i-{n:05d}", "snapshot_id": f"s-{n}", "received_at": NOW - timedelta(minutes=n),
         "cluster_id": cluster_id, "broker_id": 1, "client_id": cid, "client_type": ctype,
         "client_software_name": sw[0], "client_software_version": sw[1], "principal": "User:app",
         "client_address": "/10.0.0.1", "group_id": "g" if ctype == "consumer" else None, "cfg_client_id": cid,
         "rows": 1, "files": []} for n, (cid, ctype, _acks, sw) in enumerate(clients)], schema=HEAD_SCHEMA)
    values = pa.Table.from_pylist([{"client_instance_id": f"i-{n:05d}", "key": "acks", "value": acks}
                                   for n, (_c, _t, acks, _sw) in enumerate(clients) if acks is not None],
                                  schema=VALUE_SCHEMA)
    table = client_instances(heads, values, watched, NOW)
    dist: dict[str, list[object]] = {c: [] for c in ("cluster_id", "client_type", "key", "value", "instance_count",
                                                     "total_instances", "computed_at")}
    counted: dict[tuple[str, str | None], int] = {}
    for _c, ctype, acks, _sw in clients:
        if acks is not None:
            counted[(str(ctype), acks)] = counted.get((str(ctype), acks), 0) + 1
    for (ctype, value), n in counted.items():
        total = sum(v for (t, _v), v in counted.items() if t == ctype)
        for column, cell in zip(dist, (cluster_id, ctype, "acks", value, n, total, NOW), strict=True):
            dist[column].append(cell)
    versions: dict[str, list[object]] = {c: [] for c in ("cluster_id", "client_type", "client_software_name",
                                                         "client_software_version", "instances", "computed_at")}
    for _c, ctype, _acks, sw in clients:
        for column, cell in zip(versions, (cluster_id, ctype, sw[0], sw[1], 1, NOW), strict=True):
            versions[column].append(cell)
    return facts_from_tables(dist, versions, table)


JAVA = ("apache-kafka-java", "3.9.1")
OLD = ("apache-kafka-java", "2.8.1")
CLIENTS = [("zeta", "producer", "0", JAVA), ("alpha", "producer", "0", OLD), ("beta", "producer", "all", JAVA),
           ("gamma", "producer", None, JAVA), ("delta", "producer", "1", OLD), ("c1", "consumer", None, JAVA)]


def test_per_instance_findings_equal_the_counts_and_name_every_instance() -> None:
    p = policy(ACKS_0)
    named = fleet(CLIENTS, ["acks"])["cid"]
    counted = ClientFacts(named.computed_at, named.types, named.values, named.reporting, named.software)  # no table
    by_instance, by_count = ev.client_config(p, named, True), ev.client_config(p, counted, True)
    assert (by_instance.checked, by_instance.passing) == (by_count.checked, by_count.passing) == (5, 2)
    assert [(i.name, i.outcome, i.count) for i in by_instance.items] == [
        (i.name, i.outcome, i.count) for i in by_count.items] == [("producer acks=0", "violation", 2),
                                                                   ("producer acks not reported", "unknown", 1)]
    violating, unreported = by_instance.items
    assert [c.client_id for c in violating.instances] == ["alpha", "zeta"]  # in client.id order
    assert violating.instances[0].software == "apache-kafka-java 2.8.1" and violating.instances[0].last_seen
    assert [c.client_id for c in unreported.instances] == ["gamma"]  # not reported: named, never passing
    assert all(i.instances == () and "instances not named: no per-instance results" in i.reason
               for i in by_count.items)
    unwatched = fleet(CLIENTS, [])["cid"]  # the analysis did not keep acks per instance: counted, not named
    fallback = ev.client_config(p, unwatched, True)
    assert [i.count for i in fallback.items] == [2, 1] and "did not keep this key" in fallback.items[0].reason
    floors = policy('check = "client_software"\nfloors = { "apache-kafka-java" = "3.0" }\nclient_type = "producer"')
    software = ev.client_software(floors, cluster(configs=False), named, True)
    assert [(i.name, i.count, sorted(c.client_id or "" for c in i.instances)) for i in software.items] == [
        ("apache-kafka-java 2.8.1", 2, ["alpha", "delta"])]
    assert software.checked == 5  # the consumer is not a producer
    # a waiver or an effective date changes the outcome, never who is named
    done = ev.finish(p, "c1", by_instance, [], NOW)
    assert done.items[0].instances == violating.instances


def test_at_most_max_instances_are_named_violations_first_and_the_rest_counted() -> None:
    many = [(f"p{n:05d}", "producer", "0", JAVA) for n in range(MAX_INSTANCES + 50)]
    many += [(f"q{n}", "producer", None, JAVA) for n in range(5)]
    raw = ev.client_config(policy(ACKS_0), fleet(many, ["acks"])["cid"], True)
    violating, unreported = raw.items
    assert (violating.count, len(violating.instances), violating.unnamed) == (MAX_INSTANCES + 50, MAX_INSTANCES, 50)
    assert (unreported.count, unreported.instances) == (5, ())  # the bound is spent on the violations
    assert violating.instances[-1].client_id == f"p{MAX_INSTANCES - 1:05d}"


def test_check_names_instances_in_every_format_and_bounds_sarif() -> None:
    policies = parse_policies(f'[[policies]]\nid = "no-acks-0"\ntitle = "no acks 0"\n{ACKS_0}\n',
                              source="policies.toml")
    hostile = "evil\u202e\x1b[2J"
    clients = [(f"p{n:04d}", "producer", "0", JAVA) for n in range(SARIF_INSTANCES + 30)]
    clients += [(hostile, "producer", "0", JAVA), ("quiet", "producer", None, JAVA)]
    snapshot = ClusterSnapshot("c1", "ok", NOW, "poll", cluster_id="cid",
                               brokers=[BrokerSnapshot(1, "h", 9092, reachable=True)])
    report = run_check(policies, {"c1": snapshot}, fleet(clients, ["acks"]), now=NOW)
    assert report.exit_code == 1
    log = json.loads(render(report, "sarif"))
    validator = jsonschema.Draft4Validator(_schema(), format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    assert [e.message for e in validator.iter_errors(log)] == []
    results = log["runs"][0]["results"]
    per_instance = [r for r in results if "client" in r["properties"]]
    assert len(per_instance) == SARIF_INSTANCES and all(r["kind"] == "fail" for r in per_instance)
    rest = [r for r in results if "client" not in r["properties"]]
    # the violators beyond the bound in one result, and the unreported one (the bound spent) in another
    assert [(r["properties"]["count"], r["kind"]) for r in rest] == [(31, "fail"), (1, "open")]
    assert "31 more instance(s) of 231" in rest[0]["message"]["text"]
    assert len({r["partialFingerprints"]["fleetviewFinding/v1"] for r in per_instance}) == SARIF_INSTANCES
    text = render(report, "text")
    assert text.count("instance: client.id ") == TEXT_INSTANCES + 1  # 20 of acks=0, the one not reporting acks
    assert f"... and {SARIF_INSTANCES + 31 - TEXT_INSTANCES} more instance(s)" in text
    doc = json.loads(render(report, "json"))
    (violating, unreported) = doc["results"][0]["items"]
    assert len(violating["instances"]) == SARIF_INSTANCES + 31 and violating["unnamed"] == 0
    assert {c["client_id"] for c in violating["instances"]} >= {hostile}  # JSON carries it escaped, whole
    assert unreported["instances"][0]["client_id"] == "quiet"
    junit = render(report, "junit")
    assert "\u202e" not in junit and "\x1b" not in junit and "instance: client.id p0000 (" in junit
