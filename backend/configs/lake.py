"""Ingest's rows for the lake: client_configs and quarantine rows, ingest_stats and reader progress (via backend.store)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

import pyarrow as pa

from backend.configs.record import Rejected, Snapshot
from backend.plain_text import utf8_safe
from backend.store.atomic import create_parquet
from backend.store.commit import delete_quietly
from backend.store.config_schemas import SCHEMA_VERSION, arrow_schema
from backend.store.location import parse_lake
from backend.store.progress import load_state, save_state
from backend.store.tables import update_table

INGEST_STATE_AREA = "ingest"


def snapshot_rows(snapshots: Iterable[Snapshot], ingested_at: datetime) -> pa.Table:
    """Explode snapshots into client_configs rows (one per key)."""
    cols: dict[str, list[object]] = {f.name: [] for f in arrow_schema("client_configs")}
    for snap in snapshots:
        for entry in snap.configs:
            cols["snapshot_id"].append(snap.snapshot_id)
            cols["received_at"].append(snap.received_at)
            cols["cluster_id"].append(snap.cluster_id)
            cols["broker_id"].append(snap.broker_id)
            cols["client_instance_id"].append(snap.client_instance_id)
            cols["client_id"].append(snap.client_id)
            cols["client_type"].append(snap.client_type)
            cols["client_type_inferred"].append(snap.client_type_inferred)
            cols["client_software_name"].append(snap.client_software_name)
            cols["client_software_version"].append(snap.client_software_version)
            cols["principal"].append(snap.principal)
            cols["client_address"].append(snap.client_address)
            cols["key"].append(entry.key)
            cols["value"].append(entry.value)
            cols["type"].append(entry.type)
            cols["is_default"].append(entry.is_default)
            cols["source"].append(snap.source)
            cols["source_position"].append(snap.position)
            cols["ingested_at"].append(ingested_at)
            cols["schema_version"].append(SCHEMA_VERSION)
    return pa.table(cols, schema=arrow_schema("client_configs"))


def write_snapshots(lake: str, snapshots: list[Snapshot], ingested_at: datetime) -> list[str]:
    """Append snapshots to lake/client_configs, one file per received day; returns the paths."""
    where = parse_lake(lake)
    by_day: dict[str, list[Snapshot]] = {}
    for snap in snapshots:
        by_day.setdefault(snap.received_at.date().isoformat(), []).append(snap)
    written = []
    for day, day_snaps in sorted(by_day.items()):
        table = snapshot_rows(day_snaps, ingested_at)
        if table.num_rows == 0:
            continue
        path = where.path("client_configs", f"date={day}", f"{uuid.uuid4().hex}.parquet")
        create_parquet(where, path, table)
        written.append(path)
    return written


def write_quarantine(lake: str, rejected: list[Rejected], at: datetime) -> str | None:
    """Append rejected records to lake/quarantine; returns the file written, if any."""
    if not rejected:
        return None
    where = parse_lake(lake)
    table = pa.table(
        {
            "quarantined_at": [at] * len(rejected),
            # Quarantine always takes the record: its texts made valid UTF-8 (a lone surrogate as \udcff).
            "source": [utf8_safe(r.source) for r in rejected],
            "position": [utf8_safe(r.position) for r in rejected],
            "reason": [r.reason for r in rejected],
            "detail": [utf8_safe(r.detail) for r in rejected],
            "raw_excerpt": [None if r.raw_excerpt is None else utf8_safe(r.raw_excerpt) for r in rejected],
            "schema_version": [SCHEMA_VERSION] * len(rejected),
        },
        schema=arrow_schema("quarantine"),
    )
    path = where.path("quarantine", f"date={at.date().isoformat()}", f"{uuid.uuid4().hex}.parquet")
    create_parquet(where, path, table)
    return path


def append_ingest_stats(lake: str, rows: pa.Table) -> None:
    """Add one run's counters to results/ingest_stats (switched whole; read and added again if another run switched
    it first, so no run's counters are lost)."""
    update_table(lake, "results/ingest_stats",
                 lambda current: pa.concat_tables([current, rows.cast(arrow_schema("ingest_stats"))]))


def remove_files(lake: str, paths: list[str]) -> None:
    """Remove files an ingest wrote and did not commit (its progress lost to another ingest of the source)."""
    delete_quietly(parse_lake(lake), paths)


def load_progress(lake: str, name: str) -> dict[str, object]:
    """A reader's saved progress under lake/_state/ingest/<name>.json ({} when absent)."""
    return load_state(lake, INGEST_STATE_AREA, name)


def save_progress(lake: str, name: str, state: dict[str, object]) -> None:
    """Commit a reader's progress file over the version this process loaded (CommitConflict if another moved it)."""
    save_state(lake, INGEST_STATE_AREA, name, state)
