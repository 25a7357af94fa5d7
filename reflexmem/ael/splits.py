"""Chronological train/validation/test splits and the return-counting rule.

A split is a contiguous range of bars. A return r_t runs from bar t to bar t+1, so
it belongs to a split only when both bars do: a split of n bars therefore counts
n - 1 returns and no return straddles two splits (which would let the test score
depend on a decision made in validation).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

import numpy as np
import numpy.typing as npt

DFULL_TRAIN_END = date(2025, 2, 21)
DFULL_VAL_END = date(2025, 3, 7)

SPLIT_NAMES = ("train", "val", "test")


@dataclass(frozen=True)
class Split:
    """Bars `start` (inclusive) to `stop` (exclusive) of a panel, under a name."""

    name: str
    start: int
    stop: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.stop:
            raise ValueError(f"split {self.name!r}: need 0 <= start <= stop, got {self}")

    @property
    def n_bars(self) -> int:
        """Bars inside the split."""
        return self.stop - self.start

    @property
    def n_returns(self) -> int:
        """Returns whose start and end bars both lie in the split."""
        return max(self.n_bars - 1, 0)

    def decision_bars(self) -> npt.NDArray[np.int64]:
        """Bars t at which a decision earns a counted return r_t (t -> t+1)."""
        return np.arange(self.start, self.start + self.n_returns, dtype=np.int64)


@dataclass(frozen=True)
class ChronoSplits:
    """The three consecutive splits; iterating yields them in time order."""

    train: Split
    val: Split
    test: Split

    def __iter__(self) -> Iterator[Split]:
        return iter((self.train, self.val, self.test))

    def by_name(self, name: str) -> Split:
        """Look a split up by its name (`train`, `val` or `test`)."""
        for split in self:
            if split.name == name:
                return split
        raise KeyError(f"no split named {name!r}; have {SPLIT_NAMES}")


def split_by_dates(
    local_dates: npt.NDArray[np.datetime64], train_end: date, val_end: date
) -> ChronoSplits:
    """Split bars by their printed calendar date, both end dates inclusive.

    Dates (not instants) are compared because the protocol is stated in trading
    days; the caller passes the bar's local date so DST or a UTC shift cannot move
    the last bar of a day into the next split.
    """
    if val_end < train_end:
        raise ValueError(f"val_end {val_end} is before train_end {train_end}")
    days = np.asarray(local_dates, dtype="datetime64[D]")
    if days.size > 1 and not bool(np.all(days[1:] >= days[:-1])):
        raise ValueError("local dates must be non-decreasing to split chronologically")
    a = int(np.searchsorted(days, np.datetime64(train_end, "D"), side="right"))
    b = int(np.searchsorted(days, np.datetime64(val_end, "D"), side="right"))
    n = int(days.size)
    return ChronoSplits(Split("train", 0, a), Split("val", a, b), Split("test", b, n))


def split_by_fractions(n_bars: int, train: float = 0.6, val: float = 0.2) -> ChronoSplits:
    """Split `n_bars` by shares of bars, for panels without a calendar protocol.

    Boundaries are floored so the shares are never exceeded; the test split takes
    the remainder.
    """
    if n_bars < 0 or train < 0 or val < 0 or train + val > 1:
        raise ValueError(f"need n_bars >= 0, train, val >= 0, train + val <= 1; got {train}, {val}")
    a = int(np.floor(n_bars * train))
    b = int(np.floor(n_bars * (train + val)))
    return ChronoSplits(Split("train", 0, a), Split("val", a, b), Split("test", b, n_bars))


MIN_FOLD_BARS = 500
"""Shortest fold walk-forward cuts: shorter panels get fewer folds."""


def walk_forward(
    n_bars: int,
    folds: int,
    *,
    train: float = 0.6,
    val: float = 0.2,
    min_fold_bars: int = MIN_FOLD_BARS,
) -> tuple[ChronoSplits, ...]:
    """K consecutive, non-overlapping folds, each cut train / val / test in time order.

    Fold f covers bars [f L, (f + 1) L) with L = n_bars // K (the last fold takes the
    remainder) and is split by `split_by_fractions` inside it, so no test window
    overlaps any fold's tuning data, and folds share nothing a learner could carry.
    K is reduced to n_bars // min_fold_bars (at least 1) for short panels. Views still
    show every close before the fold (point in time), only learning restarts.
    """
    if folds < 1:
        raise ValueError(f"folds must be >= 1, got {folds}")
    k = max(1, min(folds, n_bars // max(min_fold_bars, 1)))
    length = n_bars // k
    out: list[ChronoSplits] = []
    for f in range(k):
        start = f * length
        stop = n_bars if f == k - 1 else start + length
        local = split_by_fractions(stop - start, train, val)
        out.append(ChronoSplits(*(Split(s.name, start + s.start, start + s.stop) for s in local)))
    return tuple(out)
