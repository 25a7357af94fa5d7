"""A confirmed avoid-rule becomes a learned L0 check that moves on realized outcomes only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest

from reflexmem.ledger.enums import EntryState
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.role_stream import BLOCK_SECONDS
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.lifecycle import Evidence, check_move
from reflexmem.reflex.outcomes import (
    MAX_HELD,
    MIN_HELD,
    MIN_SCREENED,
    OutcomeEffect,
    check_kind,
    check_stops,
    held_out_rows,
    outcome_effect,
)
from reflexmem.reflex.rule_checks import (
    confirmation_evidence,
    next_move,
    rule_check_file,
    rule_step,
    stop_condition,
    unseen_from,
)
from reflexmem.reflex.skills import parse_skill
from reflexmem.registry import load_registry
from tests.unit.reflex.trading_data import confirmed_rule, formed_rule

S = SkillState
NOW = datetime(2024, 3, 1, tzinfo=UTC)


def test_only_conditions_of_the_decision_record_become_checks() -> None:
    assert stop_condition("symbol:AAPL") == {"field": "symbol", "equals": "AAPL"}
    assert stop_condition("direction:short") == {"field": "direction", "equals": "short"}
    assert stop_condition("scenario:breakout") == {"field": "scenario", "equals": "breakout"}
    assert "policy check" in str(stop_condition("missing:price_history"))
    assert "not in the decision record" in str(stop_condition("against:signal"))


def test_an_avoid_rule_becomes_a_learned_check_that_holds_its_carriers() -> None:
    registry = load_registry()
    made = rule_check_file(confirmed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    skill, text = made
    spec = parse_skill(text, f"generated:{skill}.yaml", registry)
    assert spec.skill_id == "momentum_avoid_symbol_aapl"
    assert check_kind(spec, registry) == "learned"
    rows = pl.DataFrame(
        {
            "_row": [0, 1, 2],
            "role_id": ["momentum", "momentum", "valuation"],
            "symbol": ["AAPL", "MSFT", "AAPL"],
        }
    )
    # The carrier of the role is held; another symbol, or another role, proceeds.
    assert check_stops(spec, rows).to_list() == [True, False, False]


def test_rules_that_cannot_be_checked_say_why() -> None:
    registry = load_registry()
    favour = rule_check_file(confirmed_rule("symbol:AAPL", +0.4), "momentum", registry, now=NOW)
    assert favour == "the rule favours its condition: a check can only hold or send back"
    lacking = confirmed_rule("missing:price_history", -0.4)
    missing = rule_check_file(lacking, "momentum", registry, now=NOW)
    assert isinstance(missing, str)
    assert "policy check" in missing
    unconfirmed = confirmed_rule("symbol:AAPL", -0.4)
    bare = replace(unconfirmed, stats={"direction": -1})
    assert rule_check_file(bare, "momentum", registry, now=NOW) == (
        "the rule has not been confirmed on later episodes"
    )


def test_the_rules_confirmation_is_legal_evidence_for_validating() -> None:
    registry = load_registry()
    made = rule_check_file(confirmed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    spec = parse_skill(made[1], "generated.yaml", registry)
    evidence = confirmation_evidence(spec.provenance)
    assert evidence.passed
    assert evidence.metrics["effect"] > 0
    check_move("x@1", S.CANDIDATE, S.VALIDATING, [evidence], quality_floor=0.0)


def _effect(held_mean: float, n_held: int, seed: int = 0) -> OutcomeEffect:
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame(
        {
            "stopped": [True] * n_held + [False] * 400,
            "realized_return": np.concatenate(
                [rng.normal(held_mean, 0.02, n_held), rng.normal(0.0, 0.02, 400)]
            ),
            "decided_at_ts": [NOW + timedelta(days=i % 200) for i in range(n_held + 400)],
        }
    )
    return outcome_effect(frame)


def _moved(state: SkillState, eff: OutcomeEffect) -> tuple[SkillState, Evidence]:
    step = next_move(state, eff)
    assert not isinstance(step, str), step
    return step


def test_outcome_steps_wait_gain_and_reject_as_the_figures_say() -> None:
    # the screen: a gain in the mean on MIN_SCREENED decisions a side
    assert isinstance(next_move(S.VALIDATING, _effect(-0.02, MIN_SCREENED - 1)), str)
    to, ev = _moved(S.VALIDATING, _effect(-0.02, MIN_SCREENED))
    assert to == S.LIMITED
    check_move("x@1", S.VALIDATING, S.LIMITED, [ev], quality_floor=0.0)
    # the test waits for MIN_HELD a side, then is taken once
    assert isinstance(next_move(S.LIMITED, _effect(-0.02, MIN_HELD - 1)), str)
    to, ev = _moved(S.LIMITED, _effect(-0.02, 60))
    assert to == S.ACTIVE
    assert ev.metrics["ci_low"] > 0
    check_move("x@1", S.LIMITED, S.ACTIVE, [ev], quality_floor=0.0)
    # Harm rejects at once, at either step.
    for state in (S.VALIDATING, S.LIMITED):
        to, ev = _moved(state, _effect(+0.02, 60))
        assert (to, ev.detail["verdict"]) == (S.REJECTED, "harm")
        check_move("x@1", state, S.REJECTED, [ev], quality_floor=0.0)


def test_the_one_test_rejects_an_interval_covering_zero() -> None:
    covering = _effect(0.0, 40, seed=3)
    assert covering.ci_low is not None
    assert covering.ci_low < 0 < (covering.ci_high or 0)
    to, ev = _moved(S.LIMITED, covering)  # no second look: the test was taken
    assert (to, ev.detail["verdict"], ev.passed) == (S.REJECTED, "none", False)
    assert ev.metrics["ci_low"] == covering.ci_low
    check_move("x@1", S.LIMITED, S.REJECTED, [ev], quality_floor=0.0)


def test_a_screen_without_a_gain_waits_until_max_held_then_rejects() -> None:
    flat = OutcomeEffect(400, MAX_HELD - 1, 0.0, 0.001, 0.5, 0.5, -0.001, None, None)
    waits = next_move(S.VALIDATING, flat)
    assert isinstance(waits, str)
    assert "no gain in the mean" in waits
    to, ev = _moved(S.VALIDATING, replace(flat, n_held=MAX_HELD))
    assert (to, ev.detail["verdict"]) == (S.REJECTED, "none")


def test_a_check_with_a_covering_interval_cannot_become_active() -> None:
    covering = OutcomeEffect(400, 40, 0.0, -0.002, 0.5, 0.55, 0.002, -0.004, 0.008)
    to, ev = _moved(S.VALIDATING, covering)
    assert to == S.LIMITED  # a gain on the screen is enough for the rollout ...
    with pytest.raises(ValueError, match="excludes zero"):  # ... never for active
        check_move("x@1", S.LIMITED, S.ACTIVE, [ev], quality_floor=0.0)


def _decisions(cost: float, n: int = 3000, seed: int = 11) -> pl.DataFrame:
    """Hourly momentum decisions after NOW; AAPL's returns lower by `cost`."""
    rng = np.random.default_rng(seed)
    symbols = rng.choice(["AAPL", "MSFT", "NVDA", "AMZN", "GOOG"], n)
    returns = rng.normal(0.0, 0.02, n) - cost * (symbols == "AAPL")
    return pl.DataFrame(
        {
            "_row": np.arange(n),
            "role_id": ["momentum"] * n,
            "symbol": symbols,
            "decided_at_ts": [NOW + timedelta(hours=i + 1) for i in range(n)],
            "settled_at": [NOW + timedelta(hours=i + 25) for i in range(n)],
            "realized_return": returns,
            "pattern": [None] * n,
            "split": ["evaluation"] * n,
        },
        schema_overrides={"pattern": pl.String},
    )


