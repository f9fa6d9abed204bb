"""The one plain-text helper: untrusted text (from a broker, ZooKeeper, a client, a file name or a URL) for Markdown
surfaces (captions, alerts, `help=` tooltips), widget options and lists of names."""

from __future__ import annotations

import re
from collections.abc import Iterable

from backend.plain_text import visible


def plain(text: object) -> str:
    """Untrusted text for a Markdown-rendering call (captions, alerts, `help=` tooltips, labels): the project's one
    rule. Hidden characters are made visible first (`backend.plain_text.visible`: a bidi override shows as <U+202E>,
    a line break as ␊, ESC as ␛), then the text goes in an inline code span, rendered literally, so no link,
    autolink, image, HTML, emoji shortcode or colour directive comes of it. The fence is one backtick longer than
    any run of backticks in the text, so the text cannot close it."""
    value = visible(text)
    fence = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    return f"{fence} {value} {fence}" if value.strip() else "—"


def plain_list(items: Iterable[object], *, limit: int = 50) -> str:
    """Untrusted names joined for Markdown (each through `plain`), the first `limit` and how many more."""
    names = list(items)
    shown = ", ".join(plain(n) for n in names[:limit])
    return (shown + (f" and {len(names) - limit:,} more" if len(names) > limit else "")) or "none"


def option(value: object) -> str:
    """A widget option as shown (`format_func=components.option` on selectboxes and multiselects whose options come
    from brokers or clients): plain text there, with hidden characters made visible."""
    return visible(value)
