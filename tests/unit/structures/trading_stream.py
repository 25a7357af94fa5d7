"""A decision stream for the trading environment: two roles, one check, an optional effect.

The valuation role holds a learned check, "avoid JNJ" (a real generated skill version,
`reflex.rule_checks`). Momentum has none. With `planted` > 0, momentum's JNJ decisions
lose `planted` on average, so lending valuation's check to momentum is worth it; with
0, JNJ decisions are like every other and lending it only costs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.rule_checks import rule_check_file
from reflexmem.reflex.skills import SkillSpec, load_yaml
from reflexmem.reflex.snapshot import PinnedSkill
from reflexmem.registry import load_registry
from reflexmem.structures.trading import TradingEnvironment, check_masks
from tests.unit.reflex.trading_data import confirmed_rule

SYMBOLS = ("AAPL", "MSFT", "JNJ", "XOM", "KO")
START = datetime(2024, 1, 2, tzinfo=UTC)


def avoid_jnj() -> PinnedSkill:
    """Valuation's generated, active check that holds JNJ decisions."""
    made = rule_check_file(
        confirmed_rule("symbol:JNJ", -0.4), "valuation", load_registry(), now=START
    )
    assert not isinstance(made, str)
    _, text = made
    raw = dict(load_yaml(text))
    raw["state"] = "active"
    return PinnedSkill(SkillSpec(raw=raw, source="test", source_yaml=text), SkillState.ACTIVE, None)


def stream(n: int, planted: float, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(text frame the checks read, decision frame with realized returns)."""
    rng = np.random.default_rng(seed)
    roles = rng.choice(["momentum", "valuation"], n)
    symbols = rng.choice(SYMBOLS, n)
    days = np.sort(rng.integers(0, 300, n))
    ret = rng.normal(0.001, 0.02, n)
    ret[(roles == "momentum") & (symbols == "JNJ")] -= planted
    at = [START + timedelta(days=int(d)) for d in days]
    text = pl.DataFrame(
        {
            "_row": np.arange(n, dtype=np.int64),
            "role_id": roles,
            "symbol": symbols,
            "direction": ["long"] * n,
            "decided_at": [t.strftime("%Y-%m-%dT%H:%M:%S+00:00") for t in at],
        }
    )
    decisions = pl.DataFrame(
        {
            "decision_id": [f"d{i:06d}" for i in range(n)],
            "role_id": roles,
            "decided_at_ts": at,
            "realized_return": ret,
        }
    )
    return text, decisions


def environment(n: int = 3000, planted: float = 0.02, seed: int = 0) -> TradingEnvironment:
    """The environment over one stream, with valuation's check."""
    text, decisions = stream(n, planted, seed)
    masks = check_masks(text, [avoid_jnj()])
    return TradingEnvironment(decisions, masks, index_version="trading-index@test")
