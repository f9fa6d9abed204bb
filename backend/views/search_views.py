"""Fleet-wide search and a topic or consumer group across the fleet: the view functions every door calls (pages, CLI,
and the HTTP API's `/api/v1/search` and `/api/v1/topics/{name}/across`). Pure: they take the index (backend.search)
and the caller's Scope (backend.auth.scope), never Streamlit.

Grants: a cluster outside the scope does not exist here. Its rows are not searched, counted or suggested; the across
views look only at visible clusters, and MirrorMaker 2's default source aliases are the visible cluster names.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from backend.auth.scope import Scope
from backend.search.query import DEFAULT_LIMIT, REGEX_TIME_LIMIT_S, QueryRefused, SearchHit, SearchResult, Visibility
from backend.search.query import search as run_query
from backend.search.reader import IndexReader, IndexSnapshot
from backend.store import state
from backend.store.lake import Lake
from backend.views.group_views import group_key

__all__ = ["DEFAULT_LIMIT", "GroupAcross", "GroupCopy", "GroupOnTopic", "IndexReader", "IndexSnapshot", "QueryRefused",
           "SearchHit", "SearchResult", "TopicAcross", "TopicCopy", "across_link", "group_across", "hit_link",
           "hits_frame", "link_target", "resolve_ref", "search", "topic_across", "visibility"]

# Kafka's legal topic name (and what most group ids look like): such a name goes into a URL as it is; any other
# (a hostile or 32 KB one) goes as "~" + a hash of it, resolved against the index.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
REF_PREFIX = "~"
DEFAULT_SEPARATOR = "."  # MirrorMaker 2's replication.policy.separator
MIN_ISR = "min.insync.replicas"


def visibility(scope: Scope | None) -> Visibility:
    """What a scope lets a query see (None: everything)."""
    if scope is None or scope.names is None:
        return Visibility()
    return Visibility(names=frozenset(scope.names), ids=frozenset(scope.ids))


def ref(name: str) -> str:
    """A name as a URL parameter: itself when it is a plain Kafka name, else "~" and a hash of it."""
    if _PLAIN_NAME.fullmatch(name):
        return name
    return REF_PREFIX + hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _q(**params: str) -> str:
    return urlencode(params)


def hit_link(hit: SearchHit) -> str:
    """The relative URL of a hit's detail page."""
    if hit.source == "topic" and hit.state == "current":
        return "./across?" + _q(topic=ref(hit.name))
    if hit.source in ("group", "member") and hit.group is not None and hit.state == "current":
        return "./consumer_groups?" + _q(cluster=hit.cluster, group=group_key(hit.cluster, hit.group))
    if hit.source == "software":
        return "./clients"
    if hit.source == "instance":
        return "./client_configs"
    return "./cluster?" + _q(cluster=hit.cluster)


def link_target(link: str) -> tuple[str, dict[str, str]]:
    """A relative link ("./cluster?cluster=a") as (page name, query parameters), for st.page_link."""
    from urllib.parse import parse_qsl, urlsplit

    parts = urlsplit(link)
    return parts.path.removeprefix("./").strip("/"), dict(parse_qsl(parts.query, keep_blank_values=True))


def across_link(hit: SearchHit) -> str | None:
    """The relative URL of the hit's topic or group across the fleet (None for other kinds)."""
    if hit.source == "topic":
        return "./across?" + _q(topic=ref(hit.name))
    if hit.source == "group" and hit.group is not None:
        return "./across?" + _q(group=ref(hit.group))
    return None


def search(snapshot: IndexSnapshot, text: str, *, scope: Scope | None = None, mode: str = "substring",
           kinds: Collection[str] | None = None, clusters: Collection[str] | None = None,
           include_deleted: bool = True, limit: int = DEFAULT_LIMIT, time_limit_s: float | None = None
           ) -> SearchResult:
    """Search the fleet as a scope sees it; every hit carries the link to its detail page (raises QueryRefused)."""
    result = run_query(snapshot, text, mode=mode, kinds=kinds, clusters=clusters, include_deleted=include_deleted,
                       limit=limit, visible=visibility(scope),
                       time_limit_s=REGEX_TIME_LIMIT_S if time_limit_s is None else time_limit_s)
    return replace(result, hits=tuple(replace(h, link=hit_link(h)) for h in result.hits))


