"""A synthetic trading decision stream with one planted cross-role effect, for structure G.

Why it is here: `bench structures --trading` needs the user's own roles replayed on
decisions whose answer is known, and production code may not import a benchmark or a
test. The unit tests of the trading environment (`tests/unit/structures/trading_stream.py`)
build their two-role stream from this module, so both read the same generator.

- Roles: real roles of the registry (`reflexmem.registry.load_registry`).
- Checks: each role holds one real generated check, "avoid <symbol>", made by the
  production code (`reflex.rule_checks.rule_check_file`) from a confirmed outcome rule
  built by the production memory builders (`confirmed_rule`), then pinned as active.
- One planted effect (`Planted`): the victim role's decisions on one symbol lose
  `loss` on average, and the holder role's check avoids exactly that symbol, so the
  edge holder -> victim lending `checks` pays. Every other decision returns N(0.001,
  0.02): lending any other check only holds decisions that earn, and costs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from reflexmem.ledger.enums import EntryState
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.memory.blocks import MIN_BLOCKS, PairBlocks
from reflexmem.memory.contrast import Moments, contrast
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.rule_entries import pattern_entry, rule_entry
from reflexmem.reflex.rule_checks import rule_check_file
from reflexmem.reflex.skills import SkillSpec, load_yaml
from reflexmem.reflex.snapshot import PinnedSkill
from reflexmem.registry import RoleRegistry, load_registry
from reflexmem.structures.trading import TradingEnvironment, check_masks, module_id

SYMBOLS = ("AAPL", "MSFT", "JNJ", "XOM", "KO")
START = datetime(2024, 1, 2, tzinfo=UTC)
DAYS = 300
"""Decision days are drawn uniformly from the first `DAYS` days after `START`."""
DRIFT, SPREAD = 0.001, 0.02
"""Mean and standard deviation of a decision's realized return (planted ones aside)."""
PREFERRED = ("momentum", "valuation", "risk", "cycle_analysis")
"""The roles the bench uses when the registry has them (four: 12 ordered pairs)."""


@dataclass(frozen=True)
class Planted:
    """One planted effect: `victim`'s decisions on `symbol` lose `loss` on average."""

    victim: str = "momentum"
    symbol: str = "JNJ"
    holder: str = "valuation"
    loss: float = 0.03
    """1.5 standard deviations of a decision's return. At 0.02 (the unit tests' size)
    the planted edge was the best single edge on the selection set in 15 of 20 seeds
    at 600 decisions and 19 of 20 at 1000; at 0.03, in 20 of 20 at both."""

    @property
    def edge(self) -> str:
        """The edge that pays: the holder lends its checks to the victim."""
        return f"{module_id(self.holder)}->{module_id(self.victim)}"

    def to_dict(self) -> dict[str, object]:
        """Plain form: the fields and the edge."""
        return {**asdict(self), "edge": self.edge}


def confirmed_rule(condition: str, shift: float, namespace: str = "role:momentum") -> MemoryEntry:
    """A rule through the production builders: formed, then confirmed on later episodes.

    Carriers' outcome scores are shifted by `shift` (negative: an avoid-rule), spread
    evenly over the fewest blocks a contrast takes.
    """
    rng = np.random.default_rng(7)
    inside, outside = rng.normal(shift, 0.5, 80), rng.normal(0.0, 0.5, 400)
    carriers, rest = Moments.of(inside), Moments.of(outside)
    spread = zip(
        np.array_split(inside, MIN_BLOCKS), np.array_split(outside, MIN_BLOCKS), strict=True
    )
    blocks = PairBlocks().add(
        (k, len(a), float(a.sum()), len(b), float(b.sum())) for k, (a, b) in enumerate(spread)
    )
    pattern = pattern_entry(namespace, condition, carriers, rest, None, (), 480, 10, 0.01, blocks)
    formed = blocks.contrast(carriers, rest)
    if formed is None:
        raise ValueError(f"no contrast for {condition!r}")
    direction = 1 if formed.effect > 0 else -1
    later = contrast(
        Moments.of(rng.normal(shift, 0.5, 70)),
        Moments.of(rng.normal(0.0, 0.5, 300)),
        direction=direction,
    )
    if later is None:
        raise ValueError(f"no confirmation for {condition!r}")
    stats = {
        "direction": direction,
        "formed": formed.as_json(),
        "confirm": later.as_json() | {"test": 1, "alpha": 0.03},
    }
    return rule_entry(pattern, EntryState.ACTIVE, "@900", stats)


