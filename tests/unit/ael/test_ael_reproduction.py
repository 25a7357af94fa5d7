"""The key check: the paper's deterministic rows come out of this implementation."""

from __future__ import annotations

import pytest

from reflexmem.ael.metrics import compute_metrics
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import BASELINES, run_episodes, run_table
from reflexmem.prices.panel import PricePanel

# Paper Table 2, test split, 0 bp: (Sharpe, Return %).
PAPER_TEST = {
    "equal_weight": (0.70, 0.34),
    "momentum": (1.44, 1.21),
    "min_variance": (-0.61, -0.32),
    "inverse_momentum": (-0.20, -0.17),
}


@pytest.mark.parametrize("method", list(PAPER_TEST))
def test_baseline_reproduces_paper_test_sharpe_and_return_to_two_decimals(
    method: str, dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    episode = run_episodes(method, dfull, dfull_splits)["test"]
    m = compute_metrics(episode.net_returns(0.0))
    assert (round(m.sharpe, 2), round(m.return_pct, 2)) == PAPER_TEST[method]


def test_splits_have_paper_bar_counts_and_return_counts(dfull_splits: ChronoSplits) -> None:
    assert [s.n_bars for s in dfull_splits] == [128, 40, 40]
    assert [s.n_returns for s in dfull_splits] == [127, 39, 39]


def test_table_rows_count_127_39_39_returns_per_split(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    rows = run_table(dfull, dfull_splits, methods=["equal_weight"], cost_bps=[0.0])
    assert {r["split"]: r["n_returns"] for r in rows} == {"train": 127, "val": 39, "test": 39}


def test_baselines_are_fully_invested_long_only(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    for method in BASELINES:
        for episode in run_episodes(method, dfull, dfull_splits).values():
            assert episode.weights.min() >= 0.0
            assert episode.weights.sum(axis=1) == pytest.approx(1.0, abs=1e-12)
