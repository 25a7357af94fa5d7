from __future__ import annotations

from pathlib import Path

import pytest

from reflexmem.ael.panel import PricePanel, load_dfull, load_panel
from reflexmem.ael.splits import DFULL_TRAIN_END, DFULL_VAL_END, ChronoSplits, split_by_dates
from tests.unit.ael_learning.synthetic import write_wide_csv


@pytest.fixture(scope="session")
def synthetic_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wide_csv(tmp_path_factory.mktemp("ael-synth") / "prices.csv")


@pytest.fixture(scope="session")
def synthetic(synthetic_csv: Path) -> PricePanel:
    return load_panel(synthetic_csv)


@pytest.fixture(scope="session")
def dfull() -> PricePanel:
    return load_dfull()


@pytest.fixture(scope="session")
def dfull_splits(dfull: PricePanel) -> ChronoSplits:
    return split_by_dates(dfull.local_dates, DFULL_TRAIN_END, DFULL_VAL_END)
