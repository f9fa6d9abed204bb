"""Conditional writes: how every commit point of the lake is made, on a local disk, S3 or pyarrow's mock filesystem.

Three writes, each of one whole object:

- ``put``: replace (or create) the object whatever is there (data files with names no other writer uses);
- ``create``: only when no object is there (S3 ``If-None-Match: *``; locally a hard link of a finished temp file,
  which fails with EEXIST): the next generation of something, a merged file, a checkpoint;
- ``swap``: only when the object is still the version this writer read (S3 ``If-Match: <ETag>``; locally under an
  flock of ``.<name>.lock`` beside it, comparing the content's SHA-256, then a rename): a manifest, a pointer.

A write that loses raises ``CommitConflict``; nothing of it is left in place. pyarrow's S3FileSystem cannot send
either condition, so S3 writes go through boto3 (credentials from the AWS SDK's default chain: the environment, a
profile, the instance role; never from the lake's URI). Reads and listings stay with pyarrow.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import posixpath
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow.fs as pafs

from backend.store.location import CONNECT_TIMEOUT_S, REQUEST_TIMEOUT_S, LakeLocation, s3_endpoint

TEMP_PREFIX = ".tmp-"
LOCK_SUFFIX = ".lock"


class CommitConflict(RuntimeError):
    """Another writer changed (or created) the object first: this write was not made."""

    def __init__(self, path: str, detail: str) -> None:
        """Name the object and what was found there."""
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


class CommitUnsupported(RuntimeError):
    """The lake's filesystem cannot make a conditional write (hdfs://, gs://, abfs:// through pyarrow)."""


def missing(exc: BaseException) -> bool:
    """Whether a read failed because the file is gone (local, or S3's 404 as pyarrow reports it from a scan)."""
    if isinstance(exc, FileNotFoundError):
        return True
    text = str(exc)
    return isinstance(exc, OSError) and any(word in text for word in ("RESOURCE_NOT_FOUND", "NO_SUCH_KEY", "NoSuchKey", "NOT_FOUND"))


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------- local disks


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_file(directory: str, data: bytes) -> str:
    os.makedirs(directory, exist_ok=True)
    tmp = posixpath.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _local_put(path: str, data: bytes) -> str:
    directory = posixpath.dirname(path)
    tmp = _temp_file(directory, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)
    return _digest(data)


def _local_create(path: str, data: bytes) -> str:
    directory = posixpath.dirname(path)
    tmp = _temp_file(directory, data)
    try:
        try:
            os.link(tmp, path)  # atomic, and fails when the name exists: O_EXCL for a whole, finished file
        except OSError as exc:
            if isinstance(exc, FileExistsError) or exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            # A filesystem without hard links: reserve the name with O_EXCL, then rename the whole file over it
            # (a reader may see the empty reservation for that moment).
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            os.replace(tmp, path)
    except FileExistsError:
        raise CommitConflict(path, "already exists (another writer created it first)") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(directory)
    return _digest(data)


@contextlib.contextmanager
def _local_lock(path: str) -> Iterator[None]:
    directory, name = posixpath.split(path)
    os.makedirs(directory, exist_ok=True)
    fd = os.open(posixpath.join(directory, f".{name}{LOCK_SUFFIX}"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
        yield
    finally:
        os.close(fd)


def _local_read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _local_swap(path: str, data: bytes, expected: str | None) -> str:
    if expected is None:
        return _local_create(path, data)
    with _local_lock(path):
        current = _local_read(path)
        if current is None:
            raise CommitConflict(path, "is gone (another writer removed it since it was read)")
        if _digest(current) != expected:
            raise CommitConflict(path, "was changed by another writer since it was read")
        return _local_put(path, data)


# ---------------------------------------------------------------------------------------------- S3 (boto3)


@functools.lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, region: str | None) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S, read_timeout=REQUEST_TIMEOUT_S,
        retries={"max_attempts": 4, "mode": "standard"},
        # An S3-compatible endpoint (SeaweedFS, MinIO, Ceph, a loopback address) serves buckets by path.
        s3={"addressing_style": "path"} if endpoint else None,
    )
    # No credentials here: boto3's default chain (environment, AWS_PROFILE / shared files, the instance role).
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region, config=config)


def s3_client(where: LakeLocation) -> Any:
    """The process's boto3 client for an s3:// lake (its endpoint: the URI's, else the AWS variables')."""
    return _s3_client(s3_endpoint(where.endpoint), where.region or os.environ.get("AWS_REGION")
                      or os.environ.get("AWS_DEFAULT_REGION") or ("us-east-1" if s3_endpoint(where.endpoint) else None))


