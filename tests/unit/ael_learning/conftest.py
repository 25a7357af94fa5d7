from __future__ import annotations

from pathlib import Path

import pytest

from reflexmem.prices.panel import PricePanel, load_panel
from tests.unit.ael_learning.synthetic import write_wide_csv


@pytest.fixture(scope="session")
def synthetic_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wide_csv(tmp_path_factory.mktemp("ael-synth") / "prices.csv")


@pytest.fixture(scope="session")
def synthetic(synthetic_csv: Path) -> PricePanel:
    return load_panel(synthetic_csv)
