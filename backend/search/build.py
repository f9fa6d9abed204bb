"""Whole builds of the index from what the lake holds: the poller's current state (and, for deleted topics and groups,
the change log of the retention window), and the Spark job's heads. Used when the index is missing or behind."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from backend.search import rows as R
from backend.search.tables import tables_of
from backend.store import readers, state
from backend.store.lake import Lake
from backend.store.location import LakeLocation

DEFAULT_RETENTION_DAYS = 30


def fleet_generation(lake: Lake) -> int:
    """The generation of the poller's committed state (0 for a lake without one, as a new writer starts)."""
    manifest = state.read_manifest(lake)
    return 0 if manifest is None else int(manifest.get("generation", 0))


def _deleted(lake: Lake, now: datetime, retention_days: int, topics: pa.Table, groups: pa.Table
             ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Deleted topics and groups of the change log inside the retention, as deleted rows."""
    try:
        changes = readers.changes(lake, kinds=["topic_deleted", "topic_recreated", "group_deleted"],
                                  entity=["topic", "group"], since=now - timedelta(days=retention_days))
    except (OSError, ValueError):
        return [], []
    topic_rows: list[dict[str, Any]] = []
    group_rows: list[dict[str, Any]] = []
    for change in changes.itertuples(index=False):
        try:
            before = json.loads(change.before_json) if isinstance(change.before_json, str) else None
        except ValueError:
            continue
        if not isinstance(before, dict):
            continue
        at = change.seen_at.to_pydatetime() if hasattr(change.seen_at, "to_pydatetime") else change.seen_at
        if change.entity == "topic":
            row = {"cluster": change.cluster_name, "cluster_id": change.cluster_id, "topic": change.subject,
                   "topic_id": before.get("topic_id"), "internal": before.get("internal")}
            topic_rows.append(R.tombstone(row, at))
        else:
            row = {"cluster": change.cluster_name, "cluster_id": change.cluster_id,
                   "group_id": before.get("group_id", change.subject), "group_type": before.get("group_type")}
            group_rows.append(R.tombstone(row, at))
    return topic_rows, group_rows


def fleet_tables(lake: Lake | str, *, now: datetime | None = None,
                 retention_days: int = DEFAULT_RETENTION_DAYS) -> tuple[dict[str, pa.Table], int]:
    """Every table of the fleet part, built from the lake's current state; and the state generation it reflects."""
    lk = lake if isinstance(lake, Lake) else Lake(lake)
    now = now or datetime.now(UTC)
    manifest = state.read_manifest(lk)
    if not manifest:
        return {t.name: t.schema.empty_table() for t in tables_of(part="fleet")}, 0

    def read(kind: str) -> pa.Table:
        return state.read_state(lk, kind, manifest=manifest)

    topics, groups = read("topics"), read("groups")
    out = {
        "topic": R.topic_rows(topics),
        "group": R.group_rows(groups),
        "member": R.member_rows(read("group_members")),
        "software": R.software_rows(read("inventory")),
        "broker": R.broker_rows(read("brokers")),
        "cluster": R.cluster_rows(read("clusters")),
        "config": R.config_rows(read("configs"), topics),
    }
    gone_topics, gone_groups = _deleted(lk, now, retention_days, topics, groups)
    if gone_topics:
        out["topic"] = pa.concat_tables([out["topic"], R.rows_table("topic", gone_topics)])
    if gone_groups:
        out["group"] = pa.concat_tables([out["group"], R.rows_table("group", gone_groups)])
    return out, int(manifest.get("generation", 0))


PIPELINE_STATE = ("_state", "pipeline", "state.json")


def pipeline_generation(where: LakeLocation) -> tuple[int | None, str | None]:
    """The Spark job's committed generation and its tables directory (None: no state)."""
    from backend.store.atomic import read_json

    meta = read_json(where, where.path(*PIPELINE_STATE))
    if not isinstance(meta, dict):
        return None, None
    try:
        return int(meta["generation"]), str(meta["tables"])
    except (KeyError, TypeError, ValueError):
        return None, None


def client_tables(where: LakeLocation) -> tuple[dict[str, pa.Table], int | None]:
    """The clients part built from the Spark job's committed heads; and the job's generation it reflects."""
    import pyarrow.parquet as pq

    generation, tables_dir = pipeline_generation(where)
    if generation is None or tables_dir is None:
        return {"instance": R.frame("instance", {}, 0)}, None
    path = where.path("_state", "pipeline", tables_dir, "heads.parquet")
    try:
        with where.fs.open_input_file(path) as handle:
            heads = pq.read_table(handle)
    except (FileNotFoundError, OSError):
        return {"instance": R.frame("instance", {}, 0)}, None
    needed = {"client_instance_id", "cluster_id", "client_id", "cfg_client_id", "principal", "client_type",
              "client_software_name", "client_software_version", "group_id"}
    if not needed <= set(heads.column_names):
        return {"instance": R.frame("instance", {}, 0)}, None
    return {"instance": R.instance_rows(heads)}, generation
