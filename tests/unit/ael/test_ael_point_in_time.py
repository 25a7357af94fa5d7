from __future__ import annotations

import numpy as np
import pytest

from reflexmem.ael.environment import MarketEnvironment, MarketView
from reflexmem.ael.splits import Split
from reflexmem.ael.table import get_method
from reflexmem.prices.panel import PricePanel

METHODS = ["equal_weight", "momentum", "min_variance", "inverse_momentum", "stateless", "tools"]
POISON_AT = 150


def _poisoned(panel: PricePanel, value: float) -> PricePanel:
    closes = np.array(panel.closes)
    closes[POISON_AT:] = value
    return panel.with_closes(closes)


def _weights(method: str, panel: PricePanel, split: Split) -> np.ndarray:
    spec = get_method(method)
    allocator = spec.factory(np.random.default_rng(3) if spec.seeded else None)
    return MarketEnvironment(panel).run(split, allocator).weights


@pytest.mark.parametrize("method", METHODS)
def test_huge_future_prices_do_not_change_any_earlier_decision(
    method: str, dfull: PricePanel
) -> None:
    everything = Split("all", 0, dfull.n_bars)
    clean = _weights(method, dfull, everything)
    poisoned = _weights(method, _poisoned(dfull, 1e12), everything)
    np.testing.assert_array_equal(poisoned[:POISON_AT], clean[:POISON_AT])
    # the poison is real: decisions that can see it do change
    assert not np.array_equal(poisoned[POISON_AT:], clean[POISON_AT:]) or method == "equal_weight"


@pytest.mark.parametrize("method", METHODS)
def test_nan_future_prices_do_not_change_any_earlier_decision(
    method: str, dfull: PricePanel
) -> None:
    # decisions up to the last bar before the poison; the last return itself is NaN
    up_to_poison = Split("pre", 0, POISON_AT + 1)
    clean = _weights(method, dfull, up_to_poison)
    poisoned = _weights(method, _poisoned(dfull, np.nan), up_to_poison)
    assert clean.shape == (POISON_AT, dfull.n_assets)
    np.testing.assert_array_equal(poisoned, clean)


def test_view_is_a_read_only_copy_of_closes_up_to_t(dfull: PricePanel) -> None:
    view = MarketEnvironment(dfull).view(10)
    assert view.closes.shape == (11, dfull.n_assets)
    np.testing.assert_array_equal(view.closes, dfull.closes[:11])
    assert not np.shares_memory(view.closes, dfull.closes)
    with pytest.raises(ValueError, match="read-only"):
        view.closes[0, 0] = 1.0


def test_allocator_only_ever_sees_history_up_to_its_bar(dfull: PricePanel) -> None:
    seen: list[tuple[int, int]] = []

    def spy(view: MarketView) -> np.ndarray:
        seen.append((view.t, view.closes.shape[0]))
        return np.full(view.n_assets, 1.0 / view.n_assets)

    MarketEnvironment(dfull).run(Split("val", 128, 168), spy)
    assert seen == [(t, t + 1) for t in range(128, 167)]


# Seed 0, first decision (bar 168) of the D-full panel, pinned.
SEED0_FIRST_WEIGHTS = {
    "stateless": [
        0.025,
        0.025,
        0.1326771164571121,
        0.025,
        0.025,
        0.025,
        0.1585390106009757,
        0.20429645563197665,
        0.025,
        0.3544874173099355,
    ],
    "tools": [
        0.021670502141298776,
        0.021670502141298776,
        0.1662473237139283,
        0.21793423093821307,
        0.021670502141298776,
        0.021670502141298776,
        0.11678884876631797,
        0.13714607153323521,
        0.021670502141298776,
        0.12035109999376264,
    ],
}


@pytest.mark.parametrize("method", ["stateless", "tools"])
def test_agent_seeds_reproduce_exactly_and_differ_slightly(method: str, dfull: PricePanel) -> None:
    spec = get_method(method)
    split = Split("test", 168, 208)
    env = MarketEnvironment(dfull)

    def run(seed: int) -> np.ndarray:
        return env.run(split, spec.factory(np.random.default_rng(seed))).weights

    seeded = run(0)
    np.testing.assert_array_equal(run(0), seeded)
    assert seeded.shape == (39, dfull.n_assets)  # one decision per bar but the last
    np.testing.assert_allclose(seeded[0], SEED0_FIRST_WEIGHTS[method], rtol=1e-9)
    diff = np.abs(run(0) - run(1)).max()
    assert 0 < diff < 0.2
