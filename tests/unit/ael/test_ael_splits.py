from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from reflexmem.ael.splits import Split, split_by_dates, split_by_fractions


def test_date_split_is_inclusive_of_both_end_dates() -> None:
    days = np.array(["2025-01-01"] * 2 + ["2025-01-02"] * 2 + ["2025-01-03"] * 2, "datetime64[D]")
    s = split_by_dates(days, date(2025, 1, 1), date(2025, 1, 2))
    assert [(x.start, x.stop) for x in s] == [(0, 2), (2, 4), (4, 6)]
    assert [x.name for x in s] == ["train", "val", "test"]


def test_returns_count_only_when_both_endpoints_are_in_the_split() -> None:
    split = Split("val", 128, 168)
    bars = split.decision_bars()
    assert bars[0] == 128
    assert bars[-1] + 1 == 167
    assert split.n_returns == len(bars) == 39
    assert Split("x", 5, 5).n_returns == 0
    assert Split("y", 5, 6).n_returns == 0


def test_fraction_split_floors_boundaries_and_gives_test_the_rest() -> None:
    s = split_by_fractions(208, 0.6, 0.2)
    assert [(x.start, x.stop) for x in s] == [(0, 124), (124, 166), (166, 208)]
    with pytest.raises(ValueError, match="train \\+ val <= 1"):
        split_by_fractions(10, 0.8, 0.3)


def test_unsorted_dates_and_reversed_ends_are_rejected() -> None:
    days = np.array(["2025-01-02", "2025-01-01"], "datetime64[D]")
    with pytest.raises(ValueError, match="non-decreasing"):
        split_by_dates(days, date(2025, 1, 1), date(2025, 1, 2))
    with pytest.raises(ValueError, match="before train_end"):
        split_by_dates(days[::-1], date(2025, 1, 2), date(2025, 1, 1))
