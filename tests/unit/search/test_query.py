"""Queries: modes, ranking, grants, hostile names and the bounded regular expression."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from backend.search import query
from backend.search.query import QueryRefused, Visibility, search
from backend.search.reader import IndexSnapshot, snapshot_of
from backend.search.rows import rows_table, tombstone

NOW = datetime.now(UTC)
RTL = "invoice\u202egpj.exe"
HUGE = "q" * 32_760 + "-tail"
META = "a.b*c[(x)]+?^$|\\d{2}"


def _topic(cluster: str, name: str, tid: str, **over: object) -> dict[str, object]:
    return {"cluster": cluster, "cluster_id": f"CID-{cluster}", "key": name, "topic": name, "topic_id": tid,
            "internal": False, **over}


def _index() -> IndexSnapshot:
    topic_rows = [
        _topic("eu", "payments", "AAAApaymentsEU"), _topic("eu", "payments.v2", "BBBB"),
        _topic("eu", "old-payments", "CCCC"), _topic("us", "payments", "DDDD"),
        _topic("secret", "payments", "SECRETid"), _topic("secret", "secret-only-topic", "EEEE"),
        _topic("eu", RTL, "FFFF"), _topic("eu", HUGE, "GGGG"), _topic("eu", META, "HHHH"),
    ]
    deleted = tombstone(_topic("eu", "payments", "OLDpaymentsID"), NOW - timedelta(days=1))
    expired = tombstone(_topic("eu", "payments", "ANCIENTid"), NOW - timedelta(days=90))
    groups = [{"cluster": "eu", "cluster_id": "CID-eu", "key": "payments-reader", "group_id": "payments-reader",
               "group_type": "consumer"},
              {"cluster": "secret", "cluster_id": "CID-secret", "key": "g", "group_id": "payments-secret-group"}]
    clusters = [{"cluster": c, "cluster_id": f"CID-{c}", "key": c, "tags": "env=prod"} for c in ("eu", "us", "secret")]
    instances = [{"cluster": "", "cluster_id": cid, "key": iid, "client_instance_id": iid, "client_id": "checkout-svc",
                  "principal": "User:payments", "software": "librdkafka 2.6.0", "client_type": "producer"}
                 for cid, iid in (("CID-eu", "i-eu"), ("CID-secret", "i-secret"), ("bootstrap:x:9092", "i-unknown"))]
    configs = [{"cluster": "eu", "cluster_id": "CID-eu", "key": "topic\x1fpayments\x1fretention.ms",
                "parent": "topic\x1fpayments", "resource_type": "topic", "resource": "payments",
                "config_name": "retention.ms", "value": "604800000", "source": "DYNAMIC_TOPIC_CONFIG"}]
    return snapshot_of({"topic": rows_table("topic", [*topic_rows, deleted, expired]), "group": rows_table("group", groups),
                        "cluster": rows_table("cluster", clusters), "instance": rows_table("instance", instances),
                        "config": rows_table("config", configs)})


INDEX = _index()
EU_ONLY = Visibility(names=frozenset({"eu", "us"}), ids=frozenset({"CID-eu", "CID-us"}))


def _names(result: query.SearchResult) -> list[tuple[str, str, str, str]]:
    return [(h.kind, h.cluster, h.name, h.match) for h in result.hits]


def test_exact_then_prefix_then_substring_current_before_deleted() -> None:
    result = search(INDEX, "PAYMENTS", kinds=["topic"], visible=EU_ONLY)
    assert [(h.cluster, h.name, h.match, h.state) for h in result.hits] == [
        ("eu", "payments", "exact", "current"), ("us", "payments", "exact", "current"),
        ("eu", "payments", "exact", "deleted"),
        ("eu", "payments.v2", "prefix", "current"), ("eu", "old-payments", "substring", "current")]
    assert result.hits[2].id == "OLDpaymentsID" and result.hits[2].deleted_at is not None  # the 90-day-old one expired
    assert result.total == 5 and result.counts["topic"] == 5 and result.clusters == 2


def test_modes_fields_and_filters() -> None:
    prefix = search(INDEX, "pay", mode="prefix", visible=EU_ONLY)
    assert {h.name for h in prefix.hits} == {"payments", "payments.v2", "payments-reader"}
    by_id = search(INDEX, "aaaapay", visible=EU_ONLY)
    assert [(h.name, h.field, h.match) for h in by_id.hits] == [("payments", "topic_id", "prefix")]
    regex = search(INDEX, r"^payments\.v\d$", mode="regex", visible=EU_ONLY)
    assert [(h.name, h.match) for h in regex.hits] == [("payments.v2", "exact")]
    assert search(INDEX, "payments", kinds=["group"], visible=EU_ONLY).hits[0].field == "group_id"
    assert {h.cluster for h in search(INDEX, "payments", clusters=["us"], visible=EU_ONLY).hits} == {"us"}
    assert all(h.state == "current" for h in search(INDEX, "payments", include_deleted=False).hits)
    value = search(INDEX, "604800000")
    assert [(h.kind, h.name, h.field, h.detail) for h in value.hits] == [
        ("config", "retention.ms", "value", "topic payments = 604800000")]
    limited = search(INDEX, "payments", limit=2)
    assert len(limited.hits) == 2 and limited.truncated and limited.total > 2


def test_a_hidden_cluster_is_never_a_hit_a_count_or_a_cluster() -> None:
    for text, mode in (("payments", "substring"), ("secret", "substring"), ("SECRETid", "prefix"), (".*", "regex"),
                       ("checkout", "substring"), ("env=prod", "substring")):
        result = search(INDEX, text, mode=mode, visible=EU_ONLY)
        assert not any(h.cluster == "secret" or "secret" in h.name.lower() or h.id == "SECRETid" for h in result.hits)
        assert all(n == sum(1 for h in result.hits if h.kind == k) for k, n in result.counts.items()) or result.truncated
        assert result.total == sum(result.counts.values())
    clients = search(INDEX, "checkout", visible=EU_ONLY)
    assert [(h.cluster, h.id) for h in clients.hits] == [("eu", "i-eu")]  # keyed by cluster id, mapped to its name
    assert clients.total == 1 and clients.clusters == 1
    everything = search(INDEX, "checkout")
    assert {h.cluster for h in everything.hits} == {"eu", "secret", "bootstrap:x:9092"}
    nobody = search(INDEX, "payments", visible=Visibility(names=frozenset(), ids=frozenset()))
    assert nobody.total == 0 and nobody.hits == () and nobody.clusters == 0


@pytest.mark.parametrize("name", [RTL, HUGE, META])
def test_hostile_names_are_found_as_plain_text(name: str) -> None:
    fragment = name[-12:]
    found = search(INDEX, fragment, kinds=["topic"])
    assert [h.name for h in found.hits] == [name]  # metacharacters match themselves in substring mode
    assert found.hits[0].name == name and len(found.hits[0].name) == len(name)
    assert search(INDEX, name, kinds=["topic"]).hits[0].match == "exact"
    literal = search(INDEX, re.escape(name[:200]), mode="regex", kinds=["topic"])
    assert name in {h.name for h in literal.hits}


def test_the_catastrophic_regex_is_linear_not_exponential() -> None:
    # Backtracking engines take exponential time on (a+)+$ against aaaa...b; RE2 does not backtrack.
    evil = snapshot_of({"topic": rows_table("topic", [_topic("eu", "a" * n + "b", f"id{n}") for n in range(1, 3000)])})
    done: list[query.SearchResult] = []
    worker = threading.Thread(target=lambda: done.append(search(evil, "(a+)+$", mode="regex", time_limit_s=5.0)))
    started = time.monotonic()
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and done and done[0].total == 0
    assert time.monotonic() - started < 5.0


def test_a_regex_past_its_time_limit_is_refused_with_a_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    # RE2 is fast enough that no pattern takes long on a test's data, so the clock is the test's: each look at it
    # moves it 0.5 s. The scan is cut in slices and the limit is checked before each one.
    monkeypatch.setattr(query, "REGEX_SLICE_ROWS", 100)
    ticks = iter(range(10_000))
    monkeypatch.setattr(query, "_monotonic", lambda: next(ticks) * 0.5)
    big = snapshot_of({"topic": rows_table("topic", [_topic("eu", f"topic-{i:05d}", f"id{i}") for i in range(5_000)])})
    with pytest.raises(QueryRefused) as refused:
        search(big, "topic-0+1", mode="regex", time_limit_s=2.0)
    message = str(refused.value)
    assert re.search(r"ran past its time limit of 2 s after [34]00 of 10,000 values and was stopped", message)
    assert "anchor it with ^" in message
    assert next(ticks) < 10  # stopped after a few slices, not at the end of the 100 slices


@pytest.mark.parametrize(("text", "mode", "reason"), [
    (r"(a)\1", "regex", "no backreferences or lookaround"),
    (r"(?=a)b", "regex", "not a usable regular expression"),
    ("x" * 1001, "regex", "at most 1,000"),
    ("x" * 40_001, "substring", "at most 40,000"),
    ("payments", "fuzzy", "unknown mode"),
])
def test_queries_the_search_will_not_run_are_refused(text: str, mode: str, reason: str) -> None:
    with pytest.raises(QueryRefused, match=re.escape(reason)):
        search(INDEX, text, mode=mode)
    with pytest.raises(QueryRefused, match="unknown kind"):
        search(INDEX, "x", kinds=["partition"])


def test_empty_and_blank_queries_find_nothing() -> None:
    assert search(INDEX, "").total == 0 and search(INDEX, "   ").total == 0


def test_results_are_json_ready() -> None:
    import json

    hit = search(INDEX, "payments", visible=EU_ONLY).hits[2]
    data = json.loads(json.dumps(hit.to_dict()))
    assert {"kind", "cluster", "name", "field", "value", "match", "state", "id"} <= set(data)
    assert data["deleted_at"].startswith(str((NOW - timedelta(days=1)).year))
    assert pa.array([RTL]).to_pylist() == [RTL]  # stored as it came; made visible only where shown
