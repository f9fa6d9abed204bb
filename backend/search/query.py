"""Queries over the in-memory index: substring (default), prefix or regular expression, case-insensitive, ranked.

Ranking: exact match first, then prefix, then substring (a regular expression that matches the whole value counts as
exact); current before deleted; then by kind (topic, group, client, broker, cluster, config), by the field that matched
(a name before an id), shorter values first. One hit per entity, with the best field it matched on.

Regular expressions run on RE2 (Arrow's regex kernels): no backreferences or lookaround, so matching time is linear
in the text and no pattern backtracks for ever. The scan is cut into slices and stopped at a time limit all the same
(a very large fleet times a costly pattern), with a clear refusal instead of a hang.

Visibility comes in as the cluster names (and, for client instances, which are keyed by cluster id, the cluster ids)
the caller may see: other clusters' rows are not matched, counted or returned.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backend.plain_text import capped
from backend.search.reader import IndexSnapshot, LoadedTable
from backend.search.tables import DELETED, KIND_ORDER, KINDS, TABLES, Table

MODES: tuple[str, ...] = ("substring", "prefix", "regex")
MAX_QUERY_CHARS = 40_000  # a whole group id (Kafka bounds them at 32,767) may be pasted
MAX_REGEX_CHARS = 1_000
REGEX_TIME_LIMIT_S = 5.0
REGEX_SLICE_ROWS = 32_768
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
DETAIL_CHARS = 200
_NO_MATCH = 255
MIN_ID_SUBSTRING = 4  # characters of a topic or instance id a query needs before ids are looked up
MIN_ID_PREFIX = 3
_MAX_LEN = (1 << 12) - 1  # values longer than this rank as equally long


class QueryRefused(ValueError):
    """A query the search will not run (bad mode or kind, too long, not a usable pattern, past its time limit)."""


@dataclass(frozen=True)
class SearchHit:
    """One entity found: what it is, where, why it matched, and where to look at it.

    ``field`` names the matching field (name, topic_id, group_id, client_id, client_instance_id, principal, software,
    broker_id, host, rack, cluster_id, tag, key, value); ``value`` is that field's value; ``match`` is exact, prefix,
    substring or regex; ``state`` current or deleted (``deleted_at`` then says when); ``id`` the entity's id where it
    has one (topic id, client instance id, cluster id); ``source`` the index table (topic, group, member, software,
    instance, broker, cluster, config); ``link`` the relative URL of its detail page (set by the views).
    """

    kind: str
    cluster: str
    name: str
    field: str
    value: str
    match: str
    state: str
    cluster_id: str | None = None
    id: str | None = None
    detail: str | None = None
    group: str | None = None
    resource: str | None = None
    deleted_at: datetime | None = None
    source: str = ""
    link: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready values (times in ISO 8601)."""
        out = asdict(self)
        out["deleted_at"] = self.deleted_at.isoformat() if self.deleted_at else None
        return out


@dataclass(frozen=True)
class SearchResult:
    """The hits of one query (the best `limit`), how many matched in all and per kind, over how many clusters."""

    query: str
    mode: str
    kinds: tuple[str, ...]
    hits: tuple[SearchHit, ...]
    total: int
    counts: Mapping[str, int] = field(default_factory=dict)
    clusters: int = 0
    truncated: bool = False
    notes: tuple[str, ...] = ()
    elapsed_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""
        return {"query": self.query, "mode": self.mode, "kinds": list(self.kinds), "total": self.total,
                "counts": dict(self.counts), "clusters": self.clusters, "truncated": self.truncated,
                "notes": list(self.notes), "hits": [h.to_dict() for h in self.hits]}


@dataclass(frozen=True)
class Visibility:
    """What the caller may see: cluster names (None: every cluster) and the cluster ids those clusters report (None:
    taken from the index's cluster rows). Rows keyed by cluster id (client instances) are visible when their id is."""

    names: frozenset[str] | None = None
    ids: frozenset[str] | None = None


@dataclass(frozen=True)
class _Ids:
    """Per cluster id: the visible clusters that report it and the name it is shown under; the ids one may see."""

    owners: Mapping[str, tuple[str, ...]]
    shown: Mapping[str, str]
    allowed: frozenset[str] | None


def _ids(snapshot: IndexSnapshot, visible: Visibility) -> _Ids:
    owners: dict[str, tuple[str, ...]] = {}
    shown: dict[str, str] = {}
    for cid, names in snapshot.cluster_ids().items():
        seen = tuple(sorted(n for n in names if visible.names is None or n in visible.names))
        if seen:
            owners[cid] = seen
            shown[cid] = seen[0] if len(seen) == 1 else " / ".join(seen) + " (same cluster id)"
    if visible.names is None:
        return _Ids(owners, shown, None)
    return _Ids(owners, shown, visible.ids if visible.ids is not None else frozenset(owners))