def avoid_check(
    role: str,
    symbol: str,
    registry: RoleRegistry | None = None,
    *,
    namespace: str = "role:momentum",
    now: datetime = START,
) -> PinnedSkill:
    """`role`'s generated check that holds its decisions on `symbol`, pinned as active."""
    rule = confirmed_rule(f"symbol:{symbol}", -0.4, namespace)
    made = rule_check_file(rule, role, registry or load_registry(), now=now)
    if isinstance(made, str):
        raise ValueError(f"no check for {role} avoiding {symbol}: {made}")
    _, text = made
    raw = dict(load_yaml(text))
    raw["state"] = "active"
    return PinnedSkill(
        SkillSpec(raw=raw, source="bench", source_yaml=text), SkillState.ACTIVE, None
    )


def bench_roles(registry: RoleRegistry, k: int = 4) -> tuple[str, ...]:
    """`k` roles of the registry: the preferred ones first, then the rest in order."""
    ids = registry.ids
    chosen = [r for r in PREFERRED if r in ids] + [r for r in ids if r not in PREFERRED]
    return tuple(chosen[:k])


def role_checks(
    roles: Sequence[str], planted: Planted, symbols: Sequence[str] = SYMBOLS
) -> dict[str, str]:
    """Role -> the symbol its check avoids: the holder the planted one, the others the rest."""
    others = [s for s in symbols if s != planted.symbol]
    out, i = {}, 0
    for role in roles:
        if role == planted.holder:
            out[role] = planted.symbol
        else:
            out[role] = others[i % len(others)]
            i += 1
    return out


def stream(
    n: int,
    seed: int,
    *,
    roles: Sequence[str],
    planted: Planted,
    symbols: Sequence[str] = SYMBOLS,
    days: int = DAYS,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(text frame the checks read, decision frame with realized returns)."""
    rng = np.random.default_rng(seed)
    role = rng.choice(list(roles), n)
    symbol = rng.choice(list(symbols), n)
    day = np.sort(rng.integers(0, days, n))
    ret = rng.normal(DRIFT, SPREAD, n)
    ret[(role == planted.victim) & (symbol == planted.symbol)] -= planted.loss
    at = [START + timedelta(days=int(d)) for d in day]
    text = pl.DataFrame(
        {
            "_row": np.arange(n, dtype=np.int64),
            "role_id": role,
            "symbol": symbol,
            "direction": ["long"] * n,
            "decided_at": [t.strftime("%Y-%m-%dT%H:%M:%S+00:00") for t in at],
        }
    )
    decisions = pl.DataFrame(
        {
            "decision_id": [f"d{i:06d}" for i in range(n)],
            "role_id": role,
            "decided_at_ts": at,
            "realized_return": ret,
        }
    )
    return text, decisions


def environment(
    n: int,
    seed: int,
    *,
    roles: Sequence[str],
    checks: Sequence[PinnedSkill],
    planted: Planted,
    index_version: str = "trading-index@bench",
    entries: Mapping[str, int] | None = None,
) -> TradingEnvironment:
    """The environment over one stream, with the checks' masks computed once."""
    text, decisions = stream(n, seed, roles=roles, planted=planted)
    masks = check_masks(text, checks)
    return TradingEnvironment(decisions, masks, index_version=index_version, entries=entries)
