"""Property: whatever the secret and wherever a record is cut, no secret survives ingest."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from backend.configs.record import parse_json_record
from tests.unit.configs.helpers import cfg, record

SENSITIVE = [("sasl.jaas.config", "PASSWORD"), ("ssl.keystore.password", "PASSWORD"),
             ("ssl.key.password", "STRING"), ("my.app.token", "STRING"),
             ("producer.ssl.truststore.password", "STRING"), ("basic.auth.user.info", "STRING")]
# A secret is never a word of the excerpt's own fixed text ("unparsable, N bytes; ...").
secrets_ = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=10, max_size=40).filter(
    lambda s: s not in "unparsable, bytes; no values kept; fields seen:")


def _leaks(outcome: object, secret: str) -> bool:
    return secret in json.dumps(outcome, default=lambda o: getattr(o, "__dict__", str(o)))


@settings(max_examples=150, deadline=None)
@given(secret=secrets_, which=st.integers(0, len(SENSITIVE) - 1), value_first=st.booleans(),
       cut=st.floats(0.05, 1.0))
def test_no_secret_survives(secret: str, which: int, value_first: bool, cut: float) -> None:
    key, typ = SENSITIVE[which]
    entry = cfg(key, f"prefix {secret} suffix", typ)
    if value_first:
        entry = {"value": entry["value"], "key": key, "type": typ, "is_default": False}
    line = json.dumps(record([cfg("acks", "all"), entry, cfg("linger.ms", "5", "LONG")]))
    for text in (line, line[: max(1, int(len(line) * cut))]):
        outcome = parse_json_record(text, "sink", "f:1")
        assert not _leaks(outcome.snapshot, secret)
        assert outcome.rejected is None or secret not in (outcome.rejected.raw_excerpt or "")
        if text == line:
            assert outcome.snapshot is not None
            assert [c.key for c in outcome.snapshot.configs] == ["acks", "linger.ms"]
