"""Whole-table reads and switches of the client-config side of the lake (client_configs, quarantine, results/<name>).

A table that is replaced whole (``results/<name>``) is one Parquet file named by a switch, ``<table>/_current.json``
(``{"file": "part-<generation>-<hex>.parquet", "generation": N}``): a replacement writes its file under a new name,
then commits the switch over the version it read (S3 If-Match, a compare-and-rename locally), then deletes the files
of older generations. Readers read the switch, then the one file it names (again, if that file was deleted between
the two reads). So a reader sees the old table or the new one, never a mix, on a local disk and on S3 alike, and two
writers cannot both switch over the same version. A table directory without a switch (written by Spark or before
switches) is read whole, as before.
"""

from __future__ import annotations

import posixpath
import random
import re
import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from backend.store.atomic import commit_json, create_parquet, read_json, read_json_versioned
from backend.store.commit import CommitConflict, delete_quietly, missing
from backend.store.config_schemas import arrow_schema, empty_table
from backend.store.location import LakeLocation, parse_lake

SWITCH = "_current.json"
_PART = re.compile(r"^part-(\d{12})-[0-9a-f]{8}\.parquet$")
SWITCH_ATTEMPTS = 50  # an append retried while other writers keep switching (each attempt backs off a little)


def _where(lake: str | LakeLocation) -> LakeLocation:
    return lake if isinstance(lake, LakeLocation) else parse_lake(lake)


def _switch(where: LakeLocation, name: str) -> dict[str, object] | None:
    value = read_json(where, posixpath.join(where.path(name), SWITCH))
    return value if isinstance(value, dict) and isinstance(value.get("file"), str) else None


def table_generation(lake: str | LakeLocation, name: str) -> int:
    """The generation of the table's current switch (0: no switch yet)."""
    switch = _switch(_where(lake), name)
    return int(switch.get("generation") or 0) if switch else 0  # type: ignore[call-overload]


def table_files(lake: str | LakeLocation, name: str) -> list[str]:
    """The finished Parquet files that make lake/<name> now: the switch's one file, else every file of the directory."""
    where = _where(lake)
    base = where.path(name)
    switch = _switch(where, name)
    if switch is not None:
        return [posixpath.join(base, str(switch["file"]))]
    return _unswitched_files(where, base)


def _unswitched_files(where: LakeLocation, base: str) -> list[str]:
    """A directory's Parquet files from before switches (a switch's own files count only once it names them)."""
    try:
        infos = where.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet")
                  and not i.base_name.startswith((".", "_")) and not _PART.match(i.base_name))


def read_table(lake: str | LakeLocation, name: str) -> pa.Table:
    """Read lake/<name> (a table or results/<name>) with its declared schema; empty when it does not exist."""
    where = _where(lake)
    path = where.path(name)
    table = name.rsplit("/", 1)[-1]
    schema = arrow_schema(table)
    for attempt in range(5):
        switch = _switch(where, name)
        try:
            if switch is not None:
                dataset = ds.dataset([posixpath.join(path, str(switch["file"]))], filesystem=where.fs,
                                     format="parquet", schema=schema)
                return _with_own_metadata(dataset.to_table(), dataset)
            if where.fs.get_file_info(path).type != pafs.FileType.Directory:
                return empty_table(table)
            if name.startswith("results/"):  # replaced whole: before its first switch, the files of the old layout
                files = _unswitched_files(where, path)
                out = (ds.dataset(files, filesystem=where.fs, format="parquet", schema=schema).to_table() if files
                       else empty_table(table))
                if _switch(where, name) is None:
                    return out  # still no switch: what was read is the table before switches
                continue  # switched while reading the old files: read the switch's file
            return ds.dataset(path, filesystem=where.fs, format="parquet", schema=schema,
                              partitioning="hive", ignore_prefixes=[".", "_"]).to_table()
        except OSError as exc:
            if not missing(exc) or attempt == 4:  # switched again and again while reading
                raise
    raise AssertionError("unreachable")


def _with_own_metadata(table: pa.Table, dataset: ds.FileSystemDataset) -> pa.Table:
    """The table with the file's own schema metadata (keys fleetview.*, e.g. the keys client_instances covers):
    read from the very file the table came from, so the two always agree."""
    fragment = next(iter(dataset.get_fragments()), None)
    meta = fragment.physical_schema.metadata if fragment is not None else None
    own = {k: v for k, v in (meta or {}).items() if k.startswith(b"fleetview.")}
    return table.replace_schema_metadata(own) if own else table


def replace_table(lake: str | LakeLocation, name: str, table: pa.Table, *, generation: int | None = None) -> str | None:
    """Switch lake/<name> to ``table`` (one Parquet file); returns its path.

    Without ``generation``: the next generation over whatever is there (retried when another writer switched in
    between: the last switch wins, each whole). With one (the pipeline's, whose run committed it): only when the table
    is older; None (nothing written) when a newer one is already in place.
    """
    return _switch_to(_where(lake), name, lambda: table, generation)


def update_table(lake: str | LakeLocation, name: str, change: Callable[[pa.Table], pa.Table]) -> str | None:
    """Read lake/<name>, switch it to ``change(table)``; read and change again if another writer switched first."""
    where = _where(lake)
    return _switch_to(where, name, lambda: change(read_table(where, name)), None)


def _switch_to(where: LakeLocation, name: str, make: Callable[[], pa.Table], generation: int | None) -> str | None:
    base = where.path(name)
    switch_path = posixpath.join(base, SWITCH)
    for _attempt in range(SWITCH_ATTEMPTS):
        switch, version = read_json_versioned(where, switch_path, None)
        current = int(switch.get("generation") or 0) if isinstance(switch, dict) else 0
        if generation is not None and current >= generation:
            return None
        gen = generation if generation is not None else current + 1
        file = f"part-{gen:012d}-{uuid.uuid4().hex[:8]}.parquet"
        path = posixpath.join(base, file)
        create_parquet(where, path, make())
        try:
            commit_json(where, switch_path, {"file": file, "generation": gen}, version)
        except CommitConflict:
            delete_quietly(where, [path])
            time.sleep(random.uniform(0, 0.005 * (_attempt + 1)))
            continue
        _drop_older(where, base, gen, file)
        return path
    raise CommitConflict(switch_path, f"switched by other writers {SWITCH_ATTEMPTS} times while this one tried")


def _drop_older(where: LakeLocation, base: str, generation: int, keep: str) -> None:
    """Delete the files a switch no longer names: older generations, and the files of a directory before switches."""
    try:
        infos = where.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except (FileNotFoundError, NotADirectoryError):
        return
    old = []
    for info in infos:
        if info.type != pafs.FileType.File or info.base_name == keep or not info.base_name.endswith(".parquet"):
            continue
        match = _PART.match(info.base_name)
        if match is None and info.base_name.startswith((".", "_")):
            continue
        if match is None or int(match.group(1)) < generation:
            old.append(info.path)
    delete_quietly(where, old)
