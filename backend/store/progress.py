"""Progress files under lake/_state/<area>/<name>.json (ingest offsets and the like), each replaced atomically."""

from __future__ import annotations

from typing import Any

from backend.store.atomic import read_json, write_json_atomic
from backend.store.location import LakeLocation, parse_lake

STATE_ROOT = "_state"


def state_path(lake: LakeLocation, area: str, name: str) -> str:
    """Where the state file of one area (ingest, pipeline, lake) and name lives."""
    return lake.path(STATE_ROOT, area, f"{name}.json")


def load_state(lake: str | LakeLocation, area: str, name: str) -> dict[str, Any]:
    """A saved state ({} when absent)."""
    where = lake if isinstance(lake, LakeLocation) else parse_lake(lake)
    value = read_json(where, state_path(where, area, name), {})
    return value if isinstance(value, dict) else {}


def save_state(lake: str | LakeLocation, area: str, name: str, state: dict[str, Any]) -> None:
    """Atomically replace a state file."""
    where = lake if isinstance(lake, LakeLocation) else parse_lake(lake)
    write_json_atomic(where, state_path(where, area, name), state)
