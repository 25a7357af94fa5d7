"""The blocked contrast holds its level when a condition's carriers crowd into few blocks.

A confirmatory test is only worth its alpha if a true null is rejected about as often as
the level says. Null streams are simulated the way a role's decisions fall: blocks of
60-160 episodes, 5-15 % of them carrying the condition, heavy-tailed outcomes, a swing
shared by the whole block and (the hard case) a swing shared only by the block's
carriers, as a symbol's own fortnight moves every decision on it. The condition has no
effect at all. Over 10,000 such tests at level 0.03, the plain count of blocks as G
rejected 1.13-1.29 times as often as the level (1.2 pooled, with or without the
carriers' swing); the effective count 0.83-1.17 times (1.0 pooled).
"""

from __future__ import annotations

import numpy as np
import pytest

from reflexmem.memory.blocks import PairBlocks
from reflexmem.memory.contrast import Moments

LEVEL = 0.03
REPS = 2500


def _rejections(rng: np.random.Generator, blocks: int, swing: float) -> tuple[int, int]:
    """Rejections of the one-sided ("avoid") test at `LEVEL`, and tests run, over `REPS`."""
    cells = REPS * blocks
    size = rng.integers(60, 160, size=cells)
    share = rng.uniform(0.05, 0.15, size=cells)
    owner = np.repeat(np.arange(cells), size)
    carry = rng.random(owner.size) < share[owner]
    common, own = rng.normal(0.0, swing, cells), rng.normal(0.0, swing, cells)
    y = rng.standard_t(4, owner.size) + common[owner] + carry * own[owner]

    def per_cell(values: np.ndarray) -> np.ndarray:
        return np.bincount(owner, weights=values, minlength=cells).reshape(REPS, blocks)

    n_in, s_in = per_cell(carry.astype(float)), per_cell(np.where(carry, y, 0.0))
    n_all, s_all = per_cell(np.ones_like(y)), per_cell(y)
    q_in, q_all = per_cell(np.where(carry, y * y, 0.0)), per_cell(y * y)
    l_in, l_all = per_cell((carry & (y < 0)).astype(float)), per_cell((y < 0).astype(float))
    rejected = tested = 0
    for r in range(REPS):
        rows = [
            (b, n_in[r, b], s_in[r, b], n_all[r, b] - n_in[r, b], s_all[r, b] - s_in[r, b])
            for b in range(blocks)
        ]
        inside = Moments(int(n_in[r].sum()), s_in[r].sum(), q_in[r].sum(), int(l_in[r].sum()))
        everyone = Moments(int(n_all[r].sum()), s_all[r].sum(), q_all[r].sum(), int(l_all[r].sum()))
        test = PairBlocks().add(rows).contrast(inside, everyone - inside, direction=-1)
        if test is not None:
            tested += 1
            rejected += test.p_value <= LEVEL
    return rejected, tested


@pytest.mark.parametrize("swing", [0.0, 1.0], ids=["independent", "carriers-swing"])
def test_a_true_null_is_rejected_about_as_often_as_the_level(swing: float) -> None:
    rng = np.random.default_rng(20261207)
    rejected = tested = 0
    for blocks in (5, 6, 8, 10):
        r, t = _rejections(rng, blocks, swing)
        rejected, tested = rejected + r, tested + t
    assert tested >= 0.95 * 4 * REPS
    rate = rejected / tested
    # 10,000 tests: the rate's standard error is 0.0017 (0.057 of the level).
    assert 0.7 * LEVEL <= rate <= 1.15 * LEVEL, rate
