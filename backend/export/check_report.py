"""What one `fleetview check` found, and the exit code it means (0 pass, 1 violations, 2 could not evaluate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from backend.standards.policy import PolicySet
from backend.store.standards_model import PolicyResult

EXIT_PASS, EXIT_VIOLATIONS, EXIT_UNKNOWN = 0, 1, 2


@dataclass
class CheckReport:
    """One check: the policies, what was judged (visible clusters only), and what it means for the exit code."""

    policies: PolicySet
    results: list[PolicyResult]
    clusters: list[str]
    source: str
    evaluated_at: datetime
    evidence_at: dict[str, datetime | None] = field(default_factory=dict)  # per cluster: when its poll read it
    notes: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        """Results (policy, cluster pairs) with this status."""
        return sum(1 for r in self.results if r.status == status)

    @property
    def exit_code(self) -> int:
        """1 with any violation; else 2 when any result is unknown or nothing was judged; else 0."""
        if self.count("violation"):
            return EXIT_VIOLATIONS
        if self.count("unknown") or not self.results:
            return EXIT_UNKNOWN
        return EXIT_PASS

    @property
    def verdict(self) -> str:
        """pass / violations / could not evaluate."""
        return {EXIT_PASS: "pass", EXIT_VIOLATIONS: "violations", EXIT_UNKNOWN: "could not evaluate"}[self.exit_code]


