"""Consumer groups in the lake: state rows of a GroupSnapshot, its change rows, and back.

Each cluster has four state files (kinds of the state manifest): `groups` (one row per group, with its status
and its bounded window), `group_members` (one row per member, rewritten only when membership changed),
`group_offsets` (one row per group and partition: committed, end, lag, since when) and `group_runs` (the last
read). Changes go to the change log (entity `group`): `groups_first_seen` (one row for a cluster's first read),
`group_created`, `group_deleted`, `group_state_changed` (Stable -> Empty ...), `group_protocol_changed` (its type,
classic -> consumer), `group_assignor_changed`, `member_joined`, `member_left` (one row per member, or one
`members_changed` row when more than MEMBER_ROWS_MAX members of one group changed in one read).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa

from backend.store.group_model import COMMITTED, GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.group_schemas import GROUP_MEMBERS, GROUP_OFFSETS, GROUP_RUNS, GROUP_SCHEMAS, GROUP_STATE
from backend.store.schemas import SCHEMA_VERSION

MEMBER_ROWS_MAX = 20

Change = tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]  # kind, subject, before, after


def _group_facts(g: GroupState) -> dict[str, Any]:
    return {"group_id": g.group_id, "group_type": g.group_type, "protocol_type": g.protocol_type,
            "protocol": g.protocol, "state": g.state, "members": g.members}


def _member_facts(group_id: str, m: GroupMember) -> dict[str, Any]:
    return {"group_id": group_id, "member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
            "instance_id": m.instance_id, "member_type": m.member_type}


def member_subject(group_id: str, m: GroupMember) -> str:
    """The change-log subject of one member."""
    return f"{group_id}: {m.client_id} ({m.member_id})"


def diff(prev: GroupSnapshot | None, new: GroupSnapshot, cluster_name: str) -> list[Change]:
    """The change rows from one stored read of a cluster's groups to the next."""
    if prev is None:
        types: dict[str, int] = {}
        for g in new.groups.values():
            types[g.group_type] = types.get(g.group_type, 0) + 1
        return [("groups_first_seen", cluster_name, None, {
            "groups": len(new.groups), "by_type": dict(sorted(types.items())),
            "members": sum(len(m) for m in new.members.values())})]
    out: list[Change] = []
    for name in sorted(set(prev.groups) | set(new.groups)):
        old, cur = prev.groups.get(name), new.groups.get(name)
        if old is None:
            assert cur is not None
            out.append(("group_created", name, None, _group_facts(cur)))
        elif cur is None:
            out.append(("group_deleted", name, _group_facts(old), None))
        else:
            if old.group_type != cur.group_type:
                out.append(("group_protocol_changed", name, _group_facts(old), _group_facts(cur)))
            if old.state != cur.state and old.state and cur.state:
                out.append(("group_state_changed", name, _group_facts(old), _group_facts(cur)))
            if old.protocol != cur.protocol and old.protocol and cur.protocol and old.group_type == cur.group_type:
                out.append(("group_assignor_changed", name, _group_facts(old), _group_facts(cur)))
        before, after = prev.members.get(name, ()), new.members.get(name, ())
        if before is after or before == after:
            continue
        old_ids = {m.member_id: m for m in before}
        new_ids = {m.member_id: m for m in after}
        joined = [new_ids[i] for i in sorted(set(new_ids) - set(old_ids))]
        left = [old_ids[i] for i in sorted(set(old_ids) - set(new_ids))]
        if len(joined) + len(left) > MEMBER_ROWS_MAX:
            out.append(("members_changed", name, {"members": len(before)}, {
                "members": len(after), "joined": len(joined), "left": len(left),
                "sample_joined": [m.client_id for m in joined[:5]], "sample_left": [m.client_id for m in left[:5]]}))
            continue
        out += [("member_joined", member_subject(name, m), None, _member_facts(name, m)) for m in joined]
        out += [("member_left", member_subject(name, m), _member_facts(name, m), None) for m in left]
    return out


def _columns(schema_name: str, cols: dict[str, list[Any]]) -> pa.Table:
    schema = GROUP_SCHEMAS[schema_name]
    return pa.Table.from_pydict({f.name: cols[f.name] for f in schema}, schema=schema)


def _head(n: int, poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None) -> dict[str, list[Any]]:
    return {"poll_id": [poll_id] * n, "polled_at": [polled_at] * n, "cluster_name": [cluster_name] * n,
            "cluster_id": [cluster_id] * n, "schema_version": [SCHEMA_VERSION] * n}


