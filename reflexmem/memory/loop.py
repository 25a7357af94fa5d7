"""The learning loop of one agent: pick a policy, recall, record, learn.

This is the surface the AEL benchmark agent calls once per episode::

    policy = loop.select_policy()
    recalled = loop.retrieve(query)        # context for the agent's prompt
    ...                                    # the agent acts; the episode settles
    loop.record_episode(text, outcome, quality, tags)

``record_episode`` hands the episode to :func:`reflexmem.memory.cycle.settle_episode`,
the one implementation of the learning rules (the ledger's ``record_episodes`` calls the
same function), so a run is reproducible from its seed and identical to the same
episodes recorded in the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState, CreditMode, as_generator
from reflexmem.memory.cycle import (
    EpisodeInput,
    EpisodeRecord,
    EvolutionEvent,
    LearningState,
    settle_episode,
)
from reflexmem.memory.distill import DistillReport
from reflexmem.memory.entries import FrozenError
from reflexmem.memory.policies import Retrieval, RetrievalPolicy, default_policies
from reflexmem.memory.policies import retrieve as retrieve_with
from reflexmem.memory.ranking import MatchFn
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore, MemoryStore, WriteResult


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
        schedule: LearningSchedule | None = None,
        rng: np.random.Generator | int | None = 0,
        match_fn: MatchFn | None = None,
    ) -> None:
        if not namespace:
            raise ValueError("namespace must not be empty")
        chosen = tuple(policies) if policies is not None else default_policies()
        if not chosen:
            raise ValueError("a learning loop needs at least one policy")
        if len({p.name for p in chosen}) != len(chosen):
            raise ValueError("policy names must be unique")
        self._namespace = namespace
        self._store: MemoryStore = store if store is not None else InMemoryStore()
        self._schedule = schedule if schedule is not None else LearningSchedule()
        self._state = LearningState.initial(chosen)
        self._rng = as_generator(rng)
        self._match_fn = match_fn
        self._episode = 0
        self._current: RetrievalPolicy | None = None
        self._history: list[EpisodeRecord] = []
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
    def schedule(self) -> LearningSchedule:
        """The loop's learning schedule (windows, warm-up, gate, credit, distillation)."""
        return self._schedule

    @property
    def store(self) -> MemoryStore:
        """The memory store (possibly shared with other namespaces)."""
        return self._store

    @property
    def policies(self) -> tuple[RetrievalPolicy, ...]:
        """Current policies in bandit-arm order, evolved ones last."""
        return self._state.policies

    @property
    def bandit_state(self) -> BanditState:
        """The current posterior over policies."""
        return self._state.bandit

    @property
    def state(self) -> LearningState:
        """The whole learned state as a value (posterior, policies, pending rewards)."""
        return self._state

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
        self._store.freeze()

    def unfreeze(self) -> None:
        """Allow learning again."""
        self._frozen = False
        self._store.unfreeze()

    def select_policy(self, name: str | None = None) -> RetrievalPolicy:
        """Pick the policy for the episode in progress (warm-up included).

        By default a Thompson sample from the posterior. ``name`` forces that policy
        instead and draws nothing from the generator (replaying a recorded run, or
        comparing with the ledger path); an unknown name raises KeyError.
        """
        if name is None:
            name = bandit_fns.select(self._state.bandit, self._rng)
        self._current = self._state.policy(name)
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
        episode = EpisodeInput(text, outcome, quality, tuple(tags), policy.name, tuple(source_ids))
        report = self._settle(episode)
        self._current = None
        return report

    def observe(
        self,
        text: str,
        outcome: float,
        quality: float,
        tags: Iterable[str] = (),
        source_ids: Iterable[str] = (),
    ) -> EpisodeReport:
        """Remember an outcome the agent saw but did not play, crediting no policy.

        In a market every rule's outcome is visible whether the agent followed it or
        not; such an observation is an episode with no policy (as the ledger records
        an episode whose ``policy`` is ``None``): it enters memory and distillation,
        and the bandit learns nothing from it. The selected policy stays selected.
        """
        if self._frozen:
            raise FrozenError("learning loop is frozen: observe refused")
        episode = EpisodeInput(text, outcome, quality, tuple(tags), None, tuple(source_ids))
        return self._settle(episode)

    def _settle(self, episode: EpisodeInput) -> EpisodeReport:
        self._state, settled = settle_episode(
            self._schedule, self._store, self._namespace, self._state, self._episode, episode
        )
        self._history.append(settled.record)
        if settled.evolution is not None:
            self._events.append(settled.evolution)
        self._episode += 1
        return EpisodeReport(settled.record, settled.write, settled.distill, settled.evolution)

    def snapshot(self) -> dict[str, Any]:
        """JSON-able learned state (episode, policies, posterior, events, history).

        Memory is not included: it belongs to the store, which may be shared.
        ``pending_credit`` lists the (policy, reward) pairs FCC will credit when the
        open window closes (always empty with uniform credit).
        """
        pending: list[list[Any]] = []
        if self._schedule.credit is CreditMode.FRACTIONAL:
            start = self._episode - self._episode % self._schedule.window_size
            pending = [[p.policy, p.reward] for p in self._state.recent if p.episode >= start]
        return {
            "namespace": self._namespace,
            "episode": self._episode,
            "policies": [p.to_dict() for p in self._state.policies],
            "bandit": self._state.bandit.to_dict(),
            "events": [e.to_dict() for e in self._events],
            "history": [
                [r.episode, r.policy, r.outcome, r.reward, r.learned] for r in self._history
            ],
            "pending_credit": pending,
        }
