"""Upgrade readiness's client-config items: keys removed, or whose default changed, between the last 3.x and the target
(from known_keys.json, which tests/integration/configs/test_known_keys_table.py regenerates from the real jars), and how
many instances of a cluster set them or sit on the old default."""

from __future__ import annotations

import json

import pandas as pd

from backend.views import readiness as R

NO_INVENTORY = pd.DataFrame(columns=["cluster_name", "kind", "connections", "software_name", "software_version"])
NO_RUNS = pd.DataFrame(columns=["cluster_name", "status"])


def _changes(target: str) -> dict[tuple[str, str], R.KeyChange]:
    return {(c.client_type, c.key): c for c in R.key_changes(target)}


def test_the_4x_changes_come_from_the_real_definitions() -> None:
    for target in ("4.0", "4.4"):
        found = _changes(target)
        linger = found[("producer", "linger.ms")]
        assert (linger.kind, linger.before_release, linger.before, linger.after) == (R.CHANGED, "3.9", "0", "5")
        for client_type in ("producer", "consumer", "admin"):
            strategy = found[(client_type, "metadata.recovery.strategy")]
            assert (strategy.before, strategy.after) == ("none", "rebootstrap")
        assert found[("admin", "enable.metrics.push")].after == "false"
        assert found[("producer", "auto.include.jmx.reporter")].kind == R.REMOVED
        assert found[("streams", "retries")].kind == R.REMOVED  # Streams' own retries went in 4.0 (KIP-572) ...
        assert ("producer", "retries") not in found  # ... the producer's did not
        assert ("producer", "acks") not in found  # its default changed in 3.0, before the last 3.x: not a 4.x change
        # a null and an empty default are one default (ssl.cipher.suites went from null to "" in 4.2)
        assert ("producer", "ssl.cipher.suites") not in found
    assert R.changed_defaults("4.4")["linger.ms"] == ("producer", "0", "5")
    assert "auto.include.jmx.reporter" in R.removed_keys("4.0")


def _results(linger: dict[str, int] | None, *, jmx: dict[str, int] | None = None,
             reporters: dict[str, int] | None = None, software: str = "apache-kafka-java") -> dict[str, pd.DataFrame]:
    """Pipeline results of one cluster "eu" (named), 100 producer instances."""
    shares = [{"cluster": "eu", "client_type": "producer", "key": "acks", "instances": 100, "default_count": 100,
               "overridden_count": 0},
              {"cluster": "eu", "client_type": "producer", "key": "linger.ms", "instances": 100, "default_count": 30,
               "overridden_count": 70}]
    dist = []
    for key, values in (("linger.ms", linger), ("auto.include.jmx.reporter", jmx), ("metric.reporters", reporters)):
        for value, n in (values or {}).items():
            dist.append({"cluster": "eu", "client_type": "producer", "key": key, "value": value, "instance_count": n})
    if jmx:
        shares.append({"cluster": "eu", "client_type": "producer", "key": "auto.include.jmx.reporter",
                       "instances": sum(jmx.values()), "default_count": 0, "overridden_count": sum(jmx.values())})
    if reporters:
        shares.append({"cluster": "eu", "client_type": "producer", "key": "metric.reporters",
                       "instances": sum(reporters.values()), "default_count": reporters.get("", 0),
                       "overridden_count": sum(reporters.values()) - reporters.get("", 0)})
    versions = [{"cluster": "eu", "client_type": "producer", "client_software_name": software,
                 "client_software_version": "3.9.1", "instances": 80},
                {"cluster": "eu", "client_type": "producer", "client_software_name": "confluent-kafka-python",
                 "client_software_version": "2.6.0", "instances": 20}]
    return {"default_share": pd.DataFrame(shares),
            "distributions": pd.DataFrame(dist, columns=["cluster", "client_type", "key", "value", "instance_count"])
            if linger is not None else None,
            "client_versions": pd.DataFrame(versions)}


def _report(results: dict[str, pd.DataFrame]) -> R.Readiness:
    clusters = pd.DataFrame({"cluster_name": ["eu"], "zk_cluster_id": [None]})
    brokers = pd.DataFrame(columns=["cluster_name", "broker_id"])
    return R.readiness(clusters, brokers, NO_INVENTORY, NO_RUNS, target="4.4", **results)


def _item(report: R.Readiness, item: str) -> tuple[str, str]:
    row = report.items[report.items["item"] == item].iloc[0]
    return row["status"], row["detail"]


def test_instances_on_the_old_default_are_named_with_their_count() -> None:
    report = _report(_results({"0": 25, "5": 5, "100": 70}))
    status, detail = _item(report, "client config defaults changed")
    assert status == R.WARN
    assert "linger.ms (producer): 25 of 100 instances on the old default 0 (3.9), 4.4 clients default to 5" in detail
    assert "80 of the 100 producer instances are Java clients" in detail
    row = report.keys[(report.keys["key"] == "linger.ms")].iloc[0]
    assert (row["at_old_default"], row["at_new_default"], row["set_otherwise"], row["flagged_default"]) == (25, 5, 70, 30)
    assert (row["instances"], row["java_instances"], row["not_reporting"]) == (100, 80, 0)
    strategy = report.keys[(report.keys["key"] == "metadata.recovery.strategy")].iloc[0]
    assert (strategy["instances_reporting"], strategy["not_reporting"], strategy["affected"]) == (0, 100, 0)
    assert report.keys["key"].iloc[0] == "linger.ms"  # the most affected first
    assert report.verdicts["warnings"].iloc[0] >= 1