def _walk(frame: pl.DataFrame) -> list[SkillState]:
    """The states a rule check passes through when the cycle runs every 100 decisions."""
    registry = load_registry()
    made = rule_check_file(confirmed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    view = VersionView(parse_skill(made[1], "g.yaml", registry), S.CANDIDATE, NOW)
    view = replace(view, history=(("candidate", NOW),))
    seen = [view.state]
    for k in range(100, frame.height + 1, 100):
        now = NOW + timedelta(hours=k)
        while view.state in (S.CANDIDATE, S.VALIDATING, S.LIMITED):
            step = rule_step(view, frame.head(k), now)
            if isinstance(step, str):
                break
            to, evidence, _ = step
            check_move(view.key, view.state, to, evidence, quality_floor=0.0)
            view = replace(view, state=to, limited_at=now if to == S.LIMITED else view.limited_at)
            seen.append(to)
    return seen


def test_a_check_of_a_true_effect_becomes_active_and_of_none_does_not() -> None:
    assert _walk(_decisions(cost=0.01)) == [S.CANDIDATE, S.VALIDATING, S.LIMITED, S.ACTIVE]
    null = _walk(_decisions(cost=0.0))
    assert S.ACTIVE not in null
    assert null[-1] in (S.VALIDATING, S.LIMITED, S.REJECTED)


def test_before_five_blocks_a_check_is_screened_but_never_made_active() -> None:
    # a gain in the mean on decisions of fewer than five fortnights: no interval yet
    early = OutcomeEffect(400, 40, 0.01, -0.01, 0.4, 0.6, 0.02, None, None)
    to, ev = _moved(S.VALIDATING, early)
    assert to == S.LIMITED
    assert "ci_low" not in ev.metrics  # no interval is recorded as none, never as zero
    check_move("x@1", S.VALIDATING, S.LIMITED, [ev], quality_floor=0.0)
    waits = next_move(S.LIMITED, early)
    assert isinstance(waits, str)
    assert "two-week blocks" in waits
    with pytest.raises(ValueError, match="low none"):
        check_move("x@1", S.LIMITED, S.ACTIVE, [ev], quality_floor=0.0)


def test_a_rule_check_holding_everything_is_rejected() -> None:
    everything = OutcomeEffect(0, MAX_HELD, None, -0.01, None, 1.0, None, None, None)
    to, ev = _moved(S.LIMITED, everything)
    assert to == S.REJECTED
    assert ev.detail["verdict"] == "none"
    assert isinstance(next_move(S.LIMITED, replace(everything, n_held=MAX_HELD - 1)), str)


def test_the_test_reads_only_outcomes_that_settled_after_the_screen() -> None:
    registry = load_registry()
    made = rule_check_file(confirmed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    moved = NOW + timedelta(days=30)
    view = VersionView(
        parse_skill(made[1], "g.yaml", registry),
        S.LIMITED,
        moved,
        limited_at=moved,
        history=(("candidate", NOW), ("validating", NOW), ("limited", moved)),
    )
    # hourly decisions over 125 days, each settling ten days after it was made
    frame = _decisions(cost=0.01).with_columns(
        (pl.col("decided_at_ts") + timedelta(days=10)).alias("settled_at")
    )
    through = NOW + timedelta(days=200)
    rows = held_out_rows(view, frame, through=through, settled_after=moved)
    unread = frame.filter(pl.col("settled_at") > moved)
    assert rows.height == unread.height
    assert (rows["decided_at_ts"] < moved).any()  # still open when the screen ran: unread
    step = rule_step(view, frame, through)
    assert not isinstance(step, str), step
    to, (evidence,), _ = step
    assert evidence.metrics["n_held"] + evidence.metrics["n_passed"] == rows.height
    assert to == S.ACTIVE


def test_the_screen_replays_the_check_on_every_decision_the_rule_was_not_formed_from() -> None:
    registry = load_registry()
    rule = confirmed_rule("symbol:AAPL", -0.4)
    formed_block = int((NOW - timedelta(days=40)).timestamp()) // BLOCK_SECONDS
    rule = replace(rule, stats={**(rule.stats or {}), "formed_block": formed_block})
    made = rule_check_file(rule, "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    spec = parse_skill(made[1], "g.yaml", registry)
    since = unseen_from(spec.provenance)
    assert since == datetime.fromtimestamp((formed_block + 1) * BLOCK_SECONDS, tz=UTC)
    assert NOW - timedelta(days=40) < since < NOW  # the block after the one it formed in
    # hourly decisions from 60 days before the check was made, each settled a day later
    frame = _decisions(cost=0.01).with_columns(
        pl.col("decided_at_ts") - timedelta(days=60), pl.col("settled_at") - timedelta(days=60)
    )
    known = frame.filter(pl.col("settled_at") <= NOW)
    view = VersionView(spec, S.VALIDATING, NOW, history=(("candidate", NOW),))
    step = rule_step(view, known, NOW)
    assert not isinstance(step, str), step
    to, (evidence,), _ = step
    assert to == S.LIMITED  # at once: no new decisions to wait for
    unformed = known.filter(pl.col("decided_at_ts") > since)
    assert evidence.metrics["n_held"] + evidence.metrics["n_passed"] == unformed.height
    assert unformed.height < known.height  # what came before never counts
    # A rule that does not say when it formed: only decisions since the check was made.
    plain = rule_check_file(confirmed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(plain, str)
    old = replace(view, spec=parse_skill(plain[1], "g.yaml", registry))
    assert unseen_from(old.spec.provenance) is None
    assert isinstance(rule_step(old, known, NOW), str)


def test_a_rule_makes_its_check_when_it_forms_and_a_retired_rule_makes_none() -> None:
    registry = load_registry()
    formed = formed_rule("symbol:AAPL", -0.4)
    made = rule_check_file(formed, "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    spec = parse_skill(made[1], "g.yaml", registry)
    assert "confirmation" not in spec.provenance
    assert spec.provenance["formation"] == (formed.stats or {})["formed"]
    evidence = confirmation_evidence(spec.provenance)
    assert "formation screen" in evidence.detail["source"]
    assert evidence.metrics["effect"] == -(formed.stats or {})["formed"]["effect"] > 0
    check_move("x@1", S.CANDIDATE, S.VALIDATING, [evidence], quality_floor=0.0)
    retired = replace(formed, state=EntryState.RETIRED)
    assert rule_check_file(retired, "momentum", registry, now=NOW) == "the rule was retired"


def _formation_walk(
    frame: pl.DataFrame, rule_at: Callable[[int], MemoryEntry | None]
) -> list[tuple[SkillState, int, Evidence]]:
    """(state, hour, evidence) of each move of a check made when its rule formed."""
    registry = load_registry()
    made = rule_check_file(formed_rule("symbol:AAPL", -0.4), "momentum", registry, now=NOW)
    assert not isinstance(made, str)
    view = VersionView(parse_skill(made[1], "g.yaml", registry), S.CANDIDATE, NOW)
    seen: list[tuple[SkillState, int, Evidence]] = []
    for k in range(100, frame.height + 1, 100):
        now = NOW + timedelta(hours=k)
        while view.state in (S.CANDIDATE, S.VALIDATING, S.LIMITED):
            step = rule_step(view, frame.head(k), now, rule_at(k))
            if isinstance(step, str):
                break
            to, (evidence,), _ = step
            check_move(view.key, view.state, to, [evidence], quality_floor=0.0)
            view = replace(view, state=to, limited_at=now if to == S.LIMITED else view.limited_at)
            seen.append((to, k, evidence))
    return seen


def test_a_check_made_at_formation_is_rolled_out_but_active_only_once_its_rule_confirms() -> None:
    formed, confirmed = formed_rule("symbol:AAPL", -0.4), confirmed_rule("symbol:AAPL", -0.4)
    made = rule_check_file(formed, "momentum", load_registry(), now=NOW)
    assert not isinstance(made, str)
    limited = VersionView(
        parse_skill(made[1], "g.yaml", load_registry()), S.LIMITED, NOW, limited_at=NOW
    )
    # every decision of the frame settled since it was limited, and still no test
    waits = rule_step(limited, _decisions(cost=0.01), NOW + timedelta(days=200), formed)
    assert waits == "its rule awaits its confirmatory test on later episodes"
    # the rule confirms at hour 2,500: the check was limited long before, active only then
    seen = _formation_walk(_decisions(cost=0.01), lambda k: formed if k < 2500 else confirmed)
    assert [s for s, _, _ in seen] == [S.VALIDATING, S.LIMITED, S.ACTIVE]
    (limited_at,) = [k for s, k, _ in seen if s == S.LIMITED]
    (active,) = [(k, e) for s, k, e in seen if s == S.ACTIVE]
    assert limited_at < 1000
    assert active[0] == 2500
    assert active[1].metrics["ci_low"] > 0  # its own one test, on what settled since limited
    assert active[1].detail["rule_confirmation"] == (confirmed.stats or {})["confirm"]


def test_a_check_made_at_formation_falls_with_its_rule() -> None:
    formed, confirmed = formed_rule("symbol:AAPL", -0.4), confirmed_rule("symbol:AAPL", -0.4)
    failed = replace(confirmed, state=EntryState.RETIRED)
    # the rule fails its test at hour 1,200, while the check is limited: rejected then
    seen = _formation_walk(_decisions(cost=0.01), lambda k: formed if k < 1200 else failed)
    assert [(s, k) for s, k, _ in seen][-1] == (S.REJECTED, 1200)
    assert "confirmatory test" in seen[-1][2].detail["reason"]
    assert seen[-1][2].metrics["rule_alpha"] == (failed.stats or {})["confirm"]["alpha"]
    assert not seen[-1][2].passed
    # a rule no longer in memory can never confirm it
    gone = _formation_walk(_decisions(cost=0.01), lambda k: None)
    assert [s for s, _, _ in gone] == [S.REJECTED]
    # a check made from a confirmed rule carries its confirmation: its rule is not read
    made = rule_check_file(confirmed, "momentum", load_registry(), now=NOW)
    assert not isinstance(made, str)
    view = VersionView(parse_skill(made[1], "g.yaml", load_registry()), S.CANDIDATE, NOW)
    step = rule_step(view, _decisions(cost=0.01), NOW, None)
    assert not isinstance(step, str)
    assert step[0] == S.VALIDATING
