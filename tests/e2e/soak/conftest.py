"""The lab fleet fixture, shared with the poller tests."""

from __future__ import annotations

from tests.integration.collect.conftest import lab_fleet

__all__ = ["lab_fleet"]
