"""The numeric key chart (Client configs "One key", Compare) draws each cluster's box at its own position."""

from __future__ import annotations

import re

import pandas as pd

from backend.export.images import figure_image
from backend.views import charts


def _summary() -> pd.DataFrame:
    return pd.DataFrame({"cluster": ["east", "west", "north"], "client_type": ["producer"] * 3,
                         "key": ["linger.ms"] * 3, "min": [0, 5, 100], "p50": [5, 10, 200],
                         "p90": [10, 20, 300], "max": [20, 50, 400]})


def _box_spans(svg: str) -> list[tuple[float, float]]:
    """(left, right) x of every drawn box, from the rendered SVG's box paths."""
    spans = []
    for path in re.findall(r'<path class="box" d="([^"]+)"', svg):
        xs = [float(x) for x in re.findall(r"[MLH](-?\d+(?:\.\d+)?)", path)]
        spans.append((min(xs), max(xs)))
    return spans


def test_each_cluster_box_is_drawn_at_its_own_position() -> None:
    svg = figure_image(charts.numeric_distribution(_summary(), key="linger.ms"), "svg", width=900, height=400).decode()
    spans = sorted(_box_spans(svg))
    assert len(spans) == 3
    for (_, right), (left, _) in zip(spans, spans[1:], strict=False):
        assert right <= left, spans  # side by side, no overlap
    for label in ("east (producer)", "west (producer)", "north (producer)"):
        assert label in svg  # one tick per cluster


def test_one_cluster_and_hostile_labels() -> None:
    frame = _summary().iloc[:1].assign(cluster="<b>x</b>")
    fig = charts.numeric_distribution(frame, key="linger.ms")
    assert len(fig.data) == 1 and "<b>" not in fig.data[0].x[0]
