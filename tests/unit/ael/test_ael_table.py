from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from reflexmem.ael.baselines import EqualWeight
from reflexmem.ael.environment import Episode
from reflexmem.ael.metrics import compute_metrics
from reflexmem.ael.plots import plot_equity_curves
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import (
    ROW_KEYS,
    aggregate,
    register_method,
    registered_methods,
    render_table2,
    run_episodes,
    run_table,
    unregister_method,
)
from reflexmem.prices.panel import PricePanel


def test_rows_have_exactly_the_documented_keys_and_seed_none_for_baselines(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=["momentum", "stateless"], seeds=[0, 1])
    assert all(tuple(r) == ROW_KEYS for r in rows)
    assert {r["seed"] for r in rows if r["method"] == "momentum"} == {None}
    assert {r["seed"] for r in rows if r["method"] == "stateless"} == {0, 1}
    # momentum: 3 splits x 4 costs; stateless: 2 seeds x 3 splits x 4 costs
    assert len(rows) == 12 + 24
    assert all(r["timing"]["seconds"] > 0 for r in rows)


@pytest.mark.parametrize("method", ["momentum", "inverse_momentum", "stateless", "tools"])
def test_higher_costs_lower_returns_monotonically(
    method: str, dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=[method], seeds=[0])
    test = sorted((r for r in rows if r["split"] == "test"), key=lambda r: r["cost_bp"])
    assert [r["cost_bp"] for r in test] == [0.0, 5.0, 10.0, 20.0]
    returns = [r["return_pct"] for r in test]
    assert all(a > b for a, b in itertools.pairwise(returns))


def test_aggregate_gives_mean_and_std_over_seeds(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=["tools"], seeds=[0, 1, 2], cost_bps=[0.0])
    agg = {(a["split"]): a for a in aggregate(rows)}
    sharpes = [r["sharpe"] for r in rows if r["split"] == "test"]
    assert agg["test"]["n_seeds"] == 3
    assert agg["test"]["sharpe_mean"] == pytest.approx(np.mean(sharpes))
    assert agg["test"]["sharpe_std"] == pytest.approx(np.std(sharpes))
    assert agg["test"]["sharpe_std"] > 0


def test_render_table2_lays_out_methods_as_rows_and_metrics_as_columns(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=["momentum", "tools"], seeds=[0, 1])
    text = render_table2(aggregate(rows), split="test", cost_bp=0)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("Method"))
    assert header.split()[1:] == [
        "Sharpe",
        "Sortino",
        "Calmar",
        "Return",
        "%",
        "MaxDD",
        "%",
        "WinR",
        "TailR",
    ]
    momentum = next(line for line in lines if line.startswith("momentum"))
    assert momentum.split()[1] == "1.44"
    assert momentum.split()[4] == "+1.21"
    tools = next(line for line in lines if line.startswith("tools"))
    assert "±" in tools


def test_registered_method_is_run_by_the_generic_runner(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    observed: list[str] = []

    class Observing(EqualWeight):
        def observe_episode(self, episode: Episode) -> None:
            observed.append(episode.split.name)

    register_method("test-observer", lambda _rng: Observing(), seeded=False)
    try:
        assert "test-observer" in registered_methods()
        with pytest.raises(ValueError, match="already registered"):
            register_method("test-observer", lambda _rng: Observing(), seeded=False)
        rows = run_table(dfull, dfull_splits, methods=["test-observer"], cost_bps=[0.0])
    finally:
        unregister_method("test-observer")
    assert observed == ["train", "val", "test"]
    eq = compute_metrics(run_episodes("equal_weight", dfull, dfull_splits)["test"].net_returns(0))
    assert next(r for r in rows if r["split"] == "test")["sharpe"] == eq.sharpe


def test_equity_plot_is_written_as_png(
    tmp_path: Path, dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    episodes = {m: run_episodes(m, dfull, dfull_splits, 0)["test"] for m in ["momentum", "tools"]}
    path = plot_equity_curves(episodes, dfull, tmp_path / "plots", cost_bp=5)
    assert path.parent == tmp_path / "plots"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 10_000
