"""Deterministic analysis tools over a point-in-time view.

These are the price-only counterparts of the tools an LLM agent calls in the AEL
paper. They read nothing but `MarketView.closes` (bars 0..t), so whatever plans on
top of them inherits the environment's point-in-time guarantee. Every tool works
on short histories too (it uses what is visible and reports `n_obs`), because the
first decisions of a run are made with a handful of bars and must not crash.
All computations are vectorised across tickers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflexmem.ael.environment import MarketView
from reflexmem.ael.metrics import BARS_PER_YEAR
from reflexmem.prices.panel import FloatArray


@dataclass(frozen=True)
class ToolConfig:
    """Windows of the tools, in bars (4 bars = one trading day on D-full)."""

    summary_window: int = 20
    rsi_period: int = 14
    sma_period: int = 20
    momentum_lookbacks: tuple[int, ...] = (2, 4, 8, 16)
    risk_window: int = 20
    corr_window: int = 40
    bars_per_year: float = BARS_PER_YEAR


@dataclass(frozen=True, eq=False)
class PriceSummary:
    """Where each ticker stands within its recent range."""

    last: FloatArray
    window_return: FloatArray
    high: FloatArray
    low: FloatArray
    range_position: FloatArray
    n_obs: int


@dataclass(frozen=True, eq=False)
class Technicals:
    """RSI (0..100, simple-average form) and distance from the simple moving average."""

    rsi: FloatArray
    sma_distance: FloatArray
    n_obs: int


@dataclass(frozen=True, eq=False)
class MomentumTable:
    """Simple returns over several lookbacks, shape (len(lookbacks), N)."""

    lookbacks: tuple[int, ...]
    values: FloatArray

    def blend(self) -> FloatArray:
        """Equal-weight average across lookbacks, one number per ticker."""
        return np.asarray(self.values.mean(axis=0), dtype=np.float64)


@dataclass(frozen=True, eq=False)
class RiskMetrics:
    """Realised volatility and drawdowns over the risk window."""

    realized_vol: FloatArray
    annualized_vol: FloatArray
    max_drawdown: FloatArray
    current_drawdown: FloatArray
    n_obs: int


@dataclass(frozen=True, eq=False)
class CorrelationMatrix:
    """Pairwise return correlations; undefined pairs (flat prices) are set to 0."""

    matrix: FloatArray
    mean_pairwise: float


@dataclass(frozen=True, eq=False)
class RiskScore:
    """Risk in [0, 1] per ticker and for the whole book, with a coarse label."""

    per_asset: FloatArray
    portfolio: float
    regime: str


@dataclass(frozen=True, eq=False)
class CompositeSignal:
    """Cross-sectional score per ticker: > 0 means preferred over the average name."""

    score: FloatArray


@dataclass(frozen=True, eq=False)
class ToolReport:
    """All tool outputs for one view, as the planner consumes them."""

    tickers: tuple[str, ...]
    summary: PriceSummary
    technicals: Technicals
    momentum: MomentumTable
    risk: RiskMetrics
    correlations: CorrelationMatrix
    risk_score: RiskScore
    signal: CompositeSignal


def _simple_returns(closes: FloatArray) -> FloatArray:
    return np.asarray(closes[1:] / closes[:-1] - 1.0, dtype=np.float64)


def price_summary(view: MarketView, window: int = 20) -> PriceSummary:
    """Last close, return and high/low over the last `window` bars."""
    c = view.tail(window + 1)
    high, low = c.max(axis=0), c.min(axis=0)
    span = high - low
    position = np.divide(c[-1] - low, span, out=np.full_like(span, 0.5), where=span > 0)
    return PriceSummary(c[-1].copy(), c[-1] / c[0] - 1.0, high, low, position, int(c.shape[0]))


def technicals(view: MarketView, rsi_period: int = 14, sma_period: int = 20) -> Technicals:
    """RSI from average gains/losses and close / SMA - 1.

    RSI is 50 when nothing moved and 100 when there were gains but no losses, so
    a short or flat history reads as neutral rather than as a division error.
    """
    diffs = np.diff(view.tail(rsi_period + 1), axis=0)
    gains = np.clip(diffs, 0.0, None).sum(axis=0)
    losses = np.clip(-diffs, 0.0, None).sum(axis=0)
    total = gains + losses
    rsi = np.divide(100.0 * gains, total, out=np.full_like(total, 50.0), where=total > 0)
    sma = view.tail(sma_period).mean(axis=0)
    return Technicals(rsi, view.closes[-1] / sma - 1.0, int(diffs.shape[0]))


def momentum(view: MarketView, lookbacks: tuple[int, ...] = (2, 4, 8, 16)) -> MomentumTable:
    """C_t / C_t-L - 1 per lookback; 0 (no view) where the history is shorter than L."""
    c = view.closes
    lb = np.asarray(lookbacks, dtype=np.int64)
    available = lb <= view.t
    past = c[np.where(available, view.t - lb, view.t)]
    values = np.where(available[:, None], c[-1][None, :] / past - 1.0, 0.0)
    return MomentumTable(tuple(lookbacks), np.asarray(values, dtype=np.float64))


def quant_risk(
    view: MarketView, window: int = 20, bars_per_year: float = BARS_PER_YEAR
) -> RiskMetrics:
    """Measure bar-return population std (raw and annualised) and price drawdowns."""
    c = view.tail(window + 1)
    r = _simple_returns(c)
    vol = r.std(axis=0, ddof=0) if r.shape[0] > 0 else np.zeros(c.shape[1])
    drawdown = c / np.maximum.accumulate(c, axis=0) - 1.0
    return RiskMetrics(
        vol,
        vol * np.sqrt(bars_per_year),
        drawdown.min(axis=0),
        drawdown[-1].copy(),
        int(r.shape[0]),
    )


def correlations(view: MarketView, window: int = 40) -> CorrelationMatrix:
    """Correlation of bar returns over the window (identity below 3 returns)."""
    n = view.n_assets
    r = _simple_returns(view.tail(window + 1))
    if r.shape[0] < 3:
        return CorrelationMatrix(np.eye(n), 0.0)
    centred = r - r.mean(axis=0)
    scale = np.sqrt((centred * centred).sum(axis=0))
    outer = scale[:, None] * scale[None, :]
    cov = centred.T @ centred
    corr = np.divide(cov, outer, out=np.zeros_like(cov), where=outer > 0)
    np.fill_diagonal(corr, 1.0)
    off = ~np.eye(n, dtype=bool)
    return CorrelationMatrix(corr, float(corr[off].mean()))


def risk_score(
    risk: RiskMetrics,
    corr: CorrelationMatrix,
    vol_reference: float = 0.40,
    drawdown_reference: float = 0.10,
) -> RiskScore:
    """Blend volatility, drawdown and co-movement into one bounded number.

    Vol is measured against 40 % a year and drawdown against 10 %, both capped at
    1, so one extreme name cannot dominate; high average correlation raises the
    book's risk because diversification is failing exactly then.
    """
    vol_part = np.clip(risk.annualized_vol / vol_reference, 0.0, 1.0)
    dd_part = np.clip(-risk.max_drawdown / drawdown_reference, 0.0, 1.0)
    per_asset = 0.6 * vol_part + 0.4 * dd_part
    book = float(np.clip(0.7 * per_asset.mean() + 0.3 * max(corr.mean_pairwise, 0.0), 0.0, 1.0))
    regime = "calm" if book < 0.35 else "stressed" if book > 0.6 else "normal"
    return RiskScore(np.asarray(per_asset, dtype=np.float64), book, regime)


def _zscore(x: FloatArray) -> FloatArray:
    sd = x.std(ddof=0)
    if not np.isfinite(sd) or sd == 0:
        return np.zeros_like(x)
    return np.asarray((x - x.mean()) / sd, dtype=np.float64)


MOMENTUM_WEIGHT = 0.0
"""Chosen on D-full's train + validation splits only, see `tools_calibration`."""


