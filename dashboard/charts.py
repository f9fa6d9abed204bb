"""Plotly chart factories for the pages: the ones in backend.views.charts, shared with the CLI report."""

from __future__ import annotations

from backend.views.charts import *  # noqa: F403 - this module is the pages' name for the shared factories
from backend.views.charts import __all__  # noqa: F401
