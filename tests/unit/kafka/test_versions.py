"""The release table and the fingerprint guess: ranges that contain the truth, labelled guesses."""

from __future__ import annotations

import pytest

from backend.kafka import versions as V


def _rows(prefixes: tuple[str, ...]) -> list[V.ReleaseRow]:
    rows = [r for r in V.release_rows() if r.release.startswith(prefixes)]
    assert rows, f"no rows for {prefixes}"
    return rows


def _contains(g: V.VersionGuess, release: str) -> bool:
    assert g.version_min is not None
    low_ok = V.release_key(g.version_min) <= V.release_key(release)
    high_ok = g.version_max is None or V.release_key(release) <= V.release_key(g.version_max)
    return low_ok and high_ok


FAMILIES = {
    "0.10-0.11": ("0.10", "0.11"),
    "1.x": ("1.",),
    "2.x": ("2.",),
    "3.x": ("3.",),
    "4.x": ("4.",),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_release_row_guesses_a_range_containing_itself(family: str) -> None:
    for row in _rows(FAMILIES[family]):
        g = V.guess(row.apis)
        assert g.software == V.APACHE, (row.release, g)
        assert g.provenance == "guessed"
        assert _contains(g, row.release), (row.release, row.family, g.label(), g.evidence)
        assert g.family == row.family
        assert 0 < g.confidence < 1


def test_table_covers_0_10_to_4_4_in_both_families() -> None:
    zk = [r.release for r in V.release_rows() if r.family == "zk"]
    kraft = [r.release for r in V.release_rows() if r.family == "kraft"]
    assert zk[0] == "0.10.0" and zk[-1] == "3.9"
    assert kraft[0] == "2.8" and kraft[-1] == "4.4"
    assert {"4.0", "4.1", "4.2", "4.3"} <= set(kraft)


def test_releases_without_api_changes_give_a_range() -> None:
    # KRaft 3.4 advertises exactly what 3.3 did, so neither can be told apart.
    row = next(r for r in V.release_rows() if r.release == "3.4" and r.family == "kraft")
    g = V.guess(row.apis)
    assert (g.version_min, g.version_max) == ("3.3", "3.4")
    assert g.label() == "3.3–3.4"


def test_kafka_4_removed_old_versions_is_the_3_9_versus_4_signal() -> None:
    k39 = next(r for r in V.release_rows() if r.release == "3.9" and r.family == "kraft")
    k40 = next(r for r in V.release_rows() if r.release == "4.0")
    assert k39.apis[1][0] == 0 and k40.apis[1][0] == 4  # Fetch min version
    g39, g40 = V.guess(k39.apis), V.guess(k40.apis)
    assert any("still served" in e for e in g39.evidence)
    assert g39.version_max is not None and V.release_key(g39.version_max) < (4, 0)
    assert V.release_key(g40.version_min or "0") >= (4, 0)
    assert any("KIP-896" in e for e in g40.evidence)


def test_zookeeper_mode_caps_the_range_at_3_9() -> None:
    row = next(r for r in V.release_rows() if r.release == "3.9" and r.family == "zk")
    g = V.guess(row.apis)
    assert g.family == "zk" and g.version_max == "3.9"
    assert any("ZooKeeper mode ended" in e for e in g.evidence)


def test_feature_gated_keys_missing_still_match() -> None:
    # A real 4.3 broker may hide telemetry (71, 72) and share-group keys behind features.
    row = dict(next(r for r in V.release_rows() if r.release == "4.3").apis)
    for key in (71, 72, 76, 77, 78, 79, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92):
        row.pop(key, None)
    g = V.guess(row)
    assert g.software == V.APACHE and _contains(g, "4.3"), g.evidence
    assert g.confidence >= 0.8  # absent gated keys are not evidence against 4.3


def test_newer_than_the_table_gives_an_open_range() -> None:
    row = dict(next(r for r in V.release_rows() if r.release == "4.4").apis)
    row[0] = (row[0][0], row[0][1] + 1)
    row[120] = (0, 0)
    g = V.guess(row)
    assert g.version_min == "4.4" and g.version_max is None
    assert g.label() == "≥ 4.4"


def test_empty_table_is_unknown_not_guessed() -> None:
    g = V.guess({})
    assert g.provenance == "unknown" and g.version_min is None and g.label() == "unknown"


def test_redpanda_like_table_is_not_called_apache() -> None:
    # Modern Produce/Fetch, ApiVersions v3, no ZooKeeper keys, no DescribeQuorum.
    k38 = dict(next(r for r in V.release_rows() if r.release == "3.8" and r.family == "kraft").apis)
    k38.pop(55, None)
    k38[18] = (0, 3)
    g = V.guess(k38)
    assert g.software.startswith("Redpanda")
    assert g.confidence <= 0.4
    assert any("DescribeQuorum" in e for e in g.evidence)


def test_pre_kraft_table_without_zookeeper_keys_is_kafka_compatible() -> None:
    row = dict(next(r for r in V.release_rows() if r.release == "2.4").apis)
    for key in (4, 5, 6, 7):
        row.pop(key)
    g = V.guess(row)
    assert "not Apache" in g.software
    assert g.confidence <= 0.4


def test_versions_label_is_a_range_and_min_equals_max_still_guessed() -> None:
    g = V.VersionGuess(V.APACHE, "3.7", "3.9", 0.8)
    assert g.label() == "3.7–3.9" and g.provenance == "guessed"
    assert V.VersionGuess(V.APACHE, "3.9", "3.9", 0.9).label() == "3.9"
