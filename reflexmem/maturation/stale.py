"""When a pending case is *stale*: stuck, not merely waiting for its bars.

A pending case is stale when both hold:

1. its decision is older than twice its role's maturation period (calendar days; the
   SQL prefilter `reflexmem.ledger.health.overdue_condition`), and
2. its symbol's series already holds twice the role's outcome horizon in bars after the
   decision's entry bar (the first bar at or after the decision), the last of them
   closed by `now`.

By then the position should long have settled and the case matured, so something
upstream (settlement, the schedule, a contradictory settlement) is stuck. A case
pending only because its bars have not arrived yet (a holiday, a slow feed, a symbol
the price source does not carry) is waiting, not stale. One `searchsorted` per symbol,
whatever the number of cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import polars as pl

from reflexmem.ledger.health import STALE_FACTOR
from reflexmem.prices.providers import PriceProvider
from reflexmem.prices.series import PriceSource, bars_after


def stale_mask(
    cases: pl.DataFrame, source: PriceSource, horizons: Mapping[str, int], now: datetime
) -> npt.NDArray[np.bool_]:
    """Per overdue case (role_id, symbol, decided_at): whether it saw twice its horizon.

    A role missing from `horizons` is never stale: the registry is the only source of
    a role's horizon, so none is guessed.
    """
    if cases.height == 0:
        return np.zeros(0, dtype=np.bool_)
    h = cases["role_id"].replace_strict(dict(horizons), default=-1, return_dtype=pl.Int64)
    n = np.where(h.to_numpy() > 0, STALE_FACTOR * h.to_numpy(), -1)
    decided = cases["decided_at"].dt.convert_time_zone("UTC").dt.replace_time_zone(None).to_numpy()
    symbols = cases["symbol"].cast(pl.String).fill_null("").to_numpy().astype(str)
    far = bars_after(source, symbols, decided.astype("datetime64[us]"), n).exit
    cap = np.datetime64(now.astimezone(UTC).replace(tzinfo=None), "us")
    return far.known & (far.stamp <= cap)


def stale_judge(
    prices: PriceProvider, horizons: Mapping[str, int], now: datetime
) -> Callable[[pl.DataFrame], npt.NDArray[np.bool_]]:
    """`stale_mask` over `prices`, loading the series of each batch's symbols once."""

    def judge(cases: pl.DataFrame) -> npt.NDArray[np.bool_]:
        if cases.height == 0:
            return np.zeros(0, dtype=np.bool_)
        source = prices.for_symbols(cases["symbol"].drop_nulls().unique().to_list())
        return stale_mask(cases, source, horizons, now)

    return judge
