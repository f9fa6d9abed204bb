"""Secrets in places the key rules cannot see, through `python -m backend ingest` (issue 13, items 4-6).

Each case failed on the previous main: a quarantined record kept values verbatim when its `configs`
was an object, a >10 KB record went through a regex that broke on braces, and a credential under a
harmless key (client.id, bootstrap.servers) reached the lake.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from backend.configs import sensitive
from backend.store.tables import read_table
from tests.unit.configs.helpers import cfg, lake_bytes_contain, record, write_jsonl

ROOT = Path(__file__).resolve().parents[3]
CANARY = "Canary-pw-7f3a"


def _ingest(sink: Path, lake: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "backend", "ingest", "--sink", str(sink), "--lake", str(lake)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done


def _nowhere(lake: Path, *outputs: str) -> None:
    assert lake_bytes_contain(lake, CANARY) == []
    for text in outputs:
        assert CANARY not in text


def test_quarantine_keeps_no_value_of_a_configs_object_or_an_unknown_field(tmp_path: Path) -> None:
    as_object = dict(record([]), configs={"basic.auth.user.info": f"bob:{CANARY}",
                                          "db.url": f"postgres://app:{CANARY}@db:5432/x", "acks": "all"})
    stray_field = dict(record([cfg("acks", "all")]), broker_id="one", notes=f"token for later: {CANARY}")
    write_jsonl(tmp_path / "sink" / "b.jsonl", [as_object, stray_field])
    done = _ingest(tmp_path / "sink", tmp_path / "lake")
    rows = read_table(str(tmp_path / "lake"), "quarantine").to_pylist()
    assert sorted(r["reason"] for r in rows) == ["wrong_type", "wrong_type"]
    first = json.loads(min(rows, key=lambda r: r["position"])["raw_excerpt"])
    assert first["configs"] == {"(unknown key)": "[withheld]", "acks": "[withheld]"}  # names of known keys only
    assert first["cluster_id"] == "clusterA"  # where it came from stays readable
    _nowhere(tmp_path / "lake", done.stdout, done.stderr)


def test_an_oversized_or_broken_record_keeps_no_value_at_all(tmp_path: Path) -> None:
    braces = cfg("acks", "{" * 40 + "x" * 11_000 + "}")  # braces inside values broke the old regex fallback
    jaas = cfg("sasl.jaas.config", f'ScramLoginModule required username="u" password="{CANARY}";', "PASSWORD")
    huge = record([braces, jaas])
    cut = json.dumps(record([cfg("client.id", "a"), jaas]))[:-40]
    write_jsonl(tmp_path / "sink" / "b.jsonl", [huge, cut])
    done = _ingest(tmp_path / "sink", tmp_path / "lake")
    rows = read_table(str(tmp_path / "lake"), "quarantine").to_pylist()
    assert sorted(r["reason"] for r in rows) == ["malformed_json", "too_large"]
    for row in rows:
        assert row["raw_excerpt"].startswith("unparsable") and "no values kept" in row["raw_excerpt"]
        assert "sasl.jaas.config" not in row["raw_excerpt"]  # a sensitive name is not a record field either
    _nowhere(tmp_path / "lake", done.stdout, done.stderr)


@pytest.mark.parametrize(("key", "value"), [
    ("client.id", f'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                  f'password="{CANARY}";'),
    ("bootstrap.servers", f"alice:{CANARY}@broker-1:9092,broker-2:9092"),
    ("client.id", f"svc password={CANARY}"),
    ("client.dns.lookup", f"Bearer {CANARY}abcdef"),
    ("client.id", f"-----BEGIN PRIVATE KEY-----{CANARY}-----END PRIVATE KEY-----"),
])
def test_a_credential_under_a_harmless_key_is_dropped_and_counted(tmp_path: Path, key: str, value: str) -> None:
    write_jsonl(tmp_path / "sink" / "b.jsonl", [record([cfg("acks", "all"), cfg(key, value)])])
    done = _ingest(tmp_path / "sink", tmp_path / "lake")
    assert "records written:     1" in done.stdout
    assert f"    {key}: 1" in done.stdout  # counted with the dropped sensitive keys, by name only
    kept = read_table(str(tmp_path / "lake"), "client_configs").to_pylist()
    assert {r["key"] for r in kept} == {"acks"}
    _nowhere(tmp_path / "lake", done.stdout, done.stderr)


def test_a_credential_in_a_record_field_is_dropped_and_counted(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "sink" / "b.jsonl", [record([cfg("acks", "all")], client_id=f"Bearer {CANARY}abcdef")])
    done = _ingest(tmp_path / "sink", tmp_path / "lake")
    assert "    client_id: 1" in done.stdout
    rows = read_table(str(tmp_path / "lake"), "client_configs").to_pylist()
    assert rows and all(r["client_id"] is None for r in rows)
    _nowhere(tmp_path / "lake", done.stdout, done.stderr)


@pytest.mark.parametrize("value", ["all", "snappy", "broker-1:9092,broker-2:9092", "User:alice", "10.0.0.5:9092",
                                   "https://schema-registry:8081", "org.apache.kafka.clients.producer.RoundRobin"])
def test_ordinary_values_are_not_credentials(value: str) -> None:
    assert sensitive.credential_shape(value) is None


def test_logs_are_redacted_by_the_one_filter() -> None:
    stream = io.StringIO()
    logger = logging.getLogger("test.hostile.secrets")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        sensitive.install_log_filter(logger)
        logger.warning("cluster %s: login failed with sasl.jaas.config=%s", "prod",
                       f'PlainLoginModule required username="a" password="{CANARY}";')
        logger.warning("bootstrap alice:%s@broker:9092 unreachable", CANARY)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "login failed" in text and "unreachable" in text  # the message is kept, the secret is not
    assert CANARY not in text


def test_the_command_line_installs_the_filter_on_logging_s_last_resort(tmp_path: Path) -> None:
    from backend.cli import main

    assert logging.lastResort is not None
    logging.lastResort.filters = [f for f in logging.lastResort.filters if not isinstance(f, sensitive.SecretFilter)]
    code = main(["export", "--report", "drift", "--clusters", "x", "--lake", str(tmp_path / "none"),
                 "--out", str(tmp_path / "o.html")])
    assert code != 0  # no lake there: the command fails, but logging was protected first
    assert any(isinstance(f, sensitive.SecretFilter) for f in logging.lastResort.filters)


_POLICY_WORDS = ("password", "secret", "jaas")


def test_no_module_but_the_sanitizer_compiles_its_own_secret_regex() -> None:
    offenders = []
    for path in (ROOT / "backend").rglob("*.py"):
        if path == ROOT / "backend" / "configs" / "sensitive.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "compile" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and any(w in node.args[0].value.lower() for w in _POLICY_WORDS)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_a_cut_userinfo_in_a_bootstrap_list_is_withheld_and_real_address_lists_are_kept() -> None:
    from backend.configs.sensitive import address_list_shape

    # A line cut before the '@' of user:secret@host:9092 leaves the secret as the "port".
    assert address_list_shape("bootstrap.servers", "u:Cnry9x7q") == "not_addresses"
    assert address_list_shape("bootstrap.servers", "[k1:9092, u:Cnry9x7q]") == "not_addresses"
    assert address_list_shape("producer.bootstrap.servers", "k1:9092,u:x") == "not_addresses"
    for fine in ("k1:9092", "[k1.prod.example:9093, k2.prod.example:9093]", "SASL_SSL://k1:9094,[::1]:9092",
                 "10.0.0.5:9092, 10.0.0.6:9092"):
        assert address_list_shape("bootstrap.servers", fine) is None, fine
    assert address_list_shape("client.id", "u:Cnry9x7q") is None  # only broker-address lists have this shape
