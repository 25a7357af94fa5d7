"""A realistic decision stream over real prices, for the demo and the benchmarks.

Every failure mode admission must catch appears at a known rate: automated origins,
automation markers on manual-looking executions, unverified external trades, unknown
origins (including perps), unknown roles, unconsumed and reused previews, and identity
mismatches. Generation is vectorized with numpy, so a million decisions take seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from reflexmem.prices.panel import PricePanel
from reflexmem.registry import load_registry

ROLES = ("valuation", "momentum", "cycle_analysis", "risk")
UNKNOWN_ROLE = "sentiment"
ORIGIN_MIX = {
    "manual_agent": 0.56,
    "manual_external_verified": 0.10,
    "manual_external_unverified": 0.05,
    "autopilot": 0.09,
    "strategy_studio": 0.03,
    "xstrategy": 0.02,
    "workflow": 0.05,
    "unknown": 0.05,
    "unknown_perp": 0.05,
}
SCENARIOS = ("earnings", "breakout", "mean_reversion", "macro_shock", "rotation")
HORIZON_BARS = 8
SNAPSHOT_AS_OF = "2026-03-15T00:00:00+00:00"


def _masked(values: np.ndarray, keep: np.ndarray) -> pl.Series:
    """Text values where `keep`, nulls elsewhere."""
    return pl.Series(values.astype(str)).set(pl.Series(~keep), None)


def _item(kind: str, as_of: np.ndarray) -> np.ndarray:
    return np.char.add(np.char.add(f'{{"kind": "{kind}", "as_of": "', as_of), '"}')


def _evidence(roles: np.ndarray, decided: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each role's required evidence as of the decision, with realistic gaps and leaks.

    About 12 % of decisions lack one required item (missing data), fundamentals are a
    month old, and a quarter of valuation decisions carry the 2026 snapshot instead:
    evidence dated after the decision, which reflection must flag as look-ahead.
    """
    n = roles.size
    now = np.asarray(_iso(decided.astype(datetime)), dtype=str)
    month_ago = np.asarray(_iso((decided - np.timedelta64(30, "D")).astype(datetime)), dtype=str)
    registry = load_registry()
    out = _item("price_history", now)
    gap = rng.random(n) < 0.12
    leak = (roles == "valuation") & (rng.random(n) < 0.25)
    for role_id in registry.ids:
        mine = roles == role_id
        kinds = [e.kind for e in registry.get(role_id).policy.required_evidence]
        for k, kind in enumerate(k for k in kinds if k != "price_history"):
            as_of = np.where(leak, SNAPSHOT_AS_OF, month_ago) if kind == "fundamentals" else now
            keep = mine & ~(gap & (k == 0))
            out = np.where(keep, np.char.add(np.char.add(out, ", "), _item(kind, as_of)), out)
    return np.char.add(np.char.add("[", out), "]")


def _iso(ts: np.ndarray) -> list[str]:
    return [t.isoformat() + "+00:00" for t in ts]


