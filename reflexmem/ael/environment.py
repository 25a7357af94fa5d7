"""Point-in-time market environment: allocators see closes 0..t and nothing else.

The guarantee is structural rather than a convention: at bar t an allocator gets a
`MarketView` over closes 0..t and no reference to the full panel (and hence to future
rows) is reachable from what it is handed. `MarketEnvironment.run` keeps one
*visible buffer* per run that it fills one row per bar: the view of bar t is a
read-only slice of it, and at the moment of decision t every row after t of that
buffer is still NaN, so even the slice's `.base` holds nothing from the future.
This costs O(N) per bar instead of copying the whole history (O(t N)), which kept
long panels quadratic. Returns and costs are computed afterwards from the collected
weight matrix in one vectorised pass.

Costs follow the data README's convention (the paper's code): turnover of one
continuous run, the first decision of a run pays nothing (w_-1 = w_0, no buy-in) and
a split continuing a run starts from the weights held at the end of the previous one
(`initial_weights`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from reflexmem.ael.pit_guard import Refusal
from reflexmem.ael.splits import Split
from reflexmem.prices.panel import FloatArray, PricePanel

IntArray = npt.NDArray[np.int64]

_WEIGHT_TOL = 1e-9


class MarketView:
    """What an allocator may know at the close of bar t: closes 0..t.

    Built by copying, never by slicing the panel's buffer, so even numpy's `.base`
    chain leads nowhere near the future.
    """

    __slots__ = ("_closes", "_date", "_key", "_stamp", "_tickers")

    def __init__(
        self,
        closes: FloatArray,
        stamp: np.datetime64,
        local_date: np.datetime64,
        tickers: tuple[str, ...],
        *,
        history_key: bytes | None = None,
        copy: bool = True,
    ) -> None:
        own = np.array(closes, dtype=np.float64, copy=True) if copy else closes
        own.setflags(write=False)
        self._closes = own
        self._stamp = stamp
        self._date = local_date
        self._tickers = tickers
        self._key = history_key

    @property
    def history_key(self) -> bytes:
        """Digest of exactly what is visible (closes 0..t, clock, tickers).

        Environments pass a prefix-hash chain computed once per panel (O(1) per bar);
        a view built by hand hashes its closes.
        """
        if self._key is None:
            h = hashlib.blake2b(self._closes.tobytes(), digest_size=16)
            h.update(np.asarray(self._stamp, dtype="datetime64[us]").tobytes())
            h.update("\x1f".join(self._tickers).encode())
            self._key = h.digest()
        return self._key

    @property
    def closes(self) -> FloatArray:
        """Closes of bars 0..t, shape (t+1, N), read-only."""
        return self._closes

    @property
    def t(self) -> int:
        """Index of the current (last visible) bar."""
        return int(self._closes.shape[0]) - 1

    @property
    def n_closes(self) -> int:
        """Number of visible closes per ticker (t + 1)."""
        return int(self._closes.shape[0])

    @property
    def n_assets(self) -> int:
        """Tickers in the view."""
        return int(self._closes.shape[1])

    @property
    def tickers(self) -> tuple[str, ...]:
        """Ticker names, in column order."""
        return self._tickers

    @property
    def timestamp(self) -> np.datetime64:
        """UTC instant of bar t (naive datetime64 in UTC)."""
        return self._stamp

    @property
    def local_date(self) -> np.datetime64:
        """Calendar date of bar t as printed in the source file."""
        return self._date

    @property
    def decision_time(self) -> datetime:
        """Bar t's instant as an aware UTC datetime, for evidence time checks."""
        micros = int(self._stamp.astype("datetime64[us]").astype(np.int64))
        return datetime.fromtimestamp(micros / 1e6, tz=UTC)

    def tail(self, n: int) -> FloatArray:
        """Return the last `n` visible closes (fewer if the history is shorter)."""
        return self._closes[-n:] if n > 0 else self._closes[:0]


@dataclass(frozen=True, eq=False)
class Decision:
    """Weights chosen at one bar plus what the allocator wants on the record.

    `weights` are the risky-asset weights; whatever they leave below 1 is cash,
    which earns 0. Refusals travel with the decision so that evidence the guard
    turned away shows up in the agent's output, not only in a log.
    """

    weights: FloatArray
    notes: tuple[str, ...] = ()
    refusals: tuple[Refusal, ...] = ()

    @property
    def cash(self) -> float:
        """Share of the portfolio left in cash."""
        return float(1.0 - np.sum(self.weights))


