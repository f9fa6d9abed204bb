"""Which lakes the UI may show: the configured lake and the fleet file's named lakes, never one the browser typed."""

from __future__ import annotations

import logging

from backend.config import default_fleet_file
from backend.store.location import resolve_lake

DEFAULT_NAME = "default"
_log = logging.getLogger(__name__)


def configured_lakes(fleet_file: str | None = None) -> dict[str, str]:
    """{name: location}: "default" is the one resolver's lake; further names come from [settings] lakes."""
    path = fleet_file or default_fleet_file()
    settings = None
    if path:
        from backend.config import load_fleet

        try:
            settings = load_fleet(path).settings
        except (OSError, ValueError) as exc:  # a broken fleet file must not break the dashboard
            _log.warning("fleet file %s not usable for the lake: %s", path, exc)
    choices = {DEFAULT_NAME: resolve_lake(None, fleet_lake_path=settings.lake_path if settings else None)}
    for name, location in (settings.lakes if settings else {}).items():
        choices.setdefault(name, location)
    return choices
