from __future__ import annotations

import json
from datetime import date

import pytest

from reflexmem.ledger.enums import OutcomeClass, PendingReason
from reflexmem.reflection.budget import BudgetGate, BudgetLimits
from reflexmem.reflection.types import Reflection, TokenUsage

MONDAY, TUESDAY = date(2024, 3, 4), date(2024, 3, 5)


def limits(**overrides: int) -> BudgetLimits:
    values = {
        "calls_per_batch": 100,
        "tokens_per_batch": 1_000_000,
        "calls_per_day": 100,
        "tokens_per_day": 1_000_000,
        "tokens_per_call": 1_000,
    }
    values.update(overrides)
    return BudgetLimits(**values)


def test_cases_beyond_the_batch_call_limit_are_deferred_in_order_not_dropped() -> None:
    gate = BudgetGate(limits(calls_per_batch=2), day=MONDAY)
    allowed, deferred = gate.admit(["a", "b", "c", "d"])
    assert allowed == ["a", "b"]
    assert [d.item for d in deferred] == ["c", "d"]
    assert all(d.reason is PendingReason.BUDGET_DEFERRED for d in deferred)
    assert "call budget" in deferred[0].detail


def test_token_limit_admits_only_as_many_calls_as_the_estimate_fits() -> None:
    gate = BudgetGate(limits(tokens_per_batch=2_500), day=MONDAY)
    allowed, deferred = gate.admit(list("abcd"))
    assert allowed == ["a", "b"]
    assert len(deferred) == 2
    assert "token budget" in deferred[0].detail


def test_daily_limit_defers_later_batches_and_the_next_day_picks_them_up() -> None:
    lim = limits(calls_per_batch=3, calls_per_day=4)
    monday = BudgetGate(lim, day=MONDAY)
    first, held = monday.admit(["a", "b", "c"])
    assert first == ["a", "b", "c"]
    assert held == []
    # the next Monday batch: last time's deferrals first, then new cases
    second, held = monday.admit(["d", "e", "f"])
    assert second == ["d"]
    third, held_more = monday.admit([d.item for d in held])
    assert third == []
    assert [d.item for d in held_more] == ["e", "f"]
    stored = json.loads(json.dumps(monday.ledger))  # the caller persists plain data
    assert stored == {"2024-03-04": {"calls": 4, "tokens": 4_000}}

    tuesday = BudgetGate(lim, day=TUESDAY, ledger=stored)
    picked_up, still_held = tuesday.admit([d.item for d in held_more] + ["g"])
    assert picked_up == ["e", "f", "g"]
    assert still_held == []
    assert tuesday.ledger["2024-03-04"] == {"calls": 4, "tokens": 4_000}
    assert tuesday.ledger["2024-03-05"] == {"calls": 3, "tokens": 3_000}


def test_record_replaces_the_reservation_with_actual_usage() -> None:
    gate = BudgetGate(limits(), day=MONDAY)
    gate.admit(["a", "b"])
    assert gate.used_today() == (2, 2_000)
    gate.record(calls=3, tokens=450)  # one retry, far fewer tokens than estimated
    assert gate.used_today() == (3, 450)
    gate.record(calls=0, tokens=0)  # nothing outstanding: no change
    assert gate.used_today() == (3, 450)


def test_recorded_overspend_shrinks_what_the_day_has_left() -> None:
    gate = BudgetGate(limits(calls_per_day=10, tokens_per_day=5_000), day=MONDAY)
    gate.admit(["a"])
    gate.record(calls=1, tokens=4_500)
    allowed, deferred = gate.admit(["b", "c"])
    assert allowed == []
    assert len(deferred) == 2


def _reflection(case_id: str, calls: int, usage: TokenUsage | None) -> Reflection:
    return Reflection(
        case_id=case_id,
        outcome_class=OutcomeClass.VARIANCE,
        lesson=None,
        evidence_used=(),
        reasons=("x",),
        layer="L3",
        model_calls=calls,
        usage=usage,
    )


def test_reflections_without_reported_usage_are_charged_at_the_estimate() -> None:
    gate = BudgetGate(limits(tokens_per_call=1_000), day=MONDAY)
    gate.admit(["a", "b"])
    gate.record_reflections(
        [_reflection("a", 1, TokenUsage(100, 20, 120)), _reflection("b", 2, None)]
    )
    assert gate.used_today() == (3, 120 + 2 * 1_000)


def test_the_gate_does_not_mutate_the_ledger_it_was_given() -> None:
    given = {"2024-03-04": {"calls": 1, "tokens": 10}}
    gate = BudgetGate(limits(), day=MONDAY, ledger=given)
    gate.admit(["a"])
    assert given == {"2024-03-04": {"calls": 1, "tokens": 10}}
    assert gate.used_today() == (2, 1_010)


def test_limits_reject_a_zero_token_estimate() -> None:
    with pytest.raises(ValueError, match="invalid budget limits"):
        limits(tokens_per_call=0)
