"""`RecallHit`: one recalled item, with both of its times.

A hit says when what it states became true on the cycle's clock (`valid_at`: a case's
matured outcome, a memory entry's episode) and when the system wrote it (`recorded_at`:
the reflection or the distillation, wall clock), so an audit can tell "what did the
agent know on that day" from "when did we learn it".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from reflexmem.ledger.enums import Tier


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled item: a role case (episodic) or an active memory entry."""

    kind: Literal["case", "memory"]
    id: str
    tier: Tier
    text: str
    role: str
    symbol: str | None
    scenario: str | None
    outcome_class: str | None
    decided_at: datetime | None
    score: float
    match: float
    text_score: float
    vector_score: float | None
    valid_at: datetime | None = None
    recorded_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the CLI prints it)."""
        return {
            "kind": self.kind,
            "id": self.id,
            "tier": self.tier.value,
            "text": self.text,
            "role": self.role,
            "symbol": self.symbol,
            "scenario": self.scenario,
            "outcome_class": self.outcome_class,
            "decided_at": _iso(self.decided_at),
            "valid_at": _iso(self.valid_at),
            "recorded_at": _iso(self.recorded_at),
            "score": round(self.score, 6),
            "match": round(self.match, 6),
            "text_score": round(self.text_score, 6),
            "vector_score": None if self.vector_score is None else round(self.vector_score, 6),
        }
