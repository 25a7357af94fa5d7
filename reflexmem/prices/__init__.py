"""Prices: where a decision's outcome is read from, for maturation and the benchmarks alike.

`panel` holds close-price panels (aligned tickers on one bar clock) and their loaders,
the bundled D-full data included; `series` defines the price-source protocol and its
vectorized lookups (last price at or before a time, the n-th bar after an entry,
window statistics, why a decision
is not settled yet); `providers` hands out a source per batch, from the ledger's
`market_bars` or from price files; `dfull_bars` turns the bundled data into bar files
for the ledger. Maturation and the AEL benchmark both read prices from here, so neither
depends on the other.
"""

from reflexmem.prices.providers import LedgerPrices, PanelPrices, PriceProvider
from reflexmem.prices.series import (
    Horizon,
    MappingPrices,
    PriceSeries,
    PriceSource,
    Unsettled,
    bars_after,
    dfull_prices,
    last_at_or_before,
    unsettled_reasons,
    window_stats,
)

__all__ = [
    "Horizon",
    "LedgerPrices",
    "MappingPrices",
    "PanelPrices",
    "PriceProvider",
    "PriceSeries",
    "PriceSource",
    "Unsettled",
    "bars_after",
    "dfull_prices",
    "last_at_or_before",
    "unsettled_reasons",
    "window_stats",
]
