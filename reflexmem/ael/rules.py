"""The family of fixed allocation rules, vectorised over every bar of a panel at once.

The learning agent's arms and the "every fixed rule" comparators are the same family:
the paper's four baselines (equal weight, momentum 4, inverse momentum 4, minimum
variance 13) plus longer lookbacks of the same rules. The lookbacks are fixed a
priori as a geometric grid (x4: 4, 16, 64 bars; 13 and 52 closes for the variance
window), not tuned on any split.

`rule_weights(closes, rule)` returns the weights the rule holds at every bar: row t is
a function of closes 0..t only, exactly what the per-view allocators of `baselines`
compute (a test checks every row against them), but in one numpy pass instead of one
Python call per bar. `RuleBook` prices the whole family on a panel once, so fixed
rules, the validation-selected rule and the hindsight-best rule cost nothing extra,
and `arm_weights_at(tail, rules)` is the per-bar form a learning agent uses from the
tail of its own point-in-time view.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from reflexmem.ael.environment import MarketView
from reflexmem.prices.panel import FloatArray, PricePanel

KINDS = ("equal_weight", "momentum", "inverse_momentum", "min_variance")
MOMENTUM_FLOOR = 0.02


@dataclass(frozen=True)
class Rule:
    """One fixed allocation rule: a kind and its lookback (bars; closes for min_variance)."""

    name: str
    kind: str
    lookback: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"rule {self.name!r}: unknown kind {self.kind!r}; have {KINDS}")
        if self.kind != "equal_weight" and self.lookback < 1:
            raise ValueError(f"rule {self.name!r}: lookback must be >= 1")

    @property
    def history(self) -> int:
        """Closes the rule needs before it stops falling back to equal weight."""
        if self.kind == "equal_weight":
            return 1
        return self.lookback if self.kind == "min_variance" else self.lookback + 1


RULE_FAMILY: tuple[Rule, ...] = (
    Rule("equal_weight", "equal_weight"),
    Rule("momentum", "momentum", 4),
    Rule("momentum_16", "momentum", 16),
    Rule("momentum_64", "momentum", 64),
    Rule("inverse_momentum", "inverse_momentum", 4),
    Rule("inverse_momentum_16", "inverse_momentum", 16),
    Rule("inverse_momentum_64", "inverse_momentum", 64),
    Rule("min_variance", "min_variance", 13),
    Rule("min_variance_52", "min_variance", 52),
)
"""The arms. The first, fourth... keep the paper's names for the paper's four baselines."""

RULE_NAMES = tuple(r.name for r in RULE_FAMILY)
MAX_HISTORY = max(r.history for r in RULE_FAMILY)


def _momentum(m: FloatArray, floor: float) -> FloatArray:
    n = m.shape[-1]
    floor = min(floor, 0.5 / n)  # as in baselines.momentum_weights
    positive = m > 0
    share = np.where(positive, m, 0.0)
    total = share.sum(axis=-1, keepdims=True)
    budget = 1.0 - floor * (~positive).sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(positive, budget * share / total, floor)
    none = ~positive.any(axis=-1, keepdims=True)
    return np.asarray(np.where(none, 1.0 / n, w), dtype=np.float64)


def _inverse_momentum(m: FloatArray) -> FloatArray:
    top = m.max(axis=-1, keepdims=True)
    bottom = m.min(axis=-1, keepdims=True)
    score = top - m + np.maximum(0.1 * (top - bottom), 1e-6)
    return np.asarray(score / score.sum(axis=-1, keepdims=True), dtype=np.float64)


def _inverse_vol(sigma: FloatArray) -> FloatArray:
    n = sigma.shape[-1]
    ok = np.all(sigma > 0, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(ok, 1.0 / np.where(sigma > 0, sigma, 1.0), 1.0)
    w = inv / inv.sum(axis=-1, keepdims=True)
    return np.asarray(np.where(ok, w, 1.0 / n), dtype=np.float64)


def rule_weights(closes: FloatArray, rule: Rule) -> FloatArray:
    """Weights of `rule` at every bar, shape (T, N); row t uses closes 0..t only."""
    c = np.asarray(closes, dtype=np.float64)
    t_bars, n = c.shape
    out = np.full((t_bars, n), 1.0 / n)
    if rule.kind == "equal_weight" or t_bars < rule.history:
        return out
    lb = rule.lookback
    if rule.kind in ("momentum", "inverse_momentum"):
        m = c[lb:] / c[:-lb] - 1.0
        out[lb:] = (
            _momentum(m, MOMENTUM_FLOOR) if rule.kind == "momentum" else (_inverse_momentum(m))
        )
        return out
    # min_variance: decision t uses the lookback closes t-lb+1..t (lb - 1 returns).
    r = c[1:] / c[:-1] - 1.0
    windows = sliding_window_view(r, lb - 1, axis=0)  # (T - lb + 1, N, lb - 1)
    sigma = windows.std(axis=-1, ddof=0)
    out[lb - 1 :] = _inverse_vol(sigma)
    return out


def arm_weights_at(tail: FloatArray, rules: tuple[Rule, ...] = RULE_FAMILY) -> FloatArray:
    """Every rule's weights at the last bar of `tail` (its last closes), shape (K, N).

    `tail` must hold at least `MAX_HISTORY` closes, or the whole history if shorter:
    rules then fall back to equal weight exactly as they do on the full history.
    """
    c = np.asarray(tail, dtype=np.float64)
    n = c.shape[1]
    out = np.full((len(rules), n), 1.0 / n)
    have = c.shape[0]
    last = c[-1]
    for k, rule in enumerate(rules):
        if rule.kind == "equal_weight" or have < rule.history:
            continue
        if rule.kind == "min_variance":
            recent = c[-rule.lookback :]
            sigma = (recent[1:] / recent[:-1] - 1.0).std(axis=0, ddof=0)
            out[k] = _inverse_vol(sigma[None, :])[0]
            continue
        m = last / c[-1 - rule.lookback] - 1.0
        w = (
            _momentum(m[None, :], MOMENTUM_FLOOR)
            if rule.kind == "momentum"
            else (_inverse_momentum(m[None, :]))
        )
        out[k] = w[0]
    return out


@dataclass(frozen=True, eq=False)
class RuleBook:
    """Every rule of a family priced on one panel: weights, bar returns, turnover.

    `weights[k, t]` is rule k's target at bar t, `gross[k, t]` its return over bar
    t -> t+1 (defined for t < T - 1) and `turnover[k, t]` = |w_t - w_t-1|_1 of one
    continuous run (0 at bar 0: no buy-in).
    """

    panel: PricePanel
    rules: tuple[Rule, ...] = RULE_FAMILY

    @cached_property
    def weights(self) -> FloatArray:
        """(K, T, N) weights of every rule at every bar."""
        return np.stack([rule_weights(self.panel.closes, r) for r in self.rules])

    @cached_property
    def asset_returns(self) -> FloatArray:
        """(T - 1, N) simple returns C_t+1 / C_t - 1."""
        c = self.panel.closes
        return np.asarray(c[1:] / c[:-1] - 1.0, dtype=np.float64)

    @cached_property
    def gross(self) -> FloatArray:
        """(K, T - 1) bar returns of every rule."""
        return np.asarray(
            np.einsum("ktn,tn->kt", self.weights[:, :-1], self.asset_returns), dtype=np.float64
        )

    @cached_property
    def turnover(self) -> FloatArray:
        """(K, T - 1) turnover paid by the return of bar t (continuous run from bar 0)."""
        w = self.weights[:, :-1]
        out = np.zeros(w.shape[:2])
        out[:, 1:] = np.abs(np.diff(w, axis=1)).sum(axis=2)
        return out

    def names(self) -> tuple[str, ...]:
        """Rule names in arm order."""
        return tuple(r.name for r in self.rules)

    def index(self, name: str) -> int:
        """Arm index of a rule name."""
        return self.names().index(name)


@dataclass(frozen=True)
class RuleAllocator:
    """One family rule as a per-bar allocator over a point-in-time view."""

    rule: Rule

    def __call__(self, view: MarketView, /) -> FloatArray:
        """The rule's weights from the visible closes."""
        weights: FloatArray = arm_weights_at(view.tail(self.rule.history), (self.rule,))[0]
        return weights
