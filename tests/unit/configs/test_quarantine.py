"""Every quarantine reason, with its position, its reason and a redacted excerpt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.configs.ingest import ingest_sink
from backend.configs.sensitive import redact_text
from backend.store.tables import read_table
from tests.unit.configs.helpers import (
    SECRET_VALUES,
    cfg,
    lake_bytes_contain,
    record,
    secret_configs,
    write_jsonl,
)


def _bad_records() -> list[tuple[str, object]]:
    good = record([cfg("acks", "all"), *secret_configs()])
    missing = dict(good)
    del missing["cluster_id"]
    wrong = dict(good, broker_id="one")
    wrong_cfg = dict(good, configs=[dict(cfg("acks", "all"), is_default="no"), *secret_configs()])
    bad_uuid = dict(good, client_instance_id="not-a-uuid")
    bad_int = dict(good, configs=[cfg("linger.ms", "soon", "LONG"), *secret_configs()])
    huge = dict(good, configs=[*secret_configs(), *[cfg("acks", "x" * 100)] * 120])
    truncated = json.dumps(good)[:-30]
    return [
        ("missing_field", missing),
        ("wrong_type", wrong),
        ("wrong_type", wrong_cfg),
        ("invalid_value", bad_uuid),
        ("invalid_value", bad_int),
        ("too_large", huge),
        ("malformed_json", truncated),
        ("wrong_type", [good]),
    ]


def test_each_reason_is_quarantined_with_position_and_no_secret(tmp_path: Path) -> None:
    sink, lake = tmp_path / "sink", tmp_path / "lake"
    bad = _bad_records()
    ok = record([cfg("acks", "all")])
    write_jsonl(sink / "b.jsonl", [ok] + [r for _, r in bad])  # type: ignore[misc]
    result = ingest_sink(str(lake), sink)
    assert result.records_read == len(bad) + 1
    assert result.records_written == 1
    expected: dict[str, int] = {}
    for reason, _ in bad:
        expected[reason] = expected.get(reason, 0) + 1
    assert dict(result.quarantined) == expected
    rows = read_table(str(lake), "quarantine").to_pylist()
    assert [(r["position"], r["reason"]) for r in sorted(rows, key=lambda r: int(r["position"].split(":")[1]))] == [
        (f"b.jsonl:{i + 2}", reason) for i, (reason, _) in enumerate(bad)]
    assert all(r["raw_excerpt"] and len(r["raw_excerpt"]) <= 512 for r in rows)
    stats = read_table(str(lake), "results/ingest_stats").to_pylist()
    assert {r["detail"]: r["count"] for r in stats if r["metric"] == "quarantined"} == expected
    for secret in SECRET_VALUES:
        assert lake_bytes_contain(lake, secret) == [], secret


@pytest.mark.parametrize("text", [
    '{"configs": [{"key": "ssl.key.password", "value": "keystore-pw-123", "type": "PASSWORD"',
    '{"configs": [{"value": "keystore-pw-123", "key": "my.custom", "type": "STRING"}, {"key',
    'sasl.jaas.config=x required password="keystore-pw-123";',
    '{"principal": "x", "token": "keystore-pw-123"',
])
def test_redact_text_on_unparsable_input(text: str) -> None:
    out = redact_text(text)
    assert "keystore-pw-123" not in out
    assert "[REDACTED]" in out


def test_redact_text_keeps_harmless_values() -> None:
    text = '{"key": "acks", "value": "all", "type": "STRING"'
    assert redact_text(text) == text
