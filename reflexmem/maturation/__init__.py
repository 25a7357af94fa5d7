"""Maturation (SPEC 4.4): settle positions from fills and prices, decide which cases are due.

`prices` defines the price-source protocol and the vendored D-full source (hourly bars
plus daily SPY), `settle` closes positions whose outcome horizon has been observed, and
`mature` moves each pending case to eligible or keeps it pending with its reason.
"""

from reflexmem.maturation.mature import MaturityReport, decide_maturity, mature_cases
from reflexmem.maturation.prices import (
    MappingPrices,
    PriceSeries,
    PriceSource,
    dfull_prices,
    last_at_or_before,
    window_stats,
)
from reflexmem.maturation.settle import SettleReport, settle_frame, settle_open_positions

__all__ = [
    "MappingPrices",
    "MaturityReport",
    "PriceSeries",
    "PriceSource",
    "SettleReport",
    "decide_maturity",
    "dfull_prices",
    "last_at_or_before",
    "mature_cases",
    "settle_frame",
    "settle_open_positions",
    "window_stats",
]
