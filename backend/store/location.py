"""Where the lake is: the one parser of lake paths and URIs, and the one resolver of which lake to use."""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow.fs as pafs

DEFAULT_LAKE = "./lake"
ENV_LAKE = "FLEETVIEW_LAKE"
LAKE_HELP = ("lake path or URI (file://, s3://bucket/prefix, s3a://, hdfs://); default: $FLEETVIEW_LAKE, else the "
             "fleet file's lake_path, else ./lake. S3: endpoint and credentials from the AWS variables "
             "(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...), a profile or the instance role")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# mock:// is pyarrow's in-memory filesystem, the non-local lake the tests use.
_REMOTE_SCHEMES = {"s3", "s3a", "hdfs", "gs", "gcs", "abfs", "abfss", "mock"}
S3_SCHEMES = frozenset({"s3", "s3a"})
# What an s3:// lake URI may say besides bucket and prefix. Credentials never: they come from the usual places
# (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, the instance role), so no lake text (the fleet file, a log
# line, status.json, the UI) ever holds one.
S3_QUERY_KEYS = frozenset({"endpoint_override", "region", "scheme"})
_CREDENTIAL_WORDS = ("key", "secret", "token", "password", "credential")
CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0


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
    scheme: str = "file"
    endpoint: str | None = None  # an s3:// lake's endpoint_override (None: the AWS variables' or AWS's own)
    region: str | None = None

    @property
    def s3(self) -> bool:
        """Whether the lake is on S3 or an S3-compatible store (s3://, s3a://)."""
        return self.scheme in S3_SCHEMES

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
    if scheme in S3_SCHEMES:
        return _parse_s3(text)
    pyarrow_uri = text
    try:
        fs, root = pafs.FileSystem.from_uri(pyarrow_uri)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad URI
        raise LakeLocationError(f"cannot open lake {text!r}: {exc}") from None
    spark_uri = text.split("?", 1)[0].rstrip("/")
    return LakeLocation(text, fs, root.rstrip("/") or "/", False, spark_uri, scheme)


def _parse_s3(text: str) -> LakeLocation:
    """s3://bucket/prefix[?endpoint_override=http://host:port&region=R]: refused with any credential in it."""
    parts = urlsplit(text)
    if parts.username is not None or parts.password is not None:
        raise LakeLocationError("an s3:// lake URI must not carry credentials (user:secret@): set AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, a profile (AWS_PROFILE) or use the instance role")
    if not parts.netloc:
        raise LakeLocationError(f"an s3:// lake URI needs a bucket: s3://bucket/prefix, got {_shown(text)!r}")
    if parts.fragment:
        raise LakeLocationError(f"an s3:// lake URI must not carry a fragment: {_shown(text)!r}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    for key in query:
        if key not in S3_QUERY_KEYS:
            if any(word in key.lower() for word in _CREDENTIAL_WORDS):
                raise LakeLocationError(
                    f"an s3:// lake URI must not carry credentials ({key}=...): set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY, a profile (AWS_PROFILE) or use the instance role")
            raise LakeLocationError(f"unknown option {key!r} in the s3:// lake URI (known: {', '.join(sorted(S3_QUERY_KEYS))})")
    endpoint = query.get("endpoint_override") or None
    if endpoint is not None:
        if "://" not in endpoint:
            endpoint = f"{query.get('scheme') or 'https'}://{endpoint}"
        ep = urlsplit(endpoint)
        if ep.username is not None or ep.password is not None:
            raise LakeLocationError("the s3:// lake URI's endpoint_override must not carry credentials")
        if ep.scheme not in ("http", "https") or not ep.hostname:
            raise LakeLocationError(f"endpoint_override must be http(s)://host[:port], got {endpoint!r}")
    region = query.get("region") or None
    root = (parts.netloc + "/" + unquote(parts.path).strip("/")).rstrip("/")
    try:
        fs = _s3_filesystem(endpoint, region)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for bad options
        raise LakeLocationError(f"cannot open lake {_shown(text)!r}: {exc}") from None
    return LakeLocation(text, fs, root, False, "s3a://" + root, "s3", endpoint, region)


def _shown(text: str) -> str:
    return text.split("?", 1)[0]


def s3_endpoint(endpoint: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint a lake uses: the URI's endpoint_override, else $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL."""
    env = os.environ if environ is None else environ
    return endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None


@functools.lru_cache(maxsize=32)
def _s3_filesystem_cached(endpoint: str | None, region: str | None) -> pafs.FileSystem:
    options: dict[str, object] = {"connect_timeout": CONNECT_TIMEOUT_S, "request_timeout": REQUEST_TIMEOUT_S}
    if endpoint:
        ep = urlsplit(endpoint)
        options.update(endpoint_override=ep.netloc, scheme=ep.scheme)
    if region:
        options["region"] = region
    elif endpoint:
        # An S3-compatible endpoint has no region to look up; AWS's own answers from its default.
        options["region"] = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    # Credentials: the AWS SDK's default chain (environment, profile, instance role); never given here.
    return pafs.S3FileSystem(**options)  # type: ignore[arg-type]


def _s3_filesystem(endpoint: str | None, region: str | None) -> pafs.FileSystem:
    return _s3_filesystem_cached(s3_endpoint(endpoint), region)


def check_lake_text(location: str) -> None:
    """Refuse a lake location that cannot be a lake (raises LakeLocationError), without opening a remote one."""
    match = _SCHEME_RE.match(location.strip())
    if match is None or match.group(1).lower() in ("file", *S3_SCHEMES):
        parse_lake(location)  # an s3:// lake is checked (credentials, options) without a request
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
