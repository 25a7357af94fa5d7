"""The README's cost rule: one continuous run over the panel, no buy-in, carried turnover."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from reflexmem.ael.baselines import (
    equal_weights,
    inverse_momentum_weights,
    min_variance_weights,
    momentum_weights,
)
from reflexmem.ael.metrics import compute_metrics
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import DEFAULT_COST_BPS, run_episodes, run_table
from reflexmem.prices.panel import FloatArray, PricePanel

RULES: dict[str, Callable[[FloatArray], FloatArray]] = {
    "equal_weight": lambda c: equal_weights(c.shape[1]),
    "momentum": lambda c: momentum_weights(c[-5:]),
    "inverse_momentum": lambda c: inverse_momentum_weights(c[-5:]),
    "min_variance": lambda c: min_variance_weights(c[-13:]),
}


def _continuous(
    panel: PricePanel, rule: Callable[[FloatArray], FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """The paper's code, written out: weights at every bar, turnover of one run."""
    c = panel.closes
    w = np.vstack([rule(c[: t + 1]) for t in range(panel.n_bars - 1)])
    gross = np.einsum("ij,ij->i", w, c[1:] / c[:-1] - 1.0)
    previous = np.vstack([w[:1], w[:-1]])  # w_-1 = w_0: no buy-in
    return gross, np.abs(w - previous).sum(axis=1)


@pytest.mark.parametrize("method", list(RULES))
def test_every_baseline_split_and_cost_level_equals_one_continuous_run(
    method: str, dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    gross, turnover = _continuous(dfull, RULES[method])
    episodes = run_episodes(method, dfull, dfull_splits)
    for split in dfull_splits:
        ep = episodes[split.name]
        bars = split.decision_bars()
        np.testing.assert_allclose(ep.gross_returns, gross[bars], atol=1e-15)
        np.testing.assert_allclose(ep.turnover, turnover[bars], atol=1e-12)
        for cost in DEFAULT_COST_BPS:
            expected = compute_metrics(gross[bars] - cost * 1e-4 * turnover[bars])
            assert compute_metrics(ep.net_returns(cost)) == pytest.approx(expected)


def test_equal_weight_pays_nothing_and_its_sharpe_is_the_same_at_every_cost(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=["equal_weight"])
    for split in ("train", "val", "test"):
        sharpes = {r["sharpe"] for r in rows if r["split"] == split}
        assert len(sharpes) == 1
    episodes = run_episodes("equal_weight", dfull, dfull_splits)
    assert all(float(ep.turnover.sum()) == 0.0 for ep in episodes.values())


def test_the_first_decision_pays_nothing_and_split_boundaries_pay_the_carried_turnover(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    episodes = run_episodes("momentum", dfull, dfull_splits)
    assert episodes["train"].turnover[0] == 0.0
    c = dfull.closes
    for prev, split in (("train", "val"), ("val", "test")):
        start = dfull_splits.by_name(split).start
        carried = momentum_weights(c[start - 5 : start])  # decided at the previous split's last bar
        first = episodes[split].weights[0]
        assert episodes[split].turnover[0] == pytest.approx(np.abs(first - carried).sum())
        assert episodes[split].turnover[0] > 0
        carry = episodes[prev].carry
        assert carry is not None
        np.testing.assert_allclose(carry, carried)
    # the carried turnover is charged: the first test return at 10 bp is lower by c * turnover
    test = episodes["test"]
    assert test.net_returns(10.0)[0] == pytest.approx(
        test.gross_returns[0] - 1e-3 * test.turnover[0]
    )
