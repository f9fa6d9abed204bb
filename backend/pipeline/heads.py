"""Each client instance's latest snapshot (its head), picked on the driver from the snapshot table.

A head is the greatest (received_at, snapshot_id, identity columns) of an instance, nulls first, as
Spark orders structs: of two snapshots at the same time the greater snapshot_id wins. A head carries
what the driver needs of its instance: the identity, the group.id and client.id it reported (the
smallest spelling, normalised), its row count and the files holding its rows (a refresh reads them
again to take the instance's old entries out of the counts).
"""

from __future__ import annotations

from posixpath import relpath
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from backend.pipeline.normalize import normalize_value
from backend.store.config_schemas import arrow_schema

IDS = "client_instance_id"
INSTANCE_COLUMNS = (
    "client_instance_id", "snapshot_id", "received_at", "cluster_id", "broker_id", "client_id",
    "client_type", "client_software_name", "client_software_version", "principal", "client_address",
)
CAPTURED = ("group.id", "client.id")  # values the driver needs per snapshot (group_id, CC015)
ORDER = ("received_at", "snapshot_id", *INSTANCE_COLUMNS[3:])  # the greater wins
_CONFIG = arrow_schema("client_configs")
HEAD_SCHEMA = pa.schema([
    *(_CONFIG.field(c).with_nullable(True) for c in INSTANCE_COLUMNS),
    pa.field("group_id", pa.string()), pa.field("cfg_client_id", pa.string()),
    pa.field("rows", pa.int64()), pa.field("files", pa.list_(pa.string())),
])
CLASS_COLUMNS = ("cluster_id", "client_type", "group_id")  # what the counts need of a snapshot's instance


def _starts(table: pa.Table, columns: tuple[str, ...]) -> np.ndarray:
    """Per row of a sorted table: whether it starts a new run of equal ``columns`` (nulls equal to nulls)."""
    starts = np.zeros(table.num_rows, dtype=bool)
    if table.num_rows:
        starts[0] = True
    for name in columns:
        col = table[name].combine_chunks()
        a, b = col.slice(1), col.slice(0, len(col) - 1)
        differs = pc.or_(pc.fill_null(pc.not_equal(a, b), False), pc.xor(pc.is_null(a), pc.is_null(b)))
        starts[1:] |= differs.to_numpy(zero_copy_only=False)
    return starts


def _last_per_instance(table: pa.Table, order: tuple[str, ...]) -> np.ndarray:
    """Row indices of each instance's greatest row by ``order`` (the table sorted by instance and order)."""
    ranked = table.append_column("_i", pa.array(np.arange(table.num_rows))).sort_by(
        [(c, "ascending") for c in (IDS, *order)], null_placement="at_start")
    first = _starts(ranked, (IDS,))
    return ranked["_i"].to_numpy()[np.append(first[1:], True)] if ranked.num_rows else np.zeros(0, dtype=np.int64)


def _smallest_per_group(groups: np.ndarray, values: pa.Array, size: int) -> pa.Array:
    """Per group id: the smallest value, or null when any value is null; null for groups without values."""
    out: list[str | None] = [None] * size
    if len(groups):
        frame = pd.DataFrame({"g": groups, "v": values.to_pandas()})
        nulls = frame["v"].isna().groupby(frame["g"]).any()
        for g, v in frame.dropna().groupby("g")["v"].min().items():
            out[int(g)] = None if nulls.get(g, False) else v
    return pa.array(out, pa.string())


