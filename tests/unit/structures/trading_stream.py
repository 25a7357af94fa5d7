"""A decision stream for the trading environment: two roles, one check, an optional effect.

The valuation role holds a learned check, "avoid JNJ" (a real generated skill version,
`reflex.rule_checks`). Momentum has none. With `planted` > 0, momentum's JNJ decisions
lose `planted` on average, so lending valuation's check to momentum is worth it; with
0, JNJ decisions are like every other and lending it only costs.

The generator is the benchmark's (`apps.bench.structures_stream`, which runs the same
stream on four roles with a check each); this module fixes the two-role case the unit
tests read.
"""

from __future__ import annotations

from apps.bench import structures_stream as bench
from reflexmem.reflex.snapshot import PinnedSkill
from reflexmem.structures.trading import TradingEnvironment

ROLES = ("momentum", "valuation")


def avoid_jnj() -> PinnedSkill:
    """Valuation's generated, active check that holds JNJ decisions."""
    return bench.avoid_check("valuation", "JNJ")


def environment(n: int = 3000, planted: float = 0.02, seed: int = 0) -> TradingEnvironment:
    """The environment over one stream, with valuation's check."""
    return bench.environment(
        n,
        seed,
        roles=ROLES,
        checks=[avoid_jnj()],
        planted=bench.Planted(loss=planted),
        index_version="trading-index@test",
    )
