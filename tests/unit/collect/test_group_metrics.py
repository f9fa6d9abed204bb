"""Group lag on /metrics: the worst groups and their topics get series, the rest are counted; hostile ids stay labels."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from backend.collect.group_metrics import MAX_LABEL_CHARS, group_label
from backend.collect.metrics import FleetMetrics
from backend.store.group_model import GroupSnapshot, GroupState, PartitionLag
from backend.store.model import ClusterSnapshot, FleetPoll

AT = datetime.now(UTC)
HOSTILE = '=cmd|"/C calc"!A0 <script>alert(1)</script> [x](javascript:alert(1))\nnext line\\'
LONG_A = "a" * 10_000
LONG_B = "a" * 9_999 + "b"


def _samples(metrics: FleetMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode("utf-8")
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def _snapshot() -> GroupSnapshot:
    snap = GroupSnapshot(collected_at=AT, duration_ms=120.0)
    names = [HOSTILE, LONG_A, LONG_B] + [f"ok-{i}" for i in range(10)]
    for i, name in enumerate(names):
        status = "stalled" if name == HOSTILE else ("lagging" if name in (LONG_A, LONG_B) else "ok")
        snap.groups[name] = GroupState(name, group_type="classic", state="Stable", members=1, status=status,
                                       lag=1000 - i)
        snap.offsets[name] = tuple(PartitionLag(f"topic-{t}", 0, 10, 10 + t) for t in range(3))
    return snap


def test_worst_groups_get_series_within_the_limits_and_the_rest_is_counted(tmp_path: Path) -> None:
    metrics = FleetMetrics(str(tmp_path / "lake"), group_max_groups=4, group_max_topics=5)
    cluster = ClusterSnapshot("prod", "ok", AT, "p1", groups=_snapshot())
    never_read = ClusterSnapshot("other", "ok", AT, "p1")
    metrics.update(FleetPoll("p1", AT, [cluster, never_read], [], 10.0))
    samples = _samples(metrics)
    lags = {s[0]["group"]: s[1] for s in samples["kafka_fleet_group_lag_records"]}
    assert len(lags) == 4 and lags[group_label(HOSTILE)] == 1000.0  # stalled first, then lagging, then the largest lag
    assert group_label(LONG_A) in lags and group_label(LONG_B) in lags and "ok-0" in lags
    assert len(samples["kafka_fleet_group_topic_lag_records"]) == 5
    dropped = {s[0]["kind"]: s[1] for s in samples["kafka_fleet_group_series_dropped"]}
    assert dropped == {"group": 9.0, "group_topic": 7.0}
    assert ({"cluster": "prod", "status": "stalled"}, 1.0) in samples["kafka_fleet_groups_by_status"]
    assert samples["kafka_fleet_groups"] == [({"cluster": "prod", "type": "classic", "state": "Stable"}, 13.0)]
    assert [s[0]["cluster"] for s in samples["kafka_fleet_group_last_read_timestamp_seconds"]] == ["prod"]
    assert samples["kafka_fleet_cluster_group_lag_records"] == [({"cluster": "prod"}, float(sum(1000 - i
                                                                                            for i in range(13))))]


def test_label_values_are_escaped_and_long_ids_stay_distinct() -> None:
    assert group_label(HOSTILE) == HOSTILE.replace("\n", "\u240a")  # kept whole, the line break made visible
    a, b = group_label(LONG_A), group_label(LONG_B)
    assert len(a) == MAX_LABEL_CHARS and a != b and a.startswith("a" * 100)
    metrics = FleetMetrics("/nonexistent-lake")
    metrics.update(FleetPoll("p1", AT, [ClusterSnapshot("prod", "ok", AT, "p1", groups=_snapshot())], [], 1.0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode("utf-8")
    assert "<script>alert(1)</script>" in text  # a label value, not markup: Prometheus shows it as text
    line = next(x for x in text.splitlines() if x.startswith("kafka_fleet_group_lag_records") and "cmd" in x)
    assert '\\"/C calc\\"' in line and "\u240a" in line  # quotes escaped, the newline shown as ␊: one line each
