"""Synthetic trading decisions with known lessons, for the skill-cycle unit tests.

Momentum decisions (the role requires price_history and technicals, at most a day old)
in which every `gap`-th lacks technicals: reflection's lesson for exactly those is the
`pattern` below, so a check learned from them should stop exactly them. Beside them,
`confirmed_rule`: a confirmed outcome rule of the memory, as distillation writes one, and
`formed_rule`: the same rule as it stood when it formed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import polars as pl

from apps.bench.structures_stream import confirmed_rule as confirmed_rule
from reflexmem.ledger.enums import EntryState
from reflexmem.memory.entries import MemoryEntry
from reflexmem.reflex.trading import judged_frame, labelled, observations
from reflexmem.registry import RoleRegistry


def formed_rule(condition: str, shift: float) -> MemoryEntry:
    """`confirmed_rule` as it stood when it formed: a waiting candidate, no test yet."""
    rule = confirmed_rule(condition, shift)
    stats = {k: v for k, v in (rule.stats or {}).items() if k != "confirm"}
    return replace(rule, id=f"{rule.id}-formed", state=EntryState.CANDIDATE, stats=stats)


LESSON = "Role momentum (trend_reversal_ignored): decided without the required technicals evidence."
START = datetime(2025, 1, 6, 14, 30, tzinfo=UTC)
SYMBOLS = ("AAPL", "MSFT", "NVDA", "AMZN", "GOOG")
ACCOUNTS = ("acct-main", "acct-ira", "acct-lab")


def raw_decisions(
    n: int, *, gap: int = 8, start: datetime = START, lag_days: float = 0.0
) -> pl.DataFrame:
    """Decision rows as the ledger holds them (evidence as JSON text), one per hour.

    A decision's ID is its hour since `START`, so batches of other hours never collide.
    """
    rows = []
    for i in range(n):
        at = start + timedelta(hours=i)
        stamp = at.isoformat()
        tech = (at - timedelta(days=lag_days)).isoformat()
        items = [f'{{"kind": "price_history", "as_of": "{stamp}"}}']
        if i % gap != 0:
            items.append(f'{{"kind": "technicals", "as_of": "{tech}"}}')
        rows.append(
            {
                "decision_id": f"d{int((at - START).total_seconds() // 3600):06d}",
                "role_id": "momentum",
                "account": ACCOUNTS[i % 3],
                "symbol": SYMBOLS[(i // 3) % 5],
                "direction": "long" if i % 2 else "short",
                "scenario": ("breakout", "rotation")[i % 2],
                "decided_at": at.strftime("%Y-%m-%d %H:%M:%S.%f"),
                "evidence": "[" + ", ".join(items) + "]",
            }
        )
    return pl.DataFrame(rows)


def episodes(
    registry: RoleRegistry,
    n: int,
    *,
    gap: int = 8,
    start: datetime = START,
    lag_days: float = 0.0,
) -> pl.DataFrame:
    """Labelled episodes of those decisions (lesson where technicals are absent), judged."""
    raw = raw_decisions(n, gap=gap, start=start, lag_days=lag_days)
    missing = ~raw["evidence"].str.contains("technicals")
    raw = raw.with_columns(
        pl.concat_str([pl.lit("ep-"), pl.col("decision_id")]).alias("episode_id"),
        pl.concat_str([pl.lit("case-"), pl.col("decision_id")]).alias("case_id"),
        pl.int_range(pl.len()).alias("episode_index"),
        pl.when(missing)
        .then(pl.lit("missing_data"))
        .otherwise(pl.lit("variance"))
        .alias("outcome_class"),
        pl.when(missing)
        .then(pl.lit(LESSON))
        .otherwise(pl.lit(None, dtype=pl.String))
        .alias("lesson"),
    )
    frame = labelled(observations(raw, registry))
    return judged_frame(frame, registry).with_columns(frame["episode_index"])
