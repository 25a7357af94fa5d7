"""Statistics beside every Sharpe: non-iid standard error, bootstrap intervals, SPA.

A Sharpe ratio on 39 hourly returns has a standard error near 5 (annualised), so a
table of point estimates cannot rank methods. Three tools make the verdict honest:

- `sharpe_se`: Lo (2002), the non-iid case. The Sharpe ratio is a function of the
  GMM estimates (mu, sigma^2) with moment functions psi_t = (r_t - mu,
  (r_t - mu)^2 - sigma^2); its variance is grad' Omega grad / T with
  grad = (1 / sigma, -mu / (2 sigma^3)) and Omega the Newey-West (Bartlett) HAC
  covariance of psi with q = floor(4 (T / 100)^(2/9)) lags. Non-normal returns enter
  through the third and fourth moments inside Omega, serial correlation through its
  lags. Annualised by sqrt(bars per year), like the Sharpe itself.
- `Resampler`: the stationary bootstrap of Politis and Romano (1994) from `arch`
  (`arch.bootstrap.StationaryBootstrap`), with the expected block length of Politis
  and White (2004) as corrected by Patton et al. (2009) (`optimal_block_length`, the
  median over the window's series). Each replicate is kept as a count vector, so the
  Sharpe ratios of every method in every replicate are two matrix products, and
  pooling over folds and panels bootstraps each window independently and adds the
  sums (a stratified bootstrap: no block straddles two windows).
- `spa_pvalue`: Hansen's (2005) test of superior predictive ability from `arch`
  (`arch.bootstrap.SPA`, studentised, stationary bootstrap, 1,000 replicates, the
  "consistent" p-value). H0: the method's expected net return per bar is not above
  the comparator's. The claim "beats every comparator" is an intersection-union
  test: its p-value is the largest pairwise one.

An interval that covers zero reads "indistinguishable": the data cannot tell the two
methods apart. Replicate counts, the confidence level and the seeds are constants
here, fixed before any result was seen.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from reflexmem.prices.panel import FloatArray

BOOTSTRAP_REPS = 1000
SPA_REPS = 1000
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20_260_101
ALPHA = 0.05


def newey_west_lags(n: int) -> int:
    """Bartlett-kernel lag count floor(4 (n / 100)^(2/9)) (Newey and West 1994)."""
    lags: int = math.floor(4.0 * (max(n, 1) / 100.0) ** (2.0 / 9.0))
    return lags


def sharpe_se(returns: npt.ArrayLike, bars_per_year: float, lags: int | None = None) -> float:
    """Annualised standard error of the Sharpe ratio, Lo (2002) non-iid (GMM + HAC).

    nan for fewer than 3 returns or zero variance.
    """
    r = np.asarray(returns, dtype=np.float64)
    n = int(r.shape[0])
    if n < 3:
        return math.nan
    mu = float(r.mean())
    var = float(r.var())
    if not var > 0:
        return math.nan
    sigma = math.sqrt(var)
    d = r - mu
    psi = np.column_stack([d, d * d - var])
    q = newey_west_lags(n) if lags is None else lags
    omega = psi.T @ psi / n
    for j in range(1, min(q, n - 1) + 1):
        gamma = psi[j:].T @ psi[:-j] / n
        omega += (1.0 - j / (q + 1.0)) * (gamma + gamma.T)
    grad = np.array([1.0 / sigma, -mu / (2.0 * sigma**3)])
    variance = float(grad @ omega @ grad) / n
    return math.sqrt(max(variance, 0.0) * bars_per_year)


def block_length(series: FloatArray) -> int:
    """Median Politis-White stationary block length over the rows of `series` (>= 1)."""
    from arch.bootstrap import optimal_block_length

    s = np.atleast_2d(np.asarray(series, dtype=np.float64))
    usable = [row for row in s if np.std(row) > 0]
    if not usable or s.shape[1] < 10:
        return 1
    lengths = optimal_block_length(np.column_stack(usable))["stationary"].to_numpy()
    finite = lengths[np.isfinite(lengths)]
    return max(1, round(float(np.median(finite)))) if finite.size else 1


def bootstrap_counts(n: int, block: int, reps: int, seed: int) -> npt.NDArray[np.float64]:
    """Occurrence counts (reps, n) of each bar in stationary-bootstrap replicates."""
    from arch.bootstrap import StationaryBootstrap

    bs = StationaryBootstrap(block, np.zeros(n), seed=seed)
    counts = np.zeros((reps, n))
    for b in range(reps):
        idx = np.asarray(bs.update_indices(), dtype=np.int64)
        counts[b] = np.bincount(idx, minlength=n)
    return counts


@dataclass(frozen=True, eq=False)
class Window:
    """One test window (a panel's fold): series of every method, aligned bar by bar."""

    names: tuple[str, ...]
    series: FloatArray  # (methods, bars)
    counts: npt.NDArray[np.float64]  # (reps, bars)
    block: int


def make_window(
    names: Sequence[str], series: FloatArray, *, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> Window:
    """Bootstrap one window: block length from its series, `reps` stationary replicates."""
    s = np.asarray(series, dtype=np.float64)
    block = block_length(s)
    counts = bootstrap_counts(s.shape[1], block, reps, BOOTSTRAP_SEED + seed)
    return Window(tuple(names), s, counts, block)


def _sharpe_from_sums(s1: FloatArray, s2: FloatArray, n: FloatArray | float) -> FloatArray:
    mean = s1 / n
    var = np.maximum(s2 / n - mean * mean, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(var > 0, mean / np.sqrt(var), np.nan), dtype=np.float64)


@dataclass(frozen=True)
class Difference:
    """Sharpe(method) - Sharpe(comparator) with its bootstrap interval and SPA p-value."""

    method: str
    comparator: str
    diff: float
    ci_low: float
    ci_high: float
    spa_p: float | None

    @property
    def distinguishable(self) -> bool:
        """Whether the interval excludes zero."""
        return not (self.ci_low <= 0.0 <= self.ci_high)

    def words(self) -> str:
        """'beats ... by X' / 'trails ... by X' / 'is indistinguishable from ...'."""
        ci = f"95% CI [{self.ci_low:+.2f}, {self.ci_high:+.2f}]"
        spa = "" if self.spa_p is None else f", SPA p = {self.spa_p:.3f}"
        if not self.distinguishable:
            return (
                f"{self.method} is indistinguishable from {self.comparator}"
                f" (difference {self.diff:+.2f} Sharpe, {ci}{spa})"
            )
        verb = "beats" if self.diff > 0 else "trails"
        return f"{self.method} {verb} {self.comparator} by {abs(self.diff):.2f} Sharpe, {ci}{spa}"


def pooled_sharpes(
    windows: Sequence[Window], names: Sequence[str]
) -> tuple[FloatArray, FloatArray]:
    """Point Sharpe (per bar) and bootstrap Sharpes (reps,) of each name, pooled.

    Returns (point: (len(names),), boot: (len(names), reps)).
    """
    k = len(names)
    reps = windows[0].counts.shape[0]
    s1 = np.zeros(k)
    s2 = np.zeros(k)
    b1 = np.zeros((k, reps))
    b2 = np.zeros((k, reps))
    n = 0.0
    nb = np.zeros(reps)
    for w in windows:
        rows = np.stack([w.series[w.names.index(m)] for m in names])
        s1 += rows.sum(axis=1)
        s2 += (rows * rows).sum(axis=1)
        n += rows.shape[1]
        b1 += rows @ w.counts.T
        b2 += (rows * rows) @ w.counts.T
        nb += w.counts.sum(axis=1)
    return _sharpe_from_sums(s1, s2, n), _sharpe_from_sums(b1, b2, nb[None, :])


_SPA_MEMO: dict[tuple[bytes, int, int], float] = {}


def spa_pvalue(method: FloatArray, comparator: FloatArray, block: int, *, seed: int = 0) -> float:
    """Hansen's SPA p-value of H0 'method's mean net return <= comparator's' (arch).

    Memoised on the two series, the block length and the seed (a verdict and a row
    often ask for the same pair).
    """
    m = np.asarray(method, dtype=np.float64)
    c = np.asarray(comparator, dtype=np.float64)
    key = (hashlib.blake2b(m.tobytes() + c.tobytes(), digest_size=16).digest(), block, seed)
    hit = _SPA_MEMO.get(key)
    if hit is None:
        hit = _spa(m, c, block, seed)
        if len(_SPA_MEMO) > 4096:
            _SPA_MEMO.clear()
        _SPA_MEMO[key] = hit
    return hit


def _spa(m: FloatArray, c: FloatArray, block: int, seed: int) -> float:
    from arch.bootstrap import SPA

    if np.allclose(m, c):
        return 1.0
    d = m - c
    if np.allclose(d, d.mean()):  # a constant differential: nothing to bootstrap
        return 0.0 if d.mean() > 0 else 1.0
    spa = SPA(
        -c,
        -m[:, None],
        block_size=max(block, 1),
        reps=SPA_REPS,
        bootstrap="stationary",
        studentize=True,
        seed=BOOTSTRAP_SEED + seed,
    )
    spa.compute()
    return float(spa.pvalues["consistent"])


def compare(
    windows: Sequence[Window],
    method: str,
    comparators: Sequence[str],
    bars_per_year: float,
    *,
    spa_for: Sequence[str] = (),
) -> list[Difference]:
    """Annualised Sharpe differences of `method` to each comparator over `windows` pooled.

    SPA p-values are computed for the comparators in `spa_for` (each call runs 1,000
    replicates, so callers ask for it where a verdict needs it).
    """
    names = [method, *comparators]
    point, boot = pooled_sharpes(windows, names)
    scale = math.sqrt(bars_per_year)
    lo_q, hi_q = (1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100
    out: list[Difference] = []
    for j, comp in enumerate(comparators, start=1):
        diffs = (boot[0] - boot[j]) * scale
        finite = diffs[np.isfinite(diffs)]
        low, high = (
            (float(np.percentile(finite, lo_q)), float(np.percentile(finite, hi_q)))
            if finite.size
            else (math.nan, math.nan)
        )
        p: float | None = None
        if comp in spa_for:
            m = np.concatenate([w.series[w.names.index(method)] for w in windows])
            c = np.concatenate([w.series[w.names.index(comp)] for w in windows])
            block = round(float(np.median([w.block for w in windows])))
            p = spa_pvalue(m, c, block)
        out.append(Difference(method, comp, float((point[0] - point[j]) * scale), low, high, p))
    return out


def beats_all_pvalue(differences: Sequence[Difference]) -> float | None:
    """Intersection-union p-value of 'beats every comparator': the largest pairwise SPA p."""
    ps = [d.spa_p for d in differences if d.spa_p is not None]
    return max(ps) if ps else None
