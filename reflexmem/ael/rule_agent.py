"""The learning agent: production memory choosing, per regime, among allocation rules.

The agent is the decision space only; the learner is `reflexmem.memory`, the one the
cycle runs on the user's roles (`LearningLoop` -> `settle_episode` -> `distil_window`:
condition patterns screened against the role's other episodes, rules confirmed on
later episodes under alpha-spending and retired when contradicted; the Beta Thompson
bandit over retrieval policies; warm-up; the evolution gate; freeze). It keeps no
statistics, thresholds or sampler of its own. One decision bar at a time:

1. **settle** bar t-1 from the now visible close: every rule's credited outcome
   x_k = r_k - r_EW - c * turnover_k (c = `REFERENCE_COST_BP`, the table's headline
   10 bp) is added to the block's sums for the regime of t-1; at the close of a block
   of `BLOCK` bars, every regime seen in it gets one episode per rule in its own
   namespace (`rule_memory`): the rule held is the played episode that credits the
   retrieval policy, the others are observed outcomes that credit nothing (the
   `ael_bandit_feedback` ablation records only the rule held);
2. **decide** once per (regime, block): the regime's loop draws a retrieval policy
   from its posterior, recalls, and the agent follows the rule that recalled confirmed
   rules (screened patterns for the methods without reflection) favour most; it leaves
   a rule memory says to avoid for equal weight; otherwise it keeps the rule it last
   held in that regime. Under bandit feedback, with nothing learned, it visits the
   rules in turn (there is no other way to see an outcome of a rule it never holds).

From the first test decision everything is frozen (memory, posteriors, policies);
`fingerprint()` covers all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexmem.ael.environment import Decision, Episode, MarketView
from reflexmem.ael.frozen import FrozenCheck, digest
from reflexmem.ael.learning_variants import VARIANTS, Variant
from reflexmem.ael.pit_guard import Evidence as PitEvidence
from reflexmem.ael.pit_guard import EvidenceGuard
from reflexmem.ael.regimes import REGIMES, TAIL
from reflexmem.ael.roles import refusal_notes
from reflexmem.ael.rule_features import view_features
from reflexmem.ael.rule_memory import (
    BLOCK,
    BlockOutcomes,
    arm_match,
    arm_tag,
    evidence_from,
    regime_namespace,
)
from reflexmem.ael.rules import RULE_FAMILY, Rule
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.loop import EpisodeReport, LearningLoop
from reflexmem.memory.merge import MergeConfig
from reflexmem.memory.policies import FULL_DETAILED, default_policies
from reflexmem.memory.rule_config import RuleConfig
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore

REFERENCE_COST_BP = 10.0


@dataclass(frozen=True, eq=False)
class _Pending:
    bar: int
    arms: np.ndarray  # (K, N) rule weights at bar
    prev_arms: np.ndarray | None
    regime: int
    closes_block: bool


class RuleAgent:
    """AEL over a family of allocation rules, one instance per (method, seed, fold)."""

    def __init__(
        self,
        rng: np.random.Generator,
        variant: Variant | str,
        *,
        rules: tuple[Rule, ...] = RULE_FAMILY,
        evidence: tuple[PitEvidence, ...] = (),
        cost_bp: float = REFERENCE_COST_BP,
        freeze_after: str = "val",
    ) -> None:
        self.variant = VARIANTS[variant] if isinstance(variant, str) else variant
        self.rng = rng
        self.rules = rules
        self.names = tuple(r.name for r in rules)
        self.arm_index = {n: i for i, n in enumerate(self.names)}
        self.cost = cost_bp * 1e-4
        self.freeze_after = freeze_after
        self.evidence = evidence
        self.guard = EvidenceGuard()
        policies = default_policies() if self.variant.bandit else (FULL_DETAILED,)
        self.policy_names = tuple(p.name for p in policies)
        self.store = InMemoryStore()
        # One block of bars is one market draw: the episodes it writes (one per rule
        # under full information) are one block of every contrast (memory/blocks.py).
        drawn = len(rules) if self.variant.full_information else 1
        self.schedule = LearningSchedule(
            warmup_episodes=self.variant.warmup, distill=MergeConfig(rules=RuleConfig(block=drawn))
        )
        seeds = rng.integers(0, 2**63 - 1, size=len(REGIMES))
        self.loops = tuple(
            LearningLoop(
                regime_namespace(self.variant.name, r),
                store=self.store,
                policies=policies,
                schedule=self.schedule,
                rng=np.random.default_rng(int(seeds[r])),
                match_fn=arm_match,
            )
            for r in range(len(REGIMES))
        )
        self.query = " ".join(arm_tag(n) for n in self.names)
        self.block = BlockOutcomes(len(rules))
        self.reflections: list[dict[str, Any]] = []
        self.written: dict[str, list[EpisodeInput]] = {}
        """Every episode written, per namespace, in order: what a ledger replay needs."""
        self.seen = 0
        self.frozen_checks: list[FrozenCheck] = []
        self.episodes: dict[str, Episode] = {}
        self.choices: list[tuple[int, int, str]] = []  # (regime, arm, policy) per decision
        self.posterior_means: list[tuple[float, ...]] = []
        self.marks: list[tuple[str, int]] = []
        self._pending: _Pending | None = None
        self._held = [0] * len(REGIMES)
        self._visits = [0] * len(REGIMES)
        self._plan: dict[int, tuple[int, str]] = {}
        self._plan_block = 0
        self._frozen = False
        self._frozen_digest: str | None = None
        self._frozen_decisions = 0

    @property
    def name(self) -> str:
        """The method this agent runs under."""
        return self.variant.name

    @property
    def frozen(self) -> bool:
        """Whether learning is switched off (test phase)."""
        return self._frozen

    # -- settlement -------------------------------------------------------------------

    @staticmethod
    def _sigma(view: MarketView) -> float:
        """Recent volatility of the equal-weight index: the unit of an episode's outcome."""
        tail = view.tail(TAIL)
        e = (tail[1:] / tail[:-1] - 1.0).mean(axis=1) if tail.shape[0] > 2 else np.zeros(1)
        return max(float(e.std()), 1e-4)

    def _settle(self, view: MarketView) -> None:
        p = self._pending
        if p is None or p.bar + 1 > view.t:
            return
        self._pending = None
        if self._frozen:
            return
        c = view.closes
        a = c[p.bar + 1] / c[p.bar] - 1.0
        turnover = (
            np.abs(p.arms - p.prev_arms).sum(axis=1)
            if p.prev_arms is not None
            else np.zeros(len(self.rules))
        )
        self.block.add(p.regime, p.arms @ a - float(a.mean()) - self.cost * turnover)
        if p.closes_block:
            self._close_block(self._sigma(view))

    def _close_block(self, sigma: float) -> None:
        """Write the block's episodes: per regime seen, the rule held, then the others."""
        for regime, means in self.block.means().items():
            loop = self.loops[regime]
            held, policy = self._plan[regime]
            outcomes = np.tanh(means / sigma)
            order = [held]
            if self.variant.full_information:
                order += [k for k in range(len(self.rules)) if k != held]
            for k in order:
                name = self.names[k]
                text = (
                    f"in {REGIMES[regime]} {name} {'(held) ' if k == held else ''}beat equal"
                    f" weight by {means[k] * 1e4:+.2f} bp a bar net of costs"
                )
                played = policy if k == held else None
                episode = EpisodeInput(text, float(outcomes[k]), 1.0, (arm_tag(name),), played)
                self.written.setdefault(loop.namespace, []).append(episode)
                args = (episode.text, episode.outcome, episode.quality, episode.tags)
                if played is not None:
                    loop.select_policy(name=played)
                    self._note(regime, loop.record_episode(*args))
                else:
                    self._note(regime, loop.observe(*args))
        self.block.clear()

    def _note(self, regime: int, report: EpisodeReport) -> None:
        """Keep what a closing window learned: rules formed, confirmed, rejected."""
        d = report.distill
        if d is None or not (d.promoted or d.confirmed or d.rejected):
            return
        self.reflections.append(
            {
                "episode": d.end - 1,
                "regime": REGIMES[regime],
                "formed": list(d.promoted),
                "confirmed": list(d.confirmed),
                "rejected": list(d.rejected),
                "insight": "; ".join(
                    e.text
                    for i in (*d.confirmed, *d.rejected)
                    if (e := self.store.get(i)) is not None
                ),
            }
        )

    # -- decision ---------------------------------------------------------------------

    def _decide(self, regime: int) -> tuple[int, str]:
        loop = self.loops[regime]
        policy = loop.select_policy()
        ev = evidence_from(loop.retrieve(self.query), self.arm_index, rules=self.variant.reflection)
        held = self._held[regime]
        if ev.favoured:
            arm = ev.favoured[0]
        elif held in ev.avoided:
            arm = 0 if 0 not in ev.avoided else held
        elif not self.variant.full_information and not self._frozen:
            arm = self._visits[regime] % len(self.rules)
        else:
            arm = held
        self._visits[regime] += 1
        self._held[regime] = arm
        return arm, policy.name

    def __call__(self, view: MarketView, /) -> Decision:
        """Settle the previous bar, then follow the rule chosen for this regime and block."""
        self._settle(view)
        arms, regime = view_features(view, self.rules)
        block = self.seen // BLOCK
        if block != self._plan_block:
            self._plan.clear()
            self._plan_block = block
        if regime not in self._plan:
            self._plan[regime] = self._decide(regime)
        arm, policy_name = self._plan[regime]
        p = self._pending
        self._pending = _Pending(
            view.t, arms, None if p is None else p.arms, regime, (self.seen + 1) % BLOCK == 0
        )
        self.choices.append((regime, arm, policy_name))
        base = len(self.policy_names)
        self.posterior_means.append(tuple(self.loops[regime].bandit_state.means()[:base].tolist()))
        self.seen += 1
        if self._frozen:
            self._frozen_decisions += 1
        notes: tuple[str, ...] = (
            f"regime {REGIMES[regime]}; rule {self.names[arm]}; policy {policy_name}",
        )
        refusals: tuple[Any, ...] = ()
        if self.evidence:
            _, refused = self.guard.admit(self.evidence, view.decision_time)
            refusals = tuple(refused)
            notes = (*notes, *refusal_notes(refused))
        return Decision(arms[arm], notes, refusals)

    # -- phases -----------------------------------------------------------------------

    def learned_state(self) -> dict[str, Any]:
        """Every piece of learning state as JSON-able data (what the fingerprint covers)."""
        return {
            "store": self.store.to_dict(),
            "loops": {loop.namespace: loop.snapshot() for loop in self.loops},
            "reflections": self.reflections,
        }

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of `learned_state()`."""
        return digest(self.learned_state())

    def freeze(self) -> None:
        """Switch learning off: memory, posteriors and policies become read-only."""
        self._frozen = True
        for loop in self.loops:
            loop.freeze()

    def observe_episode(self, episode: Episode) -> None:
        """Record the split; freeze after `freeze_after`; check every frozen split."""
        name = episode.split.name
        self.episodes[name] = episode
        self.marks.append((name, len(self.choices)))
        if self._frozen_digest is not None:
            after = self.fingerprint()
            check = FrozenCheck(name, self._frozen_digest, after, self._frozen_decisions)
            self.frozen_checks.append(check)
            self._frozen_decisions = 0
        if name == self.freeze_after and not self._frozen:
            self.freeze()
            self._frozen_digest = self.fingerprint()