def groups_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                 snap: GroupSnapshot) -> pa.Table:
    """The `groups` state rows of one cluster."""
    groups = [snap.groups[k] for k in sorted(snap.groups)]
    cols = _head(len(groups), poll_id, polled_at, cluster_name, cluster_id)
    for name in ("group_id", "group_type", "protocol_type", "protocol", "state", "coordinator_id", "members",
                 "topics", "partitions", "lag", "lag_partitions", "max_partition_lag", "status", "status_since",
                 "last_commit_at", "first_seen_at", "error", "uncommitted_records", "uncommitted_partitions",
                 "partitions_ahead"):
        cols[name] = [getattr(g, name) for g in groups]
    cols["evidence_json"] = [json.dumps(g.evidence, sort_keys=True, default=str) if g.evidence else None
                             for g in groups]
    cols["topic_names"] = [list(g.topic_names) for g in groups]
    cols["window_at"] = [list(g.window_at) for g in groups]
    cols["window_lag"] = [list(g.window_lag) for g in groups]
    cols["window_committed"] = [list(g.window_committed) for g in groups]
    cols["collected_at"] = [snap.collected_at] * len(groups)
    return _columns(GROUP_STATE, cols)


def members_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                  snap: GroupSnapshot) -> pa.Table:
    """The `group_members` state rows of one cluster."""
    rows = [(g, m) for g in sorted(snap.members) for m in snap.members[g]]
    cols = _head(len(rows), poll_id, polled_at, cluster_name, cluster_id)
    cols["group_id"] = [g for g, _ in rows]
    for name in ("member_id", "instance_id", "client_id", "client_host", "rack", "member_type", "subscribed_regex"):
        cols[name] = [getattr(m, name) for _, m in rows]
    cols["assigned_partitions"] = [len(m.assignment) for _, m in rows]
    assignments = []
    for _, m in rows:
        by_topic: dict[str, list[int]] = {}
        for topic, p in m.assignment:
            by_topic.setdefault(topic, []).append(p)
        assignments.append(json.dumps(by_topic, sort_keys=True))
    cols["assignment_json"] = assignments
    cols["subscribed_json"] = [json.dumps(list(m.subscribed)) for _, m in rows]
    return _columns(GROUP_MEMBERS, cols)


def offsets_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                  snap: GroupSnapshot) -> pa.Table:
    """The `group_offsets` state rows of one cluster (column by column: tens of thousands of rows)."""
    rows = [(g, p) for g in sorted(snap.offsets) for p in snap.offsets[g]]
    cols = _head(len(rows), poll_id, polled_at, cluster_name, cluster_id)
    cols["group_id"] = [g for g, _ in rows]
    cols["topic"] = [p.topic for _, p in rows]
    cols["partition"] = [p.partition for _, p in rows]
    cols["committed_offset"] = [p.committed for _, p in rows]
    cols["end_offset"] = [p.end for _, p in rows]
    cols["lag"] = [p.lag for _, p in rows]
    for name in ("member_id", "topic_id", "last_moved_at", "lag_since"):
        cols[name] = [getattr(p, name) for _, p in rows]
    cols["offset_kind"] = [p.kind for _, p in rows]
    cols["reported_lag"] = [p.reported_lag for _, p in rows]
    cols["log_start_offset"] = [p.log_start for _, p in rows]
    return _columns(GROUP_OFFSETS, cols)


def error_text(snap: GroupSnapshot) -> str | None:
    """What a read could not read, in one line (None when it read everything)."""
    return "; ".join(f"{where}: {why}" for where, why in sorted(snap.errors.items())) or None


def runs_table(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
               snap: GroupSnapshot) -> pa.Table:
    """The `group_runs` state row of one cluster."""
    row = {"poll_id": poll_id, "polled_at": polled_at, "cluster_name": cluster_name, "cluster_id": cluster_id,
           "collected_at": snap.collected_at, "groups_listed": snap.listed, "groups_read": len(snap.groups),
           "groups_skipped": snap.skipped, "brokers_answered": snap.brokers_answered, "error": error_text(snap),
           "duration_ms": round(snap.duration_ms, 3), "versions_json": json.dumps(snap.versions, sort_keys=True),
           "requests_json": json.dumps(snap.requests, sort_keys=True), "schema_version": SCHEMA_VERSION}
    return pa.Table.from_pylist([row], schema=GROUP_SCHEMAS[GROUP_RUNS])


