"""The KIP-1324 sensitive criteria, one case each, plus keys that must pass."""

from __future__ import annotations

import pytest

from backend.configs.record import infer_client_type
from backend.configs.sensitive import sensitive_reason


@pytest.mark.parametrize(("key", "typ", "client_type", "reason"), [
    ("sasl.jaas.config", "PASSWORD", "producer", "type"),
    ("key.serializer", "CLASS", "producer", "type"),
    ("key.serializer", "STRING", "producer", "type"),  # mislabelled, ConfigDef says CLASS
    ("sasl.mechanism", "STRING", "producer", "prefix"),
    ("security.protocol", "STRING", "consumer", "prefix"),
    ("ssl.endpoint.identification.algorithm", "STRING", None, "prefix"),
    ("producer.ssl.key.password", "STRING", "streams", "segment"),
    ("enable.ssl.certificate.verification", "BOOLEAN", "producer", "segment"),
    ("my.sasl.thing", "STRING", None, "segment"),
    ("partitioner.class", "STRING", "producer", "suffix"),
    ("interceptor.classes", "LIST", "consumer", "suffix"),
    ("my.app.db.password", "STRING", "consumer", "custom"),
    ("acks", "STRING", "consumer", "custom"),  # not a consumer key
])
def test_sensitive(key: str, typ: str, client_type: str | None, reason: str) -> None:
    assert sensitive_reason(key, typ, client_type) == reason


@pytest.mark.parametrize(("key", "typ", "client_type"), [
    ("acks", "STRING", "producer"),
    ("linger.ms", "LONG", "producer"),
    ("group.id", "STRING", "consumer"),
    ("share.acquire.mode", "STRING", "share_consumer"),
    ("default.api.timeout.ms", "INT", "admin"),
    ("producer.linger.ms", "LONG", "streams"),
    ("num.stream.threads", "INT", "streams"),
    ("queue.buffering.max.ms", "DOUBLE", "producer"),  # librdkafka-only key
    ("client.id", "STRING", None),
])
def test_not_sensitive(key: str, typ: str, client_type: str | None) -> None:
    assert sensitive_reason(key, typ, client_type) is None


def test_librdkafka_keys_only_for_librdkafka_clients() -> None:
    assert sensitive_reason("queue.buffering.max.ms", "DOUBLE", "producer", librdkafka=False) == "custom"


@pytest.mark.parametrize(("keys", "expected"), [
    ({"acks", "linger.ms"}, "producer"),
    ({"group.id", "enable.auto.commit"}, "consumer"),
    ({"group.id", "share.acquire.mode"}, "share_consumer"),
    ({"application.id", "acks"}, "streams"),
    ({"default.api.timeout.ms", "client.id"}, "admin"),
    ({"client.id"}, None),
])
def test_infer_client_type(keys: set[str], expected: str | None) -> None:
    assert infer_client_type(keys) == expected
