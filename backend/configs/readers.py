"""Readers that turn each config source into raw items for validation.

Every reader returns ``RawItem``s: either raw JSON text (sink, topic) or a record dict built in
the KIP-1324 snapshot shape (Java logs, .properties), plus the source position.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.configs.known_keys import known_type
from backend.plain_text import file_label

_NAMESPACE = uuid.UUID("6f6c2b8e-6f5e-4b8a-9d0c-4b1f2f8b7c11")


@dataclass(frozen=True)
class RawItem:
    """One record from a source: raw JSON bytes/text, or an already-built record dict.

    ``oversize`` is the real byte length of a line too long to be read whole (``raw`` holds only its
    start); ``unparsed_lines`` counts lines inside a Java config block that were not ``key = value``;
    ``truncated`` marks a Java block cut off by the end of the file. ``position`` is UTF-8 text whatever the file's
    name (``backend.plain_text.file_label``); ``file`` is the file's real path relative to the source's root.
    """

    position: str
    raw: bytes | str | None = None
    record: dict[str, Any] | None = None
    oversize: int = 0
    unparsed_lines: int = 0
    truncated: bool = False
    file: str | None = None


FileProblems = dict[str, str]  # a file's name (UTF-8 text) -> why it was not read, or not read whole


def file_problem(exc: OSError) -> str:
    """Why a file could not be read, in words (no path: the caller names the file)."""
    if isinstance(exc, FileNotFoundError):
        return "vanished before it was read whole (deleted or rotated away); what was read is kept"
    return f"not readable ({type(exc).__name__}: {exc.strerror or exc})"


def _walk_files(root: Path, problems: FileProblems | None) -> list[Path]:
    """Every file under root, sorted; a directory that cannot be listed is a problem of its own, not a failure."""
    found: list[Path] = []

    def unlisted(exc: OSError) -> None:
        if problems is not None and exc.filename is not None and Path(os.fsdecode(exc.filename)) != root:
            problems[file_label(Path(os.fsdecode(exc.filename)).relative_to(root).as_posix())] = file_problem(exc)

    for folder, _dirs, names in os.walk(root, onerror=unlisted, followlinks=True):  # as Path.rglob did on 3.11
        found += [Path(folder) / name for name in names]
    return sorted(found)


# ---------------------------------------------------------------- PushConfig sink (JSONL)

SINK_SUFFIXES = (".jsonl", ".ndjson", ".json")


MAX_LINE_BYTES = 64 * 1024  # over MAX_RECORD_BYTES, so an over-long line is still quarantined as too_large


def _skip_line(src: Any, chunk: int = 1 << 16) -> tuple[int, bool]:
    """Read past the rest of the current line in bounded chunks: (bytes skipped incl. newline, newline found)."""
    skipped = 0
    while True:
        part = src.readline(chunk)
        skipped += len(part)
        if part.endswith(b"\n"):
            return skipped, True
        if len(part) < chunk:
            return skipped, False


def read_sink(sink_dir: str | Path, state: dict[str, Any], max_line_bytes: int = MAX_LINE_BYTES,
              problems: FileProblems | None = None) -> tuple[list[RawItem], dict[str, Any]]:
    """Read complete new lines from every sink file, line by line; a partial last line waits for next time.

    A line longer than ``max_line_bytes`` is never held whole: its first bytes and its real size become
    an item that is quarantined as too_large, with its position.

    ``state`` maps a file's path relative to ``sink_dir`` to ``{"offset": bytes, "line": n}``;
    the returned state is to be saved only after the items are safely in the lake. A file that vanishes or cannot
    be read is named in ``problems`` with the reason; its lines read before that are kept, and the other files are
    read as usual.
    """
    root = Path(sink_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"sink directory {root} does not exist")
    new_state = {k: dict(v) for k, v in state.items()}
    items: list[RawItem] = []
    for path in _walk_files(root, problems):
        rel = path.relative_to(root).as_posix()
        if path.name.startswith(".") or not path.name.endswith(SINK_SUFFIXES):
            continue
        label = file_label(rel)
        progress = new_state.get(rel, {"offset": 0, "line": 0})
        offset, line_no = progress["offset"], progress["line"]
        try:
            info = path.stat()  # follows a link; raises when the file vanished since the listing
            if not stat.S_ISREG(info.st_mode):
                continue
            if info.st_size < offset:  # truncated or replaced: start again
                offset, line_no = 0, 0
            with path.open("rb") as src:
                src.seek(offset)
                while True:
                    line = src.readline(max_line_bytes + 1)  # bounded: a 100 MiB line is never held whole
                    if not line.endswith(b"\n"):
                        if len(line) <= max_line_bytes:
                            break  # a partial last line waits for the writer to finish it
                        skipped, complete = _skip_line(src)
                        if not complete:
                            break  # the over-long line is still being written: read it whole next time
                        line_no += 1
                        items.append(RawItem(position=f"{label}:{line_no}", raw=line[:4096],
                                             oversize=len(line) + skipped - 1, file=rel))
                        offset = src.tell()
                        continue
                    line_no += 1
                    offset += len(line)
                    if line.strip():
                        items.append(RawItem(position=f"{label}:{line_no}", raw=line.rstrip(b"\r\n"), file=rel))
        except OSError as exc:
            if problems is not None:
                problems[label] = file_problem(exc)
        new_state[rel] = {"offset": offset, "line": line_no}
    return items, new_state


# ---------------------------------------------------------------- Kafka topic


def topic_state_name(topic: str, bootstrap: str) -> str:
    """File name for a topic's saved offsets (one per topic and bootstrap list)."""
    digest = hashlib.sha256(f"{bootstrap}|{topic}".encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", topic)
    return f"topic-{safe}-{digest}"


def read_topic(
    topic: str,
    bootstrap: str,
    state: dict[str, Any],
    timeout_s: float = 10.0,
    extra_config: dict[str, Any] | None = None,
    max_messages: int = 1_000_000,
) -> tuple[list[RawItem], dict[str, Any]]:
    """Read a topic from saved offsets to the high watermark with assign(); never commits.

    ``state`` is ``{"<partition>": next_offset}``. Raises TimeoutError / RuntimeError when the
    cluster cannot be reached or the topic does not exist.
    """
    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        # confluent-kafka insists on a group.id, but with assign() and no commits the group is
        # never joined and no offsets are stored on the cluster.
        "group.id": "fleetview-ingest-noncommitting",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "socket.timeout.ms": int(timeout_s * 1000),
        "session.timeout.ms": 6000,
        "enable.partition.eof": True,
        "log_level": 3,
        **(extra_config or {}),
    }
    consumer = Consumer(conf)
    items: list[RawItem] = []
    new_state = dict(state)
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s)
        except KafkaException as err:
            raise TimeoutError(f"cannot reach {bootstrap}: {err}") from None
        tmeta = meta.topics.get(topic)
        if tmeta is None or tmeta.error is not None or not tmeta.partitions:
            reason = tmeta.error if tmeta is not None else "not found"
            raise RuntimeError(f"topic {topic!r} unavailable on {bootstrap}: {reason}")
        remaining: dict[int, int] = {}
        assignment = []
        for partition in sorted(tmeta.partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s)
            start = int(state.get(str(partition), low))
            start = max(start, low)
            new_state[str(partition)] = start
            if start < high:
                remaining[partition] = high
                assignment.append(TopicPartition(topic, partition, start if start else OFFSET_BEGINNING))
        if not assignment:
            return items, new_state
        consumer.assign(assignment)
        # The timeout bounds the wait for the next message, not the whole (possibly long) read.
        deadline = time.monotonic() + timeout_s
        while remaining and len(items) < max_messages:
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out reading {topic}: no progress for {timeout_s}s")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            partition, offset = msg.partition(), msg.offset()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and partition is not None:
                    remaining.pop(partition, None)
                    continue
                raise RuntimeError(f"error reading {topic}: {error}")
            if partition is None or offset is None or partition not in remaining:
                continue
            deadline = time.monotonic() + timeout_s
            items.append(RawItem(position=f"{topic}:{partition}:{offset}", raw=msg.value() or b""))
            new_state[str(partition)] = offset + 1
            if offset + 1 >= remaining[partition]:
                remaining.pop(partition)
    finally:
        consumer.close()
    return items, new_state


