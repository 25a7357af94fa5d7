from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflexmem.ledger.enums import Direction, OutcomeClass
from reflexmem.reflection.rules import RuleConfig, RuleReflector, classify, pick_failure_mode
from reflexmem.reflection.types import LEARNABLE, EvidenceItem, Reflection, ReflectionInput
from tests.unit.reflection.reflection_helpers import EvidenceFor, MakeCase, RoleOf

DECIDED_AT = datetime(2024, 3, 4, 15, 30, tzinfo=UTC)  # what make_case uses (conftest)


def one(case: ReflectionInput, config: RuleConfig | None = None) -> Reflection:
    (reflection,) = classify([case], config)
    return reflection


# --- variance (noise band) -------------------------------------------------------------


def test_loss_inside_the_noise_band_is_variance_and_teaches_nothing(make_case: MakeCase) -> None:
    # momentum: horizon 5 days, vol 1 %/day -> band 1.0 * 0.01 * sqrt(5) = 2.24 %
    r = one(make_case(realized_return=-0.02, realized_vol=0.01, signal=-0.8))
    assert r.outcome_class is OutcomeClass.VARIANCE
    assert r.lesson is None
    assert r.layer == "L1"
    assert "noise band" in r.reasons[0]


def test_noise_band_widens_with_the_square_root_of_the_horizon(make_case: MakeCase) -> None:
    # same -3 % loss and 1 % daily vol: outside momentum's 5-day band (2.24 %),
    # inside cycle_analysis's 30-day band (5.48 %)
    short = one(make_case("momentum", realized_return=-0.03, realized_vol=0.01, signal=-0.8))
    long_ = one(make_case("cycle_analysis", realized_return=-0.03, realized_vol=0.01, signal=-0.8))
    assert short.outcome_class is OutcomeClass.LOGIC_ERROR
    assert long_.outcome_class is OutcomeClass.VARIANCE


def test_noise_band_uses_the_configured_k(make_case: MakeCase) -> None:
    case = make_case(realized_return=-0.03, realized_vol=0.01, signal=-0.8)
    assert one(case, RuleConfig(noise_k=2.0)).outcome_class is OutcomeClass.VARIANCE
    assert one(case, RuleConfig(noise_k=1.0)).outcome_class is OutcomeClass.LOGIC_ERROR


# --- exogenous -------------------------------------------------------------------------


def test_unforeseeable_market_shock_against_the_position_is_exogenous(make_case: MakeCase) -> None:
    r = one(
        make_case(realized_return=-0.08, realized_vol=0.01, market_shock_sigma=-3.0, signal=-0.8)
    )
    assert r.outcome_class is OutcomeClass.EXOGENOUS
    assert r.lesson is None
    assert "-3.00 sigma" in r.reasons[0]


def test_shock_excuses_a_short_only_when_the_market_rose(make_case: MakeCase) -> None:
    up = make_case(direction=Direction.SHORT, realized_return=0.08, market_shock_sigma=3.0)
    down = make_case(direction=Direction.SHORT, realized_return=0.08, market_shock_sigma=-3.0)
    assert one(up).outcome_class is OutcomeClass.EXOGENOUS
    assert one(down).outcome_class is OutcomeClass.VARIANCE  # loss not explained by the shock


def test_shock_below_threshold_or_observable_at_decision_excuses_nothing(
    make_case: MakeCase,
) -> None:
    small = make_case(realized_return=-0.08, market_shock_sigma=-1.5, signal=-0.8)
    known = make_case(
        realized_return=-0.08, market_shock_sigma=-3.0, shock_observable=True, signal=-0.8
    )
    assert one(small).outcome_class is OutcomeClass.LOGIC_ERROR
    assert one(known).outcome_class is OutcomeClass.LOGIC_ERROR


# --- logic_error -----------------------------------------------------------------------


