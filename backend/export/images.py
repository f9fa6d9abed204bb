"""Render Plotly figures to PNG, SVG and self-contained HTML (kaleido drives a local Chromium)."""

from __future__ import annotations

import os
import shutil

import kaleido
import plotly.graph_objects as go
import plotly.io as pio

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
IMAGE_TIMEOUT_S = 60.0


class ExportError(RuntimeError):
    """Raised when a figure cannot be rendered to an image."""


def ensure_browser() -> str:
    """Point kaleido at a local Chromium (env BROWSER_PATH wins) and return its path."""
    found = os.environ.get("BROWSER_PATH") or next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)
    if not found:
        raise ExportError("no Chromium found for PNG/SVG export: install chromium or set BROWSER_PATH")
    os.environ["BROWSER_PATH"] = found
    return found


def figure_image(fig: go.Figure, fmt: str, *, width: int = 1200, height: int | None = None) -> bytes:
    """Render a figure as 'png' or 'svg' bytes."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"unsupported image format {fmt!r}; use png or svg")
    ensure_browser()
    height = height or int(fig.layout.height or 600)
    try:
        image = kaleido.calc_fig_sync(fig, opts={"format": fmt, "width": width, "height": height},
                                      kopts={"timeout": IMAGE_TIMEOUT_S})
    except Exception as exc:  # kaleido raises several private error types
        raise ExportError(f"{fmt.upper()} export failed: {exc}") from exc
    return image if isinstance(image, bytes) else str(image).encode()


def figure_html(fig: go.Figure) -> str:
    """Interactive HTML of a figure with plotly.js inlined (no network access needed to open it)."""
    return pio.to_html(fig, include_plotlyjs=True, full_html=True, config={"displaylogo": False})
