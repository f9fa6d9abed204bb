"""CSV exports neutralise formula prefixes (OWASP CSV injection) in every text cell, whatever the reader takes
for the end of a row; numbers stay numbers."""

from __future__ import annotations

import csv
import io
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.export.csv_safe import FORMULA_PREFIXES, LINE_BREAKS, neutralise, safe_csv
from backend.views import charts

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A reader that ends a row at every line break it knows, inside quotes or not (some spreadsheets do for CR).
ROW_END = re.compile("\r\n|[" + "".join(LINE_BREAKS) + "]")


def _rows_split_at_every_break(text: str) -> list[list[str]]:
    lines = ROW_END.split(text)
    assert lines[-1] == ""  # the text ends with a row end
    return [next(csv.reader([line], strict=False)) if line else [] for line in lines[:-1]]


@pytest.mark.parametrize("prefix", ["=", "+", "-", "@"])
def test_every_formula_prefix_is_neutralised(prefix: str) -> None:
    frame = pd.DataFrame({"key": ["acks"], "value": [f'{prefix}HYPERLINK("https://evil.invalid","x")'],
                          "instances": [-3], "share": [-0.5]})
    rows = list(csv.reader(io.StringIO(safe_csv(frame))))
    assert rows[0] == ["key", "value", "instances", "share"]
    assert rows[1][1] == "'" + frame.loc[0, "value"]
    assert rows[1][0] == "acks" and rows[1][2] == "-3" and rows[1][3] == "-0.5"  # numbers untouched


@pytest.mark.parametrize("text", ["x\r=1+1", "x\n=1+1", "x\r\n@SUM(A1)", "a\x0b+1", "a\x0c-1", "a\x85=1",
                                  "a\u2028=1", "a\u2029=1", "a\x1c=1", "\r=1", "\t=1", "x\r,=cmd|' /C calc'!A0"])
def test_a_line_break_inside_a_cell_cannot_start_a_row(text: str) -> None:
    out = safe_csv(pd.DataFrame({"v": [text], "n": [1]}))
    assert out.count("\n") == 2 and not any(b in out.replace("\n", "") for b in LINE_BREAKS)
    rows = _rows_split_at_every_break(out)
    assert len(rows) == 2 and rows[1][-1] == "1"
    assert not rows[1][0].startswith(FORMULA_STARTS)
    assert ROW_END.search(text) is None or "␍" in rows[1][0] or "␊" in rows[1][0] or "<U+" in rows[1][0] \
        or "␋" in rows[1][0] or "␌" in rows[1][0] or "␜" in rows[1][0]  # the break is shown, not dropped


def test_the_reported_carriage_return_bypass_is_closed() -> None:
    assert safe_csv(pd.DataFrame({"v": ["x\r=1+1"]})) == "v\nx␍=1+1\n"


def test_non_text_cells_are_guarded_as_the_text_the_writer_prints() -> None:
    frame = pd.DataFrame({"c": pd.Categorical(["=a", "b"]), "l": [["=x"], b"=y"], "d": [pd.Timedelta(-1, "D"), None],
                          "n": [-1.5, 2]})
    rows = list(csv.reader(io.StringIO(safe_csv(frame))))
    assert rows[1][0] == "'=a" and rows[2][1] == "b'=y'" and rows[1][2].startswith("'-1 days")
    assert rows[1][3] == "-1.5"


_TRICKY = st.sampled_from(["=", "+", "-", "@", "\t", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
                           "\x85", "\u2028", "\u2029", ",", '"', "'", "=HYPERLINK(\"http://evil.invalid\")", "\u202e",
                           "\x00", "\x1b"])
_CELL = st.lists(_TRICKY | st.text(max_size=4) | st.characters(codec=None, categories=["Cs", "Cc", "Cf", "Zl", "Zp"]),
                 max_size=6).map("".join)


@settings(max_examples=300, deadline=None)
@given(cells=st.lists(st.tuples(_CELL, _CELL, st.integers(-10**6, 10**6)), min_size=1, max_size=8),
       header=_CELL)
def test_no_reader_finds_a_formula_or_an_extra_row(cells: list[tuple[str, str, int]], header: str) -> None:
    frame = pd.DataFrame(cells, columns=[header or "a", "b", "n"])
    out = safe_csv(frame)
    out.encode("utf-8")  # lone surrogates made visible: the download is valid UTF-8
    # A reader that ends rows at every CR, LF and other break finds exactly the frame's rows and columns...
    rows = _rows_split_at_every_break(out)
    assert len(rows) == len(frame) + 1
    assert all(len(row) == 3 for row in rows)
    # ...and no text cell of them starts a formula; numbers stay numbers.
    for row in rows:
        assert not row[0].startswith(FORMULA_STARTS) and not row[1].startswith(FORMULA_STARTS), row
    assert [int(r[2]) for r in rows[1:]] == [n for _, _, n in cells]
    # A CSV reader reads back exactly the neutralised cells: nothing is lost but the guard and the visible forms.
    parsed = list(csv.reader(io.StringIO(out, newline="")))
    assert parsed[1:] == [[neutralise(a), neutralise(b), str(n)] for a, b, n in cells]
    assert set(FORMULA_PREFIXES) >= {"=", "+", "-", "@"}


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
