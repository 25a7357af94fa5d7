"""Memory entries: the value every other part of the memory model trades in.

An entry is immutable so that a retrieval result, a distillation report or a ledger row
can hold it without fear that a later write changes what was recalled. Everything the
ranking, distillation and rendering need is on the entry itself, so a ledger-backed
store only has to persist these fields to reproduce in-memory behaviour exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from reflexmem.ledger.enums import EntryState, Tier


class FrozenError(RuntimeError):
    """A write reached memory, posteriors or policies while they were frozen.

    It lives beside the entry type because the store, the bandit and the loop all raise
    it, and none of them should depend on another just to share an exception.
    """


class Freezable:
    """The read-only switch of the store, the ledger store and the bandit.

    One implementation, so that "frozen" means the same everywhere: reads go on, any
    write raises :class:`FrozenError` naming what was refused.
    """

    _frozen: bool = False
    _frozen_name: str = "memory store"

    @property
    def frozen(self) -> bool:
        """Whether writes are currently refused with :class:`FrozenError`."""
        return self._frozen

    def freeze(self) -> None:
        """Make the object read-only."""
        self._frozen = True

    def unfreeze(self) -> None:
        """Allow writes again."""
        self._frozen = False

    def _guard(self, action: str) -> None:
        if self._frozen:
            raise FrozenError(f"{self._frozen_name} is frozen: {action} refused")


TIER_BOOST: Mapping[Tier, float] = {
    Tier.PROCEDURAL: 1.5,
    Tier.SEMANTIC: 1.2,
    Tier.EPISODIC: 1.0,
}
"""Ranking boost per tier: distilled knowledge outranks a single episode at equal match."""


def _unit(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One remembered thing in one namespace and tier.

    ``quality`` is the writer's judgement in [0, 1] (the store refuses low ones);
    ``outcome`` is the episode outcome s in [-1, 1] for episodic entries and the mean
    outcome of the supporting episodes for distilled ones; ``support`` and
    ``confidence`` say how many episodes back a pattern and how consistently;
    ``window_key`` names the distillation window that produced a semantic entry, which
    is what makes re-running a window detectable. ``wins`` and ``losses`` count the
    supporting episodes with positive and negative outcomes and ``first_episode`` is the
    first of them, so a merged pattern can be extended by later windows exactly.
    ``stats`` (JSON) holds what an outcome-tested condition pattern or rule needs
    beyond those columns: the carriers' outcome moments, the contrast that screened it,
    the confirmation test and its helpful / harmful counts (`outcome_rules.py`).
    """

    id: str
    namespace: str
    tier: Tier
    text: str
    tags: tuple[str, ...] = ()
    quality: float = 0.5
    created_episode: int = 0
    source_ids: tuple[str, ...] = ()
    state: EntryState = EntryState.ACTIVE
    support: int = 1
    confidence: float = 1.0
    window_key: str | None = None
    outcome: float | None = None
    wins: int = 0
    losses: int = 0
    first_episode: int | None = None
    stats: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("entry id must not be empty")
        if not self.namespace:
            raise ValueError("entry namespace must not be empty")
        # Coerce so that lists from JSON or callers compare and hash like tuples.
        object.__setattr__(self, "tier", Tier(self.tier))
        object.__setattr__(self, "state", EntryState(self.state))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "source_ids", tuple(self.source_ids))
        _unit("quality", self.quality)
        _unit("confidence", self.confidence)
        if self.created_episode < 0:
            raise ValueError(f"created_episode must be >= 0, got {self.created_episode}")
        if self.support < 0:
            raise ValueError(f"support must be >= 0, got {self.support}")
        if self.wins < 0 or self.losses < 0:
            raise ValueError("wins and losses must be >= 0")
        if self.wins + self.losses > self.support:
            raise ValueError(
                f"wins {self.wins} + losses {self.losses} exceed support {self.support}"
            )
        if self.outcome is not None and not (
            math.isfinite(self.outcome) and -1.0 <= self.outcome <= 1.0
        ):
            raise ValueError(f"outcome must be in [-1, 1], got {self.outcome!r}")

    def with_state(self, state: EntryState) -> MemoryEntry:
        """Return a copy in another state; entries never change in place."""
        return MemoryEntry(**{**self.to_dict(), "state": EntryState(state)})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, the shape a ledger row or a snapshot stores."""
        return {
            "id": self.id,
            "namespace": self.namespace,
            "tier": self.tier.value,
            "text": self.text,
            "tags": list(self.tags),
            "quality": self.quality,
            "created_episode": self.created_episode,
            "source_ids": list(self.source_ids),
            "state": self.state.value,
            "support": self.support,
            "confidence": self.confidence,
            "window_key": self.window_key,
            "outcome": self.outcome,
            "wins": self.wins,
            "losses": self.losses,
            "first_episode": self.first_episode,
            "stats": None if self.stats is None else dict(self.stats),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryEntry:
        """Rebuild an entry from :meth:`to_dict` output; unknown keys are an error.

        Rejecting unknown keys keeps a snapshot written by a newer schema from being
        read back silently without the fields it relied on.
        """
        unknown = set(data) - _FIELD_NAMES
        if unknown:
            raise ValueError(f"unknown MemoryEntry fields: {sorted(unknown)}")
        return cls(
            id=str(data["id"]),
            namespace=str(data["namespace"]),
            tier=Tier(data["tier"]),
            text=str(data["text"]),
            tags=tuple(str(t) for t in data.get("tags", ())),
            quality=float(data.get("quality", 0.5)),
            created_episode=int(data.get("created_episode", 0)),
            source_ids=tuple(str(s) for s in data.get("source_ids", ())),
            state=EntryState(data.get("state", EntryState.ACTIVE)),
            support=int(data.get("support", 1)),
            confidence=float(data.get("confidence", 1.0)),
            window_key=None if data.get("window_key") is None else str(data["window_key"]),
            outcome=None if data.get("outcome") is None else float(data["outcome"]),
            wins=int(data.get("wins", 0)),
            losses=int(data.get("losses", 0)),
            first_episode=None if data.get("first_episode") is None else int(data["first_episode"]),
            stats=None if data.get("stats") is None else dict(data["stats"]),
        )


_FIELD_NAMES = frozenset(f.name for f in fields(MemoryEntry))
