"""One learning cycle, written once: what settling one episode does, in which order.

:func:`settle_episode` is the only place where the rules of
:mod:`reflexmem.memory.schedule` are applied to a memory store and a learning state.
The in-process :class:`~reflexmem.memory.loop.LearningLoop` calls it once per episode
on its own store; the ledger's ``MemoryLedger.record_episodes`` calls it for every
episode of a batch on an in-memory mirror of the namespace and writes the difference
back. The order is fixed:

1. write the episodic entry (a refused entry still counts as an episode);
2. credit the episode (uniform credit: now; FCC: when its window closes);
3. if the episode closes a window: FCC credit of the window, semantic distillation of
   the window (learning windows only), the evolution gate (when due), then forget the
   rewards no later step can need.

The learning state is a plain value (:class:`LearningState`), so the ledger can load it,
run a whole batch through the same function and persist it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reflexmem.ledger.enums import Tier
from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState, reward_from_outcome
from reflexmem.memory.distill import DistillReport
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.merge import distil_window
from reflexmem.memory.policies import RetrievalPolicy, derive_policy
from reflexmem.memory.schedule import (
    GateCheck,
    LearningSchedule,
    Played,
    Window,
    check_gate,
    credit_episode,
    credit_window,
    learns,
    trim,
    window_closed_by,
)
from reflexmem.memory.store import MemoryStore, WriteResult


@dataclass(frozen=True, slots=True)
class EpisodeInput:
    """One settled episode: text, outcome s in [-1, 1], quality, tags, policy played.

    ``policy`` ``None`` records and remembers the episode without crediting anything.
    ``episode_id`` names the ledger's ``episodes`` row (default ``ep:<namespace>:<i>``);
    the in-process loop has no such row and ignores it.
    """

    text: str
    outcome: float
    quality: float
    tags: tuple[str, ...] = ()
    policy: str | None = None
    source_ids: tuple[str, ...] = ()
    episode_id: str | None = None
    case_id: str | None = None
    decision_id: str | None = None


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """One settled episode as the learning cycle saw it."""

    episode: int
    policy: str | None
    outcome: float
    reward: float
    learned: bool


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
class LearningState:
    """What one agent has learned in one namespace, as a value.

    ``policies`` are in bandit-arm order (evolved ones last, same order as
    ``bandit.arms``); ``recent`` holds the learning episodes played under a policy that
    the open window's FCC credit and the next gate checks still need (at most about one
    gate span, see :func:`reflexmem.memory.schedule.keep_from`).
    """

    bandit: BanditState
    policies: tuple[RetrievalPolicy, ...]
    recent: tuple[Played, ...] = ()

    def __post_init__(self) -> None:
        # Lengths only: this runs once per episode; `checked` compares every name.
        if len(self.policies) != len(self.bandit.arms):
            raise ValueError("policies and bandit arms must name the same arms in one order")

    def checked(self) -> LearningState:
        """Return the state after checking that policies and arms agree name by name."""
        if tuple(p.name for p in self.policies) != self.bandit.arms:
            raise ValueError(
                f"policies {[p.name for p in self.policies]} do not match bandit arms "
                f"{list(self.bandit.arms)}"
            )
        return self

    @classmethod
    def initial(cls, policies: tuple[RetrievalPolicy, ...]) -> LearningState:
        """Every policy at the Beta(1, 1) prior, nothing played yet."""
        return cls(BanditState.initial(p.name for p in policies), policies)

    def policy(self, name: str) -> RetrievalPolicy:
        """The policy of this arm; unknown names raise KeyError."""
        for p in self.policies:
            if p.name == name:
                return p
        raise KeyError(f"unknown policy {name!r}")


@dataclass(frozen=True, slots=True)
class Settled:
    """Everything settling one episode did."""

    record: EpisodeRecord
    write: WriteResult
    credited: Mapping[str, int] = field(default_factory=dict)
    window: Window | None = None
    distill: DistillReport | None = None
    gate: GateCheck | None = None
    evolution: EvolutionEvent | None = None


def _add(counts: dict[str, int], more: Mapping[str, int]) -> None:
    for arm, n in more.items():
        counts[arm] = counts.get(arm, 0) + n


def _evolve(
    schedule: LearningSchedule, state: LearningState, window: Window, gate: GateCheck
) -> tuple[LearningState, EvolutionEvent]:
    if gate.mean_reward is None:  # pragma: no cover - check_gate never fires without a mean
        raise ValueError("a gate fired without a mean reward")
    parent = bandit_fns.best_arm(state.bandit)
    policy = derive_policy(state.policy(parent), state.bandit.arms)
    episode = window.end - 1
    reason = (
        f"mean reward {gate.mean_reward:.3f} over episodes {gate.since}-{episode} (windows "
        f"{window.number - schedule.gate_every_windows + 1}-{window.number}) is below "
        f"{schedule.gate_threshold}; derived '{policy.name}' from best arm '{parent}' "
        f"(posterior mean {float(state.bandit.means().max()):.3f})"
    )
    event = EvolutionEvent(
        window.number, episode, gate.mean_reward, schedule.gate_threshold, parent, policy, reason
    )
    grown = LearningState(
        bandit_fns.add_arm(state.bandit, policy.name), (*state.policies, policy), state.recent
    )
    return grown, event


def episodic_entry(namespace: str, index: int, episode: EpisodeInput) -> MemoryEntry:
    """The episodic entry of an episode: id ``epi:<namespace>:<index>``, outcome clipped."""
    return MemoryEntry(
        id=f"epi:{namespace}:{index}",
        namespace=namespace,
        tier=Tier.EPISODIC,
        text=episode.text,
        tags=tuple(episode.tags),
        quality=episode.quality,
        created_episode=index,
        source_ids=tuple(episode.source_ids),
        outcome=min(max(float(episode.outcome), -1.0), 1.0),
    )


def settle_episode(
    schedule: LearningSchedule,
    store: MemoryStore,
    namespace: str,
    state: LearningState,
    index: int,
    episode: EpisodeInput,
    *,
    distill: bool = True,
) -> tuple[LearningState, Settled]:
    """Settle episode ``index`` of ``namespace``: remember it and apply whatever is due.

    ``outcome`` s gives the reward r = clip((s + 1) / 2, 0, 1) and is clipped to
    [-1, 1] in the episodic entry; a non-finite outcome raises ValueError before anything
    is written. ``distill=False`` leaves closing windows to a later
    ``distill_window`` run (they stay due; nothing else changes). An episode played
    under a policy the state does not know raises KeyError before anything is written.
    """
    if episode.policy is not None:
        state.bandit.index(episode.policy)  # KeyError before anything is written
    reward = reward_from_outcome(episode.outcome)
    write = store.put(episodic_entry(namespace, index, episode))
    learned = learns(schedule, index)
    clipped = min(max(float(episode.outcome), -1.0), 1.0)
    record = EpisodeRecord(index, episode.policy, clipped, reward, learned)
    credited: dict[str, int] = {}
    bandit, recent = state.bandit, state.recent
    if learned and episode.policy is not None:
        played = Played(index, episode.policy, reward)
        recent = (*recent, played)
        bandit, counts = credit_episode(schedule, bandit, played)
        _add(credited, counts)
    window = window_closed_by(schedule, index)
    if window is None:
        return LearningState(bandit, state.policies, recent), Settled(record, write, credited)
    bandit, counts = credit_window(schedule, bandit, window, recent)
    _add(credited, counts)
    state = LearningState(bandit, state.policies, recent)
    report = None
    if window.learned and distill:
        report = distil_window(store, namespace, window.start, window.end, schedule.distill)
    gate = check_gate(schedule, window, recent) if window.gate is not None else None
    event = None
    if gate is not None and gate.fires:
        state, event = _evolve(schedule, state, window, gate)
    state = LearningState(state.bandit, state.policies, trim(schedule, window, state.recent))
    return state, Settled(record, write, credited, window, report, gate, event)
