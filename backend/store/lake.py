"""The snapshot lake: day-partitioned Parquet tables with atomic writes and retention."""

from __future__ import annotations

import os
import re
import secrets
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from backend.store.schemas import SCHEMA_VERSION, TABLES, schema_for

_POLL_ID_RE = re.compile(r"^[0-9]{8}T[0-9]{12}Z-[0-9a-f]{6,32}$")
_DAY_DIR_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
TEMP_PREFIX = ".tmp-"
STALE_TEMP_AGE_S = 3600.0


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
    """One Parquet file of a table: its day partition, poll id and full path."""

    day: str
    poll_id: str
    path: str


class Lake:
    """A lake root on a local path or any pyarrow filesystem URI (s3://, hdfs://, file://)."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        """Open a lake at a local path or filesystem URI; nothing is created until a write."""
        text = os.fspath(location)
        if not text:
            raise LakeError("lake location is empty")
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", text) and not text.startswith("file://"):
            fs, root = pafs.FileSystem.from_uri(text.replace("s3a://", "s3://", 1))
            self.local = False
        else:
            root = os.path.abspath(text.removeprefix("file://"))
            fs = pafs.LocalFileSystem()
            self.local = True
        self.fs: pafs.FileSystem = fs
        self.root: str = root.rstrip("/") or "/"
        self.location = text

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
                poll_id = name[: -len(".parquet")].rsplit("_", 1)[0]
                out.append(LakeFile(day=day, poll_id=poll_id, path=info.path))
        out.sort(key=lambda f: (f.poll_id, f.path))
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
        if self.local:
            _write_local_atomic(data, directory, final)
        else:
            self.fs.create_dir(directory, recursive=True)
            # Object stores publish an object only when the upload completes.
            with self.fs.open_output_stream(final) as out:
                pq.write_table(data, out, compression="zstd")
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
                return dataset.to_table(columns=cols, filter=filter)
            except FileNotFoundError:
                # Retention removed a file between listing and reading: list again.
                if attempt == 2:
                    raise
                if files is not None:
                    files = [f for f in files if self._exists(f.path)]
        raise AssertionError("unreachable")

    def apply_retention(self, retention_days: int, *, today: date | None = None) -> list[str]:
        """Delete day partitions older than retention_days and stale temp files; return deleted."""
        if retention_days < 1:
            raise LakeError(f"retention_days must be >= 1, got {retention_days}")
        today = today or datetime.now(UTC).date()
        cutoff = (today - timedelta(days=retention_days - 1)).isoformat()
        deleted: list[str] = []
        for table in TABLES:
            for day in self.days(table):
                path = f"{self.table_dir(table)}/date={day}"
                if day < cutoff:
                    self.fs.delete_dir(path)
                    deleted.append(path)
                elif self.local:
                    deleted.extend(_remove_stale_temps(path))
        return deleted


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


def _write_local_atomic(data: pa.Table, directory: str, final: str) -> None:
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}.parquet")
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(data, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _remove_stale_temps(directory: str) -> list[str]:
    removed: list[str] = []
    now = time.time()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return removed
    for name in names:
        if not name.startswith(TEMP_PREFIX):
            continue
        path = os.path.join(directory, name)
        try:
            if now - os.path.getmtime(path) > STALE_TEMP_AGE_S:
                os.unlink(path)
                removed.append(path)
        except FileNotFoundError:
            continue
    return removed
