"""CSV exports neutralise formula prefixes (OWASP CSV injection) in every text cell; numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from backend.export.csv_safe import FORMULA_PREFIXES, safe_csv
from backend.views import charts


@pytest.mark.parametrize("prefix", FORMULA_PREFIXES)
def test_every_formula_prefix_is_neutralised(prefix: str) -> None:
    frame = pd.DataFrame({"key": ["acks"], "value": [f'{prefix}HYPERLINK("https://evil.invalid","x")'],
                          "instances": [-3], "share": [-0.5]})
    rows = list(csv.reader(io.StringIO(safe_csv(frame))))
    assert rows[0] == ["key", "value", "instances", "share"]
    assert rows[1][1] == "'" + frame.loc[0, "value"]
    assert rows[1][0] == "acks" and rows[1][2] == "-3" and rows[1][3] == "-0.5"  # numbers untouched


def test_chart_labels_and_hover_carry_no_markup() -> None:
    hostile = '<a href="https://evil.invalid">x</a><span style="color:red">y</span>'
    frame = pd.DataFrame({"cluster": [hostile, "b"], "key": "acks", "value": [hostile, "all"], "instance_count": [1, 2]})
    fig = charts.categorical_distribution(frame, key="acks")
    spec = fig.to_json()
    assert "<a href" not in spec and "<span style" not in spec
    assert all(hostile not in (t.hovertemplate or "") for t in fig.data)  # values go through customdata
    matrix = charts.version_matrix_chart(pd.DataFrame({"cluster": ["a", "b"], "version": [hostile, "4.3.1"],
                                                       "brokers": [3, 1]}))
    assert "<a href" not in matrix.to_json()
    assert [list(r) for r in matrix.data[0].text] == [["", "3"], ["1", ""]]  # no broker: a blank cell, not 0
