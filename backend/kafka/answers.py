"""Answers checked against questions: keep only what was asked for.

A broker (or anything on its address) may answer with resources nobody asked for: extra topics in a
DescribeConfigs answer, another broker's id, partitions of a topic that was not listed, a group that was not
described. Kept, they would be stored, listed and checked as if they existed. Every collector filters each
answer through `only_requested` with the keys it asked for, and reports what it dropped (`Checked.problem`).
Used by DescribeConfigs (`backend.kafka.configs`); the consumer-group and ListOffsets collectors call it the same
way with (group id) and (topic, partition) keys.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from backend.plain_text import visible

T = TypeVar("T")
SAMPLE_CHARS = 60


@dataclass
class Checked(Generic[T]):
    """The answered items that were asked for (first answer per key, in answer order) and what was dropped."""

    kept: list[T] = field(default_factory=list)
    unrequested: int = 0  # items whose key was not asked for
    repeated: int = 0  # second and later answers for one key
    sample: str | None = None  # one dropped key, as short visible text

    def problem(self, what: str = "resources") -> str | None:
        """One line saying what was dropped (None when the answer held only what was asked)."""
        parts = []
        if self.unrequested:
            parts.append(f"{self.unrequested} {what} that were not asked for" + (f" (e.g. {self.sample})" if self.sample else ""))
        if self.repeated:
            parts.append(f"{self.repeated} {what} answered twice")
        return "the answer held " + " and ".join(parts) + "; dropped" if parts else None


def only_requested(asked: Iterable[Hashable], answered: Iterable[T], key: Callable[[T], Hashable],
                   label: Callable[[T], str] | None = None) -> Checked[T]:
    """Keep the items of `answered` whose `key(item)` is one of `asked`, once each; count the rest (`label` names a
    dropped item in the problem line, by default its key)."""
    wanted = set(asked)
    seen: set[Hashable] = set()
    out: Checked[T] = Checked()
    for item in answered:
        k = key(item)
        if k not in wanted:
            out.unrequested += 1
            if out.sample is None:
                text = visible(label(item) if label is not None else k if not isinstance(k, tuple)
                               else " ".join(map(str, k)))
                out.sample = repr(text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…")
            continue
        if k in seen:
            out.repeated += 1
            continue
        seen.add(k)
        out.kept.append(item)
    return out
