"""The learning schedule of AEL memory (docs/design.md §8), as one value and pure functions.

Both learning paths, the in-process :class:`~reflexmem.memory.loop.LearningLoop` and the
ledger's :meth:`~reflexmem.memory.ledger_agents.MemoryLedger.record_episodes`, take their
rules from here and nowhere else: when an episode learns, which windows close, when the
evolution gate is due and over which episodes, whether it fires, and how an episode's
reward is credited to the bandit. Everything is a function of plain values (episode
indices, rewards, a :class:`BanditState`), so the two paths cannot drift apart and each
rule is testable on its own.

Windows are numbered by how many windows have completed: window ``w`` covers episodes
``[(w - 1) * window_size, w * window_size)`` and closes with episode
``w * window_size - 1``. "After window 10" in the specification is window 10 (episodes
90-99 by default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState, CreditMode
from reflexmem.memory.distill import DistillConfig
from reflexmem.memory.merge import MergeConfig

WINDOW_SIZE = 10
WARMUP_EPISODES = 15
GATE_START_WINDOW = 10
GATE_EVERY_WINDOWS = 5
GATE_THRESHOLD = 0.4


@dataclass(frozen=True, slots=True)
class LearningSchedule:
    """Windows, warm-up, evolution gate and credit mode; defaults are the specification's.

    ``warmup_episodes``: episodes with a smaller index apply no learning update (no
    posterior update, no distillation, no promotion, no evolution), although they are
    still recorded in episodic memory. The gate is checked at the close of window
    ``gate_start_window`` and of every ``gate_every_windows``-th window after it, over
    the episodes of the last ``gate_every_windows`` windows, and fires when their mean
    reward is strictly below ``gate_threshold``. ``distill`` holds the thresholds of
    the semantic distillation run at the close of every learning window.
    """

    window_size: int = WINDOW_SIZE
    warmup_episodes: int = WARMUP_EPISODES
    gate_start_window: int = GATE_START_WINDOW
    gate_every_windows: int = GATE_EVERY_WINDOWS
    gate_threshold: float = GATE_THRESHOLD
    credit: CreditMode = CreditMode.UNIFORM
    distill: DistillConfig | MergeConfig = field(default_factory=DistillConfig)

    def __post_init__(self) -> None:
        if self.window_size < 1 or self.gate_every_windows < 1 or self.gate_start_window < 1:
            raise ValueError("window_size and gate windows must be >= 1")
        if self.warmup_episodes < 0:
            raise ValueError("warmup_episodes must be >= 0")
        if not (math.isfinite(self.gate_threshold) and 0.0 <= self.gate_threshold <= 1.0):
            raise ValueError(f"gate_threshold must be in [0, 1], got {self.gate_threshold!r}")
        object.__setattr__(self, "credit", CreditMode(self.credit))

    @property
    def gate_span(self) -> int:
        """Episodes one gate check judges: ``gate_every_windows * window_size``."""
        return self.gate_every_windows * self.window_size


@dataclass(frozen=True, slots=True)
class Played:
    """A learning episode played under a policy: what credit and the gate are made of."""

    episode: int
    policy: str
    reward: float


@dataclass(frozen=True, slots=True)
class Window:
    """A window that closes: ``[start, end)``, whether it learns, and its gate span.

    ``learned``: its last episode is past warm-up, so it is distilled and may be gated.
    ``gate``: the span ``[since, end)`` the evolution gate judges at this close, or
    ``None`` when no gate check is due.
    """

    number: int
    start: int
    end: int
    learned: bool
    gate: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One evolution-gate check: its span, how many episodes it judged, and the verdict."""

    window: int
    since: int
    end: int
    episodes: int
    mean_reward: float | None
    fires: bool


def learns(schedule: LearningSchedule, episode: int) -> bool:
    """Whether episode ``episode`` (zero-based) applies learning updates (past warm-up)."""
    return episode >= schedule.warmup_episodes


def gate_span(schedule: LearningSchedule, window: int) -> tuple[int, int] | None:
    """Episodes ``[since, end)`` the gate judges at the close of window ``window``.

    ``None`` when no check is due there: before ``gate_start_window``, between checks,
    or when the window closes inside warm-up (nothing has been learned yet).
    """
    s = schedule
    end = window * s.window_size
    if window < s.gate_start_window or (window - s.gate_start_window) % s.gate_every_windows:
        return None
    if not learns(s, end - 1):
        return None
    return max(0, end - s.gate_span), end