def test_losing_against_the_roles_own_signal_is_a_logic_error_with_a_lesson(
    make_case: MakeCase, role: RoleOf
) -> None:
    case = make_case(realized_return=-0.06, realized_vol=0.01, signal=-0.6)
    r = one(case)
    assert r.outcome_class is OutcomeClass.LOGIC_ERROR
    assert r.layer == "L1"
    assert r.lesson is not None
    assert "momentum" in r.lesson
    assert any(mode in r.lesson for mode in role("momentum").failure_modes)
    assert "price_history" in r.lesson
    assert "-0.60" in r.lesson
    assert r.evidence_used == tuple(e.ref for e in case.evidence)


def test_lesson_and_failure_mode_are_deterministic(make_case: MakeCase) -> None:
    case = make_case(realized_return=-0.06, signal=-0.6)
    first = one(case)
    assert one(case) == first
    # Pinned: of momentum's modes only trend_reversal_ignored shares a hint ("ignored").
    assert first.lesson == (
        "Role momentum (trend_reversal_ignored): went long against its own "
        "price_history/technicals signal (-0.60) and lost 6.00%."
    )
    assert first.reasons == ("went long against the role's own signal -0.60 and lost 0.0600",)
    assert one(case).lesson == one(make_case(realized_return=-0.06, signal=-0.6)).lesson


def test_loss_in_line_with_the_signal_is_variance(make_case: MakeCase) -> None:
    r = one(make_case(realized_return=-0.06, realized_vol=0.01, signal=0.6))
    assert r.outcome_class is OutcomeClass.VARIANCE
    assert r.lesson is None


def test_profit_against_the_signal_yields_no_guidance(make_case: MakeCase) -> None:
    r = one(make_case(realized_return=0.06, realized_vol=0.01, signal=-0.6))
    assert r.outcome_class is OutcomeClass.VARIANCE
    assert "no loss" in r.reasons[0]


def test_a_near_zero_signal_is_not_contradicted(make_case: MakeCase) -> None:
    r = one(make_case(realized_return=-0.06, signal=-0.05))
    assert r.outcome_class is OutcomeClass.VARIANCE


def test_excess_return_probe_judges_against_the_benchmark(make_case: MakeCase) -> None:
    # valuation: long gained 1 % while SPY gained 8 %: excess -7 % against a bearish signal
    with_bench = make_case(
        "valuation", realized_return=0.01, benchmark_return=0.08, realized_vol=0.005, signal=-0.5
    )
    without = make_case("valuation", realized_return=0.01, realized_vol=0.005, signal=-0.5)
    assert one(with_bench).outcome_class is OutcomeClass.LOGIC_ERROR
    raw = one(without)
    assert raw.outcome_class is OutcomeClass.VARIANCE
    assert any("without a benchmark" in reason for reason in raw.reasons)


# --- missing_data ----------------------------------------------------------------------


