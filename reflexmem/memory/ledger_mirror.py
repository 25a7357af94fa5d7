"""Ledger rows <-> memory entries, and the in-memory mirror every ledger write goes through.

Exact parity with :class:`InMemoryStore` is obtained by construction: a write loads the
affected namespaces into an `InMemoryStore` mirror (entries, processed windows, clock,
episode counter, pending learning state), applies the operation there with the reference
admission rules (quality floor, cap with eviction by standing, duplicate refusal), and
flushes the *difference* back in a few bulk statements (inserted rows, evicted ids,
state changes, windows, namespace counters). On PostgreSQL the namespace rows are locked
(`FOR UPDATE`) for the duration, so concurrent writers cannot both squeeze into the last
free slot of a tier, nor both continue one namespace's episode counter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.ledger.memory_models import (
    BanditStateRow,
    MemoryEntryRow,
    MemoryNamespace,
    MemorySource,
    MemoryWindow,
    RetrievalPolicyRow,
)
from reflexmem.ledger.models import Episode
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.store import InMemoryStore

ENTRIES = cast(sa.Table, MemoryEntryRow.__table__)
SOURCES = cast(sa.Table, MemorySource.__table__)
WINDOWS = cast(sa.Table, MemoryWindow.__table__)
NAMESPACES = cast(sa.Table, MemoryNamespace.__table__)
POLICIES = cast(sa.Table, RetrievalPolicyRow.__table__)
BANDITS = cast(sa.Table, BanditStateRow.__table__)
EPISODES = cast(sa.Table, Episode.__table__)


def role_namespace(role_id: str) -> str:
    """The memory namespace of a role (recall reads its semantic and procedural tiers)."""
    return f"role:{role_id}"


def now_utc() -> datetime:
    """The current time, timezone-aware UTC (what every ledger timestamp is)."""
    return datetime.now(UTC)


def from_json(value: Any) -> Any:
    """A JSON column's value: drivers return text (SQLite) or parsed JSON (PostgreSQL)."""
    return json.loads(value) if isinstance(value, str) else value


def entry_from_row(row: Any) -> MemoryEntry:
    """Rebuild a `MemoryEntry` from a `memory_entries` row."""
    return MemoryEntry(
        id=str(row["entry_id"]),
        namespace=str(row["namespace"]),
        tier=Tier(row["tier"]),
        text=str(row["text"]),
        tags=tuple(from_json(row["tags"]) or ()),
        quality=float(row["quality"]),
        created_episode=int(row["created_episode"]),
        source_ids=tuple(from_json(row["source_ids"]) or ()),
        state=EntryState(row["state"]),
        support=int(row["support"]),
        confidence=float(row["confidence"]),
        window_key=row["window_key"],
        outcome=None if row["outcome"] is None else float(row["outcome"]),
        wins=int(row["wins"] or 0),
        losses=int(row["losses"] or 0),
        first_episode=None if row["first_episode"] is None else int(row["first_episode"]),
        stats=from_json(row.get("stats")),
    )


def _source_kind(entry: MemoryEntry) -> str:
    return {Tier.EPISODIC: "episode", Tier.SEMANTIC: "entry", Tier.PROCEDURAL: "entry"}[entry.tier]


def _entry_frame(entries: Sequence[MemoryEntry], at: datetime) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "entry_id": [e.id for e in entries],
            "namespace": [e.namespace for e in entries],
            "tier": [e.tier.value for e in entries],
            "state": [e.state.value for e in entries],
            "text": [e.text for e in entries],
            "tags": [json.dumps(list(e.tags)) for e in entries],
            "quality": [e.quality for e in entries],
            "created_episode": [e.created_episode for e in entries],
            "source_ids": [json.dumps(list(e.source_ids)) for e in entries],
            "source_kind": [_source_kind(e) for e in entries],
            "support": [e.support for e in entries],
            "confidence": [e.confidence for e in entries],
            "window_key": pl.Series([e.window_key for e in entries], dtype=pl.String),
            "outcome": pl.Series([e.outcome for e in entries], dtype=pl.Float64),
            "wins": pl.Series([e.wins for e in entries], dtype=pl.Int64),
            "losses": pl.Series([e.losses for e in entries], dtype=pl.Int64),
            "first_episode": pl.Series([e.first_episode for e in entries], dtype=pl.Int64),
            "stats": pl.Series(
                [None if e.stats is None else json.dumps(dict(e.stats)) for e in entries],
                dtype=pl.String,
            ),
            "created_at": pl.Series([at] * len(entries), dtype=pl.Datetime("us", "UTC")),
        }
    )


@dataclass
class Loaded:
    """What the ledger holds for some namespaces, as plain values."""

    entries: dict[str, MemoryEntry]
    windows: dict[str, set[str]]
    clock: dict[str, int]
    next_episode: dict[str, int]
    learning: dict[str, Any] = field(default_factory=dict)