def test_a_removed_key_set_to_something_else_is_a_warning_at_its_default_not() -> None:
    status, detail = _item(_report(_results({"5": 100}, jmx={"true": 60})), "client config keys removed")
    assert status == R.PASS and "all at their old default" in detail and "auto.include.jmx.reporter" in detail
    status, detail = _item(_report(_results({"5": 100}, jmx={"true": 60, "false": 4})), "client config keys removed")
    assert status == R.WARN
    assert detail.startswith("auto.include.jmx.reporter (producer, default true (3.9)): 4 of 64 instances set it")
    status, _ = _item(_report(_results({"5": 100})), "client config defaults changed")
    assert status == R.PASS  # every reporting instance already on 5


def test_without_java_clients_the_java_defaults_do_not_apply() -> None:
    report = _report(_results({"0": 100}, software="librdkafka"))
    status, detail = _item(report, "client config defaults changed")
    assert status == R.PASS and "no Java client instance" in detail
    assert report.keys.empty


def test_without_the_value_spread_the_flagged_defaults_count() -> None:
    report = _report(_results(None))
    row = report.keys[report.keys["key"] == "linger.ms"].iloc[0]
    assert pd.isna(row["at_old_default"]) and row["affected"] == 30 and row["set_otherwise"] == 70


def test_no_results_is_unknown_never_ready() -> None:
    report = _report({"default_share": None})
    assert _item(report, "client config defaults changed")[0] == R.UNKNOWN
    assert report.verdicts["verdict"].iloc[0] != R.READY


JMX = "org.apache.kafka.common.metrics.JmxReporter"


def test_metric_reporters_without_jmx_is_the_risk_not_the_old_default() -> None:
    # 4.x run only the listed reporters (default JmxReporter, KIP-830's auto.include.jmx.reporter is gone): the
    # instances on 3.x's empty default get JMX, the ones that list reporters without JmxReporter lose it.
    report = _report(_results({"5": 100}, reporters={"": 50, "com.example.StatsdReporter": 3,
                                                     f"com.example.StatsdReporter,{JMX}": 2}))
    row = report.keys[report.keys["key"] == "metric.reporters"].iloc[0]
    assert (row["at_old_default"], row["set_otherwise"], row["affected"]) == (50, 5, 3)
    status, detail = _item(report, "client config defaults changed")
    assert status == R.WARN
    assert detail.startswith("metric.reporters (producer): 3 of 55 instances set it without JmxReporter")
    assert "JMX metrics stop" in detail
    calm = _report(_results({"5": 100}, reporters={"": 50, JMX: 2}))
    assert _item(calm, "client config defaults changed")[0] == R.PASS  # on the default, or listing JmxReporter


def _alerts(*rows: tuple[str, str, str, str | None, str]) -> pd.DataFrame:
    """config_alerts rows (cluster, rule_id, client_type, client_id, observed value of the rule's key)."""
    keys = {"CC019": "auto.include.jmx.reporter", "CC020": "metric.reporters", "CC021": "retries",
            "CC022": "internal.leave.group.on.close", "CC003": "retries"}
    return pd.DataFrame([{"cluster": c, "rule_id": r, "client_type": t, "client_id": cid, "group_id": None,
                          "client_instance_id": f"id-{c}-{cid}", "observed_json": json.dumps({keys[r]: v})}
                         for c, r, t, cid, v in rows])


def test_the_rules_name_the_instances_behind_the_keys() -> None:
    alerts = _alerts(*[("eu", "CC019", "producer", f"billing-{i}", "false") for i in range(5)],
                     ("eu", "CC019", "producer", None, "false"),  # no client.id: named by its instance id
                     ("us", "CC019", "producer", "elsewhere", "false"),  # another cluster
                     ("eu", "CC019", "consumer", "no-consumers-here", "false"),  # a type the cluster has none of
                     ("eu", "CC020", "producer", "statsd-only", "com.example.StatsdReporter"),
                     ("eu", "CC003", "producer", "other-rule", "0"))
    report = _report({**_results({"5": 100}, jmx={"true": 60, "false": 6},
                                 reporters={"": 50, "com.example.StatsdReporter": 3}), "alerts": alerts})
    status, detail = _item(report, "client config keys removed")
    assert status == R.WARN and "6 of 66 instances set it" in detail
    assert "(set by billing-0, billing-1, billing-2 and 3 more)" in detail
    named = report.instances
    jmx = named[named["key"] == "auto.include.jmx.reporter"]
    assert len(jmx) == 6 and set(jmx["cluster_name"]) == {"eu"} and set(jmx["value"]) == {"false"}
    assert "instance id-eu-None" not in detail and jmx["client_instance_id"].notna().all()
    assert set(named["rule_id"]) == {"CC019", "CC020"}
    # metric.reporters: the rule (which also reads auto.include.jmx.reporter) counts and names the instances
    row = report.keys[report.keys["key"] == "metric.reporters"].iloc[0]
    assert row["affected"] == 1 and row["set_by"] == "statsd-only"
    assert "(set by statsd-only)" in _item(report, "client config defaults changed")[1]


def test_a_key_is_named_only_for_targets_that_removed_it() -> None:
    # internal.leave.group.on.close went in 4.2 (CC022): a 4.1 target does not list it.
    assert ("consumer", "internal.leave.group.on.close") not in _changes("4.1")
    assert _changes("4.2")[("consumer", "internal.leave.group.on.close")].kind == R.REMOVED
    assert R._rule_key(_changes("4.2")[("consumer", "internal.leave.group.on.close")]) == "CC022"
    assert R._rule_key(_changes("4.4")[("producer", "linger.ms")]) is None  # relying on a default is not naming