def state_tables(poll_id: str, polled_at: datetime, cluster_name: str, cluster_id: str | None,
                 prev: GroupSnapshot | None, new: GroupSnapshot) -> dict[str, pa.Table]:
    """The state kinds a read changed (its run row always; members only when membership changed)."""
    tables = {"group_runs": runs_table(poll_id, polled_at, cluster_name, cluster_id, new)}
    if prev is None or prev.groups != new.groups:
        tables["groups"] = groups_table(poll_id, polled_at, cluster_name, cluster_id, new)
    if prev is None or (prev.members is not new.members and prev.members != new.members):
        tables["group_members"] = members_table(poll_id, polled_at, cluster_name, cluster_id, new)
    if prev is None or (prev.offsets is not new.offsets and prev.offsets != new.offsets):
        tables["group_offsets"] = offsets_table(poll_id, polled_at, cluster_name, cluster_id, new)
    return tables


def _json(text: str | None, default: Any) -> Any:
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def snapshots_from_tables(groups: pa.Table, members: pa.Table, offsets: pa.Table,
                          runs: pa.Table) -> dict[str, GroupSnapshot]:
    """Per cluster, the stored read rebuilt from its state rows (the collector's baseline after a restart)."""
    out: dict[str, GroupSnapshot] = {}
    for run in runs.to_pylist():
        errors = {"last read": run["error"]} if run["error"] else {}
        out[run["cluster_name"]] = GroupSnapshot(
            collected_at=run["collected_at"], errors=errors, listed=run["groups_listed"] or 0,
            skipped=run["groups_skipped"] or 0, brokers_answered=run["brokers_answered"] or 0,
            versions=_json(run["versions_json"], {}), requests=_json(run["requests_json"], {}),
            duration_ms=run["duration_ms"] or 0.0)
    for row in groups.to_pylist():
        snap = out.get(row["cluster_name"])
        if snap is None:
            continue  # rows without a run row are not a committed read
        snap.groups[row["group_id"]] = GroupState(
            group_id=row["group_id"], group_type=row["group_type"] or "unknown", protocol_type=row["protocol_type"] or "",
            protocol=row["protocol"] or "", state=row["state"] or "", coordinator_id=row["coordinator_id"],
            members=row["members"] or 0, topics=row["topics"] or 0, partitions=row["partitions"] or 0,
            lag=row["lag"], lag_partitions=row["lag_partitions"] or 0, max_partition_lag=row["max_partition_lag"],
            status=row["status"] or "unknown", status_since=row["status_since"],
            evidence=_json(row["evidence_json"], {}), last_commit_at=row["last_commit_at"],
            first_seen_at=row["first_seen_at"], topic_names=tuple(row["topic_names"] or ()),
            window_at=tuple(row["window_at"] or ()),
            window_lag=tuple(_opt_int(v) for v in row["window_lag"] or ()),
            window_committed=tuple(_opt_int(v) for v in row["window_committed"] or ()), error=row["error"],
            uncommitted_records=row.get("uncommitted_records"),
            uncommitted_partitions=row.get("uncommitted_partitions") or 0,
            partitions_ahead=row.get("partitions_ahead") or 0)
    for row in members.to_pylist():
        snap = out.get(row["cluster_name"])
        if snap is None:
            continue
        assignment = tuple(sorted((t, int(p)) for t, ps in _json(row["assignment_json"], {}).items() for p in ps))
        member = GroupMember(member_id=row["member_id"] or "", client_id=row["client_id"] or "",
                             client_host=row["client_host"] or "", instance_id=row["instance_id"], rack=row["rack"],
                             member_type=row["member_type"], assignment=assignment,
                             subscribed=tuple(_json(row["subscribed_json"], [])),
                             subscribed_regex=row.get("subscribed_regex"))
        snap.members[row["group_id"]] = (*snap.members.get(row["group_id"], ()), member)
    per_group: dict[tuple[str, str], list[PartitionLag]] = {}
    if offsets.num_rows:
        cols = {c: offsets.column(c).to_pylist() for c in (
            "cluster_name", "group_id", "topic", "partition", "committed_offset", "end_offset", "member_id",
            "topic_id", "last_moved_at", "lag_since", "offset_kind", "reported_lag", "log_start_offset")}
        for i, cluster in enumerate(cols["cluster_name"]):
            if cluster not in out:
                continue
            per_group.setdefault((cluster, cols["group_id"][i]), []).append(PartitionLag(
                topic=cols["topic"][i], partition=cols["partition"][i], committed=cols["committed_offset"][i],
                end=cols["end_offset"][i], member_id=cols["member_id"][i], topic_id=cols["topic_id"][i],
                last_moved_at=cols["last_moved_at"][i], lag_since=cols["lag_since"][i],
                kind=cols["offset_kind"][i] or COMMITTED, reported_lag=cols["reported_lag"][i],
                log_start=cols["log_start_offset"][i]))
    for (cluster, group), parts in per_group.items():
        out[cluster].offsets[group] = tuple(parts)
    return out