def heads_of(snapshots: pa.Table, table_uri: str) -> tuple[pa.Table, int, int]:
    """(one head per instance, rows read, snapshots read) of a snapshot table (backend.pipeline.passes).

    ``table_uri``: the Spark path of the client_configs table; files are kept relative to it.
    """
    t = snapshots.sort_by([(c, "ascending") for c in INSTANCE_COLUMNS], null_placement="at_start")
    starts = _starts(t, INSTANCE_COLUMNS)  # one group per snapshot and identity
    group = np.cumsum(starts) - 1
    size = int(starts.sum())
    root = unquote(urlparse(table_uri).path)
    files = pc.dictionary_encode(t["file"].combine_chunks())
    names = pa.array([relpath(unquote(urlparse(u).path), root) for u in files.dictionary.to_pylist()], pa.string())
    by_group = pa.table({"g": group, "n": t["n"], "file": pc.take(names, files.indices)}).group_by("g").aggregate(
        [("n", "sum"), ("file", "distinct")]).sort_by("g")
    captured = {}
    for key in CAPTURED:
        mask = pc.fill_null(pc.equal(t["pk"], key), False)
        raw = _smallest_per_group(group[mask.to_numpy(zero_copy_only=False)], t["pv"].filter(mask).combine_chunks(), size)
        spellings = pc.dictionary_encode(raw)  # normalised once per distinct spelling
        normal = pa.array([normalize_value(key, v) for v in spellings.dictionary.to_pylist()], pa.string())
        captured[key] = pc.take(normal, spellings.indices)
    groups = t.take(pa.array(np.nonzero(starts)[0])).select(list(INSTANCE_COLUMNS))
    groups = groups.append_column("group_id", captured["group.id"]).append_column(
        "cfg_client_id", captured["client.id"]).append_column("rows", by_group["n_sum"].cast(pa.int64())).append_column(
        "files", by_group["file_distinct"])
    heads = groups.take(pa.array(_last_per_instance(groups, ORDER))).cast(HEAD_SCHEMA)
    snapshots_read = int(_starts(t, (IDS, "snapshot_id")).sum())
    return heads, int(pc.sum(t["n"]).as_py() or 0), snapshots_read


def supersede(prior: pa.Table, new: pa.Table) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(heads after, the new heads that changed an instance, the prior heads they replace).

    A new head changes its instance when it is greater than the prior one by ORDER; the same snapshot
    read again, or an older one, changes nothing.
    """
    candidates = prior.filter(pc.is_in(prior[IDS], value_set=new[IDS].combine_chunks()))
    # on a tie of every column the prior head sorts last, so it stays
    both = pa.concat_tables([candidates.append_column("_prior", pa.array(np.ones(candidates.num_rows, np.int8))),
                             new.append_column("_prior", pa.array(np.zeros(new.num_rows, np.int8)))])
    winners = both.take(pa.array(_last_per_instance(both, (*ORDER, "_prior"))))
    changed = winners.filter(pc.equal(winners["_prior"], 0)).drop_columns(["_prior"])
    ids = changed[IDS].combine_chunks()
    replaced = candidates.filter(pc.is_in(candidates[IDS], value_set=ids))
    kept = prior.filter(pc.invert(pc.is_in(prior[IDS], value_set=ids)))
    return pa.concat_tables([kept, changed]), changed, replaced


def wanted(changed: pa.Table, replaced: pa.Table, refill: pa.Table | None = None) -> tuple[pa.Table, pd.DataFrame]:
    """The instance pass's input: (instance, snapshot, sid, cls, w), sid numbering the snapshots, w +1 for a
    changed head, -1 for the head it replaces and 0 for an unchanged head read again only for the watched keys a
    policy file named since (``refill``); and the classes: cls -> (cluster_id, client_type, group_id)."""
    parts = [changed, replaced, *([refill] if refill is not None else [])]
    both = pa.concat_tables([p.select([IDS, "snapshot_id", *CLASS_COLUMNS]) for p in parts])
    frame = both.select(list(CLASS_COLUMNS)).to_pandas()
    cls = frame.groupby(list(CLASS_COLUMNS), dropna=False, sort=False).ngroup().to_numpy(np.int32)
    classes = frame.assign(cls=cls).drop_duplicates("cls").set_index("cls").sort_index()
    weights = np.concatenate([np.ones(changed.num_rows, np.int32), -np.ones(replaced.num_rows, np.int32),
                              np.zeros(refill.num_rows if refill is not None else 0, np.int32)])
    # one chunk per column: Spark's createDataFrame of an Arrow table whose first chunks are empty reads no rows
    return pa.table({IDS: both[IDS], "snapshot_id": both["snapshot_id"], "sid": np.arange(both.num_rows, dtype=np.int32),
                     "cls": cls, "w": weights}).combine_chunks(), classes
