"""What the last analysis says about a cluster's clients, as the client policies read it (results tables).

From `results/distributions` (instances per client type, key and normalised value, and how many reported the key)
and `results/client_versions` (instances per client type and software); keyed by cluster id like every result.
`ClientResults` reads them again only when their files changed, at most once a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import pyarrow.fs as pafs

from backend.store.location import parse_lake
from backend.store.tables import read_table

READ_EVERY_S = 60.0
TABLES = ("distributions", "client_versions")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClientFacts:
    """One cluster id's client instances as the last analysis counted them."""

    computed_at: datetime | None
    types: Mapping[str, int] = field(default_factory=dict)  # client type -> instances
    values: Mapping[tuple[str, str], Mapping[str | None, int]] = field(default_factory=dict)  # (type, key) -> value -> n
    reporting: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (type, key) -> instances reporting it
    software: Mapping[tuple[str, str | None, str | None], int] = field(default_factory=dict)  # (type, name, ver) -> n


def facts_from_tables(distributions: Mapping[str, list[object]], versions: Mapping[str, list[object]]
                      ) -> dict[str, ClientFacts]:
    """ClientFacts per cluster id from the columns of the two results tables (pure)."""
    types: dict[str, dict[str, int]] = {}
    software: dict[str, dict[tuple[str, str | None, str | None], int]] = {}
    stamps: dict[str, datetime] = {}
    for cid, ctype, name, version, n, at in zip(*(versions[c] for c in (
            "cluster_id", "client_type", "client_software_name", "client_software_version", "instances",
            "computed_at")), strict=True):
        t = str(ctype or "unknown")
        per = types.setdefault(str(cid), {})
        per[t] = per.get(t, 0) + int(n)  # type: ignore[call-overload]
        key = (t, None if name is None else str(name), None if version is None else str(version))
        sw = software.setdefault(str(cid), {})
        sw[key] = sw.get(key, 0) + int(n)  # type: ignore[call-overload]
        if isinstance(at, datetime):
            stamps[str(cid)] = max(stamps.get(str(cid), at), at)
    values: dict[str, dict[tuple[str, str], dict[str | None, int]]] = {}
    reporting: dict[str, dict[tuple[str, str], int]] = {}
    for cid, ctype, key, value, n, total, at in zip(*(distributions[c] for c in (
            "cluster_id", "client_type", "key", "value", "instance_count", "total_instances", "computed_at")),
            strict=True):
        t = str(ctype or "unknown")
        per_key = values.setdefault(str(cid), {}).setdefault((t, str(key)), {})
        shown = None if value is None else str(value)
        per_key[shown] = per_key.get(shown, 0) + int(n)  # type: ignore[call-overload]
        reporting.setdefault(str(cid), {})[(t, str(key))] = int(total)  # type: ignore[call-overload]
        if isinstance(at, datetime):
            stamps[str(cid)] = max(stamps.get(str(cid), at), at)
    ids = set(types) | set(values)
    return {cid: ClientFacts(stamps.get(cid), types.get(cid, {}), values.get(cid, {}), reporting.get(cid, {}),
                             software.get(cid, {})) for cid in ids}


class ClientResults:
    """The client facts of one lake, read again when the results changed (at most once a minute)."""

    def __init__(self, lake: str, *, every_s: float = READ_EVERY_S) -> None:
        """Read the results of this lake."""
        self.lake = lake
        self.every_s = every_s
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._stamp: tuple[tuple[str, int], ...] | None = None
        self._facts: dict[str, ClientFacts] | None = None  # None: no results in the lake

    def _files(self) -> tuple[tuple[str, int], ...]:
        where = parse_lake(self.lake)
        out = []
        for name in TABLES:
            infos = where.fs.get_file_info(pafs.FileSelector(where.path("results", name), allow_not_found=True))
            out += [(i.path, int(i.mtime_ns or 0)) for i in infos if i.type == pafs.FileType.File]
        return tuple(sorted(out))

    def refresh(self) -> dict[str, ClientFacts] | None:
        """Every cluster id's facts (the same object while the results are unchanged); None without results."""
        with self._lock:
            if time.monotonic() - self._read_at >= self.every_s:
                self._read_at = time.monotonic()
                try:
                    stamp = self._files()
                    if stamp != self._stamp:
                        self._facts = self._load() if stamp else None
                        self._stamp = stamp
                except Exception as exc:  # noqa: BLE001 - unreadable results make client policies unknown, no more
                    log.warning("client results of %s not readable: %s", self.lake, exc)
            return self._facts

    def _load(self) -> dict[str, ClientFacts]:
        dist = read_table(self.lake, "results/distributions")
        versions = read_table(self.lake, "results/client_versions")
        return facts_from_tables({c: dist.column(c).to_pylist() for c in dist.column_names},
                                 {c: versions.column(c).to_pylist() for c in versions.column_names})


def read_client_facts(lake: str) -> dict[str, ClientFacts] | None:
    """The client facts of a lake now (None: no results yet)."""
    return ClientResults(lake, every_s=0.0).refresh()
