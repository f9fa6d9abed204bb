"""The per-cluster cost limits in [settings]: defaults, and out-of-bounds values refused with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import FleetConfigError, parse_fleet


def test_defaults(tmp_path: Path) -> None:
    settings = parse_fleet("[settings]\n", source="f.toml", secrets_path=tmp_path / "none.toml").settings
    assert (settings.max_metadata_response_bytes, settings.max_brokers_probed, settings.probe_concurrency) == (
        16 * 1024 * 1024, 256, 16)


@pytest.mark.parametrize("line, key", [
    ("max_brokers_probed = 0", "max_brokers_probed"),
    ("probe_concurrency = 1000", "probe_concurrency"),
    ("max_metadata_response_bytes = 10", "max_metadata_response_bytes"),
    ('probe_concurrency = "many"', "probe_concurrency"),
])
def test_out_of_bounds_is_a_clear_error(line: str, key: str, tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match=rf"f\.toml:2: settings: key '{key}'"):
        parse_fleet(f"[settings]\n{line}\n", source="f.toml", secrets_path=tmp_path / "none.toml")
