"""Where the lake is: the one parser of lake paths and URIs, and the one resolver of which lake to use."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

DEFAULT_LAKE = "./lake"
ENV_LAKE = "FLEETVIEW_LAKE"
LAKE_HELP = ("lake path or URI (file://, s3a://, hdfs://); default: $FLEETVIEW_LAKE, else the fleet file's "
             "lake_path, else ./lake")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# mock:// is pyarrow's in-memory filesystem, the non-local lake the tests use.
_REMOTE_SCHEMES = {"s3", "s3a", "hdfs", "gs", "gcs", "abfs", "abfss", "mock"}


class LakeLocationError(ValueError):
    """A lake location that cannot be parsed (empty, unknown scheme, file:// with a host)."""


@dataclass(frozen=True)
class LakeLocation:
    """A parsed lake location: the pyarrow filesystem, the root inside it, and the URI Spark uses."""

    text: str
    fs: pafs.FileSystem
    root: str
    local: bool
    spark_uri: str

    def path(self, *parts: str) -> str:
        """A path under the root, for the pyarrow filesystem."""
        return posixpath.join(self.root, *parts) if parts else self.root

    def spark_path(self, *parts: str) -> str:
        """The same path as a URI Spark can read (file:///... for local lakes)."""
        return "/".join([self.spark_uri, *parts])

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at path (a path from .path())."""
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound


def parse_lake(location: str | os.PathLike[str]) -> LakeLocation:
    """Parse a local path, file:// URI or remote URI (s3://, s3a://, hdfs://, ...) into a LakeLocation.

    A plain path and the file:// URI of the same path give the same root. s3a:// is read as s3://.
    """
    text = os.fspath(location).strip()
    if not text:
        raise LakeLocationError("lake location is empty")
    match = _SCHEME_RE.match(text)
    if match is None:
        root = os.path.abspath(os.path.expanduser(text))
        return LakeLocation(text, pafs.LocalFileSystem(), root, True, "file://" + root)
    scheme = match.group(1).lower()
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise LakeLocationError(f"file:// lake location must not name a host: {text!r}")
        if parts.query or parts.fragment:
            raise LakeLocationError(f"file:// lake location must not carry a query or fragment: {text!r}")
        root = os.path.abspath(unquote(parts.path) or "/")
        return LakeLocation(text, pafs.LocalFileSystem(), root, True, "file://" + root)
    if scheme not in _REMOTE_SCHEMES:
        raise LakeLocationError(f"unsupported lake URI scheme {scheme!r} in {text!r}")
    pyarrow_uri = "s3://" + text[len("s3a://"):] if scheme == "s3a" else text
    try:
        fs, root = pafs.FileSystem.from_uri(pyarrow_uri)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad URI
        raise LakeLocationError(f"cannot open lake {text!r}: {exc}") from None
    spark_uri = text.split("?", 1)[0].rstrip("/")
    if scheme == "s3":
        spark_uri = "s3a://" + spark_uri[len("s3://"):]
    return LakeLocation(text, fs, root.rstrip("/") or "/", False, spark_uri)


def check_lake_text(location: str) -> None:
    """Refuse a lake location that cannot be a lake (raises LakeLocationError), without opening a remote one."""
    match = _SCHEME_RE.match(location.strip())
    if match is None or match.group(1).lower() == "file":
        parse_lake(location)
    elif match.group(1).lower() not in _REMOTE_SCHEMES:
        raise LakeLocationError(f"unsupported lake URI scheme {match.group(1)!r} in {location!r}")


def resolve_lake(
    explicit: str | None = None,
    *,
    fleet_lake_path: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The lake every CLI and the UI use: --lake, else $FLEETVIEW_LAKE, else the fleet file's lake_path, else ./lake."""
    env = os.environ if environ is None else environ
    for candidate in (explicit, env.get(ENV_LAKE), fleet_lake_path):
        if candidate and str(candidate).strip():
            return str(candidate).strip()
    return DEFAULT_LAKE
