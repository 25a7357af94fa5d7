from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.agent import (
    PlannerContext,
    RecalledEntry,
    StatelessAgent,
    ToolsAgent,
    plan_allocation,
)
from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.splits import Split
from reflexmem.ael.tools import run_tools
from reflexmem.prices.panel import PricePanel

TEST = Split("test", 168, 208)


def test_tools_agent_is_long_only_with_cash_and_sums_to_one(dfull: PricePanel) -> None:
    episode = MarketEnvironment(dfull).run(TEST, ToolsAgent(np.random.default_rng(0)))
    assert episode.weights.min() >= 0
    assert episode.weights.sum(axis=1) + episode.cash == pytest.approx(1.0)
    assert episode.cash.min() > 0
    assert episode.cash.max() <= 0.5


def test_stateless_agent_is_fully_invested(dfull: PricePanel) -> None:
    episode = MarketEnvironment(dfull).run(TEST, StatelessAgent(np.random.default_rng(0)))
    assert episode.weights.sum(axis=1) == pytest.approx(1.0)


def test_none_context_behaves_as_plain_tools(dfull: PricePanel) -> None:
    env = MarketEnvironment(dfull)
    plain = env.run(TEST, ToolsAgent(np.random.default_rng(4)))
    hooked = env.run(TEST, ToolsAgent(np.random.default_rng(4), context=lambda _view: None))
    np.testing.assert_array_equal(plain.weights, hooked.weights)


def _plan(dfull: PricePanel, context: PlannerContext | None) -> np.ndarray:
    report = run_tools(MarketEnvironment(dfull).view(180))
    plan = plan_allocation(report, context, np.random.default_rng(0))
    return np.append(plan.weights, plan.cash)


def test_risk_off_context_raises_cash_in_proportion_to_confidence(dfull: PricePanel) -> None:
    base = _plan(dfull, None)[-1]
    half = _plan(dfull, PlannerContext(regime="risk_off", confidence=0.5))[-1]
    full = _plan(dfull, PlannerContext(regime="risk_off", confidence=1.0))[-1]
    assert half == pytest.approx(base + 0.1)
    assert full == pytest.approx(base + 0.2)
    assert _plan(dfull, PlannerContext(regime="risk_on", confidence=1.0))[-1] < base


def test_recalled_tilt_raises_the_named_tickers_weight(dfull: PricePanel) -> None:
    ticker = dfull.tickers.index("JNJ")
    entry = RecalledEntry("JNJ held up in sell-offs", relevance=1.0, ticker_tilts={"JNJ": 2.0})
    tilted = _plan(dfull, PlannerContext(confidence=1.0, recalled=(entry,)))
    base = _plan(dfull, None)
    assert tilted[ticker] > base[ticker]
    zero_conf = _plan(dfull, PlannerContext(confidence=0.0, recalled=(entry,)))
    np.testing.assert_array_equal(zero_conf, base)


def test_context_insight_is_reported_in_the_decision_notes(dfull: PricePanel) -> None:
    ctx = PlannerContext(regime="risk_off", insight="rates spike", confidence=0.3)
    decision = ToolsAgent(np.random.default_rng(0), context=ctx)(MarketEnvironment(dfull).view(30))
    assert any("insight='rates spike'" in note for note in decision.notes)


def test_tools_work_from_the_very_first_bar(dfull: PricePanel) -> None:
    report = run_tools(MarketEnvironment(dfull).view(0))
    assert np.all(np.isfinite(report.signal.score))
    assert report.technicals.rsi == pytest.approx(50.0)
    np.testing.assert_array_equal(report.correlations.matrix, np.eye(dfull.n_assets))
