"""The learning agent: AEL's memory loop choosing among allocation rules per regime.

One episode is one decision bar. At the close of bar t the agent

1. **settles** bar t-1 from the now visible close: every rule's credited outcome
   x_k = r_k - r_EW - c * turnover_k (c = `REFERENCE_COST_BP`, the table's headline
   10 bp, so switching and churning pay inside the reward) is added to the regime
   of t-1 in `RuleKnowledge` for *every* rule (full-information credit; the
   `ael_bandit_feedback` ablation credits only the rule held). Its own episode,
   s = tanh(x / scale) of the book's credited outcome, is written to episodic memory
   through `LearningLoop.record_episode` (quality 0.5 + 0.5 s: losses are refused by
   the 0.3 floor) and credits the retrieval policy that made the decision;
2. every `window` recorded episodes **distils** the window's regimes into semantic
   entries and, with reflection, runs the slow loop that promotes or retires
   "in regime R prefer rule X" (see `rule_memory`);
3. computes the regime at t and every rule's weights at t from the tail of its own
   view (closes 0..t only);
4. asks the Thompson bandit for a retrieval policy, **recalls** for the regime and
   turns what came back into per-rule posteriors (prior N(0, scale^2 / `PRIOR_BARS`));
   a recalled procedural rule is followed; otherwise every recalled rule, the rule
   held and equal weight get a Thompson draw (one standard normal per rule and
   window), minus the switching cost c * |w_k - w_held|_1 amortised over one window,
   and the best is held. Nothing recalled (the `none` policy): keep the rule held.

Warm-up (the first `variant.warmup` decisions): equal weight, no memory write, no
retrieval, no learning. From the first test decision everything is frozen: the
knowledge table, the payloads, the procedural rules, reflection, memory, posteriors
and policies; `fingerprint()` covers all of it. Constants here are fixed a priori.
"""

from __future__ import annotations

import math
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
from reflexmem.ael.rule_features import tag_match, view_features
from reflexmem.ael.rule_memory import (
    MIN_SUPPORT,
    PROMOTE_CONFIDENCE,
    PROMOTE_SUPPORT,
    RETIRE_CONFIDENCE,
    SEMANTIC_PER_REGIME,
    RuleKnowledge,
    arm_tag,
    evidence_from,
    phi,
    procedural_entry,
    regime_tag,
    semantic_entry,
)
from reflexmem.ael.rules import RULE_FAMILY, Rule
from reflexmem.ledger.enums import EntryState
from reflexmem.memory.distill import DistillConfig
from reflexmem.memory.loop import LearningLoop
from reflexmem.memory.policies import FULL_DETAILED, Retrieval, default_policies
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore

REFERENCE_COST_BP = 10.0
TIER_CAP = 200
"""Entries per tier: within the specification's maximum of 500, fixed a priori so
that ranking a full store stays cheap on long panels (not chosen on any result)."""
PRIOR_BARS = 50.0
WINDOW = 10
_NO_GENERIC_DISTILL = DistillConfig(min_support=10**9)
"""The loop's generic tag patterns are off: the agent distils rule statistics itself."""


