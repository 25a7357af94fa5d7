from __future__ import annotations

import pytest

from reflexmem.ael.panel import PricePanel, load_dfull
from reflexmem.ael.splits import DFULL_TRAIN_END, DFULL_VAL_END, ChronoSplits, split_by_dates


@pytest.fixture(scope="session")
def dfull() -> PricePanel:
    return load_dfull()


@pytest.fixture(scope="session")
def dfull_splits(dfull: PricePanel) -> ChronoSplits:
    return split_by_dates(dfull.local_dates, DFULL_TRAIN_END, DFULL_VAL_END)
