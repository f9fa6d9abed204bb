"""State files of the fleet lake: the current state per cluster, open incidents, daily checkpoints.

Layout under `<lake>/_state/fleet/`:
- `state.json`: the manifest (layout version, generation, per cluster the state file of each kind);
  written last, so it is the commit of a state change;
- `current/<kind>/<cluster key>-<generation>.parquet`: a cluster's rows of one kind (clusters,
  brokers, topics, zk_nodes), with the columns of the v1 snapshot tables; a changed cluster
  rewrites only its own files;
- `incidents_open.parquet`: the open incidents (schema `incidents`);
- `checkpoints/<YYYY-MM-DD>/<kind>.parquet` + `checkpoint.json`: the whole current state at the
  first poll of a day, the base that `fleet_state_at` replays the change log onto.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.store.atomic import read_json, write_json_atomic, write_parquet_atomic
from backend.store.lake import Lake
from backend.store.schemas import CHECKPOINT_KINDS, INCIDENTS, LAYOUT_VERSION, STATE_TABLES, schema_for
from backend.store.stats import count_read

MANIFEST = "state.json"
OPEN_INCIDENTS = "incidents_open.parquet"
KINDS: tuple[str, ...] = tuple(STATE_TABLES)
CHECKPOINTED: tuple[str, ...] = CHECKPOINT_KINDS


def cluster_key(cluster_name: str) -> str:
    """A file-name-safe key of a cluster name (names come from config and are not trusted in paths)."""
    return hashlib.sha1(cluster_name.encode("utf-8")).hexdigest()[:16]


def state_path(lake: Lake, entry: str) -> str:
    """The full path of a manifest entry. Entries are relative to `_state/fleet`, so a copied, moved or restored
    lake reads its own files; an absolute entry (written before entries were relative) is read from the same
    place under this lake."""
    marker = "/_state/fleet/"
    relative = entry.split(marker, 1)[1] if marker in entry else entry.lstrip("/")
    return lake.state_dir(relative)


def empty_state(kind: str) -> pa.Table:
    """An empty table of a state kind."""
    return schema_for(STATE_TABLES[kind]).empty_table()


def read_manifest(lake: Lake) -> dict[str, Any] | None:
    """Return the state manifest, or None for a lake without v2 state."""
    value = read_json(lake.where, lake.state_dir(MANIFEST))
    count_read("state_manifest", 1 if value is not None else 0, 0)
    return value if isinstance(value, dict) else None


def new_manifest() -> dict[str, Any]:
    """A manifest for an empty state."""
    return {"layout": LAYOUT_VERSION, "generation": 0, "clusters": {}, "checkpoint_day": None, "migrated_v1": False}


def write_manifest(lake: Lake, manifest: Mapping[str, Any]) -> None:
    """Replace the manifest (the commit of a state change)."""
    write_json_atomic(lake.where, lake.state_dir(MANIFEST), dict(manifest))


def write_cluster_states(
    lake: Lake, manifest: dict[str, Any], updates: Mapping[str, Mapping[str, pa.Table]]
) -> dict[str, Any]:
    """Write the changed kinds of the changed clusters, then the manifest; delete the replaced files."""
    if not updates:
        return manifest
    generation = int(manifest.get("generation", 0)) + 1
    clusters = {name: dict(entry) for name, entry in manifest.get("clusters", {}).items()}
    replaced: list[str] = []
    for name, kinds in updates.items():
        entry = clusters.setdefault(name, {})
        for kind, table in kinds.items():
            relative = f"current/{kind}/{cluster_key(name)}-{generation:012d}.parquet"
            write_parquet_atomic(lake.where, lake.state_dir(relative), table.cast(schema_for(STATE_TABLES[kind])))
            if entry.get(kind):
                replaced.append(entry[kind])
            entry[kind] = relative
    out = {**manifest, "generation": generation, "clusters": clusters}
    write_manifest(lake, out)
    for path in replaced:
        _delete(lake, path)
    return out


def drop_clusters(lake: Lake, manifest: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """Remove clusters from the state (no longer configured); commit, then delete their files."""
    clusters = dict(manifest.get("clusters", {}))
    gone = [clusters.pop(n) for n in names if n in clusters]
    if not gone:
        return manifest
    out = {**manifest, "generation": int(manifest.get("generation", 0)) + 1, "clusters": clusters}
    write_manifest(lake, out)
    for entry in gone:
        for path in entry.values():
            _delete(lake, path)
    return out


def read_state(
    lake: Lake, kind: str, cluster_name: str | None = None, manifest: Mapping[str, Any] | None = None
) -> pa.Table:
    """Read one kind of current state (all clusters, or one) through the manifest."""
    manifest = manifest if manifest is not None else read_manifest(lake)
    if not manifest:
        return empty_state(kind)
    clusters = manifest.get("clusters", {})
    names = [cluster_name] if cluster_name is not None else sorted(clusters)
    paths = [state_path(lake, clusters[n][kind]) for n in names if n in clusters and clusters[n].get(kind)]
    return _read_paths(lake, kind, paths)


def read_clusters_state(lake: Lake, kind: str, clusters: Sequence[str] | None) -> pa.Table:
    """Read one kind of current state of the named clusters (every cluster when None), the manifest read once."""
    manifest = read_manifest(lake)
    if not manifest:
        return empty_state(kind)
    if clusters is None:
        return read_state(lake, kind, None, manifest)
    known = manifest.get("clusters", {})
    parts = [read_state(lake, kind, name, manifest) for name in dict.fromkeys(clusters) if name in known]
    return pa.concat_tables(parts) if parts else empty_state(kind)


def _read_paths(lake: Lake, kind: str, paths: list[str]) -> pa.Table:
    schema = schema_for(STATE_TABLES[kind])
    if not paths:
        return schema.empty_table()
    for attempt in range(3):
        try:
            table = ds.dataset(paths, schema=schema, format="parquet", filesystem=lake.fs).to_table()
            count_read(f"state/{kind}", len(paths), table.num_rows)
            return table
        except FileNotFoundError:
            # A writer replaced the files after we read the manifest: read the new manifest.
            if attempt == 2:
                raise
            fresh = read_manifest(lake) or {}
            names = [n for n, e in fresh.get("clusters", {}).items() if e.get(kind)]
            keys = {p.rsplit("/", 1)[-1].split("-")[0] for p in paths}
            paths = [state_path(lake, fresh["clusters"][n][kind]) for n in names if cluster_key(n) in keys]
    raise AssertionError("unreachable")


def read_open_incidents(lake: Lake) -> pa.Table:
    """Read the open incidents (empty when none)."""
    path = lake.state_dir(OPEN_INCIDENTS)
    schema = schema_for(INCIDENTS)
    try:
        with lake.fs.open_input_file(path) as handle:
            table = pq.read_table(handle, schema=schema)
    except FileNotFoundError:
        count_read("state/incidents_open", 0, 0)
        return schema.empty_table()
    count_read("state/incidents_open", 1, table.num_rows)
    return table


def write_open_incidents(lake: Lake, table: pa.Table) -> None:
    """Replace the open incidents file atomically."""
    write_parquet_atomic(lake.where, lake.state_dir(OPEN_INCIDENTS), table.cast(schema_for(INCIDENTS)))


def write_checkpoint(lake: Lake, day: str, tables: Mapping[str, pa.Table], at: datetime) -> None:
    """Write a checkpoint of the whole current state (checkpoint.json last, as its commit)."""
    for kind in CHECKPOINTED:
        table = tables.get(kind, empty_state(kind))
        write_parquet_atomic(lake.where, lake.state_dir("checkpoints", day, f"{kind}.parquet"), table)
    write_json_atomic(lake.where, lake.state_dir("checkpoints", day, "checkpoint.json"), {"at": at.isoformat()})


def checkpoint_days(lake: Lake) -> list[str]:
    """Days that have a committed checkpoint, oldest first."""
    base = lake.state_dir("checkpoints")
    try:
        infos = lake.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (FileNotFoundError, NotADirectoryError):
        return []
    days = [i.base_name for i in infos if i.type == pafs.FileType.Directory and not i.base_name.startswith(".")]
    return sorted(d for d in days if lake.fs.get_file_info(f"{base}/{d}/checkpoint.json").type == pafs.FileType.File)


def read_checkpoint(lake: Lake, day: str) -> tuple[datetime, dict[str, pa.Table]]:
    """Read a checkpoint: its time and its tables."""
    meta = read_json(lake.where, lake.state_dir("checkpoints", day, "checkpoint.json")) or {}
    at = datetime.fromisoformat(meta["at"])
    tables = {kind: _read_paths(lake, kind, [lake.state_dir("checkpoints", day, f"{kind}.parquet")])
              for kind in CHECKPOINTED}
    return at, tables


def apply_checkpoint_retention(lake: Lake, retention_days: int, *, today: date | None = None) -> list[str]:
    """Delete checkpoints older than the retention, keeping the newest one older than it (a base to replay from)."""
    today = today or datetime.now(UTC).date()
    cutoff = (today - timedelta(days=retention_days - 1)).isoformat()
    days = checkpoint_days(lake)
    old = [d for d in days if d < cutoff]
    deleted = []
    for day in old[:-1] if not [d for d in days if d == cutoff] else old:
        path = lake.state_dir("checkpoints", day)
        lake.fs.delete_dir(path)
        deleted.append(path)
    return deleted


def _delete(lake: Lake, entry: str) -> None:
    try:
        lake.fs.delete_file(state_path(lake, entry))
    except FileNotFoundError:
        pass
