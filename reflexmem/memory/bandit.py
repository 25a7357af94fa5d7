"""Thompson sampling over retrieval policies, with Beta posteriors as plain data.

The posterior is a value (:class:`BanditState`) and every learning step is a pure
function from one state to the next, so the in-process benchmark, a replay from the
ledger and a unit test all compute exactly the same posteriors. :class:`ThompsonBandit`
only adds the random generator and the freeze switch around it.

Rewards are in [0, 1] and are applied as fractional Bernoulli observations
(alpha += w r, beta += w (1 - r)), which keeps Beta-Bernoulli conjugacy in expectation
without having to binarise the episode outcome.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from reflexmem.memory.entries import Freezable

PRIOR_ALPHA = 1.0
PRIOR_BETA = 1.0


class CreditMode(StrEnum):
    """Which arms an episode's reward is credited to.

    ``UNIFORM``: the whole reward to the arm chosen for that episode, right away.
    ``FRACTIONAL`` (FCC): at the end of a window, each arm used in it receives one
    observation of the window's mean reward per episode it was used, because memory
    written under one policy shapes the outcomes of episodes run under the others.
    """

    UNIFORM = "uniform"
    FRACTIONAL = "fractional"


def reward_from_outcome(outcome: float) -> float:
    """Map an outcome s in [-1, 1] onto a Beta reward: r = clip((s + 1) / 2, 0, 1)."""
    if not math.isfinite(outcome):
        raise ValueError(f"episode outcome must be finite, got {outcome!r}")
    return min(max((outcome + 1.0) / 2.0, 0.0), 1.0)


def _check_reward(reward: float) -> None:
    if not (math.isfinite(reward) and 0.0 <= reward <= 1.0):
        raise ValueError(f"reward must be in [0, 1], got {reward!r}")


@dataclass(frozen=True, slots=True)
class BanditState:
    """Beta(alpha, beta) posterior per arm, arms in a fixed order."""

    arms: tuple[str, ...]
    alpha: tuple[float, ...]
    beta: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "arms", tuple(self.arms))
        object.__setattr__(self, "alpha", tuple(float(a) for a in self.alpha))
        object.__setattr__(self, "beta", tuple(float(b) for b in self.beta))
        if not (len(self.arms) == len(self.alpha) == len(self.beta)):
            raise ValueError("arms, alpha and beta must have the same length")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError(f"duplicate arm names: {self.arms}")
        if any(not (math.isfinite(v) and v > 0) for v in (*self.alpha, *self.beta)):
            raise ValueError("alpha and beta must be finite and positive")

    @classmethod
    def initial(cls, arms: Iterable[str]) -> BanditState:
        """Every arm at the uninformative Beta(1, 1) prior."""
        names = tuple(arms)
        return cls(names, (PRIOR_ALPHA,) * len(names), (PRIOR_BETA,) * len(names))

    def index(self, arm: str) -> int:
        """Position of an arm; unknown arms raise KeyError rather than learn nothing."""
        try:
            return self.arms.index(arm)
        except ValueError:
            raise KeyError(f"unknown arm {arm!r}") from None

    def means(self) -> NDArray[np.float64]:
        """Posterior mean alpha / (alpha + beta) of every arm."""
        a = np.asarray(self.alpha)
        return np.asarray(a / (a + np.asarray(self.beta)), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {"arms": list(self.arms), "alpha": list(self.alpha), "beta": list(self.beta)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BanditState:
        """Rebuild a state from :meth:`to_dict` output."""
        return cls(tuple(data["arms"]), tuple(data["alpha"]), tuple(data["beta"]))

    def to_json(self) -> str:
        """Canonical JSON (sorted keys), so equal states serialise to equal bytes."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BanditState:
        """Rebuild a state from :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


def sample(state: BanditState, rng: np.random.Generator) -> NDArray[np.float64]:
    """One posterior draw per arm."""
    return rng.beta(np.asarray(state.alpha), np.asarray(state.beta))


def select(state: BanditState, rng: np.random.Generator) -> str:
    """Return the arm whose posterior draw is highest (the first on an exact tie)."""
    if not state.arms:
        raise ValueError("cannot select from a bandit without arms")
    return state.arms[int(np.argmax(sample(state, rng)))]


def update(state: BanditState, arm: str, reward: float, weight: float = 1.0) -> BanditState:
    """Credit ``weight`` observations of ``reward`` to one arm (uniform credit)."""
    _check_reward(reward)
    if not (math.isfinite(weight) and weight >= 0):
        raise ValueError(f"weight must be finite and >= 0, got {weight!r}")
    i = state.index(arm)
    a = state.alpha[i] + weight * reward
    b = state.beta[i] + weight * (1.0 - reward)
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"posterior of {arm!r} overflowed: alpha={a!r}, beta={b!r}")
    # Only arm i changed and it stays finite and positive: skip re-validating every arm
    # (an agent with hundreds of evolved arms updates once per episode).
    updated = object.__new__(BanditState)
    object.__setattr__(updated, "arms", state.arms)
    object.__setattr__(updated, "alpha", (*state.alpha[:i], a, *state.alpha[i + 1 :]))
    object.__setattr__(updated, "beta", (*state.beta[:i], b, *state.beta[i + 1 :]))
    return updated


def update_fractional(
    state: BanditState, arms_used: Sequence[str], rewards: Sequence[float]
) -> BanditState:
    """FCC: every arm used in a window gets its usage count times the window mean reward.

    The total mass added equals the number of episodes, as with uniform credit; only the
    attribution differs.
    """
    if len(arms_used) != len(rewards):
        raise ValueError("arms_used and rewards must have the same length")
    if not arms_used:
        return state
    for r in rewards:
        _check_reward(r)
    mean = float(np.mean(rewards))
    counts = np.zeros(len(state.arms))
    for arm, n in Counter(arms_used).items():
        counts[state.index(arm)] = n
    alpha = np.asarray(state.alpha) + counts * mean
    beta = np.asarray(state.beta) + counts * (1.0 - mean)
    return BanditState(state.arms, tuple(alpha.tolist()), tuple(beta.tolist()))


def add_arm(state: BanditState, arm: str) -> BanditState:
    """Append a new arm at the Beta(1, 1) prior; appending keeps existing indices valid."""
    if arm in state.arms:
        raise ValueError(f"arm {arm!r} already exists")
    return BanditState((*state.arms, arm), (*state.alpha, PRIOR_ALPHA), (*state.beta, PRIOR_BETA))


def best_arm(state: BanditState) -> str:
    """Return the arm with the highest posterior mean (the first on a tie)."""
    return state.arms[int(np.argmax(state.means()))]


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """Accept a generator or a seed, so callers can share or own their randomness."""
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


class ThompsonBandit(Freezable):
    """A :class:`BanditState` with its random generator and a freeze switch.

    Selecting is allowed while frozen (a deployed agent still picks a policy from the
    frozen posterior); updating and adding arms raise :class:`FrozenError`.
    """

    def __init__(
        self, arms: Iterable[str] | BanditState, rng: np.random.Generator | int | None = 0
    ) -> None:
        self._state = arms if isinstance(arms, BanditState) else BanditState.initial(arms)
        self._rng = as_generator(rng)
        self._frozen = False
        self._frozen_name = "bandit"

    @property
    def state(self) -> BanditState:
        """The current posterior (immutable, safe to keep)."""
        return self._state

    def select(self) -> str:
        """Draw from every posterior and return the arm with the highest draw."""
        return select(self._state, self._rng)

    def update(self, arm: str, reward: float) -> None:
        """Uniform credit: the whole reward to ``arm``."""
        self._guard(f"update {arm!r}")
        self._state = update(self._state, arm, reward)

    def update_fractional(self, arms_used: Sequence[str], rewards: Sequence[float]) -> None:
        """FCC credit for one window, see :func:`update_fractional`."""
        self._guard("update_fractional")
        self._state = update_fractional(self._state, arms_used, rewards)

    def add_arm(self, arm: str) -> None:
        """Add an arm at the Beta(1, 1) prior."""
        self._guard(f"add_arm {arm!r}")
        self._state = add_arm(self._state, arm)
