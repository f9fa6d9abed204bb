"""Topic ids are kept in Kafka's text form whatever alphabet or padding a source uses."""

from __future__ import annotations

import base64
import uuid

from backend.kafka.admin import is_auth_error, normalize_topic_id


def test_normalize_topic_id_gives_kafkas_url_safe_form() -> None:
    raw = uuid.UUID("5f5025d7-2a28-41ce-9fd4-043ace4d53fc").bytes
    kafka = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    standard = base64.b64encode(raw).decode()
    assert normalize_topic_id(kafka) == kafka
    assert normalize_topic_id(standard) == kafka
    assert normalize_topic_id(standard.rstrip("=")) == kafka


def test_null_and_zero_ids_are_none_and_junk_passes_through() -> None:
    assert normalize_topic_id(None) is None
    assert normalize_topic_id("") is None
    assert normalize_topic_id("AAAAAAAAAAAAAAAAAAAAAA") is None
    assert normalize_topic_id("not-an-id") == "not-an-id"


def test_auth_errors_are_recognised_from_text() -> None:
    assert is_auth_error("SASL authentication error: Authentication failed during authentication")
    assert not is_auth_error("Connect to ipv4#127.0.0.1:9 failed: Connection refused")
