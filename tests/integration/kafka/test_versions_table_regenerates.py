"""versions_table.json is what the kafka-clients jars of 2.8-4.4 say (plus the real early KRaft answers)."""

from __future__ import annotations

import json

from backend.kafka import versions_build as B
from backend.kafka.versions import TABLE_PATH
from tests.rig.clients import KNOWN_KEYS_JARS


def test_versions_table_regenerates_from_the_jars() -> None:
    jars = sorted(KNOWN_KEYS_JARS.glob("kafka-clients-*.jar"))
    assert len(jars) == 16
    built = json.dumps(B.build(jars), indent=None, separators=(",", ":")) + "\n"
    assert TABLE_PATH.read_text(encoding="utf-8") == built, (
        "backend/kafka/versions_table.json is stale: python -m backend.kafka.versions_build "
        ".cache/known-keys/kafka-clients-*.jar > backend/kafka/versions_table.json")