def test_absent_required_evidence_is_missing_data(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    evidence = [e for e in evidence_for("momentum") if e.kind != "technicals"]
    r = one(make_case(evidence=evidence, realized_return=-0.06, signal=-0.6))
    assert r.outcome_class is OutcomeClass.MISSING_DATA
    assert r.layer == "L0"
    assert r.lesson is not None
    assert "technicals" in r.lesson
    assert "momentum" in r.lesson
    assert r.reasons == ("required technicals absent at decision time",)


def test_stale_required_evidence_is_missing_data_naming_the_stale_failure_mode(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    evidence = [
        EvidenceItem("fundamentals", DECIDED_AT - timedelta(days=150), {"pe": 12}),
        *[e for e in evidence_for("valuation") if e.kind != "fundamentals"],
    ]
    r = one(make_case("valuation", evidence=evidence, realized_return=0.05))
    assert r.outcome_class is OutcomeClass.MISSING_DATA
    assert r.lesson is not None
    assert "stale_fundamentals" in r.lesson
    assert "150.0 days old" in r.reasons[0]
    assert "(limit 100)" in r.reasons[0]


def test_evidence_exactly_at_its_age_limit_is_not_stale(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    evidence = [
        EvidenceItem("technicals", DECIDED_AT - timedelta(days=1)),
        *[e for e in evidence_for("momentum") if e.kind != "technicals"],
    ]
    assert one(make_case(evidence=evidence)).outcome_class is OutcomeClass.VARIANCE
    evidence[0] = EvidenceItem("technicals", DECIDED_AT - timedelta(days=1, seconds=1))
    assert one(make_case(evidence=evidence)).outcome_class is OutcomeClass.MISSING_DATA


def test_the_freshest_usable_item_of_a_kind_satisfies_the_requirement(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    evidence = [
        EvidenceItem("technicals", DECIDED_AT - timedelta(days=30)),
        *evidence_for("momentum"),
    ]
    assert one(make_case(evidence=evidence)).outcome_class is OutcomeClass.VARIANCE


def test_missing_data_takes_precedence_over_the_noise_band(make_case: MakeCase) -> None:
    r = one(make_case(evidence=[], realized_return=-0.001, realized_vol=0.01))
    assert r.outcome_class is OutcomeClass.MISSING_DATA
    assert len(r.reasons) == 2  # both required kinds absent


# --- look-ahead leakage ----------------------------------------------------------------


def test_evidence_dated_after_the_decision_is_flagged_as_leakage_and_never_used(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    leaked = EvidenceItem("technicals", DECIDED_AT + timedelta(hours=2), {"rsi": 80})
    evidence = [e for e in evidence_for("momentum") if e.kind != "technicals"] + [leaked]
    case = make_case(evidence=evidence, realized_return=-0.06, realized_vol=0.01, signal=-0.6)
    r = one(case)
    assert r.outcome_class is OutcomeClass.MISSING_DATA
    assert r.layer == "L0"
    assert any("look-ahead leakage" in reason for reason in r.reasons)
    # the leaked item does not satisfy the requirement ...
    assert "required technicals absent at decision time" in r.reasons
    # ... and is referenced nowhere as evidence the verdict used
    assert leaked.ref not in r.evidence_used
    assert r.evidence_used == tuple(e.ref for e in evidence if e is not leaked)


def test_leakage_is_flagged_even_when_valid_evidence_of_that_kind_exists(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    leaked = EvidenceItem("price_history", DECIDED_AT + timedelta(days=3))
    evidence = [*evidence_for("momentum"), leaked]
    r = one(make_case(evidence=evidence, realized_return=0.04))
    assert r.outcome_class is OutcomeClass.MISSING_DATA
    assert r.reasons == (
        "look-ahead leakage: price_history as_of 2024-03-07T15:30+00:00 is after the "
        "decision at 2024-03-04T15:30+00:00; item excluded from every check",
    )
    assert r.lesson is not None
    assert "look-ahead" in r.lesson
    assert leaked.ref not in r.evidence_used
    assert len(r.evidence_used) == 2


# --- failure mode choice ---------------------------------------------------------------


def test_failure_mode_choice_prefers_modes_matching_the_class_and_kind(role: RoleOf) -> None:
    valuation = role("valuation")
    assert pick_failure_mode(valuation, OutcomeClass.MISSING_DATA, ["fundamentals"]) == (
        "stale_fundamentals"
    )
    assert pick_failure_mode(role("cycle_analysis"), OutcomeClass.LOGIC_ERROR) == "regime_misread"
    assert pick_failure_mode(role("momentum"), OutcomeClass.LOGIC_ERROR) == (
        "trend_reversal_ignored"
    )


# --- batch behaviour -------------------------------------------------------------------


def _mixed_batch(make_case: MakeCase, evidence_for: EvidenceFor, n: int) -> list[ReflectionInput]:
    kinds: list[dict[str, Any]] = [
        {"realized_return": -0.01, "realized_vol": 0.01},  # variance
        {"realized_return": -0.08, "market_shock_sigma": -3.0},  # exogenous
        {"realized_return": -0.06, "signal": -0.6},  # logic_error
        {"realized_return": -0.06, "evidence": []},  # missing_data
        {"realized_return": 0.05, "signal": 0.4},  # variance (profit)
    ]
    return [make_case(case_id=f"c{i}", **kinds[i % len(kinds)]) for i in range(n)]


def test_only_learnable_classes_carry_a_lesson_across_a_mixed_batch(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    batch = _mixed_batch(make_case, evidence_for, 10)
    out = RuleReflector().reflect(batch)
    assert [r.case_id for r in out] == [c.case_id for c in batch]
    assert [r.outcome_class for r in out[:5]] == [
        OutcomeClass.VARIANCE,
        OutcomeClass.EXOGENOUS,
        OutcomeClass.LOGIC_ERROR,
        OutcomeClass.MISSING_DATA,
        OutcomeClass.VARIANCE,
    ]
    for r in out:
        assert (r.lesson is not None) == (r.outcome_class in LEARNABLE)
        assert not r.failed
        assert r.model_calls == 0


def test_empty_batch_gives_no_reflections() -> None:
    assert classify([]) == []


@pytest.mark.serial  # a time bound: run alone, not beside another worker
def test_a_batch_of_100k_cases_classifies_in_well_under_a_few_seconds(
    make_case: MakeCase, evidence_for: EvidenceFor
) -> None:
    base = _mixed_batch(make_case, evidence_for, 5)
    batch = base * 20_000
    start = time.perf_counter()
    out = classify(batch)
    elapsed = time.perf_counter() - start
    assert len(out) == 100_000
    assert out[2].outcome_class is OutcomeClass.LOGIC_ERROR
    assert out[99_998].outcome_class is OutcomeClass.MISSING_DATA
    assert elapsed < 3.0, f"100k cases took {elapsed:.2f}s"


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["momentum", "valuation", "risk", "cycle_analysis"]),
            st.sampled_from([Direction.LONG, Direction.SHORT]),
            st.floats(-0.3, 0.3),
            st.none() | st.floats(0.0, 0.05),
            st.none() | st.floats(-5, 5),
            st.none() | st.floats(-1, 1),
            st.none() | st.floats(-0.2, 0.2),
            st.integers(-3, 200),  # age in days of the first required item (< 0: leaked)
        ),
        min_size=1,
        max_size=12,
    )
)
def test_batch_classification_equals_case_by_case_classification(
    rows: list[
        tuple[str, Direction, float, float | None, float | None, float | None, float | None, int]
    ],
    role: RoleOf,
) -> None:
    batch: list[ReflectionInput] = []
    for i, (rid, direction, ret, vol, shock, signal, bench, age) in enumerate(rows):
        policy = role(rid)
        first, *rest = policy.required_evidence
        evidence = [EvidenceItem(first.kind, DECIDED_AT - timedelta(days=age))] + [
            EvidenceItem(r.kind, DECIDED_AT - timedelta(hours=1)) for r in rest
        ]
        batch.append(
            ReflectionInput(
                case_id=f"h{i}",
                role=policy,
                direction=direction,
                decided_at=DECIDED_AT,
                evidence=tuple(evidence),
                realized_return=ret,
                benchmark_return=bench,
                realized_vol=vol,
                market_shock_sigma=shock,
                signal=signal,
            )
        )
    together = classify(batch)
    assert together == [one(case) for case in batch]
    for r, (_, _, _, _, _, _, _, age) in zip(together, rows, strict=True):
        assert (r.lesson is not None) == (r.outcome_class in LEARNABLE)
        if age < 0:
            assert r.outcome_class is OutcomeClass.MISSING_DATA
            assert all(ref.as_of <= DECIDED_AT for ref in r.evidence_used)


@pytest.mark.parametrize("bad", [{"noise_k": 0}, {"shock_sigma": -1}, {"min_signal": 1.0}])
def test_rule_config_rejects_nonsense_thresholds(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="invalid rule thresholds"):
        RuleConfig(**bad)
