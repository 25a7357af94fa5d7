"""The eviction columns of a full tier, kept in step with its writes.

Once a (namespace, tier) is full, every write asks which entry ranks lowest among the
tier and the newcomer. Building the quality, age and boost arrays from the entries for
each write cost O(cap) Python per write (about 45 µs per episode at the default cap of
500, the largest single cost of recording 1e5 episodes). Here the arrays are built once
when the tier fills and then updated in place (the newcomer takes the victim's slot), so a
write costs a few numpy operations over the tier. The ranking is the same formula over
the same values (`reflexmem.memory.ranking.rank_scores`), so the victim is the one
`standing` picks: lowest score, ties to the oldest and then the smallest id, dead
entries (superseded, retired) before any live one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from reflexmem.ledger.enums import EntryState
from reflexmem.memory.entries import TIER_BOOST, MemoryEntry
from reflexmem.memory.ranking import rank_scores

DEAD = frozenset({EntryState.SUPERSEDED, EntryState.RETIRED})


def _values(entry: MemoryEntry) -> tuple[float, float, float, bool]:
    return (
        float(entry.quality),
        float(entry.created_episode),
        float(TIER_BOOST[entry.tier]),
        entry.state in DEAD,
    )


def _scores(
    quality: NDArray[np.float64],
    created: NDArray[np.float64],
    boost: NDArray[np.float64],
    clock: int,
) -> NDArray[np.float64]:
    age = np.maximum(float(clock) - created, 0.0)
    return rank_scores(np.ones(len(quality)), quality, age, boost)


class TierStanding:
    """Entries of one tier with their quality, creation episode, boost and dead flag."""

    __slots__ = ("boost", "created", "dead", "entries", "ids", "quality")

    def __init__(self, entries: list[MemoryEntry]) -> None:
        self.entries = entries
        # Positions are found by id: `list.index` on the entries compares whole frozen
        # dataclasses field by field (it was the largest cost of recording episodes).
        self.ids = [e.id for e in entries]
        cols = np.array([_values(e) for e in entries], dtype=np.float64).reshape(-1, 4)
        self.quality = cols[:, 0].copy()
        self.created = cols[:, 1].copy()
        self.boost = cols[:, 2].copy()
        self.dead = cols[:, 3].astype(np.bool_)

    def _oldest(self, tied: list[int]) -> MemoryEntry:
        """Of tied positions, the oldest entry, then the smallest id."""
        best = min(tied, key=lambda i: (self.created[i], self.ids[i]))
        return self.entries[best]

    def victim(self, newcomer: MemoryEntry, clock: int) -> MemoryEntry:
        """Who goes if `newcomer` is written: a dead entry first, else the lowest of all.

        The lowest score, ties to the oldest and then the smallest id; only the tied
        positions are looked at in Python.
        """
        if self.dead.any():
            idx = np.flatnonzero(self.dead)
            scores = _scores(self.quality[idx], self.created[idx], self.boost[idx], clock)
            return self._oldest(idx[scores == scores.min()].tolist())
        q, c, b, _ = _values(newcomer)
        # One array with the newcomer last: every score from the same vectorised pass.
        scores = _scores(
            np.append(self.quality, q), np.append(self.created, c), np.append(self.boost, b), clock
        )
        tied = np.flatnonzero(scores == scores.min()).tolist()
        n = len(self.entries)
        rivals = [i for i in tied if i < n]
        if len(rivals) == len(tied):
            return self._oldest(rivals)
        if not rivals:
            return newcomer
        return min((self._oldest(rivals), newcomer), key=lambda e: (e.created_episode, e.id))

    def restate(self, old: MemoryEntry, new: MemoryEntry) -> None:
        """`old` moved to `new.state` in place: only its dead flag can change.

        A new version supersedes the one it extends right after it is written, so
        rebuilding the columns on every state change cost O(cap) per distilled pattern.
        """
        i = self.ids.index(old.id)
        self.entries[i] = new
        self.dead[i] = new.state in DEAD

    def replace(self, victim: MemoryEntry, newcomer: MemoryEntry) -> None:
        """The newcomer takes the victim's position (the victim's choice ignores order)."""
        i = self.ids.index(victim.id)
        q, c, b, d = _values(newcomer)
        self.entries[i] = newcomer
        self.ids[i] = newcomer.id
        self.quality[i], self.created[i], self.boost[i], self.dead[i] = q, c, b, d
