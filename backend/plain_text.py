"""Untrusted text made visible and storable: the one character rule for pages, charts, CSV, reports and metric labels.

Brokers, ZooKeeper, clients and file names control strings that the product shows and writes. Each surface
has its own escaping (a Markdown code span in `dashboard.components.plain`, HTML escaping for Plotly labels,
formula guards in CSV, the exposition format's escapes for /metrics), and all of them first pass the text
through `visible`: characters that are invisible or that change how the text around them is drawn (controls,
bidi overrides and isolates, zero-width and other format characters, line and paragraph separators, lone
surrogates) are shown as what they are, so `abc\u202egpj.exe` reads `abc<U+202E>gpj.exe`, not `abcexe.jpg`.

`utf8_safe` is for text on its way to the lake (Arrow strings must be UTF-8): lone surrogates, which JSON and
non-UTF-8 file names produce, become backslash escapes. `file_label` renders a file name as UTF-8 text.
"""

from __future__ import annotations

import os
import re

# Unicode categories Cc (controls), Cf (format: bidi controls, zero-width characters, the BOM, tags...),
# Cs (surrogates), Zl and Zp (line and paragraph separators), as of Unicode 14 (Python 3.11's unicodedata);
# tests/unit/foundation/test_plain_text.py checks the ranges against unicodedata.
HIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x2028, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
HIDDEN = re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in HIDDEN_RANGES) + "]")
_CUT_NOTE_CHARS = 48
_SURROGATE = re.compile("[\ud800-\udfff]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # the control pictures: NUL -> ␀, LF -> ␊, ESC -> ␛ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def visible(text: object) -> str:
    """`text` (None: '') with every control, format, bidi, separator and lone surrogate character made visible."""
    value = "" if text is None else str(text)
    return HIDDEN.sub(_shown, value) if HIDDEN.search(value) else value


def has_hidden(text: str) -> bool:
    """Whether `visible` would change `text`."""
    return HIDDEN.search(text) is not None


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a lone surrogate, which no UTF-8 encoder (nor Arrow) takes."""
    return _SURROGATE.search(text) is not None


def utf8_safe(text: str) -> str:
    """`text` as valid UTF-8 text: each lone surrogate becomes a backslash escape (\\udcff); nothing else changes."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def file_label(name: str | os.PathLike[str]) -> str:
    """A file name or path as UTF-8 text: bytes that are not UTF-8 (surrogate-escaped by the OS layer) as \\xff."""
    text = os.fspath(name)
    if not _SURROGATE.search(text):
        return text
    try:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    except UnicodeError:  # a surrogate that is no escaped byte
        return utf8_safe(text)


def capped(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters (limit >= 48), saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - _CUT_NOTE_CHARS)
    return text[:keep] + f"… [{len(text) - keep:,} characters cut]"
