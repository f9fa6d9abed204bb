"""What the config collector keeps of a DescribeConfigs entry: sensitive values are never kept."""

from __future__ import annotations

import pytest

from backend.collect.configs import MAX_VALUE_CHARS, config_value, withheld_reason
from backend.kafka.configs import ConfigEntry


@pytest.mark.parametrize(("name", "value", "sensitive", "config_type", "why"), [
    ("ssl.key.password", None, True, "PASSWORD", "sensitive"),  # what a broker does: null value, sensitive
    ("some.plugin.secret", "s3cr3t", False, "PASSWORD", "password_type"),  # a broker that sent one anyway
    ("listener.name.sasl_ssl.plain.sasl.jaas.config", "x", False, "STRING", "key_rule"),
    ("ssl.truststore.location", "/etc/kafka/ts.jks", False, "STRING", "key_rule"),
    ("principal.builder.class", "org.example.Builder", False, "CLASS", "key_rule"),
    ("custom.endpoint", "https://user:hunter2@example.com/x", False, "STRING", "credential_shape"),
    ("custom.login", 'org.example.Login required username="a" password="b";', False, "STRING", "credential_shape"),
    ("custom.huge", "x" * (MAX_VALUE_CHARS + 1), False, "STRING", "too_long"),
    ("log.retention.hours", "168", False, "INT", None),
    ("listeners", "PLAINTEXT://h:9092", False, "LIST", None),
])
def test_withheld_reasons(name: str, value: str | None, sensitive: bool, config_type: str, why: str | None) -> None:
    assert withheld_reason(name, value, sensitive, config_type) == why
    kept = config_value(ConfigEntry(name, value, "STATIC_BROKER_CONFIG", True, sensitive, config_type))
    assert kept.withheld == why and kept.source == "STATIC_BROKER_CONFIG"
    assert kept.value == (None if why else value)
