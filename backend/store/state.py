"""State files of the fleet lake: the current state per cluster, open incidents, daily checkpoints.

Layout under `<lake>/_state/fleet/`:
- `state.json`: the manifest (layout version, generation, per cluster the state file of each kind, the open
  incidents' file); committed last and conditionally (over the version its writer read: S3 If-Match, a
  compare-and-rename locally), so it is the commit of a state change and two writers never both commit one
  generation: the second gets StateConflict;
- `current/<kind>/<cluster key>-<generation>-<writer token>.parquet`: a cluster's rows of one kind (clusters,
  brokers, topics, zk_nodes, ...), with the columns of the v1 snapshot tables; a changed cluster rewrites only its
  own files, under names no other writer uses, created only if absent;
- `open/incidents-<generation>-<writer token>.parquet`: the open incidents (schema `incidents`), named by the
  manifest (`incidents_open.parquet` in lakes written before);
- `checkpoints/<YYYY-MM-DD>/<kind>-<token>.parquet` + `checkpoint.json` (created only if absent, naming its files):
  the whole committed state at the first poll of a day, the base that `fleet_state_at` replays the change log onto.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.store.atomic import commit_json, create_bytes, create_parquet, json_bytes, read_json, read_json_versioned
from backend.store.commit import CommitConflict, delete_quietly, missing
from backend.store.lake import Lake
from backend.store.schemas import CHECKPOINT_KINDS, INCIDENTS, LAYOUT_VERSION, STATE_TABLES, schema_for
from backend.store.stats import count_read

MANIFEST = "state.json"
OPEN_INCIDENTS = "incidents_open.parquet"  # lakes written before the manifest named the open incidents' file
OPEN_ENTRY = "incidents_open"
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


def read_manifest_versioned(lake: Lake) -> tuple[dict[str, Any] | None, str | None]:
    """The manifest and its version (what commit_manifest compares); (None, None) for a lake without v2 state."""
    value, version = read_json_versioned(lake.where, lake.state_dir(MANIFEST))
    count_read("state_manifest", 1 if value is not None else 0, 0)
    return (value, version) if isinstance(value, dict) else (None, version)


def new_manifest() -> dict[str, Any]:
    """A manifest for an empty state."""
    return {"layout": LAYOUT_VERSION, "generation": 0, "clusters": {}, "checkpoint_day": None, "migrated_v1": False}


class StateConflict(CommitConflict):
    """Another writer committed the fleet state's next generation first; this writer's changes were dropped."""


def commit_manifest(lake: Lake, manifest: Mapping[str, Any], expected: str | None) -> str:
    """Commit the manifest over the version this writer read (None: only if there is none); returns the new version.

    Raises StateConflict when another writer committed in between.
    """
    try:
        return commit_json(lake.where, lake.state_dir(MANIFEST), dict(manifest), expected)
    except CommitConflict as exc:
        raise StateConflict(exc.path, f"another writer committed the fleet state first ({exc.detail}); generation "
                            f"{manifest.get('generation')} of this writer was not committed and its files were "
                            "removed. Is a second poller (serve, poll, a cron job) writing this lake?") from None


def writer_token() -> str:
    """A name part that no other writer's files share."""
    return uuid.uuid4().hex[:8]