def _bucket_key(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key


def _s3_error(exc: Exception) -> tuple[int, str]:
    response = getattr(exc, "response", None) or {}
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    code = str(response.get("Error", {}).get("Code") or "")
    return status, code


def _s3_get(where: LakeLocation, path: str) -> tuple[bytes, str] | None:
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
    try:
        answer = s3_client(where).get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        status, code = _s3_error(exc)
        if status == 404 or code in ("NoSuchKey", "404"):
            return None
        raise OSError(f"S3 GET s3://{path} failed: {code or status}") from None
    return answer["Body"].read(), str(answer["ETag"])


def _s3_put(where: LakeLocation, path: str, data: bytes, **condition: str) -> str:
    from botocore.exceptions import ClientError

    bucket, key = _bucket_key(path)
    try:
        answer = s3_client(where).put_object(Bucket=bucket, Key=key, Body=data, **condition)
    except ClientError as exc:
        status, code = _s3_error(exc)
        # 412: the condition failed (SeaweedFS also answers 412 for If-Match on a missing key, where AWS says 404);
        # 409: a concurrent conditional write to the key is in progress; 404 (If-Match): the key is gone.
        if status in (409, 412) or (status == 404 and "IfMatch" in condition):
            current = _s3_get(where, path)
            if current is not None and current[0] == data:
                return current[1]  # a retried PUT that had already landed: the object is this write
            what = "already exists (another writer created it first)" if "IfNoneMatch" in condition else (
                "is gone (another writer removed it since it was read)" if current is None
                else "was changed by another writer since it was read")
            raise CommitConflict(f"s3://{path}", what) from None
        raise OSError(f"S3 PUT s3://{path} failed: {code or status}") from None
    return str(answer["ETag"])


# ---------------------------------------------------------------------------------------------- pyarrow's mock://

_MEMORY_LOCK = threading.Lock()


def _fs_read(where: LakeLocation, path: str) -> bytes | None:
    if where.fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with where.fs.open_input_stream(path) as src:
        return bytes(src.read())


def _fs_put(where: LakeLocation, path: str, data: bytes) -> str:
    where.fs.create_dir(posixpath.dirname(path), recursive=True)
    with where.fs.open_output_stream(path) as out:
        out.write(data)
    return _digest(data)


def _memory(where: LakeLocation) -> bool:
    if where.scheme == "mock":
        return True
    raise CommitUnsupported(
        f"the lake {where.text.split('?', 1)[0]} is on {where.scheme}://, where pyarrow cannot make a conditional "
        "write, so two writers could overwrite each other's commits: use a local path or s3:// (S3 or an "
        "S3-compatible store)")


# ---------------------------------------------------------------------------------------------- the three writes


def read_versioned(where: LakeLocation, path: str) -> tuple[bytes | None, str | None]:
    """An object's bytes and version (None, None when absent); the version is what ``swap`` compares."""
    if where.local:
        data = _local_read(path)
        return (data, _digest(data)) if data is not None else (None, None)
    if where.s3:
        found = _s3_get(where, path)
        return found if found is not None else (None, None)
    data = _fs_read(where, path)
    return (data, _digest(data)) if data is not None else (None, None)


def put(where: LakeLocation, path: str, data: bytes) -> str:
    """Write an object whole, whatever is there (a data file under a name of its own); returns its version."""
    if where.local:
        return _local_put(path, data)
    if where.s3:
        return _s3_put(where, path, data)
    return _fs_put(where, path, data)  # mock://, hdfs:// & co: data files are written; hdfs & co refuse commits


def create(where: LakeLocation, path: str, data: bytes) -> str:
    """Write an object only if none is there (If-None-Match: *); CommitConflict when another writer was first."""
    if where.local:
        return _local_create(path, data)
    if where.s3:
        return _s3_put(where, path, data, IfNoneMatch="*")
    _memory(where)
    with _MEMORY_LOCK:
        if _fs_read(where, path) is not None:
            raise CommitConflict(path, "already exists (another writer created it first)")
        return _fs_put(where, path, data)


def swap(where: LakeLocation, path: str, data: bytes, expected: str | None) -> str:
    """Replace an object only if it is still at version ``expected`` (If-Match); ``None``: only if absent.

    Raises CommitConflict when another writer changed, created or removed it since; returns the new version.
    """
    if expected is None:
        return create(where, path, data)
    if where.local:
        return _local_swap(path, data, expected)
    if where.s3:
        return _s3_put(where, path, data, IfMatch=expected)
    _memory(where)
    with _MEMORY_LOCK:
        current = _fs_read(where, path)
        if current is None or _digest(current) != expected:
            raise CommitConflict(path, "was changed by another writer since it was read")
        return _fs_put(where, path, data)


def delete_quietly(where: LakeLocation, paths: list[str]) -> None:
    """Delete files this writer made and no longer wants (a lost commit's); missing ones are fine."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, OSError):
            where.fs.delete_file(path)
