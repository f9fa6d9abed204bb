"""The part of the lake a user may see: cluster names, the cluster ids they report, and text with other names hidden."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

HIDDEN_CLUSTER = "(a cluster you cannot view)"
# Characters of a cluster name (backend.config): a hidden name is replaced only where it stands alone.
_NAME_CHARS = "A-Za-z0-9._-"


@dataclass(frozen=True)
class Scope:
    """What one user sees of one lake: None for names means everything (login off)."""

    names: frozenset[str] | None = None
    ids: frozenset[str] = frozenset()
    hidden_names: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @property
    def everything(self) -> bool:
        """True when nothing is hidden (login off, or a user who may view every known cluster)."""
        return self.names is None or not self.hidden_names

    def may_view(self, name: object) -> bool:
        """Whether a cluster name is visible."""
        return self.names is None or name in self.names

    def by_name(self, frame: pd.DataFrame, column: str = "cluster_name") -> pd.DataFrame:
        """Rows of visible clusters (by name)."""
        if self.names is None or column not in frame:
            return frame
        return frame[frame[column].isin(self.names)]

    def by_id(self, frame: pd.DataFrame, *columns: str) -> pd.DataFrame:
        """Rows whose cluster id columns (default cluster_id) are all ids a visible cluster reports."""
        if self.names is None:
            return frame
        mask = pd.Series(True, index=frame.index)
        for column in columns or ("cluster_id",):
            if column in frame:
                mask &= frame[column].isin(self.ids)
        return frame[mask]

    def redact(self, text: object) -> object:
        """Text with the names of hidden clusters replaced (evidence and errors may name another cluster)."""
        if self._pattern is None or not isinstance(text, str):
            return text
        return self._pattern.sub(HIDDEN_CLUSTER, text)

    def redact_columns(self, frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
        """The frame with hidden names replaced in the given text columns."""
        present = [c for c in columns if c in frame]
        if self._pattern is None or frame.empty or not present:
            return frame
        out = frame.copy()
        for column in present:
            out[column] = out[column].map(self.redact)
        return out


def scope_for(visible: Iterable[str] | None, known: pd.DataFrame, fleet_names: Iterable[str] = ()) -> Scope:
    """The scope of a set of visible cluster names over a lake's known clusters (rows of cluster_name, cluster_id,
    polled_at: each cluster's latest id counts) and the fleet file's clusters. None: everything."""
    if visible is None:
        return Scope()
    names = frozenset(visible)
    frame = known[known["cluster_id"].notna()] if "cluster_id" in known else known.iloc[0:0]
    if "polled_at" in frame:
        frame = frame.sort_values("polled_at")
    latest = frame.groupby("cluster_name")["cluster_id"].last() if not frame.empty else pd.Series(dtype=object)
    ids = frozenset(str(cid) for name, cid in latest.items() if name in names)
    every = set(known["cluster_name"]) if "cluster_name" in known else set()
    hidden = frozenset(str(n) for n in every | set(fleet_names) if n not in names)
    pattern = None
    if hidden:
        alternatives = "|".join(re.escape(n) for n in sorted(hidden, key=len, reverse=True))
        pattern = re.compile(f"(?<![{_NAME_CHARS}])(?:{alternatives})(?![{_NAME_CHARS}])")
    return Scope(names, ids, hidden, pattern)