# ---------------------------------------------------------------- Java client startup logs

_BLOCK_START = re.compile(
    r"(?P<kind>ProducerConfig|ConsumerConfig|ShareConsumerConfig|AdminClientConfig|StreamsConfig)"
    r" values:\s*$"
)
_BLOCK_LINE = re.compile(r"^\s+(?P<key>[A-Za-z0-9_.\-]+) = (?P<value>.*?)\s*$")
_TIMESTAMP = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2}:\d{2})(?:[,.](?P<frac>\d{1,6}))?"
    r"(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
_THREAD = re.compile(r"\[(?P<thread>[^\]]*[A-Za-z][^\]]*)\]")
_VERSION = re.compile(r"Kafka version: (?P<version>\S+)")  # AppInfoParser, after each client's block
# KafkaStreams, after its StreamsConfig block; 3.x builds its admin client (another block) first.
_STREAMS_VERSION = re.compile(r"Kafka Streams version: (?P<version>\S+)")
_KIND_TO_TYPE = {
    "ProducerConfig": "producer",
    "ConsumerConfig": "consumer",
    "ShareConsumerConfig": "share_consumer",
    "AdminClientConfig": "admin",
    "StreamsConfig": "streams",
}
JAVA_SOFTWARE_NAME = "apache-kafka-java"


