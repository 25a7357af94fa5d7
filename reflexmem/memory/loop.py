"""The learning loop of one agent: pick a policy, recall, record, learn.

This is the surface the AEL benchmark agent calls once per episode::

    policy = loop.select_policy()
    recalled = loop.retrieve(query)        # context for the agent's prompt
    ...                                    # the agent acts; the episode settles
    loop.record_episode(text, outcome, quality, tags)

``record_episode`` is where every learning rule of the model is applied, in a fixed
order: the episode is written to episodic memory, the bandit is credited, and at the end
of each window the window is distilled and the evolution gate is checked. Keeping the
order in one place is what makes a run reproducible from its seed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.memory.bandit import (
    BanditState,
    CreditMode,
    ThompsonBandit,
    best_arm,
    reward_from_outcome,
)
from reflexmem.memory.distill import DistillConfig, DistillReport, distill_window
from reflexmem.memory.entries import FrozenError, MemoryEntry, Tier
from reflexmem.memory.policies import Retrieval, RetrievalPolicy, default_policies, derive_policy
from reflexmem.memory.policies import retrieve as retrieve_with
from reflexmem.memory.ranking import MatchFn
from reflexmem.memory.store import InMemoryStore, MemoryStore, WriteResult

WARMUP_EPISODES = 15
GATE_START_WINDOW = 10
GATE_EVERY_WINDOWS = 5
GATE_THRESHOLD = 0.4


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """Schedule and thresholds of the loop; defaults are the specification's values.

    ``warmup_episodes``: the first that many episodes apply no learning update (no
    posterior update, no distillation, no promotion, no evolution) although they are
    still recorded in episodic memory. The gate checks at the end of completed window
    ``gate_start_window`` and every ``gate_every_windows`` windows after it.
    """

    window_size: int = 10
    warmup_episodes: int = WARMUP_EPISODES
    gate_start_window: int = GATE_START_WINDOW
    gate_every_windows: int = GATE_EVERY_WINDOWS
    gate_threshold: float = GATE_THRESHOLD
    credit: CreditMode = CreditMode.UNIFORM
    distill: DistillConfig = field(default_factory=DistillConfig)

    def __post_init__(self) -> None:
        if self.window_size < 1 or self.gate_every_windows < 1 or self.gate_start_window < 1:
            raise ValueError("window_size and gate windows must be >= 1")
        if self.warmup_episodes < 0:
            raise ValueError("warmup_episodes must be >= 0")


@dataclass(frozen=True, slots=True)
class EvolutionEvent:
    """Why and when the gate added a policy; the audit trail of policy evolution."""

    window: int
    episode: int
    mean_reward: float
    threshold: float
    parent: str
    policy: RetrievalPolicy
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "window": self.window,
            "episode": self.episode,
            "mean_reward": self.mean_reward,
            "threshold": self.threshold,
            "parent": self.parent,
            "policy": self.policy.to_dict(),
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One settled episode as the loop saw it."""

    episode: int
    policy: str
    outcome: float
    reward: float
    learned: bool


@dataclass(frozen=True, slots=True)
class EpisodeReport:
    """Everything :meth:`LearningLoop.record_episode` did for one episode."""

    record: EpisodeRecord
    write: WriteResult
    distill: DistillReport | None = None
    evolution: EvolutionEvent | None = None