HIT_COLUMNS = ["kind", "cluster", "name", "field", "value", "match", "state", "id", "detail", "deleted_at", "link"]


def hits_frame(result: SearchResult) -> pd.DataFrame:
    """The hits as a table (the Search page's rows and its CSV), best first; a missing id or detail is empty."""
    rows = [{**{c: getattr(h, c) for c in HIT_COLUMNS}, "across": across_link(h)} for h in result.hits]
    frame = pd.DataFrame(rows, columns=[*HIT_COLUMNS, "across"])
    for column in ("id", "detail", "across"):
        frame[column] = frame[column].fillna("")
    return frame


# ---------------------------------------------------------------------------------------------- across the fleet


def _visible_current(snapshot: IndexSnapshot, table_name: str, column: str, scope: Scope | None) -> pa.Table:
    loaded = snapshot.tables.get(table_name)
    if loaded is None or not loaded.num_rows:
        return pa.table({"cluster": pa.array([], pa.string()), column: pa.array([], pa.string())})
    rows = loaded.live_rows()
    mask = pc.equal(rows.column("state"), "current")
    if scope is not None and scope.names is not None:
        mask = pc.and_(mask, pc.is_in(rows.column("cluster"), value_set=pa.array(sorted(scope.names), pa.string())))
    return rows.filter(pc.fill_null(mask, False))


def resolve_ref(snapshot: IndexSnapshot, value: str, kind: str, scope: Scope | None) -> str | None:
    """The name a URL parameter stands for (a "~" hash is looked up among the visible names it could be)."""
    if not value.startswith(REF_PREFIX):
        return value
    table, column = ("topic", "topic") if kind == "topic" else ("group", "group_id")
    rows = _visible_current(snapshot, table, column, scope)
    plain = pc.match_substring_regex(rows.column(column), f"^{_PLAIN_NAME.pattern}$")
    for name in rows.filter(pc.invert(pc.fill_null(plain, False))).column(column).to_pylist():
        if name is not None and ref(name) == value:
            return str(name)
    return None


def _lake(lake: Lake | str) -> Lake:
    return lake if isinstance(lake, Lake) else Lake(lake)


def _state(lake: Lake, kind: str, clusters: Iterable[str]) -> pd.DataFrame:
    names = sorted(set(clusters))
    if not names:
        return state.empty_state(kind).to_pandas()
    return state.read_clusters_state(lake, kind, names).to_pandas()


@dataclass(frozen=True)
class GroupOnTopic:
    """A consumer group reading one copy of a topic: its lag on that topic, its state and Burrow-style status."""

    cluster: str
    topic: str
    group_id: str
    group_type: str | None
    state: str | None
    status: str | None
    lag: int | None
    partitions: int
    members: int | None
    link: str


@dataclass(frozen=True)
class TopicCopy:
    """One cluster's topic of the name (or a MirrorMaker 2 copy of it) with what matters side by side."""

    cluster: str
    topic: str
    relation: str  # "same name", "remote copy of <alias>'s topic" or "source of remote copies"
    topic_id: str | None
    partitions: int | None
    replication_factor: int | None
    min_insync_replicas: str | None
    min_isr_source: str  # topic override / broker / default / unknown
    under_replicated: int | None
    internal: bool | None
    configs: Mapping[str, str] = field(default_factory=dict)  # effective value of each config some copy overrides
    groups: int = 0
    lag: int | None = None
    link: str = ""