def _log_time(line: str, fallback: datetime) -> datetime:
    match = _TIMESTAMP.search(line)
    if match is None:
        return fallback
    frac = (match.group("frac") or "0").ljust(6, "0")
    stamp = datetime.fromisoformat(f"{match.group('date')}T{match.group('time')}.{frac}")
    tz = match.group("tz")
    if tz and tz != "Z":
        stamp = datetime.fromisoformat(stamp.isoformat() + (tz if ":" in tz else f"{tz[:3]}:{tz[3:]}"))
        return stamp.astimezone(UTC)
    return stamp.replace(tzinfo=UTC)  # log times without a zone are taken as UTC


def _log_thread(line: str) -> str | None:
    before = line.split("values:")[0] if "values:" in line else line
    for match in _THREAD.finditer(before):
        if not _TIMESTAMP.fullmatch(match.group("thread").strip()):
            return match.group("thread").strip()
    return None


def _java_value(raw: str, declared: str | None) -> tuple[str | None, str]:
    """Convert a value as Java's ConfigDef prints it into (value, type)."""
    if raw == "[hidden]":
        return "[hidden]", "PASSWORD"
    if raw.startswith("class "):
        return raw[len("class "):], "CLASS"
    typ = declared or "STRING"
    if raw == "null":
        return None, typ
    if raw.startswith("[") and raw.endswith("]"):
        inner = raw[1:-1].strip()
        return ",".join(part.strip() for part in inner.split(",")) if inner else "", "LIST"
    return raw, typ


