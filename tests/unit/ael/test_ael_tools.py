from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.environment import MarketView
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.tools import correlations, momentum, quant_risk, risk_score, technicals
from reflexmem.prices.panel import PricePanel


def _view(closes: list[list[float]]) -> MarketView:
    c = np.array(closes, dtype=np.float64)
    return MarketView(c, np.datetime64("2025-01-06T14:30"), np.datetime64("2025-01-06"), ("A", "B"))


def test_rsi_is_share_of_gains_in_total_moves_and_sma_distance_is_relative() -> None:
    # A: +2, -1, +2 -> gains 4, losses 1 -> RSI 80; B only rises -> 100
    view = _view([[10, 10], [12, 11], [11, 12], [13, 13]])
    tech = technicals(view, rsi_period=3, sma_period=4)
    assert tech.rsi == pytest.approx([80.0, 100.0])
    assert tech.sma_distance == pytest.approx([13 / 11.5 - 1, 13 / 11.5 - 1])


def test_momentum_is_zero_for_lookbacks_beyond_the_history() -> None:
    view = _view([[10, 20], [11, 19], [12, 18]])
    table = momentum(view, lookbacks=(1, 2, 5))
    expected = np.array([[12 / 11 - 1, 18 / 19 - 1], [0.2, -0.1], [0.0, 0.0]])
    np.testing.assert_allclose(table.values, expected)


def test_risk_reports_population_vol_and_drawdowns() -> None:
    view = _view([[100, 100], [110, 100], [99, 100], [104.5, 100]])
    risk = quant_risk(view, window=3, bars_per_year=4)
    r = np.array([0.1, -0.1, 104.5 / 99 - 1])
    assert risk.realized_vol == pytest.approx([r.std(), 0.0])
    assert risk.annualized_vol == pytest.approx([2 * r.std(), 0.0])
    assert risk.max_drawdown == pytest.approx([-0.1, 0.0])
    assert risk.current_drawdown == pytest.approx([104.5 / 110 - 1, 0.0])


def test_correlation_of_a_flat_series_is_zero_not_nan_and_score_is_bounded() -> None:
    view = _view([[100, 50], [101, 50], [99, 50], [102, 50], [100, 50]])
    corr = correlations(view, window=10)
    np.testing.assert_array_equal(corr.matrix, np.eye(2))
    score = risk_score(quant_risk(view), corr)
    assert 0 <= score.portfolio <= 1
    assert np.all((score.per_asset >= 0) & (score.per_asset <= 1))
    assert score.regime in {"calm", "normal", "stressed"}


def test_the_composite_momentum_weight_is_re_derived_from_train_and_validation_only(
    dfull: PricePanel,
    dfull_splits: ChronoSplits,
) -> None:
    from reflexmem.ael.tools import MOMENTUM_WEIGHT
    from reflexmem.ael.tools_calibration import derive_momentum_weight

    assert derive_momentum_weight(dfull, dfull_splits) == MOMENTUM_WEIGHT
    poisoned = dfull.closes.copy()
    poisoned[dfull_splits.test.start :] *= np.linspace(0.2, 5.0, dfull.n_assets)[None, :]
    assert derive_momentum_weight(dfull.with_closes(poisoned), dfull_splits) == MOMENTUM_WEIGHT
