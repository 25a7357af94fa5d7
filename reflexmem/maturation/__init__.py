"""Maturation: settle positions from fills and prices, decide which cases are due.

`settle` closes positions whose outcome horizon has been observed, `settlement` states
which position is an execution's own (the rule admission applies too), and `mature`
moves each pending case to eligible or keeps it pending with its reason. Prices come
from `reflexmem.prices`.
"""

from reflexmem.maturation.mature import MaturityReport, decide_maturity, mature_cases
from reflexmem.maturation.settle import SettleReport, settle_frame, settle_open_positions

__all__ = [
    "MaturityReport",
    "SettleReport",
    "decide_maturity",
    "mature_cases",
    "settle_frame",
    "settle_open_positions",
]
