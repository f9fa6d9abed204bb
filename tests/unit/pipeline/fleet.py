"""A small hand-made fleet with known answers, as client_configs rows."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from backend.store.config_schemas import spark_schema

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
_NS = uuid.UUID("0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9")


def _type_of(value: str | None) -> str:
    if value is not None and value.lstrip("-").isdigit():
        return "INT"
    if value in ("true", "false"):
        return "BOOLEAN"
    return "STRING"


def rows_for(
    name: str,
    configs: dict[str, str | None],
    *,
    cluster: str = "east",
    client_type: str | None = "producer",
    client_id: str | None = "<name>",
    at: datetime = T0,
    defaults: frozenset[str] = frozenset(),
    software: tuple[str | None, str | None] = ("apache-kafka-java", "3.9.0"),
    snapshot: str | None = None,
) -> list[dict[str, Any]]:
    """The rows of one snapshot of instance ``name`` (instance id derived from the name)."""
    instance = str(uuid.uuid5(_NS, name))
    snap = snapshot or str(uuid.uuid5(_NS, f"{name}@{at.isoformat()}"))
    return [
        {
            "snapshot_id": snap, "received_at": at, "cluster_id": cluster, "broker_id": 1,
            "client_instance_id": instance,
            "client_id": name if client_id == "<name>" else client_id,
            "client_type": client_type, "client_type_inferred": False,
            "client_software_name": software[0], "client_software_version": software[1],
            "principal": None, "client_address": None, "key": key, "value": value,
            "type": _type_of(value), "is_default": key in defaults, "source": "test",
            "source_position": f"{name}:1", "ingested_at": at, "schema_version": 1,
        }
        for key, value in configs.items()
    ]


def instance_id(name: str) -> str:
    """The client_instance_id rows_for gives ``name``."""
    return str(uuid.uuid5(_NS, name))


def frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """client_configs DataFrame of rows."""
    schema = spark_schema("client_configs")
    return spark.createDataFrame([tuple(r[f] for f in schema.fieldNames()) for r in rows], schema)


def small_fleet() -> list[dict[str, Any]]:
    """east: 4 producers + 3 consumers of group 'orders'; west: 2 producers.

    acks      east: all x3 (defaults), 1 x1        west: 1, 0       -> TVD 0.75
    linger.ms east: 5, 10, 5, 100                  west: 5, 5       -> TVD 0.5
    P1 also has an older snapshot (acks=0) that must be ignored.
    """
    d = frozenset({"acks"})
    rows = []
    rows += rows_for("P1", {"acks": "0", "linger.ms": "1"}, at=T0 - timedelta(hours=1))
    rows += rows_for("P1", {"acks": "all", "linger.ms": "5"}, defaults=d)
    rows += rows_for("P2", {"acks": "all", "linger.ms": "10"}, defaults=d)
    rows += rows_for("P3", {"acks": "1", "linger.ms": "5"})
    rows += rows_for("P4", {"acks": "all", "linger.ms": "100"}, defaults=d)
    rows += rows_for("Q1", {"acks": "1", "linger.ms": "5"}, cluster="west")
    rows += rows_for("Q2", {"acks": "0", "linger.ms": "5"}, cluster="west",
                     software=("confluent-kafka-python", "2.3.0-rdkafka-2.3.0"))
    for name, session in (("C1", "45000"), ("C2", "45000"), ("C3", "10000")):
        rows += rows_for(name, {"group.id": "orders", "session.timeout.ms": session,
                                "max.poll.records": "500", "client.id": name.lower()},
                         client_type="consumer")
    return rows
