"""Builders of KIP-1324 snapshot records for tests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

SECRET_VALUES = ("hunter2-jaas-secret", "keystore-pw-123", "s3cr3t-db", "truststore-pw-9")


def cfg(key: str, value: str | None, typ: str = "STRING", is_default: bool = False) -> dict[str, Any]:
    """One config entry."""
    return {"key": key, "value": value, "type": typ, "is_default": is_default}


def record(
    configs: list[dict[str, Any]],
    *,
    cluster_id: str = "clusterA",
    client_type: str | None = "producer",
    instance: str | None = None,
    snapshot_id: str | None = None,
    received_at: str = "2026-11-20T10:00:00.000Z",
    client_id: str | None = "app-1",
    software: tuple[str | None, str | None] = ("apache-kafka-java", "3.9.0"),
) -> dict[str, Any]:
    """A complete snapshot record."""
    return {
        "snapshot_id": snapshot_id or str(uuid.uuid4()),
        "received_at": received_at,
        "cluster_id": cluster_id,
        "broker_id": 1,
        "client_instance_id": instance or str(uuid.uuid4()),
        "client_id": client_id,
        "client_type": client_type,
        "client_software_name": software[0],
        "client_software_version": software[1],
        "principal": "User:app",
        "client_address": "10.0.0.5",
        "configs": configs,
    }


def secret_configs() -> list[dict[str, Any]]:
    """Sensitive entries carrying the SECRET_VALUES."""
    return [
        cfg("sasl.jaas.config",
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
            f'password="{SECRET_VALUES[0]}";', "PASSWORD"),
        cfg("ssl.keystore.password", SECRET_VALUES[1], "PASSWORD"),
        cfg("my.app.db.password", SECRET_VALUES[2], "STRING"),
        cfg("producer.ssl.truststore.password", SECRET_VALUES[3], "STRING"),
    ]


def write_jsonl(path: Path, records: list[dict[str, Any] | str]) -> None:
    """Append records (dicts or raw lines) as JSON lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for rec in records:
            fh.write((rec if isinstance(rec, str) else json.dumps(rec)) + "\n")


def lake_bytes_contain(lake: Path, needle: str) -> list[Path]:
    """Every file under the lake whose bytes contain needle."""
    data = needle.encode()
    return [p for p in lake.rglob("*") if p.is_file() and data in p.read_bytes()]
