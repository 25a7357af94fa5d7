from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.baselines import (
    inverse_momentum_weights,
    min_variance_weights,
    momentum_weights,
)
from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.pricing import price_path
from reflexmem.ael.regimes import REGIMES, regime_at, regime_codes
from reflexmem.ael.rules import (
    RULE_FAMILY,
    Rule,
    RuleAllocator,
    RuleBook,
    arm_weights_at,
    rule_weights,
)
from reflexmem.ael.splits import ChronoSplits, walk_forward
from reflexmem.prices.panel import FloatArray, PricePanel
from reflexmem.synth import synthetic_prices


def _reference(rule: Rule, c: FloatArray) -> FloatArray:
    if rule.kind == "equal_weight":
        return np.full(c.shape[1], 1 / c.shape[1])
    if rule.kind == "momentum":
        return momentum_weights(c[-rule.lookback - 1 :], rule.lookback)
    if rule.kind == "inverse_momentum":
        return inverse_momentum_weights(c[-rule.lookback - 1 :], rule.lookback)
    return min_variance_weights(c[-rule.lookback :], rule.lookback)


@pytest.mark.parametrize("rule", RULE_FAMILY, ids=lambda r: r.name)
def test_vectorised_rule_rows_equal_the_per_view_rule_at_every_bar(
    rule: Rule, dfull: PricePanel
) -> None:
    c = dfull.closes
    w = rule_weights(c, rule)
    for t in range(dfull.n_bars):
        expected = _reference(rule, c[: t + 1])
        np.testing.assert_allclose(w[t], expected, atol=1e-12, err_msg=f"bar {t}")
        np.testing.assert_allclose(
            arm_weights_at(c[max(0, t - 70) : t + 1], (rule,))[0], expected, atol=1e-12
        )


def test_rule_rows_do_not_depend_on_later_closes() -> None:
    panel = synthetic_prices(300, 6, seed=3)
    c = panel.closes
    poisoned = c.copy()
    poisoned[200:] *= np.linspace(0.3, 3.0, 6)
    for rule in RULE_FAMILY:
        np.testing.assert_array_equal(
            rule_weights(c, rule)[:200], rule_weights(poisoned, rule)[:200]
        )
    np.testing.assert_array_equal(regime_codes(c)[:200], regime_codes(poisoned)[:200])


def test_rule_book_prices_exactly_like_stepping_the_allocator(dfull: PricePanel) -> None:
    (fold,) = walk_forward(dfull.n_bars, 1, min_fold_bars=100)
    book = RuleBook(dfull)
    for k, rule in enumerate(RULE_FAMILY):
        priced = price_path(dfull, fold, book.weights[k, : dfull.n_bars - 1])
        stepped = MarketEnvironment(dfull).run_splits(tuple(fold), RuleAllocator(rule))
        for name in ("train", "val", "test"):
            np.testing.assert_allclose(priced[name].gross_returns, stepped[name].gross_returns)
            np.testing.assert_allclose(priced[name].turnover, stepped[name].turnover, atol=1e-12)


def test_regime_of_a_view_tail_matches_the_vectorised_labels() -> None:
    panel = synthetic_prices(400, 5, seed=1)
    codes = regime_codes(panel.closes)
    tails = [regime_at(panel.closes[: t + 1]) for t in range(400)]
    assert tails == codes.tolist()
    assert set(codes[20:].tolist()) <= set(range(1, len(REGIMES)))
    assert set(codes[:20].tolist()) == {0}


def test_walk_forward_folds_are_consecutive_and_never_overlap() -> None:
    folds = walk_forward(8000, 4)
    assert len(folds) == 4
    spans = [(f.train.start, f.test.stop) for f in folds]
    assert spans == [(0, 2000), (2000, 4000), (4000, 6000), (6000, 8000)]
    for f in folds:
        assert f.train.stop == f.val.start
        assert f.val.stop == f.test.start
        assert (f.train.n_bars, f.val.n_bars, f.test.n_bars) == (1200, 400, 400)
    assert len(walk_forward(507, 4)) == 1  # short panels get fewer folds
    assert isinstance(folds[0], ChronoSplits)
