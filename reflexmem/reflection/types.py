"""Values exchanged by every reflection layer (rules L0/L1, model L3) and the caller.

A settled case goes in as a `ReflectionInput`; a `Reflection` comes out. The invariants
live on `Reflection` itself rather than in each layer, so no layer can hand back a
failed reflection that still carries a class or a lesson, or a lesson for a class that
teaches nothing: the caller turns `failed` into case state `reflection_failed`, and a
fabricated verdict there would be learned as if it were real.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from reflexmem.ledger.enums import CaseState, Direction, OutcomeClass
from reflexmem.registry import RolePolicy

LEARNABLE = frozenset({OutcomeClass.LOGIC_ERROR, OutcomeClass.MISSING_DATA})
"""Classes whose cases teach the role something; only these may carry a lesson."""

LESSON_MAX_CHARS = 300
"""A lesson is one sentence shown in later decision prompts, so it must stay short."""

Layer = Literal["L0", "L1", "L3"]


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got {value.isoformat()}")
    return value


@dataclass(frozen=True)
class EvidenceRef:
    """Points at one evidence item by kind and timestamp, the pair that makes it unique."""

    kind: str
    as_of: datetime

    def __str__(self) -> str:
        return f"{self.kind}@{self.as_of.isoformat()}"


@dataclass(frozen=True)
class EvidenceItem:
    """One entry of a decision's evidence list, as recorded at decision time."""

    kind: str
    as_of: datetime
    value: object = None
    # Derived once here because batch classification reads them for every item.
    ref: EvidenceRef = field(init=False, repr=False, compare=False)
    epoch: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.kind:
            raise ValueError("evidence kind must not be empty")
        _aware(self.as_of, f"evidence {self.kind!r} as_of")
        object.__setattr__(self, "ref", EvidenceRef(self.kind, self.as_of))
        object.__setattr__(self, "epoch", self.as_of.timestamp())

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> EvidenceItem:
        """Parse `{"kind", "as_of", "value"}`; an unparseable timestamp is an error, not a guess."""
        kind = raw.get("kind")
        as_of = raw.get("as_of")
        if not isinstance(kind, str):
            raise ValueError(f"evidence item without a string kind: {dict(raw)!r}")
        if isinstance(as_of, str):
            stamp = datetime.fromisoformat(as_of)
        elif isinstance(as_of, datetime):
            stamp = as_of
        else:
            raise ValueError(f"evidence {kind!r} has no ISO as_of timestamp")
        return cls(kind=kind, as_of=stamp, value=raw.get("value"))


def parse_evidence(raw: Iterable[Mapping[str, object]] | None) -> tuple[EvidenceItem, ...]:
    """Parse a decision's JSON evidence list; `None` means the decision recorded none."""
    if raw is None:
        return ()
    items: list[EvidenceItem] = []
    for i, entry in enumerate(raw):
        try:
            items.append(EvidenceItem.from_json(entry))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"evidence[{i}]: {exc}") from exc
    return tuple(items)


def _finite(value: float | None, what: str) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {value!r}")


@dataclass(frozen=True)
class ReflectionInput:
    """A settled role case with everything a reflector may look at.

    Returns are simple returns over the role's probe horizon. `realized_vol` is the
    instrument's daily return volatility over that horizon. `market_shock_sigma` is the
    benchmark's move over the horizon in units of its own horizon volatility (signed);
    `shock_observable` says the shock was knowable at decision time (e.g. a scheduled
    event in the evidence), which keeps it from excusing the loss. `signal` in [-1, 1]
    is what the role's own available evidence said (positive = long).
    """

    case_id: str
    role: RolePolicy
    direction: Direction
    decided_at: datetime
    evidence: tuple[EvidenceItem, ...]
    realized_return: float
    benchmark_return: float | None = None
    realized_vol: float | None = None
    market_shock_sigma: float | None = None
    shock_observable: bool = False
    signal: float | None = None

    def __post_init__(self) -> None:
        _aware(self.decided_at, "decided_at")
        object.__setattr__(self, "evidence", tuple(self.evidence))
        _finite(self.realized_return, "realized_return")
        _finite(self.benchmark_return, "benchmark_return")
        _finite(self.realized_vol, "realized_vol")
        _finite(self.market_shock_sigma, "market_shock_sigma")
        _finite(self.signal, "signal")
        if self.realized_vol is not None and self.realized_vol < 0:
            raise ValueError(f"realized_vol must be >= 0, got {self.realized_vol}")
        if self.signal is not None and not -1.0 <= self.signal <= 1.0:
            raise ValueError(f"signal must lie in [-1, 1], got {self.signal}")


@dataclass(frozen=True)
class TokenUsage:
    """Tokens a model call reported in its `usage` field, summed over attempts."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True)
class Reflection:
    """One layer's verdict on one case, or the record that it could not give one."""

    case_id: str
    outcome_class: OutcomeClass | None
    lesson: str | None
    evidence_used: tuple[EvidenceRef, ...]
    reasons: tuple[str, ...]
    layer: Layer
    failed: bool = False
    error: str | None = None
    model_calls: int = 0
    usage: TokenUsage | None = field(default=None)

    def __post_init__(self) -> None:
        if self.failed:
            if self.outcome_class is not None or self.lesson is not None:
                raise ValueError("a failed reflection must carry neither class nor lesson")
            if not self.error:
                raise ValueError("a failed reflection must say why it failed")
            return
        if self.outcome_class is None:
            raise ValueError("a successful reflection needs an outcome class")
        if self.error is not None:
            raise ValueError("a successful reflection carries no error")
        if self.outcome_class in LEARNABLE:
            if not self.lesson or not self.lesson.strip():
                raise ValueError(f"{self.outcome_class} needs a lesson")
            if len(self.lesson) > LESSON_MAX_CHARS:
                raise ValueError(f"lesson longer than {LESSON_MAX_CHARS} characters")
        elif self.lesson is not None:
            raise ValueError(f"{self.outcome_class} teaches nothing and must carry no lesson")

    @property
    def case_state(self) -> CaseState:
        """The state the caller writes back to the role case."""
        return CaseState.REFLECTION_FAILED if self.failed else CaseState.REFLECTED

    def to_json(self) -> dict[str, object]:
        """Plain data for the `RoleCase.reflection` JSON column."""
        return {
            "case_id": self.case_id,
            "class": None if self.outcome_class is None else str(self.outcome_class),
            "lesson": self.lesson,
            "evidence": [str(ref) for ref in self.evidence_used],
            "reasons": list(self.reasons),
            "layer": self.layer,
            "failed": self.failed,
            "error": self.error,
            "model_calls": self.model_calls,
            "usage": None
            if self.usage is None
            else {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "total_tokens": self.usage.total_tokens,
            },
        }


class Reflector(Protocol):
    """Anything that turns a batch of settled cases into one reflection per case, in order."""

    def reflect(self, batch: Sequence[ReflectionInput]) -> list[Reflection]:
        """Reflect on every case; a case it cannot judge comes back with `failed=True`."""
        ...
