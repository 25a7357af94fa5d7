"""Metrics against empyrical-reloaded (and pandas where empyrical's convention differs).

Convention bridges, stated once:
- empyrical's Sharpe uses ddof=1; ours ddof=0, so ours = theirs * sqrt(n / (n - 1));
- empyrical's Sortino divides by the downside deviation around 0, the protocol by
  the population std of the strictly negative returns: checked against pandas;
- empyrical's Calmar uses the compound annual growth rate; the protocol uses the
  arithmetic mean * T_ann, so only empyrical's max drawdown enters there.
"""

from __future__ import annotations

import empyrical as ep
import numpy as np
import pandas as pd
import pytest

from reflexmem.ael.metrics import (
    calmar,
    compute_metrics,
    compute_metrics_batch,
    max_drawdown_pct,
    sharpe,
    sortino,
    tail_ratio,
    win_rate,
)
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import run_episodes
from reflexmem.prices.panel import PricePanel

T_ANN = 1008


def _series() -> list[np.ndarray]:
    rng = np.random.default_rng(42)
    return [
        rng.normal(0.0005, 0.01, 39),
        rng.normal(-0.001, 0.02, 127),
        rng.standard_t(3, 200) * 0.005,
    ]


def _dfull_series(panel: PricePanel, splits: ChronoSplits) -> list[np.ndarray]:
    return [e.net_returns(5.0) for e in run_episodes("momentum", panel, splits).values()]


@pytest.fixture
def series(dfull: PricePanel, dfull_splits: ChronoSplits) -> list[np.ndarray]:
    return _series() + _dfull_series(dfull, dfull_splits)


def test_sharpe_matches_empyrical_after_the_ddof_correction(series: list[np.ndarray]) -> None:
    for r in series:
        n = r.size
        theirs = ep.sharpe_ratio(pd.Series(r), annualization=T_ANN) * np.sqrt(n / (n - 1))
        assert float(sharpe(r)) == pytest.approx(theirs, rel=1e-10)


def test_return_pct_matches_empyrical_cumulative_return(series: list[np.ndarray]) -> None:
    for r in series:
        m = compute_metrics(r)
        assert m.return_pct == pytest.approx(ep.cum_returns_final(pd.Series(r)) * 100, rel=1e-10)


def test_max_drawdown_matches_empyrical_as_negative_percent(series: list[np.ndarray]) -> None:
    for r in series:
        assert float(max_drawdown_pct(r)) == pytest.approx(ep.max_drawdown(pd.Series(r)) * 100)
        assert float(max_drawdown_pct(r)) < 0


def test_tail_ratio_matches_empyrical(series: list[np.ndarray]) -> None:
    for r in series:
        assert float(tail_ratio(r)) == pytest.approx(ep.tail_ratio(pd.Series(r)), rel=1e-12)


def test_calmar_is_arithmetic_annual_mean_over_empyrical_drawdown_fraction(
    series: list[np.ndarray],
) -> None:
    for r in series:
        expected = r.mean() * T_ANN / abs(ep.max_drawdown(pd.Series(r)))
        assert float(calmar(r)) == pytest.approx(expected, rel=1e-10)


def test_sortino_uses_population_std_of_strictly_negative_returns(
    series: list[np.ndarray],
) -> None:
    for r in series:
        s = pd.Series(r)
        expected = s.mean() / s[s < 0].std(ddof=0) * np.sqrt(T_ANN)
        assert float(sortino(r)) == pytest.approx(expected, rel=1e-10)


def test_win_rate_counts_only_strictly_positive_returns() -> None:
    assert float(win_rate(np.array([0.01, 0.0, -0.01, 0.02]))) == 0.5


def test_bars_per_year_scales_the_annualised_metrics() -> None:
    r = _series()[0]
    assert float(sharpe(r, 252)) == pytest.approx(float(sharpe(r, 1008)) / 2)
    assert float(calmar(r, 252)) == pytest.approx(float(calmar(r, 1008)) / 4)


def test_batch_rows_equal_single_series_metrics() -> None:
    a, b = _series()[0], _series()[0][::-1]
    assert compute_metrics_batch(np.vstack([a, b])) == [compute_metrics(a), compute_metrics(b)]


def test_degenerate_series_follow_the_documented_inf_nan_rule() -> None:
    flat_up = compute_metrics(np.full(5, 0.001))
    assert flat_up.sharpe == np.inf  # zero std, positive mean
    assert flat_up.sortino == np.inf  # no negative returns
    assert flat_up.calmar == np.inf  # no drawdown
    assert flat_up.max_dd_pct == 0.0
    zeros = compute_metrics(np.zeros(4))
    assert np.isnan(zeros.sharpe)
    assert np.isnan(zeros.sortino)
    assert np.isnan(zeros.calmar)
    assert np.isnan(zeros.tail_ratio)
    flat_down = compute_metrics(np.full(3, -0.002))
    assert flat_down.sharpe == -np.inf
    assert flat_down.sortino == -np.inf  # negatives all equal: their std is 0
    empty = compute_metrics(np.array([]))
    assert empty.n_returns == 0
    assert empty.return_pct == 0.0
    assert empty.max_dd_pct == 0.0
    assert np.isnan(empty.sharpe)
    assert np.isnan(empty.win_rate)
    assert np.isnan(empty.tail_ratio)
