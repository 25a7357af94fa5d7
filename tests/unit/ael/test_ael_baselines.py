from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.baselines import (
    inverse_momentum_weights,
    min_variance_weights,
    momentum_weights,
)


def _closes(*columns: list[float]) -> np.ndarray:
    return np.array(columns, dtype=np.float64).T


def test_momentum_gives_losers_the_floor_and_winners_the_rest_pro_rata() -> None:
    # m = (+10%, +30%, -5%, 0%) over 4 bars
    c = _closes([100, 1, 1, 1, 110], [100, 1, 1, 1, 130], [100, 1, 1, 1, 95], [100, 1, 1, 1, 100])
    w = momentum_weights(c, lookback=4, floor=0.02)
    rest = 1 - 0.02 * 2
    assert w == pytest.approx([rest * 0.1 / 0.4, rest * 0.3 / 0.4, 0.02, 0.02])


def test_momentum_without_a_positive_mover_is_equal_weight() -> None:
    c = _closes([100, 1, 1, 1, 90], [100, 1, 1, 1, 100], [100, 1, 1, 1, 99])
    assert momentum_weights(c) == pytest.approx([1 / 3] * 3)


def test_momentum_falls_back_to_equal_weight_with_only_lookback_closes() -> None:
    c = _closes([100, 1, 1, 200], [100, 1, 1, 50])
    assert momentum_weights(c, lookback=4) == pytest.approx([0.5, 0.5])


def test_inverse_momentum_scores_distance_from_leader_plus_eps() -> None:
    c = _closes([100, 1, 1, 1, 110], [100, 1, 1, 1, 130], [100, 1, 1, 1, 90])
    m = np.array([0.1, 0.3, -0.1])
    eps = 0.1 * (0.3 - -0.1)
    score = 0.3 - m + eps
    assert inverse_momentum_weights(c) == pytest.approx(score / score.sum())


def test_inverse_momentum_with_equal_moves_uses_the_tiny_eps_and_is_equal_weight() -> None:
    c = _closes([100, 1, 1, 1, 110], [50, 1, 1, 1, 55])
    assert inverse_momentum_weights(c) == pytest.approx([0.5, 0.5])


def test_min_variance_uses_exactly_the_last_13_closes_with_population_std() -> None:
    rng = np.random.default_rng(7)
    c = np.asarray(100 * np.cumprod(1 + rng.normal(0, 0.01, size=(20, 3)), axis=0), np.float64)
    r = c[-13:][1:] / c[-13:][:-1] - 1
    inv = 1 / r.std(axis=0, ddof=0)
    assert min_variance_weights(c) == pytest.approx(inv / inv.sum())
    older = c.copy()
    older[-14] *= 1.5  # the 14th-last close is outside the window
    assert min_variance_weights(older) == pytest.approx(min_variance_weights(c))
    inside = c.copy()
    inside[-13] *= 1.5  # the 13th-last close is inside it
    assert not np.allclose(min_variance_weights(inside), min_variance_weights(c))


def test_min_variance_falls_back_to_equal_weight_below_13_closes_or_on_a_flat_price() -> None:
    rng = np.random.default_rng(1)
    c = np.asarray(100 * np.cumprod(1 + rng.normal(0, 0.01, size=(12, 2)), axis=0), np.float64)
    assert min_variance_weights(c) == pytest.approx([0.5, 0.5])
    flat = np.column_stack([np.full(13, 50.0), 100 + np.arange(13.0)])
    assert min_variance_weights(flat) == pytest.approx([0.5, 0.5])
