"""The lake: day-partitioned Parquet tables with atomic writes, compaction and retention."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from backend.store.atomic import create_parquet, remove_stale_temps
from backend.store.commit import CommitConflict, delete_quietly, missing
from backend.store.location import LakeLocation, LakeLocationError, parse_lake
from backend.store.schemas import DAY_TABLES, OWN_RETENTION_TABLES, SCHEMA_VERSION, TABLES, schema_for
from backend.store.stats import count_read

IN_FLIGHT = timedelta(seconds=60)  # another writer's file this young may be staged, not committed (Lake.compact)
_POLL_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{12}Z-[0-9a-f]{6,32}$")
_DAY_DIR_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


class LakeError(ValueError):
    """Raised for bad input to the lake (unknown table, bad rows, bad poll id)."""


def new_poll_id(at: datetime | None = None) -> str:
    """Return a new poll id that sorts by time: 20261121T054400123456Z-<hex>."""
    at = (at or datetime.now(UTC)).astimezone(UTC)
    return f"{at:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"


def poll_id_time(poll_id: str) -> datetime:
    """Return the UTC time encoded in a poll id."""
    return datetime.strptime(poll_id[:21], "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)


@dataclass(frozen=True)
class LakeFile:
    """One Parquet file of a table: its day partition, (last) poll id and full path.

    A compacted file covers the polls first_poll_id..poll_id (its name is `<first>__<last>_<hex>`).
    """

    day: str
    poll_id: str
    path: str
    first_poll_id: str = ""

    @property
    def first(self) -> str:
        """The first poll the file covers."""
        return self.first_poll_id or self.poll_id

    @property
    def merged(self) -> bool:
        """Whether the file is the output of a compaction."""
        return bool(self.first_poll_id)


class Lake:
    """A lake root on a local path or any pyarrow filesystem URI (s3://, hdfs://, file://)."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        """Open a lake at a local path or filesystem URI; nothing is created until a write."""
        try:
            self.where: LakeLocation = parse_lake(location)
        except LakeLocationError as exc:
            raise LakeError(str(exc)) from None
        self.fs: pafs.FileSystem = self.where.fs
        self.root: str = self.where.root
        self.local: bool = self.where.local
        self.location = self.where.text

    def __repr__(self) -> str:
        return f"Lake({self.location!r})"

    def table_dir(self, table: str) -> str:
        """Return the directory of a table (validates the table name)."""
        schema_for(table)
        return f"{self.root}/{table}"

    def _exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def days(self, table: str) -> list[str]:
        """Return the day partitions (YYYY-MM-DD) of a table, oldest first."""
        base = self.table_dir(table)
        try:
            infos = self.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for info in infos:
            m = _DAY_DIR_RE.match(info.base_name)
            if m and info.type == pafs.FileType.Directory:
                out.append(m.group(1))
        return sorted(out)

    def files(self, table: str, days: Iterable[str] | None = None) -> list[LakeFile]:
        """Return the finished Parquet files of a table (temp files excluded), sorted by poll id."""
        out = _drop_covered(self._listed(table, days))
        out.sort(key=lambda f: (f.poll_id, f.path))
        return out

    def _listed(self, table: str, days: Iterable[str] | None = None) -> list[LakeFile]:
        """Every finished Parquet file of a table, those a merged file covers included."""
        base = self.table_dir(table)
        wanted = self.days(table) if days is None else sorted(set(days))
        out: list[LakeFile] = []
        for day in wanted:
            try:
                infos = self.fs.get_file_info(pafs.FileSelector(f"{base}/date={day}", allow_not_found=True))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for info in infos:
                name = info.base_name
                if info.type != pafs.FileType.File or name.startswith((".", "_")):
                    continue
                if not name.endswith(".parquet"):
                    continue
                stem = name[: -len(".parquet")].rsplit("_", 1)[0]
                first, _, last = stem.partition("__")
                if last:
                    out.append(LakeFile(day=day, poll_id=last, path=info.path, first_poll_id=first))
                else:
                    out.append(LakeFile(day=day, poll_id=stem, path=info.path))
        return out

    def write(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]] | pa.Table,
        *,
        poll_id: str,
    ) -> str | None:
        """Write rows as one new Parquet file atomically into the poll's day; return its path.

        Returns None (and writes nothing) for zero rows.
        """
        schema = schema_for(table)
        if not _POLL_ID_RE.match(poll_id):
            raise LakeError(f"bad poll id {poll_id!r}")
        data = _to_table(table, rows, schema)
        if data.num_rows == 0:
            return None
        day = poll_id_time(poll_id).date().isoformat()
        directory = f"{self.table_dir(table)}/date={day}"
        final = f"{directory}/{poll_id}_{uuid.uuid4().hex[:8]}.parquet"
        create_parquet(self.where, final, data)  # a name of its own: never over another writer's file
        return final

    def read(
        self,
        table: str,
        files: Sequence[LakeFile] | None = None,
        *,
        columns: Sequence[str] | None = None,
        filter: ds.Expression | None = None,
    ) -> pa.Table:
        """Read files of a table (all when None) with the table schema; never raises when empty."""
        schema = schema_for(table)
        cols = list(columns) if columns is not None else schema.names
        for attempt in range(3):
            chosen = self.files(table) if files is None else list(files)
            if not chosen:
                return schema.empty_table().select(cols)
            try:
                dataset = ds.dataset(
                    [f.path for f in chosen],
                    schema=schema,
                    format="parquet",
                    filesystem=self.fs,
                )
                out = dataset.to_table(columns=cols, filter=filter)
                count_read(table, len(chosen), out.num_rows)
                return out
            except OSError as exc:
                if not missing(exc):
                    raise
                # Compaction or retention removed a file between listing and reading: list again
                # and take the files that now hold the same polls (a compacted file covers them).
                if attempt == 2:
                    raise
                if files is not None:
                    spans = [(f.first, f.poll_id) for f in files]
                    relisted = self.files(table, {f.day for f in files})
                    files = [f for f in relisted if any(f.first <= hi and f.poll_id >= lo for lo, hi in spans)]
        raise AssertionError("unreachable")

    def compact(self, table: str, *, now: datetime | None = None, own: Collection[str] | None = None) -> list[str]:
        """Merge a day table's small files: closed days into one file, each hour of today into one.

        The merged file is written first (its name says which polls it covers, so listings drop the
        inputs at once), then the inputs are deleted: a reader sees the inputs or the merged file,
        never both and never neither. The newest file is never merged. Returns the merged paths.

        The merged file's name follows from the polls it covers and is created only if absent (S3
        If-None-Match, O_EXCL locally), so two compactions of the same files make one file; inputs a
        crashed compaction left beside its merged file are deleted by the next one.

        ``own``: the poll ids the calling writer committed. Given, today's files of other polls younger than
        IN_FLIGHT are left alone: another writer may have staged one before a commit it can still lose (and then
        delete the file), so merged now its rows would outlive their poll.
        """
        if table not in DAY_TABLES + OWN_RETENTION_TABLES:
            raise LakeError(f"{table} is not a compactable day table")
        now = (now or datetime.now(UTC)).astimezone(UTC)
        today = now.date().isoformat()
        written: list[str] = []
        for day in self.days(table):
            listed = self._listed(table, [day])
            files = _drop_covered(listed)
            kept = {f.path for f in files}
            covered = [f for f in listed if f.path not in kept]
            if covered:
                delete_quietly(self.where, self._leftovers(table, covered, [f for f in files if f.merged]))
            files.sort(key=lambda f: (f.poll_id, f.path))
            if day == today:
                files = files[:-1]  # keep the newest file as it is: latest readers open only it
                if own is not None:
                    files = [f for f in files if f.first_poll_id or f.poll_id in own
                             or poll_id_time(f.poll_id) <= now - IN_FLIGHT]
                groups: dict[str, list[LakeFile]] = {}
                for f in files:
                    if f.first[:11] == f.poll_id[:11]:
                        groups.setdefault(f.poll_id[:11], []).append(f)
                batches = [g for g in groups.values() if len(g) > 1]
            else:
                batches = [files] if len(files) > 1 else []
            for batch in batches:
                written.append(self._merge(table, day, batch))
        return written

    def _leftovers(self, table: str, covered: list[LakeFile], merged: list[LakeFile]) -> list[str]:
        """The covered files whose polls a merged file holds (inputs a crashed compaction left), never a late file."""
        column = "poll_id" if "poll_id" in schema_for(table).names else "resolved_poll_id"
        held: set[str] = set()
        for m in merged:
            if any(m.first <= f.first and f.poll_id <= m.poll_id for f in covered):
                held.update(str(p) for p in self.read(table, [m], columns=[column]).column(column).to_pylist())
        out = []
        for f in covered:
            polls = ({str(p) for p in self.read(table, [f], columns=[column]).column(column).to_pylist()}
                     if f.merged else {f.poll_id})
            if polls <= held:
                out.append(f.path)
        return sorted(out)

    def _merge(self, table: str, day: str, batch: Sequence[LakeFile]) -> str:
        data = self.read(table, batch)
        data = data.sort_by([("poll_id", "ascending")]) if "poll_id" in data.column_names else data
        first = min(f.first for f in batch)
        last = max(f.poll_id for f in batch)
        span = hashlib.sha1(f"{first}__{last}".encode()).hexdigest()[:8]
        final = f"{self.table_dir(table)}/date={day}/{first}__{last}_{span}.parquet"
        try:
            create_parquet(self.where, final, data)
        except CommitConflict:
            pass  # another compaction merged the very same polls first: its file stands for them
        for f in batch:
            try:
                self.fs.delete_file(f.path)
            except FileNotFoundError:
                pass
        return final

    def apply_retention(self, retention_days: int, *, today: date | None = None,
                        tables: Iterable[str] | None = None) -> list[str]:
        """Delete day partitions older than retention_days and stale temp files; return deleted.

        Every table but those with a retention of their own (the audit log), unless ``tables`` names them."""
        if retention_days < 1:
            raise LakeError(f"retention_days must be >= 1, got {retention_days}")
        today = today or datetime.now(UTC).date()
        cutoff = (today - timedelta(days=retention_days - 1)).isoformat()
        deleted: list[str] = []
        for table in (tuple(tables) if tables is not None else
                      tuple(t for t in TABLES if t not in OWN_RETENTION_TABLES)):
            for day in self.days(table):
                path = f"{self.table_dir(table)}/date={day}"
                if day < cutoff:
                    self.fs.delete_dir(path)
                    deleted.append(path)
                else:
                    deleted.extend(remove_stale_temps(self.where, path))
        return deleted

    def state_dir(self, *parts: str) -> str:
        """Return a directory under the lake's `_state/fleet` (state files, checkpoints)."""
        return "/".join([self.root, "_state", "fleet", *parts])