def load_namespaces(conn: sa.Connection, namespaces: Sequence[str], lock: bool) -> Loaded:
    """Load entries, windows and counters of ``namespaces``; ``lock`` them on PostgreSQL."""
    ns = sorted(set(namespaces))
    if not ns:
        return Loaded({}, {}, {}, {})
    if lock and conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        conn.execute(
            pg_insert(NAMESPACES)
            .values([{"namespace": n, "updated_at": now_utc()} for n in ns])
            .on_conflict_do_nothing()
        )
        conn.execute(
            sa.select(NAMESPACES.c.namespace)
            .where(NAMESPACES.c.namespace.in_(ns))
            .with_for_update()
        )
    entries = {
        str(r["entry_id"]): entry_from_row(r)
        for r in conn.execute(
            sa.select(ENTRIES)
            .where(ENTRIES.c.namespace.in_(ns))
            .order_by(ENTRIES.c.created_episode, ENTRIES.c.created_at, ENTRIES.c.entry_id)
        ).mappings()
    }
    windows: dict[str, set[str]] = {}
    for n, key in conn.execute(
        sa.select(WINDOWS.c.namespace, WINDOWS.c.window_key).where(WINDOWS.c.namespace.in_(ns))
    ):
        windows.setdefault(str(n), set()).add(str(key))
    clock: dict[str, int] = {}
    nxt: dict[str, int] = {}
    learning: dict[str, Any] = {}
    cols = NAMESPACES.c
    for n, c, e, state in conn.execute(
        sa.select(cols.namespace, cols.clock, cols.next_episode, cols.learning).where(
            cols.namespace.in_(ns)
        )
    ):
        clock[str(n)] = int(c)
        nxt[str(n)] = int(e)
        if state is not None:
            learning[str(n)] = from_json(state)
    return Loaded(entries, windows, clock, nxt, learning)


class Mirror:
    """An `InMemoryStore` copy of some namespaces, flushed back as a bulk diff.

    ``next_episode`` and ``learning`` (the namespace's pending learning state, JSON-able;
    see `reflexmem.memory.ledger_agents`) may be changed by the caller; they are written
    back with the namespace row when they differ from what was loaded.
    """

    def __init__(self, conn: sa.Connection, loaded: Loaded, store: InMemoryStore) -> None:
        self.conn = conn
        self.store = store
        self._before = loaded
        self.next_episode = dict(loaded.next_episode)
        self.learning = dict(loaded.learning)

    def flush(self) -> dict[str, int]:
        """Write the difference to the ledger; returns counts of what changed."""
        after = self.store.to_dict()
        now = now_utc()
        counts = self._flush_entries(after, now)
        counts["windows"] = self._flush_windows(after, now)
        self._flush_namespaces(after, now)
        return counts

    def _flush_entries(self, after: dict[str, Any], now: datetime) -> dict[str, int]:
        new_entries = {e["id"]: MemoryEntry.from_dict(e) for e in after["entries"]}
        before = self._before.entries
        inserted = [e for i, e in new_entries.items() if i not in before]
        deleted = [i for i in before if i not in new_entries]
        changed = [e for i, e in new_entries.items() if i in before and before[i].state != e.state]
        conn = self.conn
        for start in range(0, len(deleted), 500):
            chunk = deleted[start : start + 500]
            conn.execute(sa.delete(SOURCES).where(SOURCES.c.entry_id.in_(chunk)))
            conn.execute(sa.delete(ENTRIES).where(ENTRIES.c.entry_id.in_(chunk)))
        if inserted:
            bulk_insert(conn, ENTRIES.name, _entry_frame(inserted, now))
            links = [(e.id, s) for e in inserted for s in dict.fromkeys(e.source_ids)]
            if links:
                bulk_insert(
                    conn,
                    SOURCES.name,
                    pl.DataFrame(
                        {"entry_id": [a for a, _ in links], "source_id": [b for _, b in links]}
                    ),
                )
        clock = {str(ns): int(c) for ns, c in after["clock"].items()}
        for state in EntryState:
            for ns in sorted({e.namespace for e in changed if e.state is state}):
                ids = [e.id for e in changed if e.state is state and e.namespace == ns]
                # A superseded version is stamped on both clocks, so a recall "as of" an
                # earlier time can still tell it was the live version then: the wall
                # clock (recorded time) and the namespace's episode clock at the end of
                # this write (valid time; a version superseded inside a batch of
                # episodes counts as live until the batch's last episode).
                stamp = (
                    {"superseded_at": now, "superseded_episode": clock.get(ns, 0)}
                    if state is EntryState.SUPERSEDED
                    else {}
                )
                conn.execute(
                    sa.update(ENTRIES)
                    .where(ENTRIES.c.entry_id.in_(ids))
                    .values(state=state.value, **stamp)
                )
        return {"inserted": len(inserted), "evicted": len(deleted), "state_changes": len(changed)}

    def _flush_windows(self, after: dict[str, Any], now: datetime) -> int:
        windows = [
            (ns, key)
            for ns, keys in after["windows"].items()
            for key in keys
            if key not in self._before.windows.get(ns, set())
        ]
        if windows:
            bulk_insert(
                self.conn,
                WINDOWS.name,
                pl.DataFrame(
                    {
                        "namespace": [n for n, _ in windows],
                        "window_key": [k for _, k in windows],
                        "processed_at": pl.Series(
                            [now] * len(windows), dtype=pl.Datetime("us", "UTC")
                        ),
                    }
                ),
            )
        return len(windows)

    def _flush_namespaces(self, after: dict[str, Any], now: datetime) -> None:
        before = self._before
        names = set(after["clock"]) | set(self.next_episode) | set(self.learning)
        for ns in sorted(names):
            row = {
                "clock": int(after["clock"].get(ns, before.clock.get(ns, 0))),
                "next_episode": int(self.next_episode.get(ns, 0)),
                "learning": self.learning.get(ns),
            }
            old = {
                "clock": before.clock.get(ns, 0),
                "next_episode": before.next_episode.get(ns, 0),
                "learning": before.learning.get(ns),
            }
            if ns not in before.clock and ns not in before.next_episode:
                self.conn.execute(sa.insert(NAMESPACES).values(namespace=ns, updated_at=now, **row))
            elif row != old:
                self.conn.execute(
                    sa.update(NAMESPACES)
                    .where(NAMESPACES.c.namespace == ns)
                    .values(updated_at=now, **row)
                )
