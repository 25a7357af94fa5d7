"""How the rule-choosing agent's experience goes into production memory and comes back.

The agent has no statistics of its own: everything it knows is what `reflexmem.memory`
keeps and recalls, learned by the same distillation the cycle runs on the user's roles
(`merge.distil_window` -> `outcome_rules`: condition patterns screened against the
role's other episodes, rules confirmed on later episodes under alpha-spending, retired
when later carriers contradict them). This module is the adapter between the market's
decision space and that memory:

- **namespaces**: one per regime (`agent:<method>:<regime>`), so that "the role's other
  episodes" of a pattern are the other rules *in the same regime*;
- **episodes**: at the close of every block of `BLOCK` decision bars, one episode per
  (regime seen in the block, rule): the rule's mean credited outcome over the block's
  bars in that regime (return minus the equal-weight return minus the reference cost
  times the rule's own turnover), in units of the market's recent volatility,
  s = tanh(x / sigma). The condition tag is `arm:<rule>`. Quality is 1 for every
  episode: a priced outcome is exact, and a quality that fell with the outcome would
  make the store's floor keep only the winners and bias every contrast;
- **evidence**: what a recall returned, read as favoured and avoided rules: a confirmed
  procedural rule (or, for the methods without reflection, a screened semantic pattern)
  whose condition is `arm:X` favours or avoids X by its contrast's direction, ranked by
  the lower end of its interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reflexmem.ael.regimes import REGIMES
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import Retrieval

BLOCK = 10
"""Decision bars per block: the agent settles what it saw into memory once a block."""
ARM_PREFIX = "arm:"


def arm_tag(name: str) -> str:
    """The condition tag of a rule, e.g. `arm:momentum_16`."""
    return f"{ARM_PREFIX}{name}"


def regime_namespace(method: str, regime: int) -> str:
    """The memory namespace of one method's experience in one regime."""
    return f"agent:{method}:{REGIMES[regime]}"


def arm_match(query: str, entries: Sequence[MemoryEntry]) -> np.ndarray:
    """f_match for a query of condition tags: 1 where the entry carries one of them, else 0.

    The agent asks for everything its regime's memory holds about the rules; which of
    it comes back is then the ranking's (quality, recency, tier) and the policy's
    (tiers, top k, budget) choice, as for any recall.
    """
    wanted = frozenset(query.split())
    return np.fromiter(
        (not wanted.isdisjoint(e.tags) for e in entries), dtype=np.float64, count=len(entries)
    )


@dataclass
class BlockOutcomes:
    """Credited outcomes of every rule, summed per regime, over one block's settled bars."""

    n_arms: int
    sums: dict[int, np.ndarray] = field(default_factory=dict)
    bars: dict[int, int] = field(default_factory=dict)

    def add(self, regime: int, outcomes: np.ndarray) -> None:
        """Credit one settled bar of `regime`."""
        if regime not in self.sums:
            self.sums[regime] = np.zeros(self.n_arms)
            self.bars[regime] = 0
        self.sums[regime] += outcomes
        self.bars[regime] += 1

    def means(self) -> dict[int, np.ndarray]:
        """Mean credited outcome of every rule per regime seen, regimes in order."""
        return {r: self.sums[r] / self.bars[r] for r in sorted(self.sums)}

    def clear(self) -> None:
        """Start the next block."""
        self.sums.clear()
        self.bars.clear()


@dataclass(frozen=True)
class Evidence:
    """What one recall said about the rules: favoured ones best first, avoided ones."""

    favoured: tuple[int, ...] = ()
    avoided: frozenset[int] = frozenset()
    recalled: int = 0


def _verdict(entry: MemoryEntry, confirmed: bool) -> tuple[int, float] | None:
    """(direction, lower end of the interval in that direction) of a learned item, or None."""
    stats = entry.stats or {}
    if confirmed:
        if entry.tier is not Tier.PROCEDURAL or "confirm" not in stats:
            return None
        test, direction = stats["confirm"], int(stats["direction"])
    else:
        if entry.tier is not Tier.SEMANTIC or not stats.get("contrast"):
            return None
        test = stats["contrast"]
        direction = 1 if test["effect"] > 0 else -1
    low = float(test["ci_low"]) if direction > 0 else -float(test["ci_high"])
    return direction, low


def evidence_from(
    retrieval: Retrieval | None, arm_index: dict[str, int], *, rules: bool
) -> Evidence:
    """Favoured and avoided rules in what a recall returned.

    Only active entries are ever recalled, so a procedural entry here is a confirmed
    rule and a semantic one a screened pattern. With `rules` the agent acts on
    confirmed rules only (the slow loop's output); without, on screened patterns.
    Episodic entries are single observations and decide nothing.
    """
    if retrieval is None:
        return Evidence()
    favoured: dict[int, float] = {}
    avoided: set[int] = set()
    recalled = 0
    for item in retrieval.ranked:
        entry = item.entry
        if entry.state is not EntryState.ACTIVE:
            continue
        arm = next(
            (arm_index.get(t[len(ARM_PREFIX) :]) for t in entry.tags if t.startswith(ARM_PREFIX)),
            None,
        )
        if arm is None:
            continue
        recalled += 1
        verdict = _verdict(entry, rules)
        if verdict is None:
            continue
        direction, low = verdict
        if direction > 0:
            favoured[arm] = max(low, favoured.get(arm, -np.inf))
        else:
            avoided.add(arm)
    order = sorted(favoured, key=lambda k: (-favoured[k], k))
    return Evidence(tuple(k for k in order if k not in avoided), frozenset(avoided), recalled)