def generate(
    prices: PricePanel, n: int, *, seed: int = 0, fill_cost: Mapping[str, float] | None = None
) -> dict[str, pl.DataFrame]:
    """Decisions, previews, executions, fills and outcomes for `n` decisions.

    `fill_cost` plants a true effect in the user's data: per symbol, a fraction by which
    its fills are worse than the close (a long pays more, a short receives less), so
    those trades realize less than the market move. Nothing else marks them: only their
    outcomes can teach it.
    """
    rng = np.random.default_rng(seed)
    t_count, n_tickers = prices.closes.shape
    ts = np.asarray(prices.timestamps, dtype="datetime64[us]")
    tickers = np.asarray(prices.tickers)
    bar = rng.integers(5, t_count, n)
    tick = rng.integers(0, n_tickers, n)
    close = prices.closes[bar, tick]
    past = prices.closes[bar - 4, tick]
    momentum_up = close >= past
    roles = np.asarray(ROLES)[rng.integers(0, len(ROLES), n)]
    roles = np.where(rng.random(n) < 0.02, UNKNOWN_ROLE, roles)
    direction = np.where(momentum_up ^ (rng.random(n) < 0.3), "long", "short")
    ids = np.char.zfill(np.arange(n).astype(str), 8)
    decision_id = np.char.add("d", ids)
    preview_id = np.char.add("p", ids)
    execution_id = np.char.add("e", ids)
    account = np.asarray(["acct-main", "acct-ira", "acct-lab"])[rng.integers(0, 3, n)]
    decided = ts[bar]
    scenario = np.asarray(SCENARIOS)[rng.integers(0, len(SCENARIOS), n)]
    symbol = tickers[tick]
    rationale = np.char.add(
        np.char.add(
            np.char.add(roles, ": "), np.where(momentum_up, "trend up on ", "trend down on ")
        ),
        symbol,
    )
    evidence = _evidence(roles, decided, rng)
    decisions = pl.DataFrame(
        {
            "decision_id": decision_id,
            "agent_id": np.char.add("agent-", rng.integers(1, 6, n).astype(str)),
            "role_id": roles,
            "account": account,
            "market": np.full(n, "US"),
            "symbol": symbol,
            "direction": direction,
            "decided_at": decided,
            "scenario": scenario,
            "rationale": rationale,
            "evidence": evidence.astype(str),
        }
    ).with_columns(pl.col("decided_at").dt.replace_time_zone("UTC"))

    origin_names = list(ORIGIN_MIX)
    kind = np.asarray(origin_names)[
        rng.choice(len(origin_names), n, p=np.asarray(list(ORIGIN_MIX.values())))
    ]
    origin = np.where(
        np.char.startswith(kind, "manual_external"),
        "manual_external",
        np.where(kind == "unknown_perp", "unknown", kind),
    )
    verified = kind == "manual_external_verified"
    instrument = np.where(kind == "unknown_perp", "perp", "spot")
    marked = (kind == "manual_agent") & (rng.random(n) < 0.04)
    automated = np.isin(origin, ["autopilot", "strategy_studio", "xstrategy", "workflow"])
    markers = _masked(
        np.where(
            marked,
            np.char.add(np.char.add('["autopilot_job_id=ap-', decision_id), '"]'),
            np.char.add(np.char.add('["job=', kind), '"]'),
        ),
        marked | automated,
    )

    consumed = rng.random(n) >= 0.03
    has_preview = rng.random(n) >= 0.02
    exec_symbol = np.where(rng.random(n) < 0.015, np.roll(symbol, 1), symbol)
    exec_direction = np.where(
        rng.random(n) < 0.01, np.where(direction == "long", "short", "long"), direction
    )
    consumed_by = np.where(rng.random(n) < 0.01, np.roll(decision_id, 3), decision_id)
    decided_us = decided.astype("datetime64[us]")
    previews = pl.DataFrame(
        {
            "preview_id": preview_id,
            "decision_id": decision_id,
            "account": account,
            "market": np.full(n, "US"),
            "symbol": symbol,
            "direction": direction,
            "created_at": decided_us + np.timedelta64(1, "m"),
            "consumed_at": np.where(
                consumed, decided_us + np.timedelta64(3, "m"), np.datetime64("NaT")
            ),
            "consumed_by_decision_id": _masked(consumed_by, consumed),
        }
    ).with_columns(pl.col("created_at", "consumed_at").dt.replace_time_zone("UTC"))
    reuse = rng.random(n) < 0.01
    exec_preview = _masked(np.where(reuse, np.roll(preview_id, 7), preview_id), has_preview | reuse)
    executions = pl.DataFrame(
        {
            "execution_id": execution_id,
            "decision_id": decision_id,
            "preview_id": exec_preview,
            "account": account,
            "market": np.full(n, "US"),
            "symbol": exec_symbol,
            "direction": exec_direction,
            "instrument": instrument,
            "origin": origin,
            "origin_verified": verified,
            "automation_markers": markers,
            "executed_at": decided_us + np.timedelta64(4, "m"),
        }
    ).with_columns(pl.col("executed_at").dt.replace_time_zone("UTC"))
    sign = np.where(direction == "long", 1.0, -1.0)
    cost = np.zeros(n)
    for costly, fraction in (fill_cost or {}).items():  # a few symbols, not the rows
        cost[symbol == costly] = fraction
    entry = close * (1 + sign * cost)
    fills = pl.DataFrame(
        {
            "fill_id": np.char.add("f", ids),
            "execution_id": execution_id,
            "quantity": rng.integers(1, 200, n).astype(float),
            "price": entry * (1 + rng.normal(0, 0.0005, n)),
            "fee": np.round(rng.random(n), 2),
            "filled_at": decided_us + np.timedelta64(5, "m"),
        }
    ).with_columns(pl.col("filled_at").dt.replace_time_zone("UTC"))
    exit_bar = bar + HORIZON_BARS
    settled = exit_bar < t_count
    safe_exit = np.minimum(exit_bar, t_count - 1)
    exit_close = prices.closes[safe_exit, tick]
    thin = settled & (rng.random(n) < 0.03)
    outcomes = pl.DataFrame(
        {
            "position_id": np.char.add("pos", ids),
            "decision_id": decision_id,
            "status": np.where(settled, "settled", "open"),
            "opened_at": decided_us + np.timedelta64(5, "m"),
            "settled_at": np.where(settled, ts[safe_exit], np.datetime64("NaT")),
            "entry_price": entry,
            "exit_price": np.where(settled, exit_close, np.nan),
            "realized_return": np.where(settled, sign * (exit_close / entry - 1), np.nan),
            "evaluation_points": np.where(thin, 1, np.where(settled, HORIZON_BARS, 0)),
        }
    ).with_columns(
        pl.col("opened_at", "settled_at").dt.replace_time_zone("UTC"),
        pl.col("exit_price", "realized_return").fill_nan(None),
    )
    return {
        "decisions": decisions,
        "previews": previews,
        "executions": executions,
        "fills": fills,
        "outcomes": outcomes,
    }