@dataclass(frozen=True)
class TopicAcross:
    """A topic name across the fleet: every visible cluster holding it (and its MirrorMaker 2 copies)."""

    name: str
    names: tuple[str, ...]  # the topic names looked for (the name, its source, its remote copies)
    copies: tuple[TopicCopy, ...]
    differing: tuple[str, ...]  # configs whose effective values differ between copies
    groups: tuple[GroupOnTopic, ...]
    notes: tuple[str, ...] = ()

    def copies_frame(self) -> pd.DataFrame:
        """One row per copy (the differing configs as columns), for the page and the CSV."""
        rows = []
        for c in self.copies:
            row = {k: v for k, v in asdict(c).items() if k != "configs"}
            row.update({f"config {k}": c.configs.get(k) for k in self.differing})
            rows.append(row)
        columns = [f.name for f in TopicCopy.__dataclass_fields__.values() if f.name != "configs"]
        return _whole_numbers(pd.DataFrame(rows, columns=[*columns, *(f"config {k}" for k in self.differing)]))

    def groups_frame(self) -> pd.DataFrame:
        """One row per (copy, group reading it), largest lag first."""
        columns = list(GroupOnTopic.__dataclass_fields__)
        return _whole_numbers(pd.DataFrame([asdict(g) for g in self.groups], columns=columns))

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON-ready values."""
        return {"name": self.name, "names": list(self.names), "differing": list(self.differing),
                "copies": [asdict(c) | {"configs": dict(c.configs)} for c in self.copies],
                "groups": [asdict(g) for g in self.groups], "notes": list(self.notes)}


_COUNTS = ("partitions", "replication_factor", "under_replicated", "groups", "lag", "members", "coordinator_id")


def _whole_numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts as whole numbers, an unknown one empty (not 5982.0 beside NaN)."""
    for column in (c for c in _COUNTS if c in frame):
        frame[column] = frame[column].astype("Int64")
    return frame


def mirror_names(name: str, aliases: Iterable[str], separator: str = DEFAULT_SEPARATOR) -> tuple[str, dict[str, str]]:
    """(the source topic name, {topic name looked for: what it is}) of a name and its MirrorMaker 2 copies.

    MirrorMaker 2's DefaultReplicationPolicy names a remote copy `<source alias><separator><topic>`; a name that
    starts with an alias and the separator is itself such a copy, and its source is the rest.
    """
    ordered = sorted({a for a in aliases if a}, key=len, reverse=True)
    base = name
    for alias in ordered:
        if name.startswith(alias + separator) and len(name) > len(alias) + len(separator):
            base = name[len(alias) + len(separator):]
            break
    names = {base: SOURCE}
    for alias in ordered:
        names[f"{alias}{separator}{base}"] = f"remote copy (MirrorMaker 2, source alias {alias})"
    return base, names


SOURCE = "same name"


def _catalog() -> Any:
    try:
        from backend.lab.config_catalog import DERIVED, load_catalogs

        return load_catalogs().get("kafka-4.3"), DERIVED
    except (OSError, ValueError, KeyError):
        return None, {}


def _broker_values(configs: pd.DataFrame, cluster: str) -> dict[str, str]:
    """Per broker config of a cluster, the value most of its brokers have (None values left out)."""
    mine = configs[(configs["cluster_name"] == cluster) & (configs["resource_type"] == "broker")
                   & configs["value"].notna()]
    out: dict[str, str] = {}
    for name, values in mine.groupby("config_name")["value"]:
        out[str(name)] = Counter(values.astype(str)).most_common(1)[0][0]
    return out


def _effective(name: str, overrides: Mapping[str, str], brokers: Mapping[str, str] | None, catalog: Any,
               derived: Mapping[str, tuple[tuple[str, int], ...]]) -> tuple[str | None, str]:
    """A topic config's effective value on one copy and where it comes from (topic override, broker, default)."""
    if name in overrides:
        return overrides[name], "topic override"
    if brokers is None:
        return None, "unknown"
    for synonym, factor in derived.get(name, ()):
        if synonym in brokers:
            try:
                return str(int(brokers[synonym]) * factor), "broker"
            except ValueError:
                return brokers[synonym], "broker"
    topic_def = catalog.topic.get(name) if catalog is not None else None
    for synonym in (topic_def.synonyms if topic_def is not None else (name,)):
        if synonym in brokers:
            return brokers[synonym], "broker"
    if topic_def is not None and topic_def.default is not None:
        return topic_def.default, "default"
    return None, "unknown"


