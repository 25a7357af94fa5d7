"""Maturation (SPEC 4.4): settle positions from fills and prices, decide which cases are due.

`prices` defines the price-source protocol, its vectorized lookups and the vendored
D-full source (hourly bars plus daily SPY), `providers` hands out a source per batch
(from the ledger's `market_bars` or from price files), `settle` closes positions whose
outcome horizon has been observed, and `mature` moves each pending case to eligible or
keeps it pending with its reason.
"""

from reflexmem.maturation.mature import MaturityReport, decide_maturity, mature_cases
from reflexmem.maturation.prices import (
    MappingPrices,
    PriceSeries,
    PriceSource,
    Unsettled,
    dfull_prices,
    last_at_or_before,
    unsettled_reasons,
    window_stats,
)
from reflexmem.maturation.providers import LedgerPrices, PanelPrices, PriceProvider
from reflexmem.maturation.settle import SettleReport, settle_frame, settle_open_positions

__all__ = [
    "LedgerPrices",
    "MappingPrices",
    "MaturityReport",
    "PanelPrices",
    "PriceProvider",
    "PriceSeries",
    "PriceSource",
    "SettleReport",
    "Unsettled",
    "decide_maturity",
    "dfull_prices",
    "last_at_or_before",
    "mature_cases",
    "settle_frame",
    "settle_open_positions",
    "unsettled_reasons",
    "window_stats",
]