def _rest(tech: Technicals, score: RiskScore) -> FloatArray:
    return np.asarray(
        0.25 * _zscore(tech.sma_distance)
        - 0.15 * _zscore(tech.rsi)
        - 0.15 * _zscore(score.per_asset),
        dtype=np.float64,
    )


def composite_signal(mom: MomentumTable, tech: Technicals, score: RiskScore) -> CompositeSignal:
    """MOMENTUM_WEIGHT z(momentum) + 0.25 z(SMA distance) - 0.15 z(RSI) - 0.15 z(risk).

    Trend confirms momentum, and RSI and risk temper chasing names that are stretched
    or volatile. Cross-sectional z-scores make the score scale-free. The momentum
    weight was chosen by rank IC on D-full's train and validation splits only
    (`tools_calibration.derive_momentum_weight`); the other three are a priori.
    """
    combined = MOMENTUM_WEIGHT * _zscore(mom.blend()) + _rest(tech, score)
    return CompositeSignal(np.asarray(combined, dtype=np.float64))


def composite_parts(view: MarketView, config: ToolConfig) -> tuple[FloatArray, FloatArray]:
    """(z(momentum blend), the rest of the composite) for one view, for calibration."""
    tech = technicals(view, config.rsi_period, config.sma_period)
    mom = momentum(view, config.momentum_lookbacks)
    score = risk_score(
        quant_risk(view, config.risk_window, config.bars_per_year),
        correlations(view, config.corr_window),
    )
    return _zscore(mom.blend()), _rest(tech, score)


def run_tools(view: MarketView, config: ToolConfig | None = None) -> ToolReport:
    """Run every tool on one view."""
    cfg = config or ToolConfig()
    tech = technicals(view, cfg.rsi_period, cfg.sma_period)
    mom = momentum(view, cfg.momentum_lookbacks)
    risk = quant_risk(view, cfg.risk_window, cfg.bars_per_year)
    corr = correlations(view, cfg.corr_window)
    score = risk_score(risk, corr)
    return ToolReport(
        view.tickers,
        price_summary(view, cfg.summary_window),
        tech,
        mom,
        risk,
        corr,
        score,
        composite_signal(mom, tech, score),
    )