class Allocator(Protocol):
    """Chooses weights at the close of bar t from a point-in-time view."""

    def __call__(self, view: MarketView, /) -> FloatArray | Decision:
        """Return risky-asset weights (or a `Decision` carrying them)."""
        ...


@dataclass(frozen=True, eq=False)
class Episode:
    """Everything one pass of an allocator over a split produced."""

    split: Split
    tickers: tuple[str, ...]
    bars: IntArray
    weights: FloatArray
    asset_returns: FloatArray
    gross_returns: FloatArray
    turnover: FloatArray
    decisions: tuple[Decision, ...]
    seconds: float = field(default=0.0)
    carry: FloatArray | None = field(default=None)
    """Weights decided at the split's last bar (not counted): what the next split inherits."""

    @property
    def n_returns(self) -> int:
        """Counted returns (one per decision)."""
        return int(self.gross_returns.shape[0])

    @property
    def cash(self) -> FloatArray:
        """Cash weight per decision."""
        return np.asarray(1.0 - self.weights.sum(axis=1), dtype=np.float64)

    @property
    def refusals(self) -> tuple[Refusal, ...]:
        """Every evidence refusal recorded during the episode, in bar order."""
        return tuple(r for d in self.decisions for r in d.refusals)

    def net_returns(self, cost_bp: float) -> FloatArray:
        """Price costs in: r_t - c * sum_i |w_t,i - w_t-1,i|, c = cost_bp / 1e4."""
        return np.asarray(self.gross_returns - cost_bp * 1e-4 * self.turnover, dtype=np.float64)

    def net_returns_grid(self, cost_bps: Sequence[float]) -> FloatArray:
        """Net returns for several cost levels at once, shape (len(cost_bps), n)."""
        c = np.asarray(cost_bps, dtype=np.float64)[:, None] * 1e-4
        return np.asarray(self.gross_returns[None, :] - c * self.turnover[None, :])


