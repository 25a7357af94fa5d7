"""`LedgerMemoryStore`: the `MemoryStore` protocol on the ledger tables.

Every write goes through a :class:`~reflexmem.memory.ledger_mirror.Mirror`: the affected
namespaces are loaded into an `InMemoryStore`, the operation runs there under the
reference admission rules (quality floor 0.3, cap 500 per tier with eviction by
standing, duplicate refusal), and only the difference is flushed back. Reads are plain
indexed queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.distill import DistillConfig, DistillReport
from reflexmem.memory.entries import Freezable, MemoryEntry
from reflexmem.memory.ledger_mirror import (
    ENTRIES,
    NAMESPACES,
    WINDOWS,
    Mirror,
    entry_from_row,
    load_namespaces,
)
from reflexmem.memory.merge import MergeConfig, distil_window
from reflexmem.memory.store import DEFAULT_CAP, QUALITY_FLOOR, InMemoryStore, WriteResult


class LedgerMemoryStore(Freezable):
    """:class:`MemoryStore` on the ledger tables, with the reference admission rules."""

    def __init__(
        self, engine: sa.Engine, cap: int = DEFAULT_CAP, quality_floor: float = QUALITY_FLOOR
    ) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        self._engine = engine
        self._cap = cap
        self._floor = quality_floor
        self._frozen = False

    @property
    def engine(self) -> sa.Engine:
        """The ledger engine."""
        return self._engine

    @property
    def cap(self) -> int:
        """Maximum entries per (namespace, tier)."""
        return self._cap

    @contextmanager
    def mirror(self, conn: sa.Connection, namespaces: Iterable[str]) -> Iterator[Mirror]:
        """Load namespaces into an in-memory mirror; flush the diff on success."""
        self._guard("write")
        loaded = load_namespaces(conn, list(namespaces), lock=True)
        snapshot = {
            "cap": self._cap,
            "quality_floor": self._floor,
            "frozen": False,
            "entries": [e.to_dict() for e in loaded.entries.values()],
            "windows": {ns: sorted(k) for ns, k in loaded.windows.items()},
            "clock": loaded.clock,
        }
        mirror = Mirror(conn, loaded, InMemoryStore.from_dict(snapshot))
        yield mirror
        mirror.flush()

    def put_many(self, entries: Sequence[MemoryEntry]) -> list[WriteResult]:
        """Admit a batch in one transaction, exactly as sequential `put`s would."""
        self._guard(f"put {len(entries)} entries")
        with self._engine.begin() as conn:
            return self.put_many_on(conn, entries)

    def put_many_on(self, conn: sa.Connection, entries: Sequence[MemoryEntry]) -> list[WriteResult]:
        """`put_many` on the caller's connection (joins its transaction)."""
        self._guard(f"put {len(entries)} entries")
        ids = [e.id for e in entries]
        elsewhere: set[str] = set()
        for start in range(0, len(ids), 500):
            elsewhere |= {
                str(r[0])
                for r in conn.execute(
                    sa.select(ENTRIES.c.entry_id).where(
                        ENTRIES.c.entry_id.in_(ids[start : start + 500])
                    )
                )
            }
        with self.mirror(conn, {e.namespace for e in entries}) as m:
            results: list[WriteResult] = []
            for e in entries:
                if e.id in elsewhere and m.store.get(e.id) is None:
                    results.append(
                        WriteResult(e.id, stored=False, reason="duplicate id: already stored")
                    )
                    continue
                results.append(m.store.put(e))
        return results

    def put(self, entry: MemoryEntry) -> WriteResult:
        """Admit one entry (see :meth:`put_many`)."""
        return self.put_many([entry])[0]

    def get(self, entry_id: str) -> MemoryEntry | None:
        """Return the stored entry with this id, if any."""
        with self._engine.connect() as conn:
            row = (
                conn.execute(sa.select(ENTRIES).where(ENTRIES.c.entry_id == entry_id))
                .mappings()
                .first()
            )
        return None if row is None else entry_from_row(row)

    def entries(
        self,
        namespace: str,
        tiers: Iterable[Tier] | None = None,
        states: Iterable[EntryState] | None = None,
    ) -> tuple[MemoryEntry, ...]:
        """Entries of one namespace in tier order, then creation order."""
        wanted = tuple(Tier) if tiers is None else tuple(dict.fromkeys(Tier(t) for t in tiers))
        stmt = sa.select(ENTRIES).where(
            ENTRIES.c.namespace == namespace, ENTRIES.c.tier.in_([t.value for t in wanted])
        )
        if states is not None:
            stmt = stmt.where(ENTRIES.c.state.in_([EntryState(s).value for s in states]))
        with self._engine.connect() as conn:
            rows = [entry_from_row(r) for r in conn.execute(stmt).mappings()]
        order = {t: i for i, t in enumerate(wanted)}
        rows.sort(key=lambda e: (order[e.tier], e.created_episode, e.id))
        return tuple(rows)

    def count(self, namespace: str, tier: Tier) -> int:
        """How many entries one tier of one namespace holds, whatever their state."""
        with self._engine.connect() as conn:
            n = conn.execute(
                sa.select(sa.func.count()).where(
                    ENTRIES.c.namespace == namespace, ENTRIES.c.tier == Tier(tier).value
                )
            ).scalar()
        return int(n or 0)

    def namespaces(self) -> tuple[str, ...]:
        """Namespaces with entries, windows or counters, sorted."""
        with self._engine.connect() as conn:
            names = set(conn.execute(sa.select(ENTRIES.c.namespace).distinct()).scalars())
            names |= set(conn.execute(sa.select(NAMESPACES.c.namespace)).scalars())
            names |= set(conn.execute(sa.select(WINDOWS.c.namespace).distinct()).scalars())
        return tuple(sorted(str(n) for n in names))

    def set_state(self, entry_id: str, state: EntryState) -> MemoryEntry:
        """Move an entry to another state; unknown ids raise KeyError."""
        self._guard(f"set_state {entry_id!r}")
        with self._engine.begin() as conn:
            result = conn.execute(
                sa.update(ENTRIES)
                .where(ENTRIES.c.entry_id == entry_id)
                .values(state=EntryState(state).value)
            )
            if not result.rowcount:
                raise KeyError(entry_id)
            row = (
                conn.execute(sa.select(ENTRIES).where(ENTRIES.c.entry_id == entry_id))
                .mappings()
                .one()
            )
        return entry_from_row(row)

    def has_window(self, namespace: str, window_key: str) -> bool:
        """Whether this distillation window was already processed for the namespace."""
        with self._engine.connect() as conn:
            hit = conn.execute(
                sa.select(WINDOWS.c.window_key).where(
                    WINDOWS.c.namespace == namespace, WINDOWS.c.window_key == window_key
                )
            ).first()
        return hit is not None

    def mark_window(self, namespace: str, window_key: str) -> bool:
        """Record a processed window; False if it was already recorded."""
        self._guard(f"mark_window {window_key!r}")
        with self._engine.begin() as conn, self.mirror(conn, [namespace]) as m:
            return m.store.mark_window(namespace, window_key)

    def distill(
        self,
        namespace: str,
        windows: Sequence[tuple[int, int]],
        config: DistillConfig | MergeConfig | None = None,
    ) -> list[DistillReport]:
        """Distil several windows of one namespace in one transaction (bulk flush)."""
        self._guard(f"distill {namespace!r}")
        with self._engine.begin() as conn, self.mirror(conn, [namespace]) as m:
            return [distil_window(m.store, namespace, s, e, config) for s, e in windows]
