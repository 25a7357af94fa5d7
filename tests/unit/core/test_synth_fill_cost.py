"""A planted fill cost is written into the user's data, on its symbol only, and nowhere else."""

from __future__ import annotations

import numpy as np

from reflexmem.prices.panel import load_dfull
from reflexmem.synth import generate


def test_a_fill_cost_lowers_only_its_symbols_returns_by_that_cost() -> None:
    panel = load_dfull()
    free = generate(panel, 3000, seed=2)
    costly = generate(panel, 3000, seed=2, fill_cost={"JNJ": 0.02})
    for name in ("decisions", "previews", "executions"):
        assert free[name].equals(costly[name])  # nothing in the record marks the cost
    mine = (free["decisions"]["symbol"] == "JNJ").to_numpy()
    long = (free["decisions"]["direction"] == "long").to_numpy()
    entry = costly["outcomes"]["entry_price"] / free["outcomes"]["entry_price"]
    assert np.allclose(entry.to_numpy()[mine & long], 1.02)
    assert np.allclose(entry.to_numpy()[mine & ~long], 0.98)
    assert np.allclose(entry.to_numpy()[~mine], 1.0)
    fills = (costly["fills"]["price"] / free["fills"]["price"]).to_numpy()
    assert np.allclose(fills[mine & long], 1.02)
    lost = (free["outcomes"]["realized_return"] - costly["outcomes"]["realized_return"]).to_numpy()
    settled = ~np.isnan(lost)
    assert np.all(lost[mine & settled] > 0.015)
    assert np.allclose(lost[~mine & settled], 0.0)
