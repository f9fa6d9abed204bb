"""A fixture lake with consumer groups, written through the product's own writer and checks (dates relative to now).

Three clusters: `eu` (Kafka 4.1, many groups: every status, a KIP-848 group, hostile group and client ids),
`us` (Kafka 3.9, a few classic groups), `staging` (one group). Three polls a minute apart move the groups so
the change log and the incidents have rows; results/group_configs and group_drift hold members' configs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from backend.collect.checks import run_checks
from backend.store.fleet_writer import FleetWriter
from backend.store.group_model import GroupMember, GroupSnapshot, GroupState, PartitionLag
from backend.store.lake import Lake
from backend.store.model import BrokerSnapshot, ClusterSnapshot, FleetPoll, TopicSnapshot
from tests.unit.dashboard.lake_fixture import write_result

HOSTILE_IDS = (
    "**bold** [click](https://evil.example) :red[alarm]",
    "<script>alert('group')</script><img src=x onerror=alert(1)>",
    '=HYPERLINK("https://evil.example","x")',
    "L" * 10_000,
)
HOSTILE_CLIENT = "<b>client</b> =1+1 [x](javascript:alert(1))"
MANY = 120  # groups of `eu`: more than two pages of 50
CLUSTER_IDS = {"eu": "EUgroupsAAAAAAAAAAAAAA", "us": "USgroupsBBBBBBBBBBBBBB", "staging": "STgroupsCCCCCCCCCCCCCC"}


def _group(gid: str, at: datetime, status: str, lag: int, *, group_type: str = "classic", members: int = 2,
           client: str | None = None) -> tuple[GroupState, tuple[GroupMember, ...], tuple[PartitionLag, ...]]:
    ms = tuple(GroupMember(f"{gid[:20]}-m{i}", client or f"{gid[:20]}-client-{i}", f"/10.0.0.{i}",
                           assignment=(("orders", i),)) for i in range(members))
    parts = tuple(PartitionLag("orders", i, 100, 100 + lag // 2, ms[i].member_id if i < members else None,
                               "ordersIdAAAAAAAAAAAAAA", at, at if lag else None) for i in range(2))
    state = GroupState(gid, group_type=group_type, protocol_type="consumer",
                       protocol="uniform" if group_type == "consumer" else "range",
                       state="Stable" if members else "Empty", coordinator_id=1, members=members, topics=1,
                       partitions=2, topic_names=("orders",), lag=lag, lag_partitions=2 if lag else 0,
                       max_partition_lag=lag // 2 or None, status=status, status_since=at, evidence={"lag": lag},
                       last_commit_at=at, first_seen_at=at, window_at=(at - timedelta(minutes=1), at),
                       window_lag=(lag // 2, lag), window_committed=(200, 200))
    return state, ms, parts


def _snapshot(cluster: str, at: datetime, step: int) -> GroupSnapshot:
    snap = GroupSnapshot(collected_at=at, brokers_answered=1, versions={"ListGroups": 5})
    specs: list[tuple[str, str, int, dict[str, object]]] = []
    if cluster == "eu":
        specs += [("orders-consumers", "ok", 0, {}), ("payments-consumers", "lagging", 40 * (step + 1),
                                                      {"group_type": "consumer"}),
                  ("fraud-consumers", "stalled" if step else "lagging", 900, {}),
                  ("notifications-consumers", "empty_with_lag", 300, {"members": 0})]
        specs += [(h, "stalled", 50, {"client": HOSTILE_CLIENT}) for h in HOSTILE_IDS]
        specs += [(f"svc-{i:04d}", "ok", i % 3, {}) for i in range(MANY - len(specs))]
    elif cluster == "us":
        specs += [("orders-consumers", "ok", 0, {}), ("billing-consumers", "lagging", 70, {}),
                  ("audit", "empty_with_lag", 10, {"members": 0})]
    else:
        specs += [("staging-tests", "ok", 0, {})]
    for gid, status, lag, kw in specs:
        state, ms, parts = _group(gid, at, status, lag, **kw)  # type: ignore[arg-type]
        snap.groups[gid] = state
        if ms:
            snap.members[gid] = ms
        snap.offsets[gid] = parts
    snap.listed = len(snap.groups)
    return snap


def _cluster(name: str, at: datetime, poll_id: str, step: int) -> ClusterSnapshot:
    version = {"eu": "4.1.0", "us": "3.9.1", "staging": "3.9.1"}[name]
    broker = BrokerSnapshot(1, f"{name}.example", 9092, is_controller=True, reachable=True,
                            software_name="Apache Kafka", software_version=version, version_provenance="reported",
                            version_min=version, version_max=version)
    return ClusterSnapshot(cluster_name=name, status="ok", polled_at=at, poll_id=poll_id, cluster_id=CLUSTER_IDS[name],
                           controller_id=1, tags={"env": "prod" if name != "staging" else "staging"},
                           brokers=[broker], topics=[TopicSnapshot("orders", "ordersIdAAAAAAAAAAAAAA", partitions=3,
                                                                   replication_factor=1)],
                           groups=_snapshot(name, at, step))


def build_group_lake(root: Path) -> Path:
    """Write three polls of three clusters with their groups, and the members' config results."""
    lake = Lake(root)
    writer = FleetWriter(lake)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=3)
    previous: dict[str, ClusterSnapshot] = {}
    for step in range(3):
        at = start + timedelta(minutes=step)
        poll_id = f"{at:%Y%m%dT%H%M%S}000000Z-{step:08x}"
        clusters = [_cluster(name, at, poll_id, step) for name in ("eu", "us", "staging")]
        writer.write(FleetPoll(poll_id, at, clusters, run_checks(previous, clusters), 10.0))
        previous = {c.cluster_name: c for c in clusters}
    writer.close(start + timedelta(minutes=3))
    write_result(root, "group_configs", [
        {"cluster_id": CLUSTER_IDS["eu"], "group_id": "orders-consumers", "key": "partition.assignment.strategy",
         "value": "range", "instances": 2},
        {"cluster_id": CLUSTER_IDS["eu"], "group_id": "orders-consumers", "key": "session.timeout.ms",
         "value": "45000", "instances": 2},
        {"cluster_id": CLUSTER_IDS["us"], "group_id": "billing-consumers", "key": "session.timeout.ms",
         "value": "10000", "instances": 1}])
    write_result(root, "group_drift", [
        {"cluster_id": CLUSTER_IDS["eu"], "group_id": "orders-consumers", "key": "max.poll.records", "members": 2,
         "distinct_values": 2, "value_counts_json": "{\"500\":1,\"10\":1}"}])
    return root
