from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.agent import RISK_OFF, RISK_ON
from reflexmem.ael.reflect import momentum_ic, reflect


def _closes(index_returns: np.ndarray, n_assets: int = 3) -> np.ndarray:
    path = 100.0 * np.cumprod(np.concatenate([[1.0], 1.0 + index_returns]))
    return np.repeat(path[:, None], n_assets, axis=1)


def test_a_steady_rise_reads_as_trending_up_and_asks_for_less_cash() -> None:
    rng = np.random.default_rng(0)
    closes = _closes(0.004 + 0.001 * rng.standard_normal(60))
    out = reflect(closes, [0.3] * 10)
    assert out.label == "trending_up"
    assert out.planner_regime == RISK_ON
    assert 0.0 < out.confidence <= 1.0
    assert "trending_up" in out.insight
    assert "t=+" in out.insight


def test_a_falling_index_reads_as_trending_down_and_risk_off() -> None:
    rng = np.random.default_rng(1)
    out = reflect(_closes(-0.004 + 0.001 * rng.standard_normal(60)), [-0.2] * 10)
    assert out.label == "trending_down"
    assert out.planner_regime == RISK_OFF


def test_a_volatility_spike_reads_as_volatile_before_anything_else() -> None:
    rng = np.random.default_rng(2)
    calm = 0.001 * rng.standard_normal(50)
    wild = 0.02 * rng.standard_normal(10)
    out = reflect(_closes(np.concatenate([calm, wild])), [0.0] * 10)
    assert out.label == "volatile"
    assert out.planner_regime == RISK_OFF
    assert out.stats["vol_ratio"] >= 1.5


def test_alternating_returns_read_as_mean_reverting_and_recommend_fading() -> None:
    swings = np.tile([0.004, -0.004], 30)
    out = reflect(_closes(swings), [0.1, -0.1] * 5)
    assert out.label == "mean_reverting"
    assert out.planner_regime is None
    assert out.momentum_tilt < 0


def test_losing_while_reading_the_regime_lowers_confidence() -> None:
    rng = np.random.default_rng(0)
    closes = _closes(0.004 + 0.001 * rng.standard_normal(60))
    winning = reflect(closes, [0.5] * 10)
    losing = reflect(closes, [-0.5] * 10)
    assert losing.label == winning.label
    assert losing.confidence == pytest.approx(winning.confidence * 0.5)


def test_momentum_ic_uses_only_visible_pairs_and_sees_persistent_leaders() -> None:
    # Ticker i grows at rate i: momentum ranks next-bar returns perfectly.
    t = np.arange(40, dtype=float)[:, None]
    closes = 100.0 * np.exp(0.001 * t * np.arange(1, 5)[None, :])
    assert momentum_ic(closes, window=10) == pytest.approx(1.0)
    # Appending future bars cannot change a reflection made on the prefix.
    prefix = closes[:30]
    assert reflect(prefix, [0.1] * 10) == reflect(closes[:30].copy(), [0.1] * 10)


def test_reflection_is_deterministic_and_json_able() -> None:
    closes = _closes(np.tile([0.002, -0.001, 0.003], 20))
    a, b = reflect(closes, [0.2] * 10), reflect(closes, [0.2] * 10)
    assert a == b
    assert set(a.to_dict()) >= {"label", "insight", "confidence", "planner_regime"}
