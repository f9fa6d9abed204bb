"""The one rule for untrusted text (issue 32): hidden characters visible, lone surrogates storable, answers checked
against questions, broker error texts capped with their secrets withheld."""

from __future__ import annotations

import unicodedata

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from backend.configs.sensitive import safe_error_text
from backend.kafka.answers import only_requested
from backend.plain_text import HIDDEN, HIDDEN_RANGES, capped, file_label, utf8_safe, visible
from backend.views.display import visible_frame
from dashboard.text import plain, plain_list

CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def test_the_hidden_ranges_are_the_control_format_surrogate_and_separator_characters() -> None:
    listed = {cp for lo, hi in HIDDEN_RANGES for cp in range(lo, hi + 1)}
    assert all(unicodedata.category(chr(cp)) in CATEGORIES for cp in listed)
    if unicodedata.unidata_version == "14.0.0":  # Python 3.11: exactly those categories
        assert listed == {cp for cp in range(0x110000) if unicodedata.category(chr(cp)) in CATEGORIES}
    assert all(HIDDEN.fullmatch(chr(cp)) for cp in (0, 0x1B, 0x7F, 0x85, 0x200B, 0x202E, 0x2066, 0xFEFF, 0xDCFF))


def test_visible_shows_what_would_hide_or_reorder_text() -> None:
    assert visible("abc\u202egpj.exe") == "abc<U+202E>gpj.exe"
    assert visible("a\r\n\x1b[31m\x07\x00\t\x7f") == "a␍␊␛[31m␇␀␉␡"
    assert visible("x\u2028y\u200bz\udcff") == "x<U+2028>y<U+200B>z<U+DCFF>"
    assert visible(None) == "" and visible(12) == "12" and visible("Grüße ü 日本") == "Grüße ü 日本"


@given(st.text(alphabet=st.characters(codec=None)))
def test_visible_leaves_no_hidden_character_and_is_encodable(text: str) -> None:
    shown = visible(text)
    assert HIDDEN.search(shown) is None
    shown.encode("utf-8")
    assert visible(shown) == shown


def test_plain_puts_visible_text_in_a_code_span_the_text_cannot_close() -> None:
    assert plain("abc\u202egpj.exe") == "` abc<U+202E>gpj.exe `"
    assert plain("a ``x`` [l](http://evil.invalid)\nb") == "``` a ``x`` [l](http://evil.invalid)␊b ```"
    assert plain("") == "—" and plain(None) == "—"
    assert plain_list(["![x](http://evil.invalid/i.png)", "b"]) == "` ![x](http://evil.invalid/i.png) `, ` b `"
    assert plain_list([]) == "none" and plain_list(range(3), limit=2) == "` 0 `, ` 1 ` and 1 more"


def test_surrogates_and_odd_file_names_become_utf8_text() -> None:
    assert utf8_safe("ok") == "ok" and utf8_safe("\udcff x") == "\\udcff x"
    assert file_label(b"bad\xff.jsonl".decode("utf-8", "surrogateescape")) == "bad\\xff.jsonl"
    assert file_label("plain.jsonl") == "plain.jsonl"
    cut = capped("x" * 10_000, 100)
    assert len(cut) <= 100 and cut.endswith("characters cut]") and capped("short", 100) == "short"


def test_tables_get_visible_cells_and_names_without_copying_clean_frames() -> None:
    clean = pd.DataFrame({"a": ["x", "y"], "n": [1, 2]})
    assert visible_frame(clean) is clean
    frame = pd.DataFrame({"topic": ["abc\u202egpj.exe", "ok"], "n": [1, 2], "cat": pd.Categorical(["\x1b", "b"]),
                          "list": [["\u202ex"], []], "bad\u202ename": ["a", "b"]})
    shown = visible_frame(frame)
    assert list(shown["topic"]) == ["abc<U+202E>gpj.exe", "ok"] and list(shown["n"]) == [1, 2]
    assert list(shown["cat"]) == ["␛", "b"] and shown["list"][0] == ["<U+202E>x"]
    assert "bad<U+202E>name" in shown.columns and frame["topic"][0] == "abc\u202egpj.exe"  # the input is untouched


def test_only_requested_keeps_what_was_asked_once_and_names_the_rest() -> None:
    answered = [("t", "a"), ("t", "ghost <script>"), ("t", "a"), ("b", "2"), ("t", "b")]
    checked = only_requested([("t", "a"), ("t", "b")], answered, key=lambda r: r)
    assert checked.kept == [("t", "a"), ("t", "b")]
    assert (checked.unrequested, checked.repeated) == (2, 1)
    assert checked.problem("topics") == ("the answer held 2 topics that were not asked for (e.g. 't ghost <script>') "
                                         "and 1 topics answered twice; dropped")
    assert only_requested(["x"], ["x"], key=str).problem() is None


def test_a_broker_error_text_is_capped_and_redacted_like_a_value() -> None:
    text = "INVALID_REQUEST: " + "x" * 50 + " password=hunter2-H " + "y" * 60_000 + " token=hunter2-T"
    safe = safe_error_text(text)
    assert len(safe) <= 4096 and "hunter2" not in safe and "[REDACTED]" in safe
    assert safe.endswith(f"… [{len(text) - 4096 + 48:,} more characters cut]")
    assert safe_error_text("pwd=abc access_key=XYZ bearer abcdefghijkl \udcff") == \
        "[REDACTED] [REDACTED] [REDACTED] \\udcff"
    assert safe_error_text(None) is None and safe_error_text("connection refused") == "connection refused"