def write_stream(
    stream: dict[str, pl.DataFrame], directory: Path, *, fmt: str = "parquet"
) -> list[Path]:
    """Write each kind to `directory/<kind>.<fmt>` (parquet, csv or jsonl)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for kind, frame in stream.items():
        path = directory / f"{kind}.{fmt}"
        if fmt == "parquet":
            frame.write_parquet(path)
        elif fmt == "csv":
            frame.write_csv(path)
        elif fmt == "jsonl":
            frame.write_ndjson(path)
        else:
            raise ValueError(f"unknown format {fmt!r}")
        paths.append(path)
    return paths


def synthetic_prices(bars: int = 208, tickers: int = 10, *, seed: int = 0) -> PricePanel:
    """A geometric random walk panel, for tests that must not depend on vendored data."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(0.0002, 0.01, (bars, tickers))
    closes = 100 * np.exp(np.cumsum(steps, axis=0))
    start = np.datetime64("2025-01-06T14:30", "us")
    stamps = start + np.arange(bars) * np.timedelta64(2, "h")
    return PricePanel(
        stamps, stamps.astype("datetime64[D]"), tuple(f"T{i}" for i in range(tickers)), closes
    )


def drift_panel(bars: int, tickers: int, *, spread: float, seed: int = 0) -> PricePanel:
    """Daily random walks whose drifts differ by asset: a planted effect for learners.

    Drifts run evenly from -spread to +spread per bar (volatility 1 % a bar), so rules
    that hold past winners (momentum over long lookbacks) beat equal weight in every
    regime, and rules that hold past losers trail it; with ``spread`` 0 nothing can be
    learned.
    """
    rng = np.random.default_rng(seed)
    drift = np.linspace(-spread, spread, tickers)
    closes = 100 * np.exp(np.cumsum(drift[None, :] + rng.normal(0.0, 0.01, (bars, tickers)), 0))
    start = np.datetime64("2015-01-05T21:00", "us")
    stamps = start + np.arange(bars) * np.timedelta64(1, "D")
    return PricePanel(
        stamps, stamps.astype("datetime64[D]"), tuple(f"T{i}" for i in range(tickers)), closes
    )