def check_query(text: str, mode: str, kinds: Collection[str] | None) -> None:
    """Refuse what the search cannot run (raises QueryRefused with the reason)."""
    if mode not in MODES:
        raise QueryRefused(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    unknown = sorted(set(kinds or ()) - set(KINDS))
    if unknown:
        raise QueryRefused(f"unknown kind {unknown[0]!r}: use one of {', '.join(KINDS)}")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryRefused(f"the query is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,} are searched")
    if mode == "regex":
        if len(text) > MAX_REGEX_CHARS:
            raise QueryRefused(f"the regular expression is {len(text):,} characters long; at most {MAX_REGEX_CHARS:,}")
        try:
            pc.match_substring_regex(pa.array([""], pa.string()), text, ignore_case=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            reason = str(exc).replace("Invalid regular expression: ", "")
            raise QueryRefused(f"not a usable regular expression ({reason}); the search uses RE2 syntax: no "
                               "backreferences or lookaround, so no pattern can run for ever") from None


def _numpy(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
    return np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)


_monotonic = time.monotonic  # the regex budget's clock (a seam for tests)


class _Clock:
    """The regex time budget of one query, shared by every column it scans."""

    def __init__(self, limit_s: float, total: int) -> None:
        self.deadline = _monotonic() + limit_s
        self.limit_s = limit_s
        self.total = total
        self.done = 0

    def check(self) -> None:
        if _monotonic() > self.deadline:
            raise QueryRefused(
                f"the regular expression ran past its time limit of {self.limit_s:g} s after {self.done:,} of "
                f"{self.total:,} values and was stopped; make it more specific (anchor it with ^, use a literal "
                "prefix) or search fewer kinds")


def _regex(values: pa.Array, pattern: str, clock: _Clock) -> np.ndarray:
    out = np.zeros(len(values), dtype=bool)
    for start in range(0, len(values), REGEX_SLICE_ROWS):
        clock.check()
        piece = values.slice(start, REGEX_SLICE_ROWS)
        out[start:start + len(piece)] = _numpy(pc.match_substring_regex(piece, pattern, ignore_case=True))
        clock.done += len(piece)
    clock.check()
    return out


def _allowed(table: LoadedTable, visible: Visibility, clusters: frozenset[str] | None, include_deleted: bool,
             oldest_us: int, ids: _Ids) -> np.ndarray:
    spec = TABLES[table.name]
    if spec.by_cluster_id:
        ok = [(ids.allowed is None or cid in ids.allowed)
              and (clusters is None or any(n in clusters for n in ids.owners.get(str(cid), ())))
              for cid in table.segments]
    else:
        ok = [(visible.names is None or name in visible.names) and (clusters is None or name in clusters)
              for name in table.segments]
    lookup = np.array([*ok, False], dtype=bool)  # a code of -1 (no segment) reads the last entry
    mask = lookup[table.codes] & table.alive
    if not include_deleted:
        mask &= ~table.deleted
    else:
        mask &= ~(table.deleted & (table.at_us < oldest_us))
    return mask


def _ranks(values: pa.Array, needle: str, mode: str, clock: _Clock | None) -> np.ndarray:
    """Per value: 0 exact, 1 prefix, 2 substring, 3 a regex match of part of it, 255 no match."""
    if mode == "regex":
        assert clock is not None
        hit = _regex(values, needle, clock)
        rank = np.full(len(values), _NO_MATCH, dtype=np.uint8)
        if hit.any():
            idx = np.flatnonzero(hit)
            whole = _numpy(pc.match_substring_regex(values.take(pa.array(idx)), f"^(?:{needle})$", ignore_case=True))
            rank[idx] = np.where(whole, 0, 3)
        return rank
    hit = _numpy(pc.starts_with(values, needle) if mode == "prefix" else pc.match_substring(values, needle))
    if not hit.any():
        return np.full(len(values), _NO_MATCH, dtype=np.uint8)
    prefix = hit if mode == "prefix" else _numpy(pc.starts_with(values, needle))
    exact = _numpy(pc.equal(values, needle))
    return np.where(exact, 0, np.where(prefix, 1, np.where(hit, 2, _NO_MATCH))).astype(np.uint8)


def _lengths(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.utf8_length(values), 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _match_table(table: LoadedTable, needle: str, mode: str, allowed: np.ndarray, clock: _Clock | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per row the best (rank * 16 + field index) it matched with (255: no match), and that field's length.

    Each column is matched piece by piece: a dictionary piece's distinct values once, mapped to its rows by index;
    a piece where nothing matched costs no work per row."""
    spec: Table = TABLES[table.name]
    best = np.full(table.num_rows, _NO_MATCH, dtype=np.uint8)
    best_len = np.zeros(table.num_rows, dtype=np.int64)
    chars = set(needle)
    for fi, f in enumerate(spec.fields):
        if mode != "regex" and f.chars is not None and not chars <= f.chars:
            continue
        if f.unique and len(needle) < (MIN_ID_PREFIX if mode == "prefix" else MIN_ID_SUBSTRING):
            continue  # a few characters of a random id match by chance: ids are looked up by a real beginning
        offset = 0
        for piece in table.columns[f.column]:
            size = piece.rows
            part = slice(offset, offset + size)
            offset += size
            if piece.sorted is not None and piece.order is not None and mode != "regex":
                _update_ids(piece, needle, fi, allowed[part], best[part], best_len[part])
                continue
            rank = _ranks(piece.values, needle, mode, clock)
            if not (rank != _NO_MATCH).any():
                continue
            lengths = _lengths(piece.values)
            if piece.indices is None:
                rows_rank, rows_len = rank, lengths
            else:  # index -1 (a null) reads the appended "no match"
                rows_rank = np.append(rank, np.uint8(_NO_MATCH))[piece.indices]
                rows_len = np.append(lengths, 0)[piece.indices]
            code = rows_rank.astype(np.uint16) * 16 + fi
            better = (rows_rank != _NO_MATCH) & allowed[part] & (code < best[part])
            if better.any():
                best[part][better] = code[better]
                best_len[part][better] = rows_len[better]
    return best, best_len


def _bisect(values: pa.Array, needle: str) -> int:
    """The first position of sorted values (nulls last) not below the needle."""
    lo, hi = 0, len(values) - values.null_count
    while lo < hi:
        mid = (lo + hi) // 2
        if str(values[mid].as_py()) < needle:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _update_ids(piece: Any, needle: str, fi: int, allowed: np.ndarray, best: np.ndarray, best_len: np.ndarray) -> None:
    """Ids that start with the needle (an id is looked up by its beginning: binary search in the sorted ids)."""
    lo, hi = _bisect(piece.sorted, needle), _bisect(piece.sorted, needle + "\U0010ffff")
    if lo >= hi:
        return
    rows = piece.order[lo:hi]
    values = piece.sorted.slice(lo, hi - lo)
    exact = _numpy(pc.equal(values, needle))
    code = np.where(exact, 0, 1).astype(np.uint16) * 16 + fi
    keep = allowed[rows] & (code < best[rows])
    best[rows[keep]] = code[keep]
    best_len[rows[keep]] = _lengths(values)[keep]


MATCH_NAMES = {0: "exact", 1: "prefix", 2: "substring", 3: "regex"}


def search(snapshot: IndexSnapshot, text: str, *, mode: str = "substring", kinds: Collection[str] | None = None,
           clusters: Collection[str] | None = None, include_deleted: bool = True, limit: int = DEFAULT_LIMIT,
           visible: Visibility | None = None, now: datetime | None = None,
           time_limit_s: float = REGEX_TIME_LIMIT_S) -> SearchResult:
    """Run one query over the index (raises QueryRefused for one it will not run)."""
    started = time.perf_counter()
    visible = visible or Visibility()
    check_query(text, mode, kinds)
    chosen = tuple(k for k in KINDS if kinds is None or not kinds or k in kinds)
    limit = max(1, min(int(limit), MAX_LIMIT))
    empty = SearchResult(text, mode, chosen, (), 0, {k: 0 for k in chosen}, notes=snapshot.notes)
    if not text.strip() if mode != "regex" else not text:
        return empty
    needle = text if mode == "regex" else pc.utf8_lower(pa.scalar(text, pa.string())).as_py()
    wanted_clusters = frozenset(clusters) if clusters else None
    now = now or datetime.now(UTC)
    oldest_us = int((now - timedelta(days=snapshot.retention_days)).timestamp() * 1_000_000)
    tables = [t for name, t in snapshot.tables.items() if TABLES[name].kind in chosen and t.num_rows]
    ids = _ids(snapshot, visible)
    clock = _Clock(time_limit_s, sum(len(p.values) for t in tables for pieces in t.columns.values()
                                     for p in pieces)) if mode == "regex" else None
    keys: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    counts = {k: 0 for k in chosen}
    cluster_names: set[str] = set()
    for ti, table in enumerate(tables):
        allowed = _allowed(table, visible, wanted_clusters, include_deleted, oldest_us, ids)
        if not allowed.any():
            continue
        best, best_len = _match_table(table, needle, mode, allowed, clock)
        idx = np.flatnonzero(best != _NO_MATCH)
        if not len(idx):
            continue
        spec = TABLES[table.name]
        counts[spec.kind] += len(idx)
        seg_codes = np.unique(table.codes[idx])
        for code in seg_codes:
            seg = table.segments[code]
            cluster_names.add(ids.shown.get(str(seg), str(seg)) if spec.by_cluster_id else str(seg))
        code = best[idx].astype(np.int64)
        rank, fi = code // 16, code % 16
        table_rank = KIND_ORDER[spec.kind] * 8 + list(TABLES).index(table.name)
        length = best_len[idx]
        key = ((rank << 61) | (table.deleted[idx].astype(np.int64) << 60) | (table_rank << 54) | (fi << 50)
               | (np.minimum(length, _MAX_LEN) << 38) | idx)
        keys.append(key)
        owners.append(np.full(len(idx), ti, dtype=np.int32))
    total = sum(counts.values())
    if not total:
        return SearchResult(text, mode, chosen, (), 0, counts, notes=snapshot.notes,
                            elapsed_ms=(time.perf_counter() - started) * 1000)
    all_keys, all_owners = np.concatenate(keys), np.concatenate(owners)
    pick = np.argpartition(all_keys, limit - 1)[:limit] if len(all_keys) > limit else np.arange(len(all_keys))
    pick = pick[np.argsort(all_keys[pick], kind="stable")]
    hits = _hits(tables, all_keys[pick], all_owners[pick], ids.shown)
    return SearchResult(text, mode, chosen, tuple(hits), total, counts, len(cluster_names),
                        truncated=total > len(hits), notes=snapshot.notes,
                        elapsed_ms=(time.perf_counter() - started) * 1000)


def _text(value: object, limit: int = DETAIL_CHARS) -> str:
    return capped(str(value), limit)


def _join(*parts: object) -> str | None:
    return " · ".join(_text(p) for p in parts if p not in (None, "")) or None


def _hits(tables: list[LoadedTable], keys: np.ndarray, owners: np.ndarray, id_names: Mapping[str, str]
          ) -> list[SearchHit]:
    out: list[SearchHit] = []
    for key, owner in zip(keys.tolist(), owners.tolist(), strict=True):
        table = tables[owner]
        row_index = key & ((1 << 38) - 1)
        rank, fi = key >> 61, (key >> 50) & 15
        spec = TABLES[table.name]
        row = {c: table.rows.column(c)[row_index].as_py() for c in spec.schema.names}
        f = spec.fields[fi]
        out.append(_hit(spec, row, f.column, f.name, MATCH_NAMES[int(rank)], id_names))
    return out


def _hit(spec: Table, row: dict[str, Any], column: str, field_name: str, match: str, id_names: Mapping[str, str]
         ) -> SearchHit:
    name = spec.name
    cluster = row["cluster"]
    if spec.by_cluster_id:
        cluster = id_names.get(str(row["cluster_id"]), str(row["cluster_id"]))
    detail: str | None = None
    ident: str | None = None
    group = resource = None
    if name == "topic":
        title, ident = row["topic"], row["topic_id"]
        detail = "internal topic" if row["internal"] else None
    elif name == "group":
        title, detail, group = row["group_id"], row["group_type"], row["group_id"]
    elif name == "member":
        title, group = row["client_id"], row["group_id"]
        detail = "member of group " + _text(row["group_id"])
    elif name == "software":
        title = row["software"]
        detail = f"{row['connections'] or 0:,} connections (the brokers' count)"
    elif name == "instance":
        title, ident = row["client_id"] or row["client_instance_id"], row["client_instance_id"]
        detail = _join(row["client_type"], row["software"], row["principal"],
                       f"group {_text(row['group_id'])}" if row["group_id"] else None)
        group = row["group_id"]
    elif name == "broker":
        title = row["broker_id"]
        detail = _join(row["host"], f"rack {row['rack']}" if row["rack"] else None, row["software"])
    elif name == "cluster":
        title, ident, detail = row["cluster"], row["cluster_id"], row["tags"]
    else:
        title = row["config_name"]
        resource = f"{row['resource_type']} {row['resource']}"
        shown = _text(row["value"]) if row["value"] is not None else "(value not stored)"
        detail = f"{_text(resource)} = {shown}" if row["value"] is not None else f"{_text(resource)} {shown}"
    at = row.get("at")
    return SearchHit(kind=spec.kind, cluster=str(cluster), name=str(title), field=field_name,
                     value=str(row[column]), match=match, state=row["state"], cluster_id=row["cluster_id"], id=ident,
                     detail=detail, group=group, resource=resource,
                     deleted_at=at if row["state"] == DELETED else None, source=name)
