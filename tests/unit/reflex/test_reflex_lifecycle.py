"""Every lifecycle move: legal ones pass with their evidence, everything else is refused."""

from __future__ import annotations

import itertools

import pytest

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.lifecycle import (
    MOVES,
    REQUIRED_METRICS,
    Evidence,
    EvidenceKind,
    LifecycleError,
    check_move,
    legal_targets,
    shortest_path,
)

S, K = SkillState, EvidenceKind


def evidence(kind: EvidenceKind, passed: bool, **metrics: float) -> Evidence:
    base = dict.fromkeys(REQUIRED_METRICS.get(kind, ()), 1.0)
    if kind in (K.EVALUATION, K.REPLAY):
        base.update(source_overlap=0.0, accuracy=0.99)
    base.update(metrics)
    return Evidence(kind, passed, base)


def sufficient(frm: SkillState, to: SkillState) -> list[Evidence]:
    need = MOVES[(frm, to)]
    kinds = list(need.all_of) or [need.any_of[0]]
    return [evidence(k, need.passed) for k in kinds]


@pytest.mark.parametrize(("frm", "to"), sorted(MOVES))
def test_every_legal_move_passes_with_its_evidence(frm: SkillState, to: SkillState) -> None:
    assert check_move("s@1", frm, to, sufficient(frm, to), quality_floor=0.9) is MOVES[(frm, to)]


@pytest.mark.parametrize(("frm", "to"), sorted(MOVES))
def test_every_legal_move_is_refused_with_the_opposite_verdict(
    frm: SkillState, to: SkillState
) -> None:
    flipped = [Evidence(e.kind, not e.passed, e.metrics) for e in sufficient(frm, to)]
    with pytest.raises(LifecycleError, match=r"needs (passing|failing)"):
        check_move("s@1", frm, to, flipped, quality_floor=0.9)


@pytest.mark.parametrize(("frm", "to"), sorted(MOVES))
def test_every_legal_move_is_refused_without_evidence(frm: SkillState, to: SkillState) -> None:
    with pytest.raises(LifecycleError, match="got none"):
        check_move("s@1", frm, to, [], quality_floor=0.9)


ILLEGAL = [(a, b) for a, b in itertools.product(SkillState, SkillState) if (a, b) not in MOVES]


@pytest.mark.parametrize(("frm", "to"), ILLEGAL)
def test_every_other_move_is_refused_whatever_the_evidence(frm: SkillState, to: SkillState) -> None:
    everything = [evidence(k, True) for k in EvidenceKind] + [evidence(k, False) for k in K]
    with pytest.raises(LifecycleError, match="is not a legal move"):
        check_move("s@1", frm, to, everything, quality_floor=0.0)


def test_a_skip_names_the_states_it_would_skip() -> None:
    with pytest.raises(LifecycleError) as info:
        check_move("s@1", S.CANDIDATE, S.ACTIVE, [], quality_floor=0.0)
    message = str(info.value)
    assert "legal from candidate: validating, rejected" in message
    assert "it would skip validating -> limited" in message


def test_terminal_states_have_no_way_out() -> None:
    assert legal_targets(S.REJECTED) == ()
    assert legal_targets(S.RETIRED) == ()
    assert legal_targets(None) == (S.CANDIDATE,)
    assert shortest_path(S.QUARANTINED, S.ACTIVE) == [
        S.QUARANTINED,
        S.VALIDATING,
        S.LIMITED,
        S.ACTIVE,
    ]


def test_promotion_to_active_needs_both_shadow_and_rollout() -> None:
    with pytest.raises(LifecycleError, match="needs passing shadow and rollout"):
        check_move("s@1", S.LIMITED, S.ACTIVE, [evidence(K.SHADOW, True)], quality_floor=0.0)


def test_evaluation_on_source_experiences_cannot_promote() -> None:
    seen = evidence(K.EVALUATION, True, source_overlap=3.0)
    with pytest.raises(LifecycleError, match="overlaps the skill's source experiences"):
        check_move("s@1", S.CANDIDATE, S.VALIDATING, [seen], quality_floor=0.0)


def test_passing_evidence_below_the_quality_floor_is_not_believed() -> None:
    weak = evidence(K.EVALUATION, True, accuracy=0.8)
    with pytest.raises(LifecycleError, match=r"0\.800 is below the quality floor 0\.900"):
        check_move("s@1", S.CANDIDATE, S.VALIDATING, [weak], quality_floor=0.9)


def test_evidence_without_its_figures_cannot_promote() -> None:
    bare = Evidence(K.REPLAY, True, {"n": 5.0})
    with pytest.raises(LifecycleError, match="lacks metrics"):
        check_move("s@1", S.VALIDATING, S.LIMITED, [bare], quality_floor=0.0)
    one_armed = evidence(K.ROLLOUT, True, treated=40.0, control=0.0)
    with pytest.raises(LifecycleError, match="both arms"):
        check_move(
            "s@1", S.LIMITED, S.ACTIVE, [evidence(K.SHADOW, True), one_armed], quality_floor=0
        )


def test_a_learned_check_becomes_active_on_outcome_evidence_alone() -> None:
    gain = evidence(K.OUTCOME, True, ci_low=0.002, ci_high=0.02, effect=0.011)
    assert check_move("s@1", S.LIMITED, S.ACTIVE, [gain], quality_floor=0.0).passed
    # Agreement with labels that failed beside it does not matter: it is a diagnostic.
    shadow = evidence(K.SHADOW, False)
    assert check_move("s@1", S.LIMITED, S.ACTIVE, [gain, shadow], quality_floor=0.0)


def test_outcome_evidence_cannot_promote_unless_its_interval_excludes_zero() -> None:
    covering = evidence(K.OUTCOME, True, ci_low=-0.001, ci_high=0.02, effect=0.01)
    with pytest.raises(LifecycleError, match="excludes zero on the gaining side"):
        check_move("s@1", S.LIMITED, S.ACTIVE, [covering], quality_floor=0.0)
    harm = evidence(K.OUTCOME, False, ci_low=-0.03, ci_high=-0.01, effect=-0.02)
    assert not check_move("s@1", S.LIMITED, S.REJECTED, [harm], quality_floor=0.0).passed
    assert not check_move("s@1", S.ACTIVE, S.QUARANTINED, [harm], quality_floor=0.0).passed