@dataclass(frozen=True, eq=False)
class _Pending:
    bar: int
    arms: np.ndarray  # (K, N) rule weights at bar
    prev_arms: np.ndarray | None
    weights: np.ndarray
    prev_weights: np.ndarray | None
    arm: int
    regime: int
    learning: bool


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
        window: int = WINDOW,
        freeze_after: str = "val",
    ) -> None:
        self.variant = VARIANTS[variant] if isinstance(variant, str) else variant
        self.rng = rng
        self.rules = rules
        self.names = tuple(r.name for r in rules)
        self.arm_index = {n: i for i, n in enumerate(self.names)}
        self.cost = cost_bp * 1e-4
        self.window = window
        self.freeze_after = freeze_after
        self.evidence = evidence
        self.guard = EvidenceGuard()
        policies = default_policies() if self.variant.bandit else (FULL_DETAILED,)
        self.store = InMemoryStore(cap=TIER_CAP)
        self.loop = LearningLoop(
            f"agent:{self.variant.name}",
            store=self.store,
            policies=policies,
            schedule=LearningSchedule(
                window_size=window, warmup_episodes=0, distill=_NO_GENERIC_DISTILL
            ),
            rng=np.random.default_rng(int(rng.integers(0, 2**63 - 1))),
            match_fn=tag_match,
        )
        self.knowledge = RuleKnowledge(len(rules))
        self.payloads: dict[str, tuple[float, float, float]] = {}
        self.active_rules: dict[int, tuple[str, int]] = {}
        self.reflections: list[dict[str, Any]] = []
        self.seen = 0
        self.frozen_checks: list[FrozenCheck] = []
        self.episodes: dict[str, Episode] = {}
        self.choices: list[tuple[int, int, str]] = []  # (regime, arm, policy) per decision
        self.posterior_means: list[tuple[float, ...]] = []
        self.marks: list[tuple[str, int]] = []
        self._window_regimes: set[int] = set()
        self._pending: _Pending | None = None
        self._held = 0
        self._draws = np.zeros(len(rules))
        self._draw_window = -1
        self._frozen_digest: str | None = None
        self._frozen_decisions = 0
        self._memo: dict[tuple[str, int, int], Retrieval] = {}

    @property
    def name(self) -> str:
        """The method this agent runs under."""
        return self.variant.name

    @property
    def frozen(self) -> bool:
        """Whether learning is switched off (test phase)."""
        return self.loop.frozen

    # -- settlement -------------------------------------------------------------------

    def _scale(self, view: MarketView) -> float:
        s = self.knowledge.scale()
        if s > 0:
            return s
        tail = view.tail(TAIL)
        e = (tail[1:] / tail[:-1] - 1.0).mean(axis=1) if tail.shape[0] > 2 else np.zeros(1)
        return max(float(e.std()), 1e-4)

    def _settle(self, view: MarketView) -> None:
        p = self._pending
        if p is None or p.bar + 1 > view.t:
            return
        self._pending = None
        if self.frozen or not p.learning:
            return
        c = view.closes
        a = c[p.bar + 1] / c[p.bar] - 1.0
        e = float(a.mean())
        arm_to = (
            np.abs(p.arms - p.prev_arms).sum(axis=1)
            if p.prev_arms is not None
            else np.zeros(len(self.rules))
        )
        x = p.arms @ a - e - self.cost * arm_to
        own_to = 0.0 if p.prev_weights is None else float(np.abs(p.weights - p.prev_weights).sum())
        mine = float(p.weights @ a) - e - self.cost * own_to
        if self.variant.full_information:
            self.knowledge.update(p.regime, x)
        else:
            mask = np.zeros(len(self.rules))
            mask[p.arm] = 1.0
            self.knowledge.update(p.regime, np.where(mask > 0, mine, 0.0), mask)
        scale = self._scale(view)
        s = math.tanh(mine / scale)
        name = self.names[p.arm]
        text = f"in {REGIMES[p.regime]} held {name}: {mine * 1e4:+.2f} bp vs equal weight"
        tags = (regime_tag(p.regime), arm_tag(name))
        report = self.loop.record_episode(text, s, min(max(0.5 + 0.5 * s, 0.0), 1.0), tags)
        if report.write.stored:
            self.payloads[report.write.entry_id] = (1.0, mine, mine * mine)
        self._window_regimes.add(p.regime)
        if self.loop.episode % self.window == 0:
            self._close_window(scale)

    def _close_window(self, scale: float) -> None:
        ns, episode = self.loop.namespace, self.loop.episode
        kn = self.knowledge
        for regime in sorted(self._window_regimes):
            t = kn.t_stats(regime)
            order = [int(k) for k in np.argsort(-t, kind="stable")[:SEMANTIC_PER_REGIME]]
            for arm in dict.fromkeys([*order, self._held]):
                n = float(kn.n[regime, arm])
                if n < MIN_SUPPORT:
                    continue
                stats = (n, float(kn.s1[regime, arm]), float(kn.s2[regime, arm]))
                entry = semantic_entry(ns, episode, regime, self.names[arm], stats, scale)
                if self.store.put(entry).stored:
                    self.payloads[entry.id] = stats
            if self.variant.reflection:
                self._reflect(regime, t, episode)
        self._window_regimes.clear()

    def _reflect(self, regime: int, t: np.ndarray, episode: int) -> None:
        """Slow loop: promote, keep or retire 'in regime R prefer rule X'."""
        kn = self.knowledge
        best = int(np.argmax(t))
        conf = phi(float(t[best]))
        current = self.active_rules.get(regime)
        retired = promoted = None
        if current is not None:
            held_conf = phi(float(t[current[1]]))
            overtaken = best != current[1] and conf >= PROMOTE_CONFIDENCE
            if held_conf < RETIRE_CONFIDENCE or overtaken:
                self.store.set_state(current[0], EntryState.RETIRED)
                del self.active_rules[regime]
                retired = self.names[current[1]]
        if (
            regime not in self.active_rules
            and kn.n[regime, best] >= PROMOTE_SUPPORT
            and conf >= PROMOTE_CONFIDENCE
            and best != 0
        ):
            support = int(kn.n[regime, best])
            entry = procedural_entry(
                self.loop.namespace, episode, regime, self.names[best], support, conf
            )
            if self.store.put(entry).stored:
                self.active_rules[regime] = (entry.id, best)
                promoted = self.names[best]
        self.reflections.append(
            {
                "episode": episode,
                "regime": REGIMES[regime],
                "best_rule": self.names[best],
                "confidence": conf,
                "promoted": promoted,
                "retired": retired,
                "insight": f"in {REGIMES[regime]} {self.names[best]} leads"
                f" (t = {float(t[best]):+.2f}, confidence {conf:.2f})",
            }
        )

    # -- decision ---------------------------------------------------------------------

    def _recall(self, regime: int) -> Retrieval:
        policy = self.loop.current_policy
        assert policy is not None
        # Recall is refreshed once per window for each (policy, regime): the fast loop
        # reads memory as the last refresh left it, the slow loop's cadence.
        key = (policy.name, regime, self.loop.episode // self.window)
        hit = self._memo.get(key)
        if hit is None:
            hit = self.loop.retrieve(regime_tag(regime))
            if len(self._memo) > 64:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def _choose(self, arms: np.ndarray, regime: int, scale: float, held_w: np.ndarray) -> int:
        block = self.seen // self.window
        if block != self._draw_window:
            self._draw_window = block
            self._draws = self.rng.standard_normal(len(self.rules))
        retrieval = self._recall(regime)
        ev = evidence_from(retrieval, regime, self.arm_index, self.payloads)
        if ev.preferred is not None:
            return ev.preferred
        if not ev.recalled:
            return self._held
        cands = dict.fromkeys([*ev.stats, self._held, 0])
        if not self.variant.full_information:
            cands[int(self.rng.integers(len(self.rules)))] = None
        best, best_score = self._held, -math.inf
        for k in cands:
            n, s1, s2 = ev.stats.get(k, (0.0, 0.0, 0.0))
            var = max(s2 / n - (s1 / n) ** 2, 0.0) if n > 0 else scale * scale
            mean = s1 / (n + PRIOR_BARS)
            sd = math.sqrt((var if n > 1 else scale * scale) / (n + PRIOR_BARS))
            switch = self.cost * float(np.abs(arms[k] - held_w).sum()) / self.window
            score = mean + sd * float(self._draws[k]) - switch
            if score > best_score:
                best, best_score = k, score
        return best

    def __call__(self, view: MarketView, /) -> Decision:
        """Settle the previous bar, then choose a rule and return its weights."""
        self._settle(view)
        arms, regime = view_features(view, self.rules)
        p = self._pending
        prev_w = None if p is None else p.weights
        learning = self.seen >= self.variant.warmup
        policy_name = "warm-up"
        if learning:
            policy_name = self.loop.select_policy().name
            held_w = prev_w if prev_w is not None else arms[self._held]
            self._held = self._choose(arms, regime, self._scale(view), held_w)
        weights = arms[self._held]
        self._pending = _Pending(
            view.t,
            arms,
            None if p is None else p.arms,
            weights,
            prev_w,
            self._held,
            regime,
            learning and not self.frozen,
        )
        self.choices.append((regime, self._held, policy_name))
        self.posterior_means.append(tuple(self.loop.bandit_state.means().tolist()))
        self.seen += 1
        if self.frozen:
            self._frozen_decisions += 1
        notes: tuple[str, ...] = (
            f"regime {REGIMES[regime]}; rule {self.names[self._held]}; policy {policy_name}",
        )
        refusals: tuple[Any, ...] = ()
        if self.evidence:
            _, refused = self.guard.admit(self.evidence, view.decision_time)
            refusals = tuple(refused)
            notes = (*notes, *refusal_notes(refused))
        return Decision(weights, notes, refusals)

    # -- phases -----------------------------------------------------------------------

    def learned_state(self) -> dict[str, Any]:
        """Every piece of learning state as JSON-able data (what the fingerprint covers)."""
        return {
            "store": self.store.to_dict(),
            "loop": self.loop.snapshot(),
            "knowledge": self.knowledge.to_dict(),
            "payloads": {k: list(v) for k, v in sorted(self.payloads.items())},
            "active_rules": {REGIMES[r]: list(v) for r, v in sorted(self.active_rules.items())},
            "reflections": self.reflections,
        }

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of `learned_state()`."""
        return digest(self.learned_state())

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
        if name == self.freeze_after and not self.frozen:
            self.loop.freeze()
            self._frozen_digest = self.fingerprint()
