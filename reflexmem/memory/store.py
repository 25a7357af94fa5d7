"""Where memory entries live: the store protocol and its in-memory implementation.

The protocol is the seam between the learning logic and persistence: the AEL benchmark
runs everything in process with :class:`InMemoryStore`, and a ledger-backed store will
implement the same methods later. The admission rules (quality floor, per-tier cap with
eviction of the lowest-ranked entry, freeze) are part of the contract, so any store must
apply them the same way; :class:`InMemoryStore` is the reference for that behaviour.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import Freezable, MemoryEntry
from reflexmem.memory.ranking import standing
from reflexmem.memory.standing import TierStanding

DEFAULT_CAP = 500
"""Entries kept per (namespace, tier); beyond it the lowest-ranked entry is evicted."""

QUALITY_FLOOR = 0.3
"""Writes below this quality are refused: weak lessons would crowd out good ones."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write did: stored or refused (with the reason), and what it evicted."""

    entry_id: str
    stored: bool
    reason: str | None = None
    evicted: tuple[str, ...] = ()


@runtime_checkable
class MemoryStore(Protocol):
    """Entries by namespace and tier, with admission rules and a freeze switch.

    Every mutating method must raise :class:`FrozenError` while the store is frozen and
    leave its state untouched.
    """

    @property
    def frozen(self) -> bool:
        """Whether writes are currently refused with :class:`FrozenError`."""
        ...

    def freeze(self) -> None:
        """Make the store read-only, e.g. for a test or deployment phase."""
        ...

    def unfreeze(self) -> None:
        """Allow writes again."""
        ...

    def put(self, entry: MemoryEntry) -> WriteResult:
        """Admit an entry, or refuse it with a reason; may evict one entry of its tier."""
        ...

    def get(self, entry_id: str) -> MemoryEntry | None:
        """Return the stored entry with this id, if any."""
        ...

    def entries(
        self,
        namespace: str,
        tiers: Iterable[Tier] | None = None,
        states: Iterable[EntryState] | None = None,
    ) -> tuple[MemoryEntry, ...]:
        """Entries of one namespace, optionally limited to some tiers and states."""
        ...

    def count(self, namespace: str, tier: Tier) -> int:
        """How many entries one tier of one namespace holds, whatever their state."""
        ...

    def set_state(self, entry_id: str, state: EntryState) -> MemoryEntry:
        """Move an entry to another state (shadow evaluation activates candidates)."""
        ...

    def has_window(self, namespace: str, window_key: str) -> bool:
        """Whether this distillation window was already processed for the namespace."""
        ...

    def mark_window(self, namespace: str, window_key: str) -> bool:
        """Record a processed distillation window; False if it was already recorded."""
        ...


