from __future__ import annotations

import math

import numpy as np
import pytest

from reflexmem.ael.stats import (
    Difference,
    beats_all_pvalue,
    compare,
    make_window,
    sharpe_se,
    spa_pvalue,
)


def test_lo_standard_error_matches_the_iid_formula_on_iid_normal_returns() -> None:
    rng = np.random.default_rng(0)
    r = rng.normal(0.001, 0.01, 20_000)
    sr = r.mean() / r.std()
    iid = math.sqrt((1 + 0.5 * sr**2) / r.size) * math.sqrt(252)
    assert sharpe_se(r, 252) == pytest.approx(iid, rel=0.05)


def test_lo_standard_error_grows_with_positive_autocorrelation() -> None:
    rng = np.random.default_rng(1)
    e = rng.normal(0.0, 0.01, 20_000)
    ar = np.empty_like(e)
    ar[0] = e[0]
    for t in range(1, e.size):
        ar[t] = 0.5 * ar[t - 1] + e[t]
    ar += 0.001
    iid = math.sqrt((1 + 0.5 * (ar.mean() / ar.std()) ** 2) / ar.size) * math.sqrt(252)
    assert sharpe_se(ar, 252) > 1.4 * iid
    assert math.isnan(sharpe_se([0.01, 0.01], 252))


def test_bootstrap_interval_separates_a_clear_winner_and_covers_zero_for_a_twin() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(0.0, 0.01, 2000)
    base -= base.mean()
    better = base + 0.002 + rng.normal(0, 0.002, 2000)
    noise = rng.normal(0, 0.002, 2000)
    twin = base + noise - noise.mean()  # same mean as base: nothing to find
    w = make_window(["base", "better", "twin"], np.stack([base, better, twin]))
    (win,) = compare([w], "better", ["base"], 252, spa_for=["base"])
    (tie,) = compare([w], "twin", ["base"], 252, spa_for=["base"])
    assert win.ci_low > 0
    assert win.distinguishable
    assert win.spa_p is not None
    assert win.spa_p < 0.05
    assert tie.ci_low <= 0 <= tie.ci_high
    assert tie.spa_p is not None
    assert tie.spa_p > 0.05
    assert "indistinguishable" in tie.words()
    assert "beats base" in win.words()
    assert beats_all_pvalue([win, tie]) == max(win.spa_p, tie.spa_p)


def test_pooling_two_windows_bootstraps_each_and_pools_the_point_estimate() -> None:
    rng = np.random.default_rng(3)
    a1, a2 = rng.normal(0.001, 0.01, (2, 500))
    b1, b2 = rng.normal(0.0, 0.01, (2, 500))
    w1 = make_window(["a", "b"], np.stack([a1, b1]), seed=1)
    w2 = make_window(["a", "b"], np.stack([a2, b2]), seed=2)
    (pooled,) = compare([w1, w2], "a", ["b"], 252)
    a, b = np.concatenate([a1, a2]), np.concatenate([b1, b2])
    expected = (a.mean() / a.std() - b.mean() / b.std()) * math.sqrt(252)
    assert pooled.diff == pytest.approx(expected)
    assert pooled.ci_low < pooled.diff < pooled.ci_high


def test_spa_of_identical_series_is_one_and_a_loser_does_not_beat() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(0, 0.01, 800)
    assert spa_pvalue(x, x, 5) == 1.0
    assert spa_pvalue(x - 0.003 + rng.normal(0, 0.002, 800), x, 5) > 0.3
    assert spa_pvalue(x + 0.001, x, 5) == 0.0
    d = Difference("m", "c", -1.0, -2.0, -0.5, 0.9)
    assert d.words().startswith("m trails c by 1.00")