class LearningLoop:
    """Memory, bandit and policies of one agent (one namespace), tied together."""

    def __init__(
        self,
        namespace: str,
        *,
        store: MemoryStore | None = None,
        policies: Sequence[RetrievalPolicy] | None = None,
        config: LoopConfig | None = None,
        rng: np.random.Generator | int | None = 0,
        match_fn: MatchFn | None = None,
    ) -> None:
        if not namespace:
            raise ValueError("namespace must not be empty")
        chosen = tuple(policies) if policies is not None else default_policies()
        if not chosen:
            raise ValueError("a learning loop needs at least one policy")
        self._namespace = namespace
        self._store: MemoryStore = store if store is not None else InMemoryStore()
        self._policies: dict[str, RetrievalPolicy] = {p.name: p for p in chosen}
        if len(self._policies) != len(chosen):
            raise ValueError("policy names must be unique")
        self._config = config if config is not None else LoopConfig()
        self._bandit = ThompsonBandit(list(self._policies), rng)
        self._match_fn = match_fn
        self._episode = 0
        self._current: RetrievalPolicy | None = None
        self._history: list[EpisodeRecord] = []
        self._window: list[tuple[str, float]] = []
        self._events: list[EvolutionEvent] = []
        self._frozen = False

    @property
    def namespace(self) -> str:
        """The memory namespace this loop reads and writes."""
        return self._namespace

    @property
    def episode(self) -> int:
        """Index of the episode in progress (zero-based; episodes recorded so far)."""
        return self._episode

    @property
    def config(self) -> LoopConfig:
        """The loop's schedule and thresholds."""
        return self._config

    @property
    def store(self) -> MemoryStore:
        """The memory store (possibly shared with other namespaces)."""
        return self._store

    @property
    def policies(self) -> tuple[RetrievalPolicy, ...]:
        """Current policies in bandit-arm order, evolved ones last."""
        return tuple(self._policies.values())

    @property
    def bandit_state(self) -> BanditState:
        """The current posterior over policies."""
        return self._bandit.state

    @property
    def events(self) -> tuple[EvolutionEvent, ...]:
        """Every policy the evolution gate added, with its reason."""
        return tuple(self._events)

    @property
    def history(self) -> tuple[EpisodeRecord, ...]:
        """Every recorded episode, oldest first."""
        return tuple(self._history)

    @property
    def current_policy(self) -> RetrievalPolicy | None:
        """The policy selected for the episode in progress, if any."""
        return self._current

    @property
    def frozen(self) -> bool:
        """Whether memory, posteriors and policies are read-only."""
        return self._frozen

    def freeze(self) -> None:
        """Make memory, posteriors and policies read-only (test or deployment phase).

        Selection and recall keep working; every write raises :class:`FrozenError`.
        The store is frozen as a whole, so other namespaces sharing it freeze too.
        """
        self._frozen = True
        self._bandit.freeze()
        self._store.freeze()

    def unfreeze(self) -> None:
        """Allow learning again."""
        self._frozen = False
        self._bandit.unfreeze()
        self._store.unfreeze()

    def select_policy(self) -> RetrievalPolicy:
        """Thompson-sample the policy for the episode in progress (warm-up included)."""
        self._current = self._policies[self._bandit.select()]
        return self._current

    def retrieve(self, query: str) -> Retrieval:
        """Recall for ``query`` with the selected policy; never returns candidates."""
        policy = self._require_policy()
        return retrieve_with(
            self._store,
            self._namespace,
            policy,
            query,
            now_episode=self._episode,
            match_fn=self._match_fn,
        )

    def _require_policy(self) -> RetrievalPolicy:
        if self._current is None:
            raise RuntimeError("call select_policy() before retrieve() or record_episode()")
        return self._current

    def record_episode(
        self,
        text: str,
        outcome: float,
        quality: float,
        tags: Iterable[str] = (),
        source_ids: Iterable[str] = (),
    ) -> EpisodeReport:
        """Settle the episode in progress and apply whatever learning is due.

        ``outcome`` s is clipped to [-1, 1] for the reward r = (s + 1) / 2 and for the
        episodic entry. The episode counts even if its entry is refused (low quality):
        the bandit learns from outcomes, not from what memory chose to keep.
        """
        if self._frozen:
            raise FrozenError("learning loop is frozen: record_episode refused")
        policy = self._require_policy()
        reward = reward_from_outcome(outcome)
        clipped = min(max(float(outcome), -1.0), 1.0)
        episode = self._episode
        cfg = self._config
        entry = MemoryEntry(
            id=f"epi:{self._namespace}:{episode}",
            namespace=self._namespace,
            tier=Tier.EPISODIC,
            text=text,
            tags=tuple(tags),
            quality=quality,
            created_episode=episode,
            source_ids=tuple(source_ids),
            outcome=clipped,
        )
        write = self._store.put(entry)
        learned = episode >= cfg.warmup_episodes
        record = EpisodeRecord(episode, policy.name, clipped, reward, learned)
        self._history.append(record)
        if learned:
            if cfg.credit is CreditMode.UNIFORM:
                self._bandit.update(policy.name, reward)
            else:
                self._window.append((policy.name, reward))
        distilled: DistillReport | None = None
        event: EvolutionEvent | None = None
        if (episode + 1) % cfg.window_size == 0:
            distilled, event = self._close_window(episode, learned)
        self._episode += 1
        self._current = None
        return EpisodeReport(record, write, distilled, event)

    def _close_window(
        self, episode: int, learned: bool
    ) -> tuple[DistillReport | None, EvolutionEvent | None]:
        cfg = self._config
        if self._window:
            arms, rewards = zip(*self._window, strict=True)
            self._bandit.update_fractional(arms, rewards)
            self._window.clear()
        if not learned:
            return None, None
        end = episode + 1
        report = distill_window(
            self._store, self._namespace, end - cfg.window_size, end, cfg.distill
        )
        return report, self._gate(end // cfg.window_size, episode)

    def _gate(self, window: int, episode: int) -> EvolutionEvent | None:
        cfg = self._config
        if window < cfg.gate_start_window or (window - cfg.gate_start_window) % (
            cfg.gate_every_windows
        ):
            return None
        since = (window - cfg.gate_every_windows) * cfg.window_size
        rewards = [r.reward for r in self._history if r.learned and r.episode >= since]
        if not rewards:
            return None
        mean = float(np.mean(rewards))
        if mean >= cfg.gate_threshold:
            return None
        parent = best_arm(self._bandit.state)
        policy = derive_policy(self._policies[parent], self._policies)
        reason = (
            f"mean reward {mean:.3f} over episodes {since}-{episode} (windows "
            f"{window - cfg.gate_every_windows + 1}-{window}) is below {cfg.gate_threshold}; "
            f"derived '{policy.name}' from best arm '{parent}' "
            f"(posterior mean {float(self._bandit.state.means().max()):.3f})"
        )
        self._bandit.add_arm(policy.name)
        self._policies[policy.name] = policy
        event = EvolutionEvent(window, episode, mean, cfg.gate_threshold, parent, policy, reason)
        self._events.append(event)
        return event

    def snapshot(self) -> dict[str, Any]:
        """JSON-able learned state (episode, policies, posterior, events, history).

        Memory is not included: it belongs to the store, which may be shared.
        """
        return {
            "namespace": self._namespace,
            "episode": self._episode,
            "policies": [p.to_dict() for p in self._policies.values()],
            "bandit": self._bandit.state.to_dict(),
            "events": [e.to_dict() for e in self._events],
            "history": [
                [r.episode, r.policy, r.outcome, r.reward, r.learned] for r in self._history
            ],
            "pending_credit": [list(item) for item in self._window],
        }
