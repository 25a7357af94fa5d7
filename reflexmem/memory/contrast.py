"""Outcome contrasts: does a condition move outcomes, and by how much, with what certainty.

A pattern is worth remembering only if the episodes that carry a condition ended
differently from the role's other episodes. A share of wins among the carriers alone
says nothing (a role that wins 60 % of the time "mostly wins" under every tag), so
everything here compares two groups: carriers and the rest.

Groups are kept as :class:`Moments` (count, sum, sum of squares, losses): sufficient
statistics that add and subtract exactly, so a lineage can extend its figures window by
window and the rest of a role is "all minus carriers" without a second pass.

The test is **Welch's t** for a difference of means with unequal variances (the
carriers are usually the smaller group, with their own spread); closed form and
deterministic, the same figure on every backend and rerun. :func:`welch` is vectorized
over arrays so a whole window's conditions, or every skill version of a listing, cost
one call. :func:`spent_alpha` is the level of the k-th test of a sequence whose levels
sum to q (alpha-spending: the error control of confirmed rules).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

CONFIDENCE = 0.95
MIN_SIDE = 2
"""Episodes each side needs for a variance, hence a test."""


@dataclass(frozen=True, slots=True)
class Moments:
    """Count, sum, sum of squares and losses (outcomes below zero) of one group."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    losses: int = 0

    @classmethod
    def of(cls, values: Iterable[float]) -> Moments:
        """The moments of some outcomes."""
        arr = np.fromiter(values, dtype=float)
        return cls(len(arr), float(arr.sum()), float((arr * arr).sum()), int((arr < 0).sum()))

    @classmethod
    def from_json(cls, value: Mapping[str, float] | None) -> Moments:
        """Moments stored by :meth:`as_json` (empty when nothing was stored)."""
        if not value:
            return cls()
        return cls(
            int(value["n"]), float(value["sum"]), float(value["sumsq"]), int(value["losses"])
        )

    def as_json(self) -> dict[str, float]:
        """The moments as JSON numbers (floats round-trip exactly)."""
        return {"n": self.n, "sum": self.total, "sumsq": self.squares, "losses": self.losses}

    def __add__(self, other: Moments) -> Moments:
        return Moments(
            self.n + other.n,
            self.total + other.total,
            self.squares + other.squares,
            self.losses + other.losses,
        )

    def __sub__(self, other: Moments) -> Moments:
        return Moments(
            self.n - other.n,
            self.total - other.total,
            self.squares - other.squares,
            self.losses - other.losses,
        )

    @property
    def mean(self) -> float | None:
        """Mean outcome (None for an empty group)."""
        return self.total / self.n if self.n else None

    @property
    def variance(self) -> float | None:
        """Sample variance (ddof 1; None below two outcomes)."""
        if self.n < MIN_SIDE:
            return None
        return max(0.0, (self.squares - self.total * self.total / self.n) / (self.n - 1))

    @property
    def loss_rate(self) -> float | None:
        """Share of outcomes below zero."""
        return self.losses / self.n if self.n else None


@dataclass(frozen=True, slots=True)
class Contrast:
    """Carriers against the rest: difference of means, its interval and p-value.

    ``effect`` = mean(carriers) - mean(rest); ``p_value`` is two-sided unless the
    contrast was asked for one direction (see :func:`contrast`).
    """

    n_in: int
    n_out: int
    mean_in: float
    mean_out: float
    loss_in: float
    loss_out: float
    effect: float
    ci_low: float
    ci_high: float
    p_value: float

    def as_json(self) -> dict[str, float]:
        """The figures as a JSON object."""
        return {k: getattr(self, k) for k in self.__slots__}


def _t_sf(t: float, df: float) -> float:
    """Student's t survival function: `scipy.stats.t.sf` without its per-call overhead.

    The same special function the distribution object calls (about 100 us less per
    call; a cycle computes thousands of contrasts).
    """
    return float(special.stdtr(df, -t))


def welch(
    n1: ArrayLike,
    mean1: ArrayLike,
    var1: ArrayLike,
    n2: ArrayLike,
    mean2: ArrayLike,
    var2: ArrayLike,
    confidence: float = CONFIDENCE,
) -> tuple[NDArray[np.float64], ...]:
    """Welch's difference of means, vectorized: (diff, ci_low, ci_high, t, df).

    Entries where either side has fewer than two outcomes are NaN. A zero standard
    error (both groups constant) gives a zero-width interval and t = +-inf or NaN.
    """
    a_n, b_n = np.asarray(n1, float), np.asarray(n2, float)
    ok = (a_n >= MIN_SIDE) & (b_n >= MIN_SIDE)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(ok, np.asarray(var1, float) / a_n, np.nan)
        b = np.where(ok, np.asarray(var2, float) / b_n, np.nan)
        se = np.sqrt(a + b)
        df = (a + b) ** 2 / (a**2 / (a_n - 1) + b**2 / (b_n - 1))
        diff = np.where(ok, np.asarray(mean1, float) - np.asarray(mean2, float), np.nan)
        q = special.stdtrit(np.where(se > 0, df, 1.0), 0.5 + confidence / 2.0)
        half = np.where(se > 0, q * se, 0.0)
        t = diff / se
    return diff, diff - half, diff + half, t, np.where(se > 0, df, np.inf)


def contrast(inside: Moments, outside: Moments, *, direction: int = 0) -> Contrast | None:
    """Welch contrast of two groups; None if either has fewer than two outcomes.

    ``direction`` 0 gives a two-sided p-value; +1 / -1 a one-sided one for the
    alternative "carriers do better" / "carriers do worse".
    """
    if inside.n < MIN_SIDE or outside.n < MIN_SIDE:
        return None
    diff, low, high, t, df = welch(
        inside.n,
        inside.total / inside.n,
        inside.variance or 0.0,
        outside.n,
        outside.total / outside.n,
        outside.variance or 0.0,
    )
    return result(
        inside, outside, float(diff), float(low), float(high), float(t), float(df), direction
    )


def result(
    inside: Moments,
    outside: Moments,
    d: float,
    low: float,
    high: float,
    tt: float,
    dof: float,
    direction: int,
) -> Contrast:
    """The contrast's figures from its difference, interval, t and degrees of freedom.

    Shared with the block-clustered contrast (:mod:`reflexmem.memory.blocks`).
    """
    if math.isnan(tt):
        p = 1.0
    elif direction == 0:
        p = float(2.0 * _t_sf(abs(tt), dof))
    else:
        p = float(_t_sf(direction * tt, dof))
    return Contrast(
        n_in=inside.n,
        n_out=outside.n,
        mean_in=float(inside.mean or 0.0),
        mean_out=float(outside.mean or 0.0),
        loss_in=float(inside.loss_rate or 0.0),
        loss_out=float(outside.loss_rate or 0.0),
        effect=d,
        ci_low=low,
        ci_high=high,
        p_value=min(1.0, max(0.0, p)),
    )


def spent_alpha(k: int, q: float) -> float:
    """Level of the k-th test (1-based) of a sequence: q * 6 / (pi^2 k^2), summing to q."""
    if k < 1:
        raise ValueError(f"tests count from 1, got {k}")
    return q * 6.0 / (math.pi**2 * k * k)
