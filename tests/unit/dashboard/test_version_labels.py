"""Version labels: one name for Apache Kafka whatever the source, and a guess is always shown as a range or bound."""

from __future__ import annotations

import pandas as pd

from backend.views.fleet_views import software_label, summarize_versions


def _broker(name: str | None, version: str | None, provenance: str, low: str | None = None, high: str | None = None) -> dict:
    return {"software_name": name, "software_version": version, "version_provenance": provenance,
            "version_min": low, "version_max": high}


def test_kip885_name_kafka_and_guessed_apache_kafka_read_the_same() -> None:
    assert software_label(pd.Series(_broker("Kafka", "4.3.1", "reported"))) == "Apache Kafka 4.3.1"
    assert software_label(pd.Series(_broker("Apache Kafka", None, "guessed", "3.7", "3.9"))) == "Apache Kafka 3.7–3.9 (guessed)"
    assert software_label(pd.Series(_broker("Redpanda", "v24.2.7", "reported"))) == "Redpanda v24.2.7"


def test_open_ended_guess_is_a_lower_bound_not_a_version() -> None:
    assert software_label(pd.Series(_broker("Apache Kafka", None, "guessed", "4.4", None))) == "Apache Kafka ≥ 4.4 (guessed)"


def test_mixed_cluster_lists_each_version() -> None:
    brokers = pd.DataFrame([_broker("Kafka", "4.3.1", "reported"), _broker("Kafka", "4.3.1", "reported"),
                            _broker("Kafka", "4.2.0", "reported")])
    assert summarize_versions(brokers) == "mixed: Apache Kafka 4.2.0 ×1, Apache Kafka 4.3.1 ×2"
