"""What the rule-choosing agent knows, and how it goes into and out of the three tiers.

The agent's experience is regime-conditioned: for every regime R and rule (arm) X it
keeps the count, sum and sum of squares of X's *credited outcome* per bar, the rule's
return minus the equal-weight return minus the reference cost times the rule's own
turnover (`RuleKnowledge`). Subtracting equal weight removes the market's own move,
which is most of any long-only book's return and says nothing about the rule.

The tiers of `reflexmem.memory` carry that experience to the decision:

- episodic: one entry per settled bar ("in up_calm held momentum_16: +3.1 bp"),
  quality 0.5 + 0.5 s with s = tanh(x / scale) of the agent's own credited outcome x,
  so a losing bar has low quality and the store's 0.3 floor refuses it;
- semantic: every window the agent distils, for the regimes of that window, the
  cumulative statistics of the strongest rules (and of the rule it holds) into one
  entry each ("in up_calm momentum_16 beat equal weight by +0.8 bp a bar over 240
  bars, t = +2.1"), quality 0.5 + 0.5 tanh(t / 2) (a clearly losing rule falls below
  the floor), confidence Phi(t), support n;
- procedural: the slow-loop reflection promotes "in regime R prefer rule X" when X's
  support is >= `PROMOTE_SUPPORT` bars and its confidence Phi(t) >= `PROMOTE_CONFIDENCE`,
  and retires the rule when its confidence falls below one half or another rule
  overtakes it.

An entry's numbers travel in a payload table keyed by entry id (written once with
the entry, frozen with it, inside the agent's fingerprint), so the decision reads the
statistics a recalled entry stood for at the time it was written, never the live
table: the agent only knows what its memory gives back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.ael.regimes import REGIMES
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import Retrieval
from reflexmem.prices.panel import FloatArray

MIN_SUPPORT = 20
"""Bars of a (regime, rule) before it is distilled into a semantic entry."""
PROMOTE_SUPPORT = 50
PROMOTE_CONFIDENCE = 0.9
RETIRE_CONFIDENCE = 0.5
SEMANTIC_PER_REGIME = 3
"""Strongest rules distilled per regime and window (plus the rule held)."""


def phi(x: float) -> float:
    """Standard normal CDF."""
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@dataclass
class RuleKnowledge:
    """Count, sum and sum of squares of credited outcomes per (regime, rule)."""

    n_arms: int
    n: FloatArray = field(init=False)
    s1: FloatArray = field(init=False)
    s2: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        shape = (len(REGIMES), self.n_arms)
        self.n = np.zeros(shape)
        self.s1 = np.zeros(shape)
        self.s2 = np.zeros(shape)

    def update(self, regime: int, outcomes: FloatArray, arms: FloatArray | None = None) -> None:
        """Credit outcomes to one regime: every arm (full information) or masked ones."""
        mask = np.ones(self.n_arms) if arms is None else arms
        self.n[regime] += mask
        self.s1[regime] += mask * outcomes
        self.s2[regime] += mask * outcomes * outcomes

    def scale(self) -> float:
        """RMS credited outcome over everything seen (0 before anything)."""
        total = float(self.n.sum())
        return math.sqrt(float(self.s2.sum()) / total) if total > 0 else 0.0

    def t_stats(self, regime: int) -> FloatArray:
        """t-statistic of every arm's mean outcome in a regime (0 with < 2 bars)."""
        n = self.n[regime]
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(n > 0, self.s1[regime] / n, 0.0)
            var = np.where(n > 1, self.s2[regime] / n - mean * mean, 0.0)
            t = np.where(var > 0, mean / np.sqrt(var / np.maximum(n, 1.0)), 0.0)
        return np.asarray(t, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able arrays (for the fingerprint and snapshots)."""
        return {"n": self.n.tolist(), "s1": self.s1.tolist(), "s2": self.s2.tolist()}


def regime_tag(regime: int) -> str:
    """Tag of a regime, e.g. `regime_up_calm`."""
    return f"regime_{REGIMES[regime]}"


def arm_tag(name: str) -> str:
    """Tag of a rule, e.g. `arm_momentum_16`."""
    return f"arm_{name}"


def semantic_entry(
    namespace: str,
    episode: int,
    regime: int,
    arm: str,
    stats: tuple[float, float, float],
    scale: float,
) -> MemoryEntry:
    """The distilled statistics of one (regime, rule) as a semantic entry."""
    n, s1, s2 = stats
    mean = s1 / n
    var = max(s2 / n - mean * mean, 0.0)
    t = mean / math.sqrt(var / n) if var > 0 else 0.0
    polarity = "positive" if mean > 0 else "negative"
    text = (
        f"in {REGIMES[regime]} {arm} beat equal weight by {mean * 1e4:+.2f} bp a bar net of"
        f" costs over {int(n)} bars (t = {t:+.2f})"
    )
    return MemoryEntry(
        id=f"sem:{namespace}:{REGIMES[regime]}:{arm}:{episode}",
        namespace=namespace,
        tier=Tier.SEMANTIC,
        text=text,
        tags=(regime_tag(regime), arm_tag(arm), f"polarity:{polarity}"),
        quality=float(np.clip(0.5 + 0.5 * math.tanh(t / 2.0), 0.0, 1.0)),
        created_episode=episode,
        support=int(n),
        confidence=phi(t),
        outcome=math.tanh(mean / scale) if scale > 0 else 0.0,
    )


def procedural_entry(
    namespace: str, episode: int, regime: int, arm: str, support: int, confidence: float
) -> MemoryEntry:
    """'In regime R prefer rule X' as an active procedural entry."""
    return MemoryEntry(
        id=f"proc:{namespace}:{REGIMES[regime]}:{arm}:{episode}",
        namespace=namespace,
        tier=Tier.PROCEDURAL,
        text=f"in regime {REGIMES[regime]} prefer rule {arm} (support {support},"
        f" confidence {confidence:.2f})",
        tags=(regime_tag(regime), arm_tag(arm), "polarity:positive"),
        quality=confidence,
        created_episode=episode,
        state=EntryState.ACTIVE,
        support=support,
        confidence=confidence,
        outcome=None,
    )


@dataclass
class Evidence:
    """What one recall said about the rules in the current regime."""

    preferred: int | None = None
    stats: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    recalled: int = 0


def evidence_from(
    retrieval: Retrieval | None,
    regime: int,
    arm_index: dict[str, int],
    payloads: dict[str, tuple[float, float, float]],
) -> Evidence:
    """Turn a recall into per-rule statistics for `regime` (and a preferred rule).

    Only entries tagged with the current regime count. A procedural rule names the
    preferred arm; semantic entries give cumulative statistics (the largest-support
    one per arm wins, they are snapshots of the same sums); episodic entries add one
    observation each for arms no semantic entry covers.
    """
    out = Evidence()
    if retrieval is None:
        return out
    tag = regime_tag(regime)
    episodic: dict[int, list[float]] = {}
    for item in retrieval.ranked:
        e = item.entry
        if tag not in e.tags:
            continue
        arm = next((arm_index.get(t[4:]) for t in e.tags if t.startswith("arm_")), None)
        if arm is None:
            continue
        out.recalled += 1
        payload = payloads.get(e.id)
        if e.tier is Tier.PROCEDURAL:
            if out.preferred is None:
                out.preferred = arm
        elif e.tier is Tier.SEMANTIC and payload is not None:
            best = out.stats.get(arm)
            if best is None or payload[0] > best[0]:
                out.stats[arm] = payload
        elif e.tier is Tier.EPISODIC and payload is not None:
            episodic.setdefault(arm, []).append(payload[1])
    for arm, xs in episodic.items():
        if arm not in out.stats:
            x = np.asarray(xs)
            out.stats[arm] = (float(x.size), float(x.sum()), float((x * x).sum()))
    return out
