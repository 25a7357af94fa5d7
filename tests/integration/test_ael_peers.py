"""The online-portfolio peers in their own environment (needs PyPI on first use).

One test, marked slow: it runs `universal-portfolios` 0.4.17 through
`uv run --isolated --no-project` (never in the project's environment), reads a classic
panel from the installed package, and prices the peers' weights with the project's
own cost rule.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from apps.bench.olps import PEERS, PeerJob, load_classic_panel
from reflexmem.ael.run import panel_inputs, run_benchmark
from reflexmem.synth import synthetic_prices


@pytest.mark.slow
def test_isolated_peers_and_a_classic_panel_are_priced_like_every_other_row(
    tmp_path: Path,
) -> None:
    djia = load_classic_panel("djia", tmp_path)
    assert (djia.n_bars, djia.n_assets) == (507, 30)
    assert np.all(djia.closes > 0)

    panel = synthetic_prices(700, 4, seed=2)
    inputs = panel_inputs(panel, name="synth", folds=1, bars_per_year=252)
    job = PeerJob.start(panel, inputs.folds, tmp_path / "peers")
    weights, seconds = job.result()
    assert seconds > 0
    assert set(weights) == {(p, 0) for p in PEERS}
    for w in weights.values():
        assert w.shape == (699, 4)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-6)
        assert w.min() >= -1e-9
    bcrp = weights[("bcrp", 0)]
    np.testing.assert_allclose(bcrp, bcrp[:1].repeat(699, axis=0))  # constant: hindsight CRP

    peers = {("synth", p, f): w for (p, f), w in weights.items()}
    result = run_benchmark(
        inputs,
        seeds=[0],
        methods=["equal_weight", "val_selected_rule", "olmar", "up", "bcrp"],
        peers=peers,
    )
    kinds = {r["method"]: r["kind"] for r in result.rows}
    assert kinds["olmar"] == "peer"
    assert kinds["bcrp"] == "hindsight"
    test = [
        r for r in result.rows if r["method"] == "olmar" and r["fold"] == 0 and r["split"] == "test"
    ]
    returns = {r["cost_bp"]: r["return_pct"] for r in test}
    assert returns[0.0] > returns[10.0] > returns[20.0]  # priced with the project's costs