def portfolio_returns(
    closes: FloatArray, bars: IntArray, weights: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Asset returns C_t+1 / C_t - 1 at the decision bars and the portfolio's r_t.

    Cash has no column: it earns 0, so it simply drops out of the sum.
    """
    asset = closes[bars + 1] / closes[bars] - 1.0
    gross = np.einsum("ij,ij->i", weights, asset)
    return np.asarray(asset, dtype=np.float64), np.asarray(gross, dtype=np.float64)


def turnover(weights: FloatArray, initial: FloatArray) -> FloatArray:
    """sum_i |w_t,i - w_t-1,i| per decision, with `initial` standing for w_-1."""
    previous = np.vstack([initial[None, :], weights[:-1]])
    return np.asarray(np.abs(weights - previous).sum(axis=1), dtype=np.float64)


class MarketEnvironment:
    """Steps allocators through splits of one panel, point in time."""

    def __init__(self, panel: PricePanel) -> None:
        self.panel = panel
        self._chain: list[bytes] | None = None

    def history_key(self, t: int) -> bytes:
        """Digest of closes 0..t, bar t's instant and the tickers (a prefix-hash chain)."""
        if self._chain is None:
            p = self.panel
            chain: list[bytes] = []
            previous = "\x1f".join(p.tickers).encode()
            stamps = p.timestamps.astype("datetime64[us]").astype(np.int64)
            for row, stamp in zip(p.closes, stamps.tolist(), strict=True):
                h = hashlib.blake2b(previous, digest_size=16)
                h.update(row.tobytes())
                h.update(int(stamp).to_bytes(8, "little", signed=True))
                previous = h.digest()
                chain.append(previous)
            self._chain = chain
        return self._chain[t]

    def view(self, t: int) -> MarketView:
        """Build the view of bar t: a read-only copy of closes 0..t."""
        if not 0 <= t < self.panel.n_bars:
            raise IndexError(f"bar {t} outside 0..{self.panel.n_bars - 1}")
        p = self.panel
        return MarketView(
            p.closes[: t + 1],
            p.timestamps[t],
            p.local_dates[t],
            p.tickers,
            history_key=self.history_key(t),
        )

    def run(
        self,
        split: Split,
        allocator: Allocator,
        initial_weights: FloatArray | None = None,
        *,
        decide_last_bar: bool = False,
    ) -> Episode:
        """Collect a decision at every counted bar of `split`, then price them.

        The view at bar t still holds the history before the split (closes 0..t),
        as the protocol requires; only the returns counted are restricted to the
        split. `initial_weights` is the portfolio held before the first decision:
        None (the start of a run) means no buy-in cost (w_-1 = w_0); a split that
        continues a run passes the weights held at the last bar of the split before,
        so its first return pays the carried-over turnover. `decide_last_bar` also
        asks for a decision at the split's last bar (its return belongs to no split,
        as in one continuous run over the panel) and returns it as `Episode.carry`.
        """
        if split.stop > self.panel.n_bars:
            raise ValueError(f"split {split} runs past the panel's {self.panel.n_bars} bars")
        p = self.panel
        n_assets = p.n_assets
        bars = split.decision_bars()
        started = time.perf_counter()
        buffer = np.full(p.closes.shape, np.nan)
        first = int(bars[0]) if bars.size else 0
        buffer[:first] = p.closes[:first]
        decisions_list: list[Decision] = []
        for t in bars.tolist():
            buffer[t] = p.closes[t]
            visible = buffer[: t + 1]
            view = MarketView(
                visible,
                p.timestamps[t],
                p.local_dates[t],
                p.tickers,
                history_key=self.history_key(t),
                copy=False,
            )
            decisions_list.append(_as_decision(allocator(view), t, n_assets, allocator))
        carry: FloatArray | None = None
        last = split.stop - 1
        if decide_last_bar and split.n_bars and last + 1 < p.n_bars:
            buffer[first : last + 1] = p.closes[first : last + 1]
            view = MarketView(
                buffer[: last + 1],
                p.timestamps[last],
                p.local_dates[last],
                p.tickers,
                history_key=self.history_key(last),
                copy=False,
            )
            carry = _as_decision(allocator(view), last, n_assets, allocator).weights
        decisions = tuple(decisions_list)
        weights = (
            np.vstack([d.weights for d in decisions])
            if decisions
            else np.zeros((0, n_assets), dtype=np.float64)
        )
        asset, gross = portfolio_returns(p.closes, bars, weights)
        if initial_weights is not None:
            start = np.asarray(initial_weights, dtype=np.float64)
        else:
            start = weights[0] if weights.shape[0] else np.zeros(n_assets)
        costs = turnover(weights, start)
        elapsed = time.perf_counter() - started
        return Episode(
            split, p.tickers, bars, weights, asset, gross, costs, decisions, elapsed, carry
        )

    def run_splits(self, splits: Sequence[Split], allocator: Allocator) -> dict[str, Episode]:
        """One continuous run through consecutive `splits`, as the README prices it.

        The allocator decides at every bar, including each split's last bar (whose
        return straddles two splits and counts in neither); the next split's first
        return pays the turnover from that decision. Calls
        `allocator.observe_episode(episode)` after each split if it has one.
        """
        episodes: dict[str, Episode] = {}
        held: FloatArray | None = None
        for i, split in enumerate(splits):
            more = i + 1 < len(splits)
            episode = self.run(split, allocator, initial_weights=held, decide_last_bar=more)
            observe = getattr(allocator, "observe_episode", None)
            if callable(observe):
                observe(episode)
            held = episode.carry
            episodes[split.name] = episode
        return episodes


def _as_decision(
    result: FloatArray | Decision, t: int, n_assets: int, allocator: object
) -> Decision:
    decision = result if isinstance(result, Decision) else Decision(np.asarray(result))
    w = np.asarray(decision.weights, dtype=np.float64)
    name = getattr(allocator, "__name__", type(allocator).__name__)
    if w.shape != (n_assets,):
        raise ValueError(f"{name} at bar {t}: weights shape {w.shape}, expected ({n_assets},)")
    if not bool(np.all(np.isfinite(w))):
        raise ValueError(f"{name} at bar {t}: non-finite weights {w}")
    if bool(np.any(w < -_WEIGHT_TOL)) or float(w.sum()) > 1.0 + _WEIGHT_TOL:
        raise ValueError(
            f"{name} at bar {t}: weights must be long-only and sum to <= 1 (got sum"
            f" {float(w.sum()):.6f}, min {float(w.min()):.6f})"
        )
    w = np.clip(w, 0.0, None)
    w.setflags(write=False)
    return Decision(w, decision.notes, decision.refusals)
