"""The known-key table and the client-type inference, checked against the real definitions in known_keys.json."""

from __future__ import annotations

import pytest

from backend.configs import known_keys as K
from backend.configs.record import infer_client_type
from backend.configs.sensitive import sensitive_reason


def _defined(client_type: str, release: str) -> set[str]:
    """The keys this client type's ConfigDef has in one release."""
    at = K.release_key(release)
    return {key for key in K.java_keys(client_type) if any(
        K.release_key(lo) <= at <= K.release_key(hi) for lo, hi in K.key_releases(key, client_type))}


@pytest.mark.parametrize("release", K.releases())
def test_every_real_definition_infers_to_its_own_client_type(release: str) -> None:
    for client_type in ("producer", "consumer", "admin", "streams"):
        assert infer_client_type(_defined(client_type, release)) == client_type, client_type
    share = _defined("share_consumer", release)
    if share:  # 4.1+: a share consumer sets none of the keys it refuses
        assert infer_client_type(share - K.share_unsupported()) == "share_consumer"


def test_a_4x_consumer_with_share_keys_is_a_consumer() -> None:
    consumer = _defined("consumer", "4.3")
    assert {"share.acquire.mode", "share.acknowledgement.mode"} <= consumer
    assert infer_client_type(consumer) == "consumer"
    assert infer_client_type({"group.id", "share.acquire.mode", "auto.offset.reset"}) == "consumer"
    assert infer_client_type({"group.id", "share.acquire.mode", "max.poll.records"}) == "share_consumer"


# The keys each Java client pushes by default (KIP-1324 draft).
KIP1324_DEFAULTS = {
    "producer": {"acks", "batch.size", "buffer.memory", "client.id", "compression.type", "delivery.timeout.ms",
                 "enable.idempotence", "linger.ms", "max.in.flight.requests.per.connection", "request.timeout.ms",
                 "retries"},
    "consumer": {"auto.offset.reset", "client.id", "enable.auto.commit", "fetch.min.bytes", "fetch.max.wait.ms",
                 "group.id", "isolation.level", "max.poll.interval.ms", "max.poll.records", "session.timeout.ms"},
    "share_consumer": {"client.id", "fetch.max.wait.ms", "fetch.min.bytes", "group.id", "max.poll.interval.ms",
                       "max.poll.records", "share.acknowledgement.mode", "share.acquire.mode"},
}


@pytest.mark.parametrize("client_type", sorted(KIP1324_DEFAULTS))
def test_kip1324_default_push_sets_infer_their_type(client_type: str) -> None:
    assert infer_client_type(KIP1324_DEFAULTS[client_type]) == client_type
    for key in KIP1324_DEFAULTS[client_type]:
        assert K.known_type(key, client_type, librdkafka=False) is not None, key


def test_markers_come_from_the_definitions() -> None:
    markers = K.type_markers()
    assert {"application.id", "num.stream.threads"} <= markers["streams"]
    assert {"auto.offset.reset", "session.timeout.ms", "group.protocol"} <= markers["consumer_only"]
    assert "interceptor.classes" not in markers["consumer_only"]  # producers define it too
    assert markers["share"] == {"share.acquire.mode", "share.acknowledgement.mode"}
    assert {"acks", "linger.ms", "enable.idempotence"} <= markers["producer"]
    assert "default.api.timeout.ms" in markers["admin"]


def test_key_releases_and_types() -> None:
    assert K.key_releases("share.acquire.mode", "consumer") == (("4.2", "4.4"),)
    assert K.key_releases("auto.include.jmx.reporter", "producer") == (("3.4", "3.9"),)
    assert K.known_type("linger.ms", "producer") == "LONG"
    assert K.known_type("default.api.timeout.ms", "producer") is None  # a consumer and admin key only
    assert K.known_type("producer.linger.ms", "streams") == "LONG"
    assert K.known_type("enable.config.push", "consumer") == "BOOLEAN"  # KIP-1324's own key


def test_password_and_class_keys_of_any_release_are_dropped_whatever_a_record_says() -> None:
    declared = {k for t in K.JAVA_CLIENT_TYPES for k in K.java_keys(t) if K.java_types(k) & {"PASSWORD", "CLASS"}}
    assert {"sasl.jaas.config", "ssl.keystore.password", "key.serializer", "default.key.serde"} <= declared
    for key in declared:
        for client_type in (None, *K.JAVA_CLIENT_TYPES):
            assert sensitive_reason(key, "STRING", client_type) is not None, (key, client_type)
    assert sensitive_reason("acks", "PASSWORD", "producer") == "type"
