"""Static chart export through kaleido and the local Chromium."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from backend.export.images import figure_html, figure_image
from dashboard import charts


def _figure() -> go.Figure:
    frame = pd.DataFrame({"cluster": ["a", "b"], "version": ["Apache Kafka 3.9.1", "Apache Kafka 4.1.0"], "brokers": [3, 2]})
    return charts.version_matrix_chart(frame)


def test_png_and_svg_are_real_images() -> None:
    png = figure_image(_figure(), "png", width=600, height=300)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    svg = figure_image(_figure(), "svg", width=600, height=300)
    assert svg.lstrip().startswith(b"<svg") and b"Apache Kafka 4.1.0" in svg


def test_html_inlines_plotly() -> None:
    html = figure_html(_figure())
    assert "<script src=" not in html and "Apache Kafka 3.9.1" in html


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported image format"):
        figure_image(_figure(), "gif")
