"""The one plain-text helper: untrusted text (from a broker, ZooKeeper, a client or a URL) for Markdown surfaces."""

from __future__ import annotations

import re


def plain(text: object) -> str:
    """Untrusted text for a Markdown-rendering call, as an inline code span: rendered literally, so no link,
    autolink, image, HTML, emoji shortcode or colour directive comes of it. The fence is one backtick longer than
    any run of backticks in the text, so the text cannot close it; line breaks become spaces."""
    value = ("" if text is None else str(text)).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall("`+", value)), default=0) + 1)
    return f"{fence} {value} {fence}" if value.strip() else "—"
