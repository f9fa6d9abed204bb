"""What the last analysis says about a cluster's clients, as the client policies read it (results tables).

From `results/distributions` (instances per client type, key and normalised value, and how many reported the key)
and `results/client_versions` (instances per client type and software); keyed by cluster id like every result.
`results/client_instances` adds every instance (who it is, and its values of the keys the client-config policies
name): the policies judge each instance from it, so they name the instances behind a finding. `ClientResults` reads
them again only when their files changed, at most once a minute.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from backend.store.config_schemas import WATCHED_KEYS_META
from backend.store.location import parse_lake
from backend.store.standards_model import ClientInstance
from backend.store.tables import read_table

READ_EVERY_S = 60.0
TABLES = ("distributions", "client_versions", "client_instances")
log = logging.getLogger(__name__)


class InstanceFacts:
    """One cluster id's client instances as the last analysis saw them (results/client_instances): the rows ordered
    by client.id then instance id (the order instances are named in), each one's values of the watched keys."""

    __slots__ = ("_software", "_types", "_values", "computed_at", "table", "watched")

    def __init__(self, table: pa.Table, watched: frozenset[str], computed_at: datetime | None) -> None:
        """Keep the cluster's rows (sorted here) and the keys its ``configs`` column covers."""
        self.table = table.sort_by([("client_id", "ascending"), ("client_instance_id", "ascending")],
                                   null_placement="at_end") if table.num_rows else table
        self.watched = watched
        self.computed_at = computed_at
        self._types: list[str] | None = None
        self._software: list[tuple[str | None, str | None]] | None = None
        self._values: dict[str, dict[int, str | None]] = {}

    def __len__(self) -> int:
        return self.table.num_rows

    def types(self) -> list[str]:
        """Each row's client type ('unknown' when it has none, as the counts say)."""
        if self._types is None:
            self._types = [str(t or "unknown") for t in self.table.column("client_type").to_pylist()]
        return self._types

    def software(self) -> list[tuple[str | None, str | None]]:
        """Each row's (software name, version)."""
        if self._software is None:
            self._software = list(zip(self.table.column("client_software_name").to_pylist(),
                                      self.table.column("client_software_version").to_pylist(), strict=True))
        return self._software

    def values(self, key: str) -> dict[int, str | None]:
        """Row -> normalised value of ``key`` for the rows that report it (None: reported without a value)."""
        found = self._values.get(key)
        if found is None:
            lists = self.table.column("configs").combine_chunks()
            flat = pc.list_flatten(lists)
            mask = pc.fill_null(pc.equal(flat.field("key"), key), False)
            rows = pc.filter(pc.list_parent_indices(lists), mask).to_pylist()
            found = dict(zip(rows, pc.filter(flat.field("value"), mask).to_pylist(), strict=True))
            self._values[key] = found
        return found

    def instances(self, rows: list[int]) -> list[ClientInstance]:
        """The rows as ClientInstances (one take, however many)."""
        if not rows:
            return []
        picked = self.table.take(pa.array(rows, pa.int64())).select(
            ["client_instance_id", "client_type", "client_id", "group_id", "client_software_name",
             "client_software_version", "principal", "client_address", "last_seen"]).to_pylist()
        return [ClientInstance(instance_id=str(r["client_instance_id"]), client_type=r["client_type"],
                               client_id=r["client_id"], group_id=r["group_id"], software_name=r["client_software_name"],
                               software_version=r["client_software_version"], principal=r["principal"],
                               client_address=r["client_address"], last_seen=r["last_seen"]) for r in picked]


def watched_keys_of(table: pa.Table) -> frozenset[str] | None:
    """The keys a results/client_instances table covers (its file's metadata); None when it does not say."""
    meta = table.schema.metadata or {}
    raw = meta.get(WATCHED_KEYS_META)
    if raw is None:
        return None
    try:
        keys = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return frozenset(str(k) for k in keys) if isinstance(keys, list) else None


def split_instances(table: pa.Table) -> dict[str, InstanceFacts]:
    """results/client_instances per cluster id (a table without its watched keys covers none of them)."""
    if table.num_rows == 0:
        return {}
    watched = watched_keys_of(table) or frozenset()
    ordered = table.sort_by([("cluster_id", "ascending")])
    ids = ordered.column("cluster_id").to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    stamps = ordered.column("computed_at").to_pylist()
    return {str(ids[a]): InstanceFacts(ordered.slice(int(a), int(b - a)), watched, stamps[int(a)])
            for a, b in zip(starts, ends, strict=True)}


@dataclass(frozen=True)
class ClientFacts:
    """One cluster id's client instances as the last analysis counted them."""

    computed_at: datetime | None
    types: Mapping[str, int] = field(default_factory=dict)  # client type -> instances
    values: Mapping[tuple[str, str], Mapping[str | None, int]] = field(default_factory=dict)  # (type, key) -> value -> n
    reporting: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (type, key) -> instances reporting it
    software: Mapping[tuple[str, str | None, str | None], int] = field(default_factory=dict)  # (type, name, ver) -> n
    instances: InstanceFacts | None = field(default=None, compare=False)  # None: no per-instance results (yet)


def facts_from_tables(distributions: Mapping[str, list[object]], versions: Mapping[str, list[object]],
                      instances: pa.Table | None = None) -> dict[str, ClientFacts]:
    """ClientFacts per cluster id from the columns of the two results tables and results/client_instances (pure)."""
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
    per_cluster = split_instances(instances) if instances is not None else {}
    ids = set(types) | set(values) | set(per_cluster)
    return {cid: ClientFacts(stamps.get(cid), types.get(cid, {}), values.get(cid, {}), reporting.get(cid, {}),
                             software.get(cid, {}), per_cluster.get(cid)) for cid in ids}


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
        instances = read_table(self.lake, "results/client_instances")
        return facts_from_tables({c: dist.column(c).to_pylist() for c in dist.column_names},
                                 {c: versions.column(c).to_pylist() for c in versions.column_names},
                                 instances if watched_keys_of(instances) is not None else None)


def read_client_facts(lake: str) -> dict[str, ClientFacts] | None:
    """The client facts of a lake now (None: no results yet)."""
    return ClientResults(lake, every_s=0.0).refresh()