def stage_cluster_states(
    lake: Lake, manifest: Mapping[str, Any], updates: Mapping[str, Mapping[str, pa.Table]], generation: int, token: str
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Write the changed kinds of the changed clusters as new files; return the manifest naming them (not committed),
    the files written and the manifest entries they replace (to delete once the manifest is committed)."""
    clusters = {name: dict(entry) for name, entry in manifest.get("clusters", {}).items()}
    written: list[str] = []
    replaced: list[str] = []
    for name, kinds in updates.items():
        entry = clusters.setdefault(name, {})
        for kind, table in kinds.items():
            relative = f"current/{kind}/{cluster_key(name)}-{generation:012d}-{token}.parquet"
            path = lake.state_dir(relative)
            create_parquet(lake.where, path, table.cast(schema_for(STATE_TABLES[kind])))
            written.append(path)
            if entry.get(kind):
                replaced.append(entry[kind])
            entry[kind] = relative
    return {**manifest, "clusters": clusters}, written, replaced


def stage_open_incidents(lake: Lake, manifest: Mapping[str, Any], table: pa.Table, generation: int,
                         token: str) -> tuple[dict[str, Any], str, str]:
    """Write the open incidents as a new file; the manifest naming it (not committed), its path, the entry it replaces."""
    relative = f"open/incidents-{generation:012d}-{token}.parquet"
    path = lake.state_dir(relative)
    create_parquet(lake.where, path, table.cast(schema_for(INCIDENTS)))
    return {**manifest, OPEN_ENTRY: relative}, path, str(manifest.get(OPEN_ENTRY) or OPEN_INCIDENTS)


def write_cluster_states(
    lake: Lake, manifest: dict[str, Any], updates: Mapping[str, Mapping[str, pa.Table]]
) -> dict[str, Any]:
    """Write the changed kinds of the changed clusters, then commit the manifest over the stored one; delete the
    replaced files. (The fleet writer stages and commits itself; this is the one-shot form, for fixtures and tools.)"""
    if not updates:
        return manifest
    _, version = read_manifest_versioned(lake)
    generation = int(manifest.get("generation", 0)) + 1
    staged, written, replaced = stage_cluster_states(lake, manifest, updates, generation, writer_token())
    out = {**staged, "generation": generation}
    try:
        commit_manifest(lake, out, version)
    except CommitConflict:
        delete_quietly(lake.where, written)
        raise
    for path in replaced:
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


def read_clusters_state(lake: Lake, kind: str, clusters: Sequence[str] | None,
                        manifest: Mapping[str, Any] | None = None) -> pa.Table:
    """Read one kind of current state of the named clusters (every cluster when None), the manifest read once (or
    the one given: several kinds read through one manifest are of the same polls)."""
    manifest = manifest if manifest is not None else read_manifest(lake)
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
        except OSError as exc:
            if not missing(exc):
                raise
            # A writer replaced the files after we read the manifest: read the new manifest.
            if attempt == 2:
                raise
            fresh = read_manifest(lake) or {}
            names = [n for n, e in fresh.get("clusters", {}).items() if e.get(kind)]
            keys = {p.rsplit("/", 1)[-1].split("-")[0] for p in paths}
            paths = [state_path(lake, fresh["clusters"][n][kind]) for n in names if cluster_key(n) in keys]
    raise AssertionError("unreachable")


def read_open_incidents(lake: Lake, manifest: Mapping[str, Any] | None = None) -> pa.Table:
    """Read the open incidents (empty when none): the file the manifest names (the legacy file before that)."""
    schema = schema_for(INCIDENTS)
    for attempt in range(3):
        current = manifest if manifest is not None and attempt == 0 else read_manifest(lake)
        entry = (current or {}).get(OPEN_ENTRY)
        path = state_path(lake, entry) if entry else lake.state_dir(OPEN_INCIDENTS)
        try:
            with lake.fs.open_input_file(path) as handle:
                table = pq.read_table(handle, schema=schema)
        except OSError as exc:
            if not missing(exc):
                raise
            if entry and attempt < 2:
                continue  # a writer committed a newer file and removed this one: read the new manifest
            count_read("state/incidents_open", 0, 0)
            return schema.empty_table()
        count_read("state/incidents_open", 1, table.num_rows)
        return table
    raise AssertionError("unreachable")


def write_checkpoint(lake: Lake, day: str, tables: Mapping[str, pa.Table], at: datetime) -> bool:
    """Write a checkpoint of the whole committed state, once per day: its files under names of its own, then
    checkpoint.json naming them, created only if absent. False (and nothing left) when another writer made it first."""
    token = writer_token()
    files: dict[str, str] = {}
    written: list[str] = []
    for kind in CHECKPOINTED:
        table = tables.get(kind, empty_state(kind))
        name = f"{kind}-{token}.parquet"
        path = lake.state_dir("checkpoints", day, name)
        create_parquet(lake.where, path, table)
        written.append(path)
        files[kind] = name
    try:
        create_bytes(lake.where, lake.state_dir("checkpoints", day, "checkpoint.json"),
                     json_bytes({"at": at.isoformat(), "files": files}))
    except CommitConflict:
        delete_quietly(lake.where, written)
        return False
    return True


def has_checkpoint(lake: Lake, day: str) -> bool:
    """Whether the day has a committed checkpoint."""
    return lake.fs.get_file_info(lake.state_dir("checkpoints", day, "checkpoint.json")).type == pafs.FileType.File


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
    files = meta.get("files") or {}
    tables = {kind: _read_paths(lake, kind, [lake.state_dir("checkpoints", day, files.get(kind, f"{kind}.parquet"))])
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


def delete_entries(lake: Lake, entries: Sequence[str]) -> None:
    """Delete files a committed manifest no longer names (missing ones are fine)."""
    for entry in entries:
        _delete(lake, entry)