def closing_windows(schedule: LearningSchedule, first: int, n: int) -> tuple[Window, ...]:
    """The windows that close among episodes ``[first, first + n)``, oldest first."""
    if first < 0 or n < 0:
        raise ValueError(f"episode range must be non-negative, got first={first}, n={n}")
    size = schedule.window_size
    return tuple(
        Window(
            number,
            (number - 1) * size,
            number * size,
            learns(schedule, number * size - 1),
            gate_span(schedule, number),
        )
        for number in range(first // size + 1, (first + n) // size + 1)
    )


def window_closed_by(schedule: LearningSchedule, episode: int) -> Window | None:
    """The window that episode ``episode`` closes, if it is the last of one."""
    closed = closing_windows(schedule, episode, 1)
    return closed[0] if closed else None


def gate_rewards(played: Iterable[Played], since: int, end: int) -> list[float]:
    """The gate-mean rule: rewards of learning episodes played under a policy in the span.

    That is, episodes with index in ``[since, end)``, oldest first. :class:`Played`
    only ever holds such episodes: warm-up episodes and episodes recorded without a
    policy never enter the mean.
    """
    return [p.reward for p in played if since <= p.episode < end]


def check_gate(schedule: LearningSchedule, window: Window, played: Iterable[Played]) -> GateCheck:
    """Judge the gate at a window close: it fires when the span's mean reward is < threshold.

    A span without any learning episode played under a policy does not fire (there is
    no evidence that recall is failing).
    """
    if window.gate is None:
        return GateCheck(window.number, window.end, window.end, 0, None, fires=False)
    since, end = window.gate
    rewards = gate_rewards(played, since, end)
    if not rewards:
        return GateCheck(window.number, since, end, 0, None, fires=False)
    mean = float(np.mean(rewards))
    return GateCheck(window.number, since, end, len(rewards), mean, mean < schedule.gate_threshold)


Credit = tuple[BanditState, Mapping[str, int]]
"""A posterior after a credit step, and the observations credited to each arm."""


def credit_episode(schedule: LearningSchedule, state: BanditState, played: Played) -> Credit:
    """Credit one learning episode as it settles.

    Uniform credit: the whole reward to the episode's arm, now. FCC: nothing yet (the
    episode is credited when its window closes, see :func:`credit_window`).
    """
    if schedule.credit is CreditMode.FRACTIONAL:
        return state, {}
    return bandit_fns.update(state, played.policy, played.reward), {played.policy: 1}


def credit_window(
    schedule: LearningSchedule, state: BanditState, window: Window, played: Iterable[Played]
) -> Credit:
    """Credit a closing window (FCC only; uniform credit was applied as episodes settled).

    FCC: every arm used by a learning episode of the window gets, per such episode, one
    observation of the window's mean reward (:func:`bandit.update_fractional`).
    """
    if schedule.credit is not CreditMode.FRACTIONAL:
        return state, {}
    inside = [p for p in played if window.start <= p.episode < window.end]
    if not inside:
        return state, {}
    arms = [p.policy for p in inside]
    updated = bandit_fns.update_fractional(state, arms, [p.reward for p in inside])
    return updated, dict(Counter(arms))


def keep_from(schedule: LearningSchedule, window: Window) -> int:
    """First episode index that later credit or gate checks can still need after ``window``.

    The next window's FCC credit needs episodes from ``window.end`` on; a later gate at
    window ``w' > w`` needs ``[w' * size - gate_span, ...)``, so at least
    ``window.end + window_size - gate_span``. Both paths keep only what this bound
    allows, so what they remember of past rewards stays bounded by one gate span.
    """
    return min(window.end, window.end + schedule.window_size - schedule.gate_span)


def trim(
    schedule: LearningSchedule, window: Window, played: Iterable[Played]
) -> tuple[Played, ...]:
    """The played episodes still needed after ``window`` closed (see :func:`keep_from`)."""
    bound = keep_from(schedule, window)
    return tuple(p for p in played if p.episode >= bound)