class InMemoryStore(Freezable):
    """Reference :class:`MemoryStore` kept in dictionaries, with JSON snapshots.

    Eviction compares the query-independent standing (the ranking formula with
    f_match = 1) of every entry in the full tier including the newcomer, at the newest
    episode the namespace has seen; the lowest goes, ties going to the oldest and then
    the smallest id. If the newcomer itself is lowest, the write is refused rather than
    throwing away something better. Entries no recall can return any more (superseded
    versions, retired candidates) are evicted before any live entry.
    """

    def __init__(self, cap: int = DEFAULT_CAP, quality_floor: float = QUALITY_FLOOR) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self._cap = cap
        self._floor = quality_floor
        self._frozen = False
        self._tiers: dict[tuple[str, Tier], dict[str, MemoryEntry]] = {}
        self._where: dict[str, tuple[str, Tier]] = {}
        self._windows: dict[str, set[str]] = {}
        self._clock: dict[str, int] = {}
        self._views: dict[tuple[str, Tier], tuple[MemoryEntry, ...]] = {}
        self._queries: dict[str, dict[Hashable, tuple[MemoryEntry, ...]]] = {}
        self._standing: dict[tuple[str, Tier], TierStanding] = {}

    @property
    def cap(self) -> int:
        """Maximum entries per (namespace, tier)."""
        return self._cap

    @property
    def quality_floor(self) -> float:
        """Lowest quality a write may have."""
        return self._floor

    def put(self, entry: MemoryEntry) -> WriteResult:
        """Admit an entry unless frozen, below the quality floor, a duplicate or outranked."""
        self._guard(f"put {entry.id!r}")
        if entry.quality < self._floor:
            return WriteResult(
                entry.id,
                stored=False,
                reason=f"quality {entry.quality:.3f} below floor {self._floor:.3f}",
            )
        if entry.id in self._where:
            return WriteResult(entry.id, stored=False, reason="duplicate id: already stored")
        key = (entry.namespace, entry.tier)
        bucket = self._tiers.setdefault(key, {})
        clock = max(self._clock.get(entry.namespace, 0), entry.created_episode)
        evicted: tuple[str, ...] = ()
        table: TierStanding | None = None
        if len(bucket) >= self._cap:
            # The full tier's columns are kept in step with its writes (see standing.py).
            table = self._standing.get(key) or TierStanding(list(bucket.values()))
            self._standing[key] = table
            victim = table.victim(entry, clock)
            if victim.id == entry.id:
                return WriteResult(
                    entry.id,
                    stored=False,
                    reason=f"ranks below every entry of the full {entry.tier.value} tier "
                    f"(cap {self._cap})",
                )
            del bucket[victim.id]
            del self._where[victim.id]
            table.replace(victim, entry)
            evicted = (victim.id,)
        bucket[entry.id] = entry
        self._where[entry.id] = key
        self._clock[entry.namespace] = clock
        self._invalidate(key)
        if table is not None:
            self._standing[key] = table
        return WriteResult(entry.id, stored=True, evicted=evicted)

    @staticmethod
    def _lowest(entries: list[MemoryEntry], clock: int) -> MemoryEntry:
        scores = standing(entries, clock)
        low = float(scores.min())
        tied = [entries[i] for i in np.flatnonzero(scores == low).tolist()]
        return min(tied, key=lambda e: (e.created_episode, e.id))

    def get(self, entry_id: str) -> MemoryEntry | None:
        """Return the stored entry with this id, if any."""
        key = self._where.get(entry_id)
        return None if key is None else self._tiers[key][entry_id]

    def _invalidate(self, key: tuple[str, Tier]) -> None:
        self._views.pop(key, None)
        self._standing.pop(key, None)
        self._queries.pop(key[0], None)

    def _view(self, key: tuple[str, Tier]) -> tuple[MemoryEntry, ...]:
        view = self._views.get(key)
        if view is None:
            view = tuple(self._tiers.get(key, {}).values())
            self._views[key] = view
        return view

    def entries(
        self,
        namespace: str,
        tiers: Iterable[Tier] | None = None,
        states: Iterable[EntryState] | None = None,
    ) -> tuple[MemoryEntry, ...]:
        """Entries of one namespace in tier order, then insertion order.

        While the namespace is unchanged the same tuple object is returned for the same
        arguments, which lets ranking reuse the arrays it derived from it.
        """
        wanted = tuple(Tier) if tiers is None else tuple(dict.fromkeys(tiers))
        allowed = None if states is None else frozenset(states)
        cache = self._queries.setdefault(namespace, {})
        query = (wanted, allowed)
        hit = cache.get(query)
        if hit is not None:
            return hit
        out: list[MemoryEntry] = []
        for tier in wanted:
            out.extend(self._view((namespace, tier)))
        result = tuple(out) if allowed is None else tuple(e for e in out if e.state in allowed)
        cache[query] = result
        return result

    def count(self, namespace: str, tier: Tier) -> int:
        """How many entries one tier of one namespace holds, whatever their state."""
        return len(self._tiers.get((namespace, tier), {}))

    def namespaces(self) -> tuple[str, ...]:
        """Namespaces holding at least one entry or processed window, sorted."""
        names = {ns for ns, _ in self._tiers} | set(self._windows)
        return tuple(sorted(names))

    def set_state(self, entry_id: str, state: EntryState) -> MemoryEntry:
        """Replace an entry by a copy in ``state``; unknown ids raise KeyError."""
        self._guard(f"set_state {entry_id!r}")
        key = self._where.get(entry_id)
        if key is None:
            raise KeyError(entry_id)
        old = self._tiers[key][entry_id]
        updated = old.with_state(state)
        self._tiers[key][entry_id] = updated
        table = self._standing.get(key)
        self._invalidate(key)
        if table is not None:
            table.restate(old, updated)
            self._standing[key] = table
        return updated

    def has_window(self, namespace: str, window_key: str) -> bool:
        """Whether this distillation window was already processed for the namespace."""
        return window_key in self._windows.get(namespace, ())

    def mark_window(self, namespace: str, window_key: str) -> bool:
        """Record a processed distillation window; False if it was already recorded."""
        self._guard(f"mark_window {window_key!r}")
        done = self._windows.setdefault(namespace, set())
        if window_key in done:
            return False
        done.add(window_key)
        return True

    def to_dict(self) -> dict[str, Any]:
        """Snapshot as JSON-able data, from which :meth:`from_dict` rebuilds an equal store."""
        return {
            "cap": self._cap,
            "quality_floor": self._floor,
            "frozen": self._frozen,
            "entries": [e.to_dict() for bucket in self._tiers.values() for e in bucket.values()],
            "windows": {ns: sorted(keys) for ns, keys in sorted(self._windows.items())},
            "clock": dict(sorted(self._clock.items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InMemoryStore:
        """Rebuild a store from :meth:`to_dict` output, bypassing admission rules.

        The snapshot was admitted once already; re-applying the rules on load could
        evict differently if the rules changed, which would silently alter history.
        """
        store = cls(cap=int(data["cap"]), quality_floor=float(data["quality_floor"]))
        for raw in data["entries"]:
            entry = MemoryEntry.from_dict(raw)
            key = (entry.namespace, entry.tier)
            store._tiers.setdefault(key, {})[entry.id] = entry
            store._where[entry.id] = key
        store._windows = {str(ns): set(keys) for ns, keys in data["windows"].items()}
        store._clock = {str(ns): int(c) for ns, c in data["clock"].items()}
        store._frozen = bool(data["frozen"])
        return store
