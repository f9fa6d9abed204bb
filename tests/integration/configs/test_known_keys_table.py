"""known_keys.json is what the real client definitions say (keys, types, defaults): regenerated from the jars and
compared."""

from __future__ import annotations

from backend.configs import known_keys_build as B
from backend.configs.known_keys import TABLE_PATH
from tests.rig.clients import KNOWN_KEYS_JARS

RELEASES = ["2.8", *(f"3.{m}" for m in range(10)), *(f"4.{m}" for m in range(5))]


def test_known_keys_json_regenerates_from_the_jars() -> None:
    jars = B.release_jars(KNOWN_KEYS_JARS)
    dumps = B.dump(jars)
    assert [d["release"] for d in dumps] == list(jars)
    table = B.build(dumps)
    assert list(table["releases"]) == RELEASES
    assert TABLE_PATH.read_text(encoding="utf-8") == B.render(table), (
        "backend/configs/known_keys.json is stale: python -m backend.configs.known_keys_build .cache/known-keys "
        "> backend/configs/known_keys.json")


def test_what_the_definitions_say() -> None:
    table = B.build(B.dump(B.release_jars(KNOWN_KEYS_JARS)))
    clients = table["clients"]
    assert clients["producer"]["acks"] == [["2.8", "4.4", "STRING"]]
    assert clients["producer"]["key.serializer"] == [["2.8", "4.4", "CLASS"]]
    assert clients["consumer"]["sasl.jaas.config"] == [["2.8", "4.4", "PASSWORD"]]
    # A 4.x consumer defines the share keys (the finding of issue 21); a share consumer exists from 4.1.
    assert clients["consumer"]["share.acquire.mode"] == [["4.2", "4.4", "STRING"]]
    assert clients["share_consumer"]["share.acknowledgement.mode"][0][0] == "4.1"
    assert "auto.offset.reset" in table["share_unsupported"]
    assert "application.id" in clients["streams"] and "application.id" not in clients["consumer"]
    # Defaults per release, as ConfigDef renders them: the ones Kafka 4.0 changed (upgrade readiness reads these).
    defaults = table["defaults"]
    assert defaults["producer"]["linger.ms"] == [["2.8", "3.9", "0"], ["4.0", "4.4", "5"]]
    assert defaults["consumer"]["metadata.recovery.strategy"] == [["3.8", "3.9", "none"], ["4.0", "4.4", "rebootstrap"]]
    assert defaults["producer"]["acks"] == [["2.8", "2.8", "1"], ["3.0", "4.4", "all"]]
    assert defaults["producer"]["transactional.id"] == [["2.8", "4.4", None]]  # a null default
    assert "key.serializer" not in defaults["producer"]  # no default: left out
    assert defaults["streams"]["state.dir"] == [["2.8", "4.4", "${java.io.tmpdir}/kafka-streams"]]  # not this machine's
