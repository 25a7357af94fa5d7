"""Budget gate in front of the model layer: calls and tokens per batch and per day.

Model reflection costs money, so each batch is admitted against what is left of the
batch and the day. Cases over the limit are deferred with reason `budget_deferred`,
never dropped: the caller keeps them pending and offers them first in the next batch,
which on a new day starts from a fresh allowance.

Admission reserves one call and an estimated token count per admitted case at once, so
two admissions on the same day cannot both spend the same allowance. `record()` then
swaps the reservation for the calls and tokens really used (retries included). The
ledger is plain data, `{"YYYY-MM-DD": {"calls": int, "tokens": int}}`, which the caller
persists and hands to the next gate.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Generic, TypeVar

from reflexmem.ledger.enums import PendingReason
from reflexmem.reflection.types import Reflection

T = TypeVar("T")
Ledger = dict[str, dict[str, int]]


@dataclass(frozen=True)
class BudgetLimits:
    """Hard limits; `tokens_per_call` is the estimate charged for a call not yet made."""

    calls_per_batch: int
    tokens_per_batch: int
    calls_per_day: int
    tokens_per_day: int
    tokens_per_call: int

    def __post_init__(self) -> None:
        values = (
            self.calls_per_batch,
            self.tokens_per_batch,
            self.calls_per_day,
            self.tokens_per_day,
        )
        if min(values) < 0 or self.tokens_per_call <= 0:
            raise ValueError(f"invalid budget limits: {self}")


@dataclass(frozen=True)
class Deferred(Generic[T]):
    """A case held back by the budget; it stays pending and is offered again."""

    item: T
    detail: str
    reason: PendingReason = PendingReason.BUDGET_DEFERRED


class BudgetGate:
    """Admits cases for model reflection on one day against a persisted usage ledger."""

    def __init__(self, limits: BudgetLimits, *, day: date, ledger: Ledger | None = None) -> None:
        self.limits = limits
        self.day = day
        self._ledger: Ledger = copy.deepcopy(ledger) if ledger else {}
        self._reserved_calls = 0
        self._reserved_tokens = 0

    @property
    def ledger(self) -> Ledger:
        """A copy of the usage ledger to persist; it includes outstanding reservations."""
        return copy.deepcopy(self._ledger)

    def used_today(self) -> tuple[int, int]:
        """Return (calls, tokens) charged to the gate's day so far."""
        entry = self._ledger.get(self.day.isoformat(), {})
        return entry.get("calls", 0), entry.get("tokens", 0)

    def _charge(self, calls: int, tokens: int) -> None:
        entry = self._ledger.setdefault(self.day.isoformat(), {"calls": 0, "tokens": 0})
        entry["calls"] = max(entry.get("calls", 0) + calls, 0)
        entry["tokens"] = max(entry.get("tokens", 0) + tokens, 0)

    def admit(self, cases: Sequence[T]) -> tuple[list[T], list[Deferred[T]]]:
        """Split `cases` in order into those that fit the budget and those deferred."""
        lim = self.limits
        calls, tokens = self.used_today()
        by_calls = min(lim.calls_per_batch, lim.calls_per_day - calls)
        by_tokens = min(lim.tokens_per_batch, lim.tokens_per_day - tokens) // lim.tokens_per_call
        n = max(0, min(len(cases), by_calls, by_tokens))
        allowed = list(cases[:n])
        if by_calls <= by_tokens:
            detail = (
                f"call budget: {n} call(s) left (batch {lim.calls_per_batch}, day used {calls})"
            )
        else:
            detail = (
                f"token budget: room for {n} call(s) at {lim.tokens_per_call} tokens "
                f"(batch {lim.tokens_per_batch}, day used {tokens})"
            )
        deferred = [Deferred(item, detail) for item in cases[n:]]
        reserved_tokens = n * lim.tokens_per_call
        self._charge(n, reserved_tokens)
        self._reserved_calls += n
        self._reserved_tokens += reserved_tokens
        return allowed, deferred

    def record(self, calls: int, tokens: int) -> None:
        """Replace the outstanding reservation with the calls and tokens actually used."""
        self._charge(calls - self._reserved_calls, tokens - self._reserved_tokens)
        self._reserved_calls = 0
        self._reserved_tokens = 0

    def record_reflections(self, reflections: Sequence[Reflection]) -> None:
        """`record()` from the reflections' own call counts and reported token usage.

        A call whose response reported no usage is charged at the estimate, so silence
        from the endpoint cannot make calls look free.
        """
        calls = sum(r.model_calls for r in reflections)
        estimate = self.limits.tokens_per_call
        tokens = sum(
            r.usage.total_tokens if r.usage is not None else r.model_calls * estimate
            for r in reflections
        )
        self.record(calls, tokens)
