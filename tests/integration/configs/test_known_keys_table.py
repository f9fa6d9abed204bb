"""known_keys.json is what the real client definitions say: regenerated from the jars and compared."""

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