def topic_across(lake: Lake | str, snapshot: IndexSnapshot, name: str, *, scope: Scope | None = None,
                 aliases: Iterable[str] | None = None, separator: str = DEFAULT_SEPARATOR) -> TopicAcross:
    """A topic name across the visible clusters: id, partitions, RF, min.insync.replicas, the configs that differ, the
    groups reading each copy with their lag and status. `aliases`: MirrorMaker 2 source aliases (None: the visible
    cluster names). Reads the state files of the clusters holding it only."""
    lk = _lake(lake)
    visible_clusters = sorted(set(_visible_current(snapshot, "cluster", "cluster", scope).column("cluster").to_pylist()))
    alias_list = list(aliases) if aliases is not None else visible_clusters
    _, wanted = mirror_names(name, alias_list, separator)
    rows = _visible_current(snapshot, "topic", "topic", scope)
    found = rows.filter(pc.fill_null(pc.is_in(rows.column("topic"), value_set=pa.array(sorted(wanted), pa.string())),
                                     False)).select(["cluster", "topic", "topic_id"]).to_pylist()
    clusters = sorted({str(r["cluster"]) for r in found})
    topics = _state(lk, "topics", clusters)
    configs = _state(lk, "configs", clusters)
    runs = _state(lk, "config_runs", clusters)
    read = set(runs["cluster_name"]) if not runs.empty else set()
    offsets = _state(lk, "group_offsets", clusters)
    groups = _state(lk, "groups", clusters)
    catalog, derived = _catalog()
    pairs = {(str(r["cluster"]), str(r["topic"])) for r in found}
    base, _ = mirror_names(name, alias_list, separator)
    mirrored = any(topic != base for _, topic in pairs)
    overrides: dict[tuple[str, str], dict[str, str]] = {}
    if not configs.empty:
        mine = configs[(configs["resource_type"] == "topic") & configs["value"].notna()]
        for row in mine.itertuples(index=False):
            if (row.cluster_name, row.resource) in pairs:
                overrides.setdefault((row.cluster_name, row.resource), {})[row.config_name] = row.value
    names_overridden = sorted({k for v in overrides.values() for k in v} - {MIN_ISR})
    broker_values = {c: (_broker_values(configs, c) if c in read else None) for c in clusters}
    on_topic = _groups_on(offsets, groups, pairs)
    copies = []
    for r in sorted(found, key=lambda r: (str(r["cluster"]), str(r["topic"]))):
        cluster, topic = str(r["cluster"]), str(r["topic"])
        facts = topics[(topics["cluster_name"] == cluster) & (topics["topic"] == topic)] if not topics.empty else topics
        fact = facts.iloc[0] if len(facts) else None
        mine_overrides = overrides.get((cluster, topic), {})
        min_isr, source = _effective(MIN_ISR, mine_overrides, broker_values[cluster], catalog, derived)
        effective = {k: _effective(k, mine_overrides, broker_values[cluster], catalog, derived) for k in names_overridden}
        readers = [g for g in on_topic if g.cluster == cluster and g.topic == topic]
        lags = [g.lag for g in readers if g.lag is not None]
        copies.append(TopicCopy(
            cluster=cluster, topic=topic, topic_id=r["topic_id"],
            relation="source of the remote copies" if topic == base and mirrored else wanted.get(topic, SOURCE),
            partitions=_int(fact, "partitions"), replication_factor=_int(fact, "replication_factor"),
            min_insync_replicas=min_isr, min_isr_source=source if cluster in read or MIN_ISR in mine_overrides
            else "unknown (configs not read yet)", under_replicated=_int(fact, "under_replicated"),
            internal=bool(fact["internal"]) if fact is not None and pd.notna(fact["internal"]) else None,
            configs={k: f"{v} ({s})" if v is not None else f"? ({s})" for k, (v, s) in effective.items()},
            groups=len(readers), lag=sum(lags) if lags else None,
            link="./cluster?" + _q(cluster=cluster)))
    differing = tuple(k for k in names_overridden
                      if len({_effective(k, overrides.get((c.cluster, c.topic), {}), broker_values[c.cluster],
                                         catalog, derived)[0] for c in copies}) > 1)
    notes = []
    if not copies:
        notes.append("No cluster you may view holds a topic of this name (or a MirrorMaker 2 copy of it).")
    if any(c.relation.startswith("remote copy") for c in copies):
        notes.append("Each copy has its own topic id: ids are made by each cluster (KIP-516), so a topic and its "
                     "mirror never share one.")
    return TopicAcross(name, tuple(sorted(wanted)), tuple(copies), differing,
                       tuple(sorted(on_topic, key=lambda g: (-(g.lag or 0), g.cluster, g.group_id))), tuple(notes))


