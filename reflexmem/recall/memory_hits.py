"""Semantic and procedural memory entries for recall, live at either clock.

A role namespace counts time in episodes (one per reflected case), so an entry's
valid time is an episode: made at `created_episode`, replaced at `superseded_episode`.
Recall "as of T" (valid time) maps T to the namespace's episode clock then: the last
episode of the longest prefix of its episodes whose cases were valid by T
(`episode_clock_at`). A store back-filled from past years and one run live at each
clock hold the same episodes, so they recall the same entries, ranked at the same age.
`known_at` (recorded time) asks what had been written by then, on the wall clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np
import sqlalchemy as sa

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.ledger.memory_models import MemoryEntryRow, MemoryNamespace
from reflexmem.ledger.models import Episode
from reflexmem.memory.entries import TIER_BOOST, MemoryEntry
from reflexmem.memory.ledger_mirror import entry_from_row, role_namespace
from reflexmem.memory.ranking import TokenOverlapMatcher, rank_scores
from reflexmem.recall.constraints import RecallConstraints, _aware, cr, rc
from reflexmem.recall.hit import RecallHit
from reflexmem.recall.taint import tainted_entries

ep = cast(sa.Table, Episode.__table__)
me = cast(sa.Table, MemoryEntryRow.__table__)


def _episode_valid() -> sa.ColumnElement[Any]:
    """An episode's valid time: its case's (see `constraints.valid_time`), else its record."""
    return sa.func.coalesce(rc.c.matured_at, cr.c.reflected_at, ep.c.recorded_at)


def _episodes_with_cases() -> sa.FromClause:
    return ep.outerjoin(rc, rc.c.case_id == ep.c.case_id).outerjoin(
        cr, cr.c.case_id == ep.c.case_id
    )


def episode_clock_at(conn: sa.Connection, namespace: str, as_of: datetime) -> int | None:
    """The namespace's episode clock at valid time `as_of`; None: every episode is valid."""
    first_later = conn.execute(
        sa.select(sa.func.min(ep.c.episode_index))
        .select_from(_episodes_with_cases())
        .where(ep.c.namespace == namespace, _episode_valid() > as_of)
    ).scalar()
    return None if first_later is None else int(first_later) - 1


def episode_valid_times(
    conn: sa.Connection, namespace: str, indexes: Collection[int]
) -> dict[int, datetime]:
    """Valid time of some episodes of a namespace, by episode index."""
    if not indexes:
        return {}
    rows = conn.execute(
        sa.select(ep.c.episode_index, _episode_valid())
        .select_from(_episodes_with_cases())
        .where(ep.c.namespace == namespace, ep.c.episode_index.in_(sorted(set(indexes))))
    )
    return {int(i): _aware(v) for i, v in rows if v is not None}


@dataclass(frozen=True, slots=True)
class LiveEntries:
    """The entries live at the asked clocks, the episode clock they age at, their records."""

    entries: list[MemoryEntry]
    clock: int
    recorded: Mapping[str, datetime]


def _live_then(state_at: sa.ColumnElement[Any], after: Any) -> sa.ColumnElement[bool]:
    return sa.or_(
        me.c.state == EntryState.ACTIVE.value,
        sa.and_(me.c.state == EntryState.SUPERSEDED.value, state_at > after),
    )


