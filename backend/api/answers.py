"""Answers as they leave the API: the ETag, 304, gzip and the headers of one encoded answer, built once.

The gate (backend.api.gate) encodes every buffered answer with `encode`: a weak ETag of the body (a 200 to a GET),
the gzip bytes when the body is at least GZIP_MIN_BYTES and compressible, and the three header lists it may leave
with (identity, gzip, 304). An answer that depends only on the caller's scope, its path and query and the data
generation (the handlers mark those: backend.api.common) is kept in that generation's ScopedLake under `answer_key`,
so a repeat is a dictionary look-up: no handler, no digest, no compression.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

GZIP_MIN_BYTES = 1000
GZIP_LEVEL = 6  # zlib's default: within a few % of level 9's size here, at a fraction of its CPU (compressed once)
ANSWER = "api-answer"
HOT = ("api-hot",)
# Content types never compressed (as Starlette's GZipMiddleware): already compressed, or streamed.
NOT_COMPRESSED = ("text/event-stream", "application/gzip", "application/zip", "image/", "audio/", "video/", "font/")
Header = tuple[bytes, bytes]
AnswerKey = tuple[str, str, tuple[tuple[str, str], ...]]


def etag_of(body: bytes) -> str:
    """A weak ETag of a representation (weak: gzip may re-encode the bytes)."""
    return 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def etag_matches(header: str | None, tag: str) -> bool:
    """Whether an If-None-Match header names this ETag (weak comparison) or is `*`."""
    if not header:
        return False
    wanted = tag.removeprefix("W/")
    return any(part.strip() == "*" or part.strip().removeprefix("W/") == wanted for part in header.split(","))


def normal_query(query_string: bytes) -> tuple[tuple[str, str], ...]:
    """A query as the routes read it: parameters ordered by name, the values of one name in the order given (a list
    parameter keeps its order: `cluster=b&cluster=a` is not `cluster=a&cluster=b`)."""
    items = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    return tuple(sorted(items, key=lambda item: item[0]))


def answer_key(path: str, query_string: bytes) -> AnswerKey:
    """The memo key of a GET's answer within one ScopedLake (which stands for the caller's scope and generation)."""
    return (ANSWER, path, normal_query(query_string))


@dataclass(frozen=True)
class Replay:
    """What it takes to ask a memoised question again in the next generation: the raw path and query, and a caller
    of the same scope."""

    raw_path: bytes
    query_string: bytes
    caller: object


@dataclass(frozen=True)
class Answer:
    """One encoded answer, ready to leave as identity, gzip or 304, with what its audit record says of it."""

    status: int
    body: bytes
    gzipped: bytes | None
    etag: str | None
    identity_headers: tuple[Header, ...]
    gzip_headers: tuple[Header, ...]
    not_modified_headers: tuple[Header, ...]
    clusters: tuple[str, ...] = ()
    params: Mapping[str, str] = field(default_factory=dict)

    def choose(self, if_none_match: str | None, accepts_gzip: bool) -> tuple[int, tuple[Header, ...], bytes]:
        """(status, headers, body) for a request's If-None-Match and Accept-Encoding."""
        if self.etag is not None and etag_matches(if_none_match, self.etag):
            return 304, self.not_modified_headers, b""
        if accepts_gzip and self.gzipped is not None:
            return self.status, self.gzip_headers, self.gzipped
        return self.status, self.identity_headers, self.body


def _compressible(content_type: bytes) -> bool:
    text = content_type.decode("latin-1").partition(";")[0].strip().lower()
    return not any(text.startswith(prefix) for prefix in NOT_COMPRESSED)


def encode(status: int, headers: Iterable[Header], body: bytes, *, tag: bool, clusters: Iterable[str] = (),
           params: Mapping[str, str] | None = None) -> Answer:
    """Encode an answer once: its ETag (`tag`: a 200 to a GET), gzip bytes and header lists."""
    kept: list[Header] = []
    vary = b""
    content_type = b""
    for name, value in headers:
        lowered = name.lower()
        if lowered in (b"content-length", b"etag", b"content-encoding"):
            continue
        if lowered == b"vary":
            vary = value if not vary else vary + b", " + value
            continue
        if lowered == b"content-type":
            content_type = value
        kept.append((lowered, value))
    etag = etag_of(body) if tag else None
    gzipped = None
    if len(body) >= GZIP_MIN_BYTES:
        vary = b"Accept-Encoding" if not vary else vary + b", Accept-Encoding"
        if _compressible(content_type):
            squeezed = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            gzipped = squeezed if len(squeezed) < len(body) else None
    common = kept + ([(b"vary", vary)] if vary else []) + ([(b"etag", etag.encode())] if etag else [])
    identity = (*common, (b"content-length", str(len(body)).encode()))
    zipped = identity if gzipped is None else (*common, (b"content-encoding", b"gzip"),
                                               (b"content-length", str(len(gzipped)).encode()))
    not_modified = tuple(h for h in common if h[0] != b"content-type")
    return Answer(status, body, gzipped, etag, identity, zipped, not_modified, tuple(clusters), dict(params or {}))
