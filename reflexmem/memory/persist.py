"""Ledger-backed memory: a `MemoryStore` on the ledger, and persisted policies and posteriors.

Exact parity with :class:`InMemoryStore` is obtained by construction: a write loads the
affected namespace into an `InMemoryStore` mirror (entries, processed windows, clock),
applies the operation there with the reference admission rules (quality floor, cap
with eviction by standing, duplicate refusal), and flushes the *difference* back in a
few bulk statements (inserted rows, evicted ids, state changes, windows, clock). On
PostgreSQL the namespace row is locked (`FOR UPDATE`) for the duration, so concurrent
writers cannot both squeeze into the last free slot of a tier.

`MemoryLedger` adds the agent side: retrieval policies as data (`retrieval_policies`),
Beta posteriors per agent and policy (`bandit_states`, Beta(1, 1) for a new arm),
seeded Thompson selection, episode recording with warm-up and the evolution gate, and
one freeze switch that makes memory, posteriors and policies read-only.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.memory_models import (
    BanditStateRow,
    MemoryEntryRow,
    MemoryNamespace,
    MemorySource,
    MemoryWindow,
    RetrievalPolicyRow,
)
from reflexmem.ledger.models import Episode
from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState, reward_from_outcome
from reflexmem.memory.distill import DistillConfig, DistillReport, distill_window, window_key
from reflexmem.memory.entries import EntryState, Freezable, FrozenError, MemoryEntry, Tier
from reflexmem.memory.loop import (
    GATE_EVERY_WINDOWS,
    GATE_START_WINDOW,
    GATE_THRESHOLD,
    WARMUP_EPISODES,
)
from reflexmem.memory.policies import RetrievalPolicy, default_policies, derive_policy
from reflexmem.memory.store import DEFAULT_CAP, QUALITY_FLOOR, InMemoryStore, WriteResult

ENTRIES = cast(sa.Table, MemoryEntryRow.__table__)
SOURCES = cast(sa.Table, MemorySource.__table__)
WINDOWS = cast(sa.Table, MemoryWindow.__table__)
NAMESPACES = cast(sa.Table, MemoryNamespace.__table__)
POLICIES = cast(sa.Table, RetrievalPolicyRow.__table__)
BANDITS = cast(sa.Table, BanditStateRow.__table__)
EPISODES = cast(sa.Table, Episode.__table__)

WINDOW_SIZE = 10
_TIER_ORDER = {t: i for i, t in enumerate(Tier)}


def role_namespace(role_id: str) -> str:
    """The memory namespace of a role (recall reads its semantic and procedural tiers)."""
    return f"role:{role_id}"


def _now() -> datetime:
    return datetime.now(UTC)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def entry_from_row(row: Any) -> MemoryEntry:
    """Rebuild a `MemoryEntry` from a `memory_entries` row."""
    return MemoryEntry(
        id=str(row["entry_id"]),
        namespace=str(row["namespace"]),
        tier=Tier(row["tier"]),
        text=str(row["text"]),
        tags=tuple(_json(row["tags"]) or ()),
        quality=float(row["quality"]),
        created_episode=int(row["created_episode"]),
        source_ids=tuple(_json(row["source_ids"]) or ()),
        state=EntryState(row["state"]),
        support=int(row["support"]),
        confidence=float(row["confidence"]),
        window_key=row["window_key"],
        outcome=None if row["outcome"] is None else float(row["outcome"]),
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
            "created_at": pl.Series([at] * len(entries), dtype=pl.Datetime("us", "UTC")),
        }
    )


@dataclass
class _Loaded:
    entries: dict[str, MemoryEntry]
    windows: dict[str, set[str]]
    clock: dict[str, int]
    next_episode: dict[str, int]


def _load(conn: sa.Connection, namespaces: Sequence[str], lock: bool) -> _Loaded:
    ns = sorted(set(namespaces))
    if not ns:
        return _Loaded({}, {}, {}, {})
    if lock and conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        conn.execute(
            pg_insert(NAMESPACES)
            .values([{"namespace": n, "updated_at": _now()} for n in ns])
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
    for n, c, e in conn.execute(
        sa.select(NAMESPACES.c.namespace, NAMESPACES.c.clock, NAMESPACES.c.next_episode).where(
            NAMESPACES.c.namespace.in_(ns)
        )
    ):
        clock[str(n)] = int(c)
        nxt[str(n)] = int(e)
    return _Loaded(entries, windows, clock, nxt)


class Mirror:
    """An `InMemoryStore` copy of some namespaces, flushed back as a bulk diff."""

    def __init__(self, conn: sa.Connection, loaded: _Loaded, store: InMemoryStore) -> None:
        self.conn = conn
        self.store = store
        self._before = loaded
        self.next_episode = dict(loaded.next_episode)

    def flush(self) -> dict[str, int]:
        """Write the difference to the ledger; returns counts of what changed."""
        after = self.store.to_dict()
        now = _now()
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
        for state in EntryState:
            ids = [e.id for e in changed if e.state is state]
            if ids:
                conn.execute(
                    sa.update(ENTRIES).where(ENTRIES.c.entry_id.in_(ids)).values(state=state.value)
                )
        windows = [
            (ns, key)
            for ns, keys in after["windows"].items()
            for key in keys
            if key not in self._before.windows.get(ns, set())
        ]
        if windows:
            bulk_insert(
                conn,
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
        names = set(after["clock"]) | set(self.next_episode)
        for ns in sorted(names):
            clock = int(after["clock"].get(ns, self._before.clock.get(ns, 0)))
            nxt = int(self.next_episode.get(ns, 0))
            if ns in self._before.clock or ns in self._before.next_episode:
                if (clock, nxt) != (
                    self._before.clock.get(ns, 0),
                    self._before.next_episode.get(ns, 0),
                ):
                    conn.execute(
                        sa.update(NAMESPACES)
                        .where(NAMESPACES.c.namespace == ns)
                        .values(clock=clock, next_episode=nxt, updated_at=now)
                    )
            else:
                conn.execute(
                    sa.insert(NAMESPACES).values(
                        namespace=ns, clock=clock, next_episode=nxt, updated_at=now
                    )
                )
        return {
            "inserted": len(inserted),
            "evicted": len(deleted),
            "state_changes": len(changed),
            "windows": len(windows),
        }


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
        loaded = _load(conn, list(namespaces), lock=True)
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
        config: DistillConfig | None = None,
    ) -> list[DistillReport]:
        """Distil several windows of one namespace in one transaction (bulk flush)."""
        self._guard(f"distill {namespace!r}")
        with self._engine.begin() as conn, self.mirror(conn, [namespace]) as m:
            return [distill_window(m.store, namespace, s, e, config) for s, e in windows]


# --------------------------------------------------------------------- policies + bandit


@dataclass(frozen=True, slots=True)
class EpisodeInput:
    """One settled episode to record: text, outcome s in [-1, 1], quality, tags, policy."""

    text: str
    outcome: float
    quality: float
    tags: tuple[str, ...] = ()
    policy: str | None = None
    source_ids: tuple[str, ...] = ()
    episode_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordReport:
    """What recording a batch of episodes changed."""

    namespace: str
    agent_id: str
    first_episode: int
    episodes: int
    stored: int
    refused: tuple[tuple[str, str], ...]
    bandit_updates: dict[str, int]
    windows_closed: tuple[str, ...]
    evolved: tuple[str, ...] = ()
    evolution_reasons: tuple[str, ...] = field(default=())


class MemoryLedger:
    """Persisted memory, policies and Thompson posteriors of agents, with one freeze switch."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        cap: int = DEFAULT_CAP,
        quality_floor: float = QUALITY_FLOOR,
        seed: int = 0,
        warmup_episodes: int = WARMUP_EPISODES,
    ) -> None:
        self.engine = engine
        self.store = LedgerMemoryStore(engine, cap=cap, quality_floor=quality_floor)
        self.seed = seed
        self.warmup_episodes = warmup_episodes
        self._frozen = False

    @property
    def frozen(self) -> bool:
        """Whether memory, posteriors and policies are read-only."""
        return self._frozen

    def freeze(self) -> None:
        """Make memory, posteriors and policies read-only: every write raises."""
        self._frozen = True
        self.store.freeze()

    def unfreeze(self) -> None:
        """Allow writes again."""
        self._frozen = False
        self.store.unfreeze()

    def _guard(self, action: str) -> None:
        if self._frozen:
            raise FrozenError(f"memory ledger is frozen: {action} refused")

    # policies -------------------------------------------------------------------------

    def ensure_agent(
        self, agent_id: str, policies: Sequence[RetrievalPolicy] | None = None
    ) -> tuple[RetrievalPolicy, ...]:
        """The agent's policies, creating the defaults at Beta(1, 1) on first use."""
        existing = self.policies(agent_id)
        if existing:
            return existing
        self._guard(f"ensure_agent {agent_id!r}")
        chosen = tuple(policies) if policies is not None else default_policies()
        with self.engine.begin() as conn:
            self._insert_policies(conn, agent_id, chosen, start=0, reason=None)
        return chosen

    def _insert_policies(
        self,
        conn: sa.Connection,
        agent_id: str,
        policies: Sequence[RetrievalPolicy],
        *,
        start: int,
        reason: str | None,
    ) -> None:
        now = _now()
        conn.execute(
            sa.insert(POLICIES),
            [
                {
                    "agent_id": agent_id,
                    "name": p.name,
                    "position": start + i,
                    "spec": p.to_dict(),
                    "parent": p.parent,
                    "generation": p.generation,
                    "reason": reason,
                    "created_at": now,
                }
                for i, p in enumerate(policies)
            ],
        )
        conn.execute(
            sa.insert(BANDITS),
            [
                {
                    "agent_id": agent_id,
                    "policy": p.name,
                    "position": start + i,
                    "alpha": bandit_fns.PRIOR_ALPHA,
                    "beta": bandit_fns.PRIOR_BETA,
                    "pulls": 0,
                    "updated_at": now,
                }
                for i, p in enumerate(policies)
            ],
        )

    def policies(self, agent_id: str) -> tuple[RetrievalPolicy, ...]:
        """The agent's policies in bandit-arm order (empty for an unknown agent)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(POLICIES.c.spec)
                .where(POLICIES.c.agent_id == agent_id)
                .order_by(POLICIES.c.position)
            ).scalars()
            return tuple(RetrievalPolicy.from_dict(_json(s)) for s in rows)

    def add_policy(self, agent_id: str, policy: RetrievalPolicy, reason: str) -> None:
        """Append an evolved policy as a new arm at Beta(1, 1)."""
        self._guard(f"add_policy {policy.name!r}")
        with self.engine.begin() as conn:
            n = conn.execute(
                sa.select(sa.func.count()).where(POLICIES.c.agent_id == agent_id)
            ).scalar()
            self._insert_policies(conn, agent_id, [policy], start=int(n or 0), reason=reason)

    # bandit -----------------------------------------------------------------------------

    def _bandit_rows(self, conn: sa.Connection, agent_id: str) -> list[Any]:
        return list(
            conn.execute(
                sa.select(BANDITS)
                .where(BANDITS.c.agent_id == agent_id)
                .order_by(BANDITS.c.position)
            ).mappings()
        )

    def bandit_state(self, agent_id: str) -> BanditState:
        """The agent's posterior (arms in position order)."""
        with self.engine.connect() as conn:
            rows = self._bandit_rows(conn, agent_id)
        return BanditState(
            tuple(r["policy"] for r in rows),
            tuple(r["alpha"] for r in rows),
            tuple(r["beta"] for r in rows),
        )

    def pulls(self, agent_id: str) -> dict[str, int]:
        """Updates credited to each arm so far."""
        with self.engine.connect() as conn:
            return {str(r["policy"]): int(r["pulls"]) for r in self._bandit_rows(conn, agent_id)}

    def _rng(self, agent_id: str, step: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(agent_id.encode("utf-8")), step])

    def select_policy(self, agent_id: str, step: int | None = None) -> RetrievalPolicy:
        """Thompson-sample a policy; reproducible from (seed, agent, step).

        ``step`` defaults to the number of updates credited so far, so the same ledger
        state always gives the same pick; selecting is allowed while frozen.
        """
        policies = {p.name: p for p in self.ensure_agent(agent_id)}
        state = self.bandit_state(agent_id)
        at = sum(self.pulls(agent_id).values()) if step is None else step
        return policies[bandit_fns.select(state, self._rng(agent_id, at))]

    def save_bandit(
        self, conn: sa.Connection, agent_id: str, state: BanditState, pulls: Mapping[str, int]
    ) -> None:
        """Write a posterior back (one executemany over the agent's arms)."""
        self._guard(f"bandit update {agent_id!r}")
        now = _now()
        conn.execute(
            sa.update(BANDITS)
            .where(BANDITS.c.agent_id == sa.bindparam("a"), BANDITS.c.policy == sa.bindparam("p"))
            .values(
                alpha=sa.bindparam("al"),
                beta=sa.bindparam("be"),
                pulls=BANDITS.c.pulls + sa.bindparam("n"),
                updated_at=now,
            ),
            [
                {"a": agent_id, "p": arm, "al": a, "be": b, "n": int(pulls.get(arm, 0))}
                for arm, a, b in zip(state.arms, state.alpha, state.beta, strict=True)
            ],
        )

    # episodes ---------------------------------------------------------------------------

    def record_episodes(
        self,
        agent_id: str,
        namespace: str,
        episodes: Sequence[EpisodeInput],
        *,
        task_family: str = "memory",
    ) -> RecordReport:
        """Record settled episodes: ledger rows, episodic entries, bandit credit, gate.

        One transaction for the batch. Episode indices continue the namespace's
        counter; an episode whose index is below the warm-up is recorded and remembered
        but credits nothing (as in `LearningLoop`). A refused entry still counts as an
        episode. At the end of a window from window 10 on, every 5 windows, a mean
        reward below 0.4 over the last 5 windows adds one derived policy.
        """
        self._guard(f"record_episodes {namespace!r}")
        policies = {p.name: p for p in self.ensure_agent(agent_id)}
        now = _now()
        with self.engine.begin() as conn:
            with self.store.mirror(conn, [namespace]) as m:
                first = m.next_episode.get(namespace, 0)
                rows: list[dict[str, Any]] = []
                results: list[WriteResult] = []
                rewards: list[tuple[int, str | None, float]] = []
                for i, ep in enumerate(episodes):
                    idx = first + i
                    clipped = min(max(float(ep.outcome), -1.0), 1.0)
                    entry = MemoryEntry(
                        id=f"epi:{namespace}:{idx}",
                        namespace=namespace,
                        tier=Tier.EPISODIC,
                        text=ep.text,
                        tags=tuple(ep.tags),
                        quality=ep.quality,
                        created_episode=idx,
                        source_ids=tuple(ep.source_ids),
                        outcome=clipped,
                    )
                    results.append(m.store.put(entry))
                    reward = reward_from_outcome(ep.outcome)
                    rewards.append((idx, ep.policy, reward))
                    rows.append(
                        {
                            "episode_id": ep.episode_id or f"ep:{namespace}:{idx}",
                            "agent_id": agent_id,
                            "task_family": task_family,
                            "outcome": clipped,
                            "payload": json.dumps(
                                {
                                    "namespace": namespace,
                                    "episode": idx,
                                    "policy": ep.policy,
                                    "reward": reward,
                                    "learned": idx >= self.warmup_episodes,
                                }
                            ),
                            "recorded_at": now,
                        }
                    )
                m.next_episode[namespace] = first + len(episodes)
            if rows:
                frame = pl.DataFrame(rows).with_columns(
                    pl.col("recorded_at").cast(pl.Datetime("us", "UTC"))
                )
                bulk_insert(conn, EPISODES.name, frame)
            state, counts = self._credit(conn, agent_id, rewards, policies)
            evolved, reasons, closed = self._gate(
                conn, agent_id, namespace, first, len(episodes), state, policies
            )
        refused = tuple((r.entry_id, r.reason or "") for r in results if not r.stored)
        return RecordReport(
            namespace=namespace,
            agent_id=agent_id,
            first_episode=first,
            episodes=len(episodes),
            stored=sum(r.stored for r in results),
            refused=refused,
            bandit_updates=counts,
            windows_closed=closed,
            evolved=evolved,
            evolution_reasons=reasons,
        )

    def _credit(
        self,
        conn: sa.Connection,
        agent_id: str,
        rewards: Sequence[tuple[int, str | None, float]],
        policies: Mapping[str, RetrievalPolicy],
    ) -> tuple[BanditState, dict[str, int]]:
        rows = self._bandit_rows(conn, agent_id)
        state = BanditState(
            tuple(r["policy"] for r in rows),
            tuple(r["alpha"] for r in rows),
            tuple(r["beta"] for r in rows),
        )
        counts: dict[str, int] = {}
        for idx, policy, reward in rewards:
            if policy is None or idx < self.warmup_episodes:
                continue
            if policy not in policies:
                raise KeyError(f"unknown policy {policy!r} for agent {agent_id!r}")
            state = bandit_fns.update(state, policy, reward)
            counts[policy] = counts.get(policy, 0) + 1
        if counts:
            self.save_bandit(conn, agent_id, state, counts)
        return state, counts

    def _gate(
        self,
        conn: sa.Connection,
        agent_id: str,
        namespace: str,
        first: int,
        n: int,
        state: BanditState,
        policies: Mapping[str, RetrievalPolicy],
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        closed: list[str] = []
        evolved: list[str] = []
        reasons: list[str] = []
        taken = dict(policies)
        for end in range(first + 1, first + n + 1):
            if end % WINDOW_SIZE:
                continue
            closed.append(window_key(namespace, end - WINDOW_SIZE, end))
            window = end // WINDOW_SIZE
            if end - 1 < self.warmup_episodes or window < GATE_START_WINDOW:
                continue
            if (window - GATE_START_WINDOW) % GATE_EVERY_WINDOWS:
                continue
            since = (window - GATE_EVERY_WINDOWS) * WINDOW_SIZE
            payloads = [
                _json(p)
                for p in conn.execute(
                    sa.select(EPISODES.c.payload).where(EPISODES.c.agent_id == agent_id)
                ).scalars()
            ]
            got = [
                float(p["reward"])
                for p in payloads
                if p.get("namespace") == namespace
                and p.get("learned")
                and p.get("policy") is not None
                and since <= int(p["episode"]) < end
            ]
            if not got:
                continue
            mean = float(np.mean(got))
            if mean >= GATE_THRESHOLD:
                continue
            parent = bandit_fns.best_arm(state)
            policy = derive_policy(taken[parent], taken)
            reason = (
                f"mean reward {mean:.3f} over episodes {since}-{end - 1} is below "
                f"{GATE_THRESHOLD}; derived '{policy.name}' from best arm '{parent}'"
            )
            count = conn.execute(
                sa.select(sa.func.count()).where(POLICIES.c.agent_id == agent_id)
            ).scalar()
            self._insert_policies(conn, agent_id, [policy], start=int(count or 0), reason=reason)
            state = bandit_fns.add_arm(state, policy.name)
            taken[policy.name] = policy
            evolved.append(policy.name)
            reasons.append(reason)
        return tuple(evolved), tuple(reasons), tuple(closed)

    # distillation -----------------------------------------------------------------------

    def due_windows(self, namespace: str) -> list[tuple[int, int]]:
        """Completed, unprocessed windows past warm-up, oldest first."""
        with self.engine.connect() as conn:
            loaded = _load(conn, [namespace], lock=False)
        done = loaded.windows.get(namespace, set())
        total = loaded.next_episode.get(namespace, 0)
        due = []
        for w in range(total // WINDOW_SIZE):
            start, end = w * WINDOW_SIZE, (w + 1) * WINDOW_SIZE
            if end - 1 < self.warmup_episodes:
                continue
            if window_key(namespace, start, end) not in done:
                due.append((start, end))
        return due

    def namespaces_due(self) -> dict[str, list[tuple[int, int]]]:
        """Every namespace with at least one window of ten new episodes to distil."""
        with self.engine.connect() as conn:
            names = [str(n) for n in conn.execute(sa.select(NAMESPACES.c.namespace)).scalars()]
        due = {ns: self.due_windows(ns) for ns in sorted(names)}
        return {ns: w for ns, w in due.items() if w}

    def distill_due(self, config: DistillConfig | None = None) -> list[DistillReport]:
        """Distil every due window of every namespace (idempotent by window key)."""
        reports: list[DistillReport] = []
        for ns, windows in self.namespaces_due().items():
            reports += self.store.distill(ns, windows, config)
        return reports