def live_entries(conn: sa.Connection, c: RecallConstraints, tiers: Collection[Tier]) -> LiveEntries:
    """Entries of the role's namespace recall may return under `c` (untainted, tagged)."""
    ns = role_namespace(c.role)
    wanted_tiers = [x.value for x in tiers if x is not Tier.EPISODIC]
    if not wanted_tiers:
        return LiveEntries([], 0, {})
    n = cast(sa.Table, MemoryNamespace.__table__)
    clock_now = sa.select(n.c.clock).where(n.c.namespace == ns)
    stmt = sa.select(me).where(me.c.namespace == ns, me.c.tier.in_(wanted_tiers))
    clock: int | None = None
    if c.as_of is None and c.known_at is None:
        stmt = stmt.where(me.c.state == EntryState.ACTIVE.value)
    if c.as_of is not None:
        now = int(conn.execute(clock_now).scalar() or 0)
        then = episode_clock_at(conn, ns, c.as_of)
        clock = now if then is None else min(then, now)
        superseded = sa.func.coalesce(me.c.superseded_episode, -1)
        stmt = stmt.where(me.c.created_episode <= clock, _live_then(superseded, clock))
    if c.known_at is not None:
        stmt = stmt.where(me.c.created_at <= c.known_at, _live_then(me.c.superseded_at, c.known_at))
    rows = list(conn.execute(stmt).mappings())
    if not rows:  # nothing to check for taint (its recursive query is not free)
        return LiveEntries([], clock or 0, {})
    if clock is None:
        clock = int(conn.execute(clock_now).scalar() or 0)
    wanted = set()
    if c.symbol is not None:
        wanted.add(f"symbol:{c.symbol}")
    if c.scenario is not None:
        wanted.add(f"scenario:{c.scenario}")
    tainted = tainted_entries(conn, ns)
    entries = [
        e
        for e in map(entry_from_row, rows)
        if e.namespace == ns and wanted <= set(e.tags) and e.id not in tainted
    ]
    recorded = {str(r["entry_id"]): _aware(r["created_at"]) for r in rows}
    return LiveEntries(entries, clock, recorded)


def memory_hits(
    conn: sa.Connection,
    c: RecallConstraints,
    terms: Sequence[str],
    embed: Any,
    qvec: Any,
    weight: float,
    tiers: Collection[Tier],
) -> list[tuple[float, float, RecallHit]]:
    """Scored hits of the live entries: (score, created episode, hit).

    `embed` is the embedder's `embed` (None without embeddings); the hits' `valid_at`
    is left for `with_valid_times`, which needs it only for the few returned.
    """
    live = live_entries(conn, c, tiers)
    entries = live.entries
    if not entries:
        return []
    text = TokenOverlapMatcher()(" ".join(terms), entries) if terms else np.ones(len(entries))
    if embed is not None and qvec is not None:
        vec = embed([e.text for e in entries]) @ np.asarray(qvec, dtype=np.float32)
        match = weight * text + (1.0 - weight) * np.maximum(vec.astype(np.float64), 0.0)
    else:
        vec = None
        match = np.asarray(text, dtype=np.float64)
    quality = np.asarray([e.quality for e in entries])
    age = np.asarray([max(live.clock - e.created_episode, 0) for e in entries], dtype=np.float64)
    boost = np.asarray([TIER_BOOST[e.tier] for e in entries])
    scores = rank_scores(match, quality, age, boost)
    return [
        (
            float(scores[i]),
            float(e.created_episode),
            RecallHit(
                kind="memory",
                id=e.id,
                tier=e.tier,
                text=e.text,
                role=c.role,
                symbol=c.symbol,
                scenario=c.scenario,
                outcome_class=None,
                decided_at=None,
                score=float(scores[i]),
                match=float(match[i]),
                text_score=float(text[i]),
                vector_score=None if vec is None else float(vec[i]),
                valid_at=None,
                recorded_at=live.recorded.get(e.id),
            ),
        )
        for i, e in enumerate(entries)
    ]


def entry_valid_times(
    conn: sa.Connection, namespace: str, created: Collection[int]
) -> dict[int, datetime]:
    """When an entry made at each episode clock became valid: its prefix's latest episode.

    An entry made at episode `e` is live at valid time T exactly when `e` is at most
    `episode_clock_at(T)`, i.e. when every episode up to `e` was valid by T; so its valid
    time is the latest valid time among those episodes (missing: no episode up to `e`).
    """
    out: dict[int, datetime] = {}
    for e in sorted(set(created)):
        value = conn.execute(
            sa.select(sa.func.max(_episode_valid()))
            .select_from(_episodes_with_cases())
            .where(ep.c.namespace == namespace, ep.c.episode_index <= e)
        ).scalar()
        if value is not None:
            out[e] = _aware(value)
    return out
