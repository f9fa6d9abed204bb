"""Which helper runs each cluster's librdkafka client: group testing finds the cluster whose answers kill it."""

from __future__ import annotations

import itertools

import pytest

from backend.kafka.isolation import SHARED, Isolation, isolated_lane


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _hosted(iso: Isolation, names: list[str]) -> dict[str, set[str]]:
    lanes: dict[str, set[str]] = {}
    for name in names:
        lane = iso.lane(name)
        if lane is not None:
            lanes.setdefault(lane, set()).add(name)
    return lanes


def _hunt(iso: Isolation, names: list[str], culprits: set[str], limit: int = 50) -> int:
    """Every cluster calls at once; a helper dies when a culprit's call is on it. Return the deaths until all are paused."""
    deaths = 0
    while any(iso.lane(c) is not None for c in culprits):
        assert deaths < limit, iso.lanes()
        lanes = _hosted(iso, names)  # one poll: every call goes to the helper its cluster is on as the poll starts
        for lane, hosted in sorted(lanes.items()):
            if hosted & culprits:
                iso.died(lane, hosted, hosted, "killed by SIGABRT")
                deaths += 1
    return deaths


def test_the_culprit_among_27_clusters_is_alone_on_its_helper_after_four_deaths() -> None:
    iso = Isolation(slots=3, clock=Clock())
    names = [f"c{i:02d}" for i in range(27)]
    assert all(iso.lane(n) == SHARED for n in names)
    deaths = _hunt(iso, names, {"c17"})
    assert deaths == 4  # shared (27) -> 9 -> 3 -> alone
    assert iso.lane("c17") is None and iso.convictions("c17") == 1
    reason = iso.pause_reason("c17") or ""
    assert reason.startswith("librdkafka is off for this cluster for 15 min") and "killed by SIGABRT" in reason
    # Everyone else is back on the shared helper: one helper process in the normal case.
    assert {iso.lane(n) for n in names if n != "c17"} == {SHARED}
    assert iso.lanes() == {"c17": "paused"}


def test_any_two_culprits_among_20_are_both_found_and_the_rest_stay_shared() -> None:
    names = [f"c{i:02d}" for i in range(20)]
    for a, b in itertools.combinations(names, 2):
        iso = Isolation(slots=3, clock=Clock())
        assert _hunt(iso, names, {a, b}) <= 14, (a, b)  # one culprit alone takes at most 4 here
        assert iso.lane(a) is None and iso.lane(b) is None
        assert {iso.lane(n) for n in names if n not in (a, b)} == {SHARED}


def test_a_helper_that_died_idle_implicates_no_one() -> None:
    iso = Isolation(slots=3, clock=Clock())
    assert iso.died(SHARED, {"a", "b"}, set(), "killed by SIGKILL") == []
    assert iso.lane("a") == SHARED and iso.lanes() == {}


def test_a_suspect_sharing_an_isolated_helper_is_not_convicted_with_the_others() -> None:
    iso = Isolation(slots=1, clock=Clock())
    iso.died(SHARED, {"a", "b"}, {"a", "b"}, "killed by SIGABRT")
    assert iso.lane("a") == iso.lane("b") == isolated_lane(0)  # one isolated helper: both on it
    assert iso.died(isolated_lane(0), {"a", "b"}, {"a", "b"}, "killed by SIGABRT") == []
    # Only "a" in flight: the narrower evidence replaces {a, b}; "b" goes back to the shared helper.
    assert iso.died(isolated_lane(0), {"a", "b"}, {"a"}, "killed by SIGABRT") == []
    assert iso.lane("a") == isolated_lane(0) and iso.lane("b") == SHARED
    # Convicted only when the helper ran its client alone (here "b"'s client was still open on it).
    assert iso.died(isolated_lane(0), {"a", "b"}, {"a"}, "killed by SIGABRT") == []
    assert iso.died(isolated_lane(0), {"a"}, {"a"}, "killed by SIGABRT") == ["a"]


def test_a_pause_ends_in_probation_on_an_own_helper_then_the_shared_one_and_a_repeat_doubles_it() -> None:
    clock = Clock()
    iso = Isolation(slots=3, hold_s=600, bench_s=900, bench_max_s=2000, clock=clock)
    iso.died(SHARED, {"x", "y"}, {"x", "y"}, "killed by SIGABRT")
    lane = iso.lane("x")
    assert lane is not None and lane != SHARED and iso.lane("y") not in (SHARED, lane)
    assert iso.died(lane, {"x"}, {"x"}, "killed by SIGABRT") == ["x"]
    assert iso.lane("y") == SHARED  # the set "x" was in is explained by it
    clock.now += 899
    assert iso.lane("x") is None
    clock.now += 1
    probation = iso.lane("x")
    assert probation is not None and probation != SHARED  # alone on an isolated helper
    assert iso.died(probation, {"x"}, {"x"}, "killed by SIGSEGV") == ["x"]
    assert "for 30 min" in (iso.pause_reason("x") or "") and "SIGSEGV" in (iso.pause_reason("x") or "")
    clock.now += 1800
    assert iso.lane("x") not in (None, SHARED)
    iso.died(iso.lane("x") or "", {"x"}, {"x"}, "killed by SIGABRT")
    assert "for 33.3333 min" in (iso.pause_reason("x") or "")  # capped at bench_max_s
    clock.now += 2000
    assert iso.lane("x") not in (None, SHARED)
    clock.now += 600  # a probation without a death: back to the shared helper
    assert iso.lane("x") == SHARED


def test_release_ends_a_pause_early_and_a_new_configuration_starts_afresh() -> None:
    iso = Isolation(slots=2, clock=Clock())
    iso.died(SHARED, {"x"}, {"x"}, "killed by SIGABRT")
    iso.died(iso.lane("x") or "", {"x"}, {"x"}, "killed by SIGABRT")
    assert iso.lane("x") is None
    assert iso.release("x") and not iso.release("x")
    assert iso.lane("x") not in (None, SHARED)
    iso.forget("x")
    assert iso.lane("x") == SHARED and iso.convictions("x") == 0 and iso.pause_reason("x") is None


def test_there_is_no_isolation_without_a_helper_for_it() -> None:
    with pytest.raises(ValueError):
        Isolation(slots=0)