def parse_java_log(path: str | Path, cluster_id: str | None = None) -> list[RawItem]:
    """Find every `XConfig values:` block in a Java client log and build one record per block.

    The log gives no client instance id or cluster: the instance id is derived from the file
    and block position (stable across re-ingests), the cluster is ``cluster_id`` or
    ``bootstrap:<bootstrap.servers>``. Values printed by Java carry no is-default flag, so
    is_default is false.
    """
    file = Path(path)
    fallback = datetime.fromtimestamp(file.stat().st_mtime, UTC)
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    blocks: list[tuple[int, str, str | None, datetime, list[tuple[str, str]], int, bool]] = []
    i = 0
    while i < len(lines):
        match = _BLOCK_START.search(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        entries, unparsed, ended = [], 0, False
        i += 1
        while i < len(lines):
            line = lines[i]
            if m := _BLOCK_LINE.match(line):
                entries.append((m.group("key"), m.group("value")))
                i += 1
            elif not line.strip() or _BLOCK_START.search(line) or not _block_goes_on(lines, i + 1):
                ended = True  # ConfigDef ends a block with a blank line; a new block or the log going on ends it too
                break
            else:
                unparsed += 1  # a stray line (another thread, a wrapped value) with the block going on after it
                i += 1
        blocks.append((start, match.group("kind"), _log_thread(lines[start]),
                       _log_time(lines[start], fallback), entries, unparsed, not ended))
    items = []
    for start, kind, thread, stamp, entries, unparsed, truncated in blocks:
        version = _find_version(lines, start, thread, streams=kind == "StreamsConfig")
        # The header names the client (a 4.1+ consumer logs share.* keys too): never inferred from keys.
        client_type = _KIND_TO_TYPE[kind]
        configs = []
        for key, raw in entries:
            value, typ = _java_value(raw, known_type(key, client_type))
            configs.append({"key": key, "value": value, "type": typ, "is_default": False})
        values = {c["key"]: c["value"] for c in configs}
        bootstrap = values.get("bootstrap.servers") or values.get("application.server") or "unknown"
        seed = f"{file_label(file.resolve())}:{start + 1}:{values.get('client.id')}"
        record = {
            "snapshot_id": str(uuid.uuid5(_NAMESPACE, "snapshot:" + seed)),
            "received_at": stamp.isoformat(),
            "cluster_id": cluster_id or f"bootstrap:{bootstrap}",
            "broker_id": -1,
            "client_instance_id": str(uuid.uuid5(_NAMESPACE, "instance:" + seed)),
            "client_id": values.get("client.id") or None,
            "client_type": client_type,
            "client_software_name": JAVA_SOFTWARE_NAME,
            "client_software_version": version,
            "principal": None,
            "client_address": None,
            "configs": configs,
        }
        items.append(RawItem(position=f"{file_label(file.name)}:{start + 1}", record=record, unparsed_lines=unparsed,
                             truncated=truncated, file=str(file)))
    return items


def _block_goes_on(lines: list[str], at: int, look: int = 3) -> bool:
    """Whether a `key = value` line of the block follows within ``look`` lines (else the block has ended)."""
    for line in lines[at:at + look]:
        if _BLOCK_LINE.match(line):
            return True
        if not line.strip() or _BLOCK_START.search(line):
            return False
    return False


def _find_version(lines: list[str], start: int, thread: str | None, streams: bool = False) -> str | None:
    """The `Kafka version:` AppInfoParser prints after the block, before the next block of the same thread.

    Without thread names (Kafka's own log4j pattern has none) the next block of any thread ends the search:
    a client that refused its config after logging it never prints a version, and must not take the next
    client's. A StreamsConfig block takes the `Kafka Streams version:` KafkaStreams prints, which may come
    after the blocks of the Streams app's own clients (up to the next StreamsConfig block).
    """
    pattern = _STREAMS_VERSION if streams else _VERSION
    first: str | None = None
    for line in lines[start + 1: start + 1000 if streams else start + 400]:
        block = _BLOCK_START.search(line)
        if block and (thread is None or _log_thread(line) == thread) and (
                not streams or block.group("kind") == "StreamsConfig"):
            break
        match = pattern.search(line)
        if match is None:
            continue
        if thread is None or _log_thread(line) == thread:
            return match.group("version")
        first = first or match.group("version")
    return first


# ---------------------------------------------------------------- .properties files

_HEADER = re.compile(r"^[#!]\s*(?P<name>cluster|client\.id|client\.type)\s*:\s*(?P<value>\S.*?)\s*$")


def _properties(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """Parse Java .properties text into (properties, header comments)."""
    props: dict[str, str] = {}
    headers: dict[str, str] = {}
    logical = ""
    for raw_line in text.splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            header = _HEADER.match(line)
            if header:
                headers[header.group("name")] = header.group("value")
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        match = re.match(r"^((?:[^=:\s\\]|\\.)+)\s*[=:\s]\s*(.*)$", logical)
        if match:
            props[match.group(1).replace("\\", "")] = match.group(2)
        elif logical:
            props[logical] = ""
        logical = ""
    return props, headers


def read_properties_dir(root: str | Path, problems: FileProblems | None = None) -> list[RawItem]:
    """Build one record per ``<root>/<cluster>/<client>.properties`` file (headers override).

    A file that vanishes or cannot be read is named in ``problems`` with the reason; the others are read as usual.
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"properties directory {base} does not exist")
    items = []
    for path in _walk_files(base, problems):
        if not path.name.endswith(".properties"):
            continue
        rel = path.relative_to(base)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            stamp = datetime.fromtimestamp(os.stat(path).st_mtime, UTC)
        except OSError as exc:
            if problems is not None:
                problems[file_label(rel.as_posix())] = file_problem(exc)
            continue
        props, headers = _properties(text)
        # Ids taken from the path are text whatever the file system holds (a non-UTF-8 byte as \xff).
        cluster = headers.get("cluster") or (file_label(rel.parts[0]) if len(rel.parts) > 1 else None)
        client_id = headers.get("client.id") or props.get("client.id") or file_label(path.stem)
        client_type = headers.get("client.type")
        configs = []
        for key, value in props.items():
            typ = known_type(key, client_type) or "STRING"
            if typ == "LIST":
                value = ",".join(v.strip() for v in value.split(","))
            configs.append({"key": key, "value": value, "type": typ, "is_default": False})
        where = file_label(path.resolve())
        seed = f"{where}:{stamp.isoformat()}"
        record = {
            "snapshot_id": str(uuid.uuid5(_NAMESPACE, "snapshot:" + seed)),
            "received_at": stamp.isoformat(),
            "cluster_id": cluster,
            "broker_id": -1,
            "client_instance_id": str(uuid.uuid5(_NAMESPACE, f"instance:{where}")),
            "client_id": client_id,
            "client_type": client_type,
            "client_software_name": None,
            "client_software_version": None,
            "principal": None,
            "client_address": None,
            "configs": configs,
        }
        items.append(RawItem(position=f"{file_label(rel.as_posix())}:1", record=record, file=rel.as_posix()))
    return items