def _drop_covered(files: list[LakeFile]) -> list[LakeFile]:
    """Drop files whose polls a compacted file already holds (the merge wrote it, inputs not yet gone)."""
    merged = [f for f in files if f.merged]
    if not merged:
        return files
    out = []
    for f in files:
        covered = any(
            m is not f and m.first <= f.first and f.poll_id <= m.poll_id and (m.first, m.poll_id) != (f.first, f.poll_id)
            for m in merged
        )
        if not covered:
            out.append(f)
    return out


def _to_table(table: str, rows: Sequence[Mapping[str, Any]] | pa.Table, schema: pa.Schema) -> pa.Table:
    if isinstance(rows, pa.Table):
        data = rows
        if "schema_version" not in data.column_names:
            data = data.append_column("schema_version", pa.array([SCHEMA_VERSION] * data.num_rows, pa.int32()))
        missing = [n for n in schema.names if n not in data.column_names]
        if missing:
            raise LakeError(f"{table}: missing columns {missing}")
        try:
            return data.select(schema.names).cast(schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            raise LakeError(f"{table}: rows do not fit the schema: {exc}") from None
    unknown = {k for row in rows for k in row} - set(schema.names)
    if unknown:
        raise LakeError(f"{table}: unknown columns {sorted(unknown)}")
    filled = [{**row, "schema_version": SCHEMA_VERSION} for row in rows]
    try:
        return pa.Table.from_pylist(filled, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise LakeError(f"{table}: rows do not fit the schema: {exc}") from None