def _int(fact: Any, column: str) -> int | None:
    if fact is None or column not in fact or pd.isna(fact[column]):
        return None
    return int(fact[column])


def _groups_on(offsets: pd.DataFrame, groups: pd.DataFrame, pairs: set[tuple[str, str]]) -> list[GroupOnTopic]:
    if offsets.empty or not pairs:
        return []
    keys = offsets["cluster_name"].astype(str) + "\x1f" + offsets["topic"].astype(str)
    mine = offsets[keys.isin({f"{c}\x1f{t}" for c, t in pairs})]
    out = []
    info = groups.set_index(["cluster_name", "group_id"]) if not groups.empty else None
    for (cluster, topic, gid), parts in mine.groupby(["cluster_name", "topic", "group_id"], sort=True):
        lag_values = parts["lag"].dropna()
        lag = int(lag_values.clip(lower=0).sum()) if len(lag_values) else None
        row = info.loc[(cluster, gid)] if info is not None and (cluster, gid) in info.index else None
        if isinstance(row, pd.DataFrame):
            row = row.iloc[0]
        out.append(GroupOnTopic(
            cluster=str(cluster), topic=str(topic), group_id=str(gid),
            group_type=None if row is None else row["group_type"], state=None if row is None else row["state"],
            status=None if row is None else row["status"], lag=lag, partitions=len(parts),
            members=None if row is None or pd.isna(row["members"]) else int(row["members"]),
            link="./consumer_groups?" + _q(cluster=str(cluster), group=group_key(str(cluster), str(gid)))))
    return out


@dataclass(frozen=True)
class GroupCopy:
    """One cluster's consumer group of the id."""

    cluster: str
    group_id: str
    group_type: str | None
    protocol: str | None
    state: str | None
    status: str | None
    lag: int | None
    members: int | None
    topics: tuple[str, ...]
    coordinator_id: int | None
    link: str


@dataclass(frozen=True)
class GroupAcross:
    """A consumer group id across the visible clusters."""

    group_id: str
    copies: tuple[GroupCopy, ...]
    notes: tuple[str, ...] = ()

    def frame(self) -> pd.DataFrame:
        """One row per cluster holding the group, for the page and the CSV."""
        rows = [{**asdict(c), "topics": ", ".join(c.topics)} for c in self.copies]
        return _whole_numbers(pd.DataFrame(rows, columns=list(GroupCopy.__dataclass_fields__)))

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON-ready values."""
        return {"group_id": self.group_id, "copies": [asdict(c) | {"topics": list(c.topics)} for c in self.copies],
                "notes": list(self.notes)}


def group_across(lake: Lake | str, snapshot: IndexSnapshot, group_id: str, *, scope: Scope | None = None) -> GroupAcross:
    """A consumer group id across the visible clusters: type, assignor, state, status, lag, members, topics."""
    rows = _visible_current(snapshot, "group", "group_id", scope)
    found = rows.filter(pc.fill_null(pc.equal(rows.column("group_id"), group_id), False))
    clusters = sorted(set(found.column("cluster").to_pylist()))
    groups = _state(_lake(lake), "groups", clusters)
    mine = groups[groups["group_id"] == group_id] if not groups.empty else groups
    copies = []
    for row in mine.sort_values("cluster_name").itertuples(index=False):
        cluster = str(row.cluster_name)
        topics = tuple(str(t) for t in (row.topic_names if row.topic_names is not None else ()))
        copies.append(GroupCopy(
            cluster=cluster, group_id=group_id, group_type=row.group_type, protocol=row.protocol, state=row.state,
            status=row.status, lag=None if pd.isna(row.lag) else int(row.lag),
            members=None if pd.isna(row.members) else int(row.members), topics=topics,
            coordinator_id=None if pd.isna(row.coordinator_id) else int(row.coordinator_id),
            link="./consumer_groups?" + _q(cluster=cluster, group=group_key(cluster, group_id))))
    notes = () if copies else ("No cluster you may view has a consumer group of this id.",)
    return GroupAcross(group_id, tuple(copies), notes)
