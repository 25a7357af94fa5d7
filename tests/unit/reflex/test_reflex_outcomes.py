"""The outcome effect of a check on realized returns, and the kind of a check (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest
import yaml
from scipy import special

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.memory.role_stream import BLOCK_SECONDS
from reflexmem.reflex.candidates import candidate_files
from reflexmem.reflex.clusters import describe
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.outcomes import (
    LEARNED,
    MAX_HELD,
    POLICY,
    check_kind,
    held_out_rows,
    outcome_effect,
    outcome_effects,
    outcome_evidence,
)
from reflexmem.reflex.skills import SkillSpec, parse_skill
from reflexmem.registry import RoleRegistry
from tests.unit.memory.test_blocks import direct
from tests.unit.reflex.trading_data import START, episodes

DAY = timedelta(days=1)


def _frame(
    stopped: Sequence[bool | None], returns: Sequence[float | None], days: list[int] | None = None
) -> pl.DataFrame:
    """Decisions, each on its own day (or on `days`); two weeks make a block."""
    at = [START + d * DAY for d in (days if days is not None else range(len(stopped)))]
    return pl.DataFrame(
        {"stopped": stopped, "realized_return": returns, "decided_at_ts": at},
        schema={
            "stopped": pl.Boolean,
            "realized_return": pl.Float64,
            "decided_at_ts": pl.Datetime("us", "UTC"),
        },
    )


def _expected(frame: pl.DataFrame) -> tuple[float, float, float]:
    """Effect and 95 % interval computed directly from every decision and its block."""
    rows = frame.filter(pl.col("realized_return").is_not_null())
    ret = rows["realized_return"].to_numpy()
    passed = ~rows["stopped"].fill_null(False).to_numpy()
    block = (rows["decided_at_ts"].dt.epoch("s") // BLOCK_SECONDS).to_numpy()
    d, se, g = direct(ret, passed, block)
    half = float(special.stdtrit(g - 1.0, 0.975)) * se
    return d, d - half, d + half


def test_a_check_whose_stops_did_no_worse_has_an_interval_covering_zero() -> None:
    rng = np.random.default_rng(4)
    n = 160  # 10 weeks of decisions: five blocks
    frame = _frame(
        list(rng.random(n) < 0.25), list(rng.normal(0.0, 0.02, n)), [d // 2 for d in range(n)]
    )
    found = outcome_effect(frame)
    held = frame["stopped"].to_numpy()
    assert (found.n_passed, found.n_held) == (int((~held).sum()), int(held.sum()))
    ret = frame["realized_return"].to_numpy()
    assert found.mean_passed == pytest.approx(ret[~held].mean())
    assert found.mean_held == pytest.approx(ret[held].mean())
    assert found.loss_rate_held == pytest.approx((ret[held] < 0).mean())
    effect, low, high = _expected(frame)
    assert found.effect == pytest.approx(effect, abs=1e-12)
    assert found.ci_low == pytest.approx(low, abs=1e-12)
    assert found.ci_high == pytest.approx(high, abs=1e-12)
    assert found.covers_zero is True
    assert found.method == "blocks_t"


def test_a_check_that_stops_the_losers_has_an_interval_excluding_zero() -> None:
    held = [i % 3 == 0 for i in range(90)]
    returns = [(-0.02 if h else 0.01) + 0.005 * ((i * 7) % 5 - 2) for i, h in enumerate(held)]
    frame = _frame([*held, None, False], [*returns, 0.5, None])
    found = outcome_effect(frame)
    # the null `stopped` proceeds; the row without a return is left out
    assert (found.n_passed, found.n_held) == (61, 30)
    undated = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(None)
        .otherwise(pl.col("decided_at_ts"))
        .alias("decided_at_ts")
    )
    assert (outcome_effect(undated).n_passed, outcome_effect(undated).n_held) == (61, 29)
    found = outcome_effect(frame.head(90))
    assert found.effect == pytest.approx(0.03, abs=0.002)
    assert (found.loss_rate_passed, found.loss_rate_held) == (0.0, 1.0)
    _, low, high = _expected(frame.head(90))
    assert found.ci_low == pytest.approx(low, abs=1e-12)
    assert found.ci_high == pytest.approx(high, abs=1e-12)
    assert found.covers_zero is False


def test_decisions_of_one_fortnight_are_one_draw_not_many() -> None:
    # 60 decisions over four weeks: two blocks, whatever their number; Welch would give
    # a tight interval, blocks give none until five fortnights hold decisions
    held = [i % 4 == 0 for i in range(60)]
    returns = [-0.02 if h else 0.01 for h in held]
    crowded = outcome_effect(_frame(held, returns, [i // 3 for i in range(60)]))
    assert crowded.effect == pytest.approx(0.03)
    assert (crowded.ci_low, crowded.ci_high, crowded.covers_zero) == (None, None, None)
    spread = outcome_effect(_frame(held, returns, list(range(60))))
    assert spread.ci_low is not None


def test_too_little_data_gives_none_not_a_number() -> None:
    one_held = outcome_effect(_frame([False, False, True], [0.01, 0.02, -0.05], [0, 15, 30]))
    assert (one_held.n_passed, one_held.n_held) == (2, 1)
    assert (one_held.effect, one_held.ci_low, one_held.ci_high) == (None, None, None)
    assert one_held.mean_held == -0.05
    assert one_held.covers_zero is None
    nothing_held = outcome_effect(_frame([False, False], [0.01, 0.02]))
    assert nothing_held.n_held == 0
    assert (nothing_held.mean_held, nothing_held.loss_rate_held, nothing_held.effect) == (
        None,
        None,
        None,
    )
    empty = outcome_effect(_frame([], []))
    assert (empty.n_passed, empty.n_held, empty.effect) == (0, 0, None)
    flat = outcome_effect(_frame([False, True] * 5, [0.01, 0.0] * 5, [14 * i for i in range(10)]))
    assert [flat.effect, flat.ci_low, flat.ci_high] == [pytest.approx(0.01)] * 3


def test_effects_of_many_checks_in_one_pass_match_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    a = _frame(list(rng.random(80) < 0.3), list(rng.normal(0.01, 0.02, 80)), list(range(80)))
    b = _frame([False, False, True, True], [0.01, -0.01, 0.02, 0.04])
    both = pl.concat(
        [a.with_columns(pl.lit("a").alias("skill")), b.with_columns(pl.lit("b").alias("skill"))]
    )
    found = outcome_effects(both, "skill")
    assert found["a"] == outcome_effect(a)
    assert found["a"].ci_low is not None
    assert found["b"] == outcome_effect(b)
    assert found["b"].effect == pytest.approx(-0.03)


def _specs(registry: RoleRegistry, frame: pl.DataFrame) -> dict[str, SkillSpec]:
    fit = frame.filter(pl.col("split") == "fit")
    pattern = str(frame.filter(pl.col("pattern").is_not_null())["pattern"][0])
    cluster = describe(
        registry, fit, "momentum", pattern, gist="decided without technicals", outcome_class="md"
    )
    now = START + timedelta(days=30)
    files = candidate_files(cluster, fit, registry, now=now, taken=set())
    return {spec.layer.value: spec for spec in (parse_skill(t, s, registry) for s, t in files)}


def _edited(spec: SkillSpec, registry: RoleRegistry, change: Any) -> SkillSpec:
    raw = yaml.safe_load(spec.source_yaml)
    change(raw)
    return parse_skill(yaml.safe_dump(raw), "edited.yaml", registry)


def test_a_check_that_only_restates_the_required_evidence_is_policy(
    registry: RoleRegistry,
) -> None:
    specs = _specs(registry, episodes(registry, 400))
    # technicals absent is exactly what the momentum role file forbids; the L1 form also
    # weighs direction and scenario toward stopping (they co-occur in this data): learned
    assert {layer: check_kind(s, registry) for layer, s in specs.items()} == {
        "L0": POLICY,
        "L1": LEARNED,
        "L2": POLICY,
    }

    def evidence_only(raw: dict[str, Any]) -> None:
        weights = raw["decision"]["procedure"]["weights"]["request_evidence"]
        weights.update(direction_short=0.0, scenario_breakout=-1.0)

    assert check_kind(_edited(specs["L1"], registry, evidence_only), registry) == POLICY

    def stricter(raw: dict[str, Any]) -> None:  # stale after 0.5 days: stricter than the role
        raw["decision"]["procedure"]["rules"][0]["when"] = [
            {"field": "technicals_age_days", "gt": 0.5}
        ]

    def narrower(raw: dict[str, Any]) -> None:  # absent and long: learned which ones matter
        raw["decision"]["procedure"]["rules"][0]["when"].append(
            {"field": "direction", "equals": "long"}
        )

    def staler(raw: dict[str, Any]) -> None:  # older than the role allows: still the policy
        raw["decision"]["procedure"]["rules"][0]["when"] = [
            {"field": "technicals_age_days", "gt": 1}
        ]

    def hold(reason: str) -> Any:
        def change(raw: dict[str, Any]) -> None:  # the verdict the generator writes a hold
            raw["decision"]["verdicts"]["request_evidence"] = {
                "status": "hold",
                "reason": reason,
                "note": "hold {direction} {symbol} for {account}",
            }

        return change

    examples = specs["L2"]
    after = _edited(examples, registry, hold("lesson:technicals_after_decision"))
    assert check_kind(after, registry) == POLICY
    both = _edited(examples, registry, hold("lesson:technicals_stale_price_history_missing"))
    assert check_kind(both, registry) == POLICY
    narrower_words = _edited(examples, registry, hold("lesson:technicals_missing_direction_long"))
    assert check_kind(narrower_words, registry) == LEARNED
    assert check_kind(_edited(examples, registry, hold("lesson")), registry) == LEARNED
    assert check_kind(_edited(specs["L0"], registry, stricter), registry) == LEARNED
    assert check_kind(_edited(specs["L0"], registry, narrower), registry) == LEARNED
    assert check_kind(_edited(specs["L0"], registry, staler), registry) == POLICY


def test_held_out_rows_leave_out_sources_fit_and_earlier_decisions(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 400)
    returns = pl.when(pl.col("pattern").is_not_null()).then(-0.02).otherwise(0.01)
    frame = frame.with_columns(returns.alias("realized_return"))
    spec = _specs(registry, frame)["L0"]
    created = START + timedelta(hours=100)
    view = VersionView(
        spec=spec,
        state=SkillState.ACTIVE,
        changed_at=created,
        history=((str(SkillState.CANDIDATE), created),),
    )
    rows = held_out_rows(view, frame, through=START + timedelta(days=30))
    assert rows.height > 0
    assert (rows["split"] != "fit").all()
    assert (rows["decided_at_ts"] > created).all()
    assert not rows["episode_id"].is_in(list(spec.source_experiences)).any()
    # the rule stops exactly the decisions without technicals, which lost here
    assert rows["stopped"].to_list() == rows["pattern"].is_not_null().to_list()
    found = outcome_effect(rows)
    assert found.n_passed + found.n_held == rows.height
    assert found.effect == pytest.approx(0.03)


def _stretched(frame: pl.DataFrame, by: int = 10) -> pl.DataFrame:
    """The same decisions `by` times further apart: hours become days, two weeks a block."""
    at = pl.col("decided_at_ts")
    return frame.with_columns((pl.lit(START) + (at - pl.lit(START)) * by).alias("decided_at_ts"))


THROUGH = START + timedelta(days=300)


def _view(registry: RoleRegistry, frame: pl.DataFrame) -> VersionView:
    created = START + timedelta(hours=100)
    return VersionView(
        spec=_specs(registry, frame)["L0"],
        state=SkillState.LIMITED,
        changed_at=created,
        history=((str(SkillState.CANDIDATE), created),),
    )


@pytest.mark.parametrize(
    ("held", "verdict", "passed"), [(-0.02, "gain", True), (0.04, "harm", False)]
)
def test_outcome_evidence_judges_a_learned_check_on_realized_returns(
    registry: RoleRegistry, held: float, verdict: str, passed: bool
) -> None:
    frame = episodes(registry, 400)
    noise = (pl.int_range(pl.len()) % 7 - 3).cast(pl.Float64) / 1000.0
    returns = pl.when(pl.col("pattern").is_not_null()).then(held).otherwise(0.01) + noise
    frame = _stretched(frame.with_columns(returns.alias("realized_return")))
    found = outcome_evidence(_view(registry, frame), frame, through=THROUGH)
    assert found is not None
    assert found.kind == "outcome"
    assert (found.detail["verdict"], found.passed) == (verdict, passed)
    assert found.metrics["n_held"] >= 20


def test_outcome_evidence_takes_one_test_and_an_interval_covering_zero_fails_it(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 400)
    noise = (pl.int_range(pl.len()) % 7 - 3).cast(pl.Float64) / 100.0
    frame = _stretched(frame.with_columns(noise.alias("realized_return")))
    view = _view(registry, frame)
    rows = held_out_rows(view, frame, through=THROUGH)
    assert 20 <= int(rows["stopped"].sum()) < MAX_HELD  # enough to test, far from MAX_HELD
    found = outcome_evidence(view, frame, through=THROUGH)
    assert found is not None  # no waiting for a luckier stretch: the test was taken
    assert (found.passed, found.detail["verdict"]) == (False, "none")
    assert found.metrics["ci_low"] <= 0 <= found.metrics["ci_high"]


def test_a_check_that_holds_every_decision_is_rejected_not_left_waiting(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 800)
    view = _view(registry, frame)
    # every decision without technicals: the check holds all of them, none passes
    frame = frame.with_columns(
        pl.lit(None, dtype=pl.String).alias("technicals_age_days"),
        pl.lit(-0.01).alias("realized_return"),
    )
    rows = held_out_rows(view, frame, through=THROUGH)
    assert rows["stopped"].all()
    assert rows.height >= MAX_HELD
    found = outcome_evidence(view, frame, through=THROUGH)
    assert found is not None
    assert (found.passed, found.detail["verdict"]) == (False, "none")
    assert found.metrics["n_passed"] == 0
    fewer = outcome_evidence(view, frame, through=START + timedelta(hours=150))
    assert fewer is None  # fewer than MAX_HELD held: it waits
