"""`recall()`: constrained candidates from SQL, then hybrid score, then tier ranking.

1. The database returns the cases that satisfy every constraint (`constraints`),
   ordered by full-text score (`fts`), at most `pool` of them; with an embedder, the
   most recent constrained cases are added so that a paraphrase without shared words
   can still be found.
2. Each candidate gets f_match = w * text + (1 - w) * max(cosine, 0), with text the
   full-text score divided by the pool's best (1 for a query without terms).
3. The formula of docs/design.md §8, `rank_scores` orders cases (episodic tier, age in days before
   `as_of`/now, quality 1) together with the role namespace's semantic and procedural
   memory entries (age in namespace episodes) that were live at `as_of` (active, or
   superseded only after it, on the namespace's episode clock: `memory_hits`);
   candidates never appear. The episodic tier *is* the
   role cases: the namespace's episodic memory entries mirror them and are not returned.
4. Results carry distinct texts: of several items with the same wording (the same
   lesson drawn from many cases), only the best-ranked is returned.

Every returned case is re-checked against the constraints in Python
(`constraints.violations`); a violating row would be dropped, never returned. A memory
entry made from a revoked or held case is never returned (`taint`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import sqlalchemy as sa

from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import TIER_BOOST
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.ranking import rank_scores
from reflexmem.recall.constraints import RecallConstraints, _aware, violations
from reflexmem.recall.embeddings import Embedder, make_vector_index
from reflexmem.recall.fts import (
    SQLITE_MATCH_CAP,
    candidate_query,
    slice_query,
    text_scores,
)
from reflexmem.recall.hit import RecallHit
from reflexmem.recall.memory_hits import episode_valid_times, memory_hits
from reflexmem.recall.query import query_terms

log = logging.getLogger(__name__)

DEFAULT_K = 5
DEFAULT_TEXT_WEIGHT = 0.5
CASE_QUALITY = 1.0
SECONDS_PER_AGE_UNIT = 86_400.0
"""Role cases age in days: a role's decisions are its episodes, roughly one a day."""


@dataclass(frozen=True, slots=True)
class RecallResult:
    """What one recall returned, and from how many constrained candidates."""

    constraints: RecallConstraints
    query: str
    terms: tuple[str, ...]
    hits: tuple[RecallHit, ...]
    candidates: int
    backend: str
    vector_backend: str | None = None

    @property
    def case_ids(self) -> tuple[str, ...]:
        """Ids of the recalled role cases, best first."""
        return tuple(h.id for h in self.hits if h.kind == "case")


def _match(
    text: Sequence[float | None], vec: Sequence[float | None], has_terms: bool, weight: float
) -> np.ndarray[Any, np.dtype[np.float64]]:
    raw = np.asarray([0.0 if t is None else max(float(t), 0.0) for t in text])
    if has_terms:
        best = float(raw.max()) if raw.size else 0.0
        text_part = raw / best if best > 0 else raw
    else:
        text_part = np.ones(len(raw))
    if all(v is None for v in vec):
        return np.asarray(text_part, dtype=np.float64)
    vec_part = np.asarray([0.0 if v is None else max(float(v), 0.0) for v in vec])
    return np.asarray(weight * text_part + (1.0 - weight) * vec_part, dtype=np.float64)


def _text_of(item: Any) -> str:
    text = item.text if isinstance(item, RecallHit) else str(item[1]["lesson"])
    return " ".join(text.casefold().split())


def _distinct_texts(
    ordered: Sequence[tuple[float, float, Any]], k: int
) -> list[tuple[float, float, Any]]:
    """The first `k` items of distinct wording (best-ranked first)."""
    seen: set[str] = set()
    out: list[tuple[float, float, Any]] = []
    for hit in ordered:
        text = _text_of(hit[2])
        if text in seen:
            continue
        seen.add(text)
        out.append(hit)
        if len(out) == k:
            break
    return out


def _sqlite_small_slice(
    conn: sa.Connection, c: RecallConstraints, terms: Sequence[str]
) -> list[Any] | None:
    """SQLite with terms: the slice's cases sharing a term, if the slice is small.

    The B-tree slice is read whole when it holds at most `SQLITE_MATCH_CAP` cases; its
    rows without any query term are dropped, leaving what the FTS5 MATCH would return
    (as `text_scores` would score 0). None: use the FTS5 index.
    """
    if conn.dialect.name != "sqlite" or not terms:
        return None
    rows = list(conn.execute(*slice_query(c, SQLITE_MATCH_CAP + 1)).mappings())
    if len(rows) > SQLITE_MATCH_CAP:
        return None
    scores = text_scores(rows, terms)
    return [r for r, s in zip(rows, scores, strict=True) if s > 0]


def recall(
    conn: sa.Connection,
    constraints: RecallConstraints,
    query: str,
    *,
    k: int = DEFAULT_K,
    embedder: Embedder | None = None,
    text_weight: float = DEFAULT_TEXT_WEIGHT,
    pool: int | None = None,
    include_memory: bool = True,
    now: datetime | None = None,
    tiers: Collection[Tier] = tuple(Tier),
) -> RecallResult:
    """Recall up to `k` items for `query` under `constraints` (see the module doc).

    `tiers` limits what is returned (a retrieval policy's tiers): without the episodic
    tier no case is returned, without the others no memory entry.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    if not 0.0 <= text_weight <= 1.0:
        raise ValueError("text_weight must be in [0, 1]")
    terms = query_terms(query)
    dialect = conn.dialect.name
    size = pool if pool is not None else max(50, 5 * k)
    rows: dict[str, Any] = {}
    want_cases = Tier.EPISODIC in tiers and k > 0
    fetched = _sqlite_small_slice(conn, constraints, terms) if want_cases else None
    if fetched is None:
        fetched = (
            list(conn.execute(*candidate_query(dialect, constraints, terms, size)).mappings())
            if want_cases
            else []
        )
    if terms:
        scores = text_scores(fetched, terms)
        best = sorted(range(len(fetched)), key=lambda i: -scores[i])[:size]
        for i in best:
            rows[str(fetched[i]["case_id"])] = {**fetched[i], "text_score": scores[i]}
    else:
        for row in fetched:
            rows[str(row["case_id"])] = row
    vector_backend = None
    vec_scores: dict[str, float] = {}
    qvec = None
    if embedder is not None and want_cases:
        if terms:
            for row in conn.execute(*candidate_query(dialect, constraints, (), size)).mappings():
                rows.setdefault(str(row["case_id"]), row)
        index = make_vector_index(conn, embedder)
        vector_backend = type(index).__name__
        qvec = embedder.embed([query])[0]
        vec_scores = index.scores(conn, list(rows), qvec)
    kept: list[Any] = []
    for cid, row in rows.items():
        bad = violations(row, constraints)
        if bad:  # pragma: no cover - the SQL filters make this unreachable
            log.error("recall dropped case %s violating %s", cid, bad)
            continue
        kept.append(row)
    reference = constraints.as_of or now or datetime.now(UTC)
    case_match = _match(
        [r["text_score"] for r in kept],
        [vec_scores.get(str(r["case_id"])) if embedder else None for r in kept],
        bool(terms),
        text_weight,
    )
    ages = np.asarray(
        [
            max((reference - _aware(r["decided_at"])).total_seconds(), 0.0) / SECONDS_PER_AGE_UNIT
            for r in kept
        ]
    )
    n = len(kept)
    case_scores = rank_scores(
        case_match, np.full(n, CASE_QUALITY), ages, np.full(n, TIER_BOOST[Tier.EPISODIC])
    )
    hits: list[tuple[float, float, Any]] = [
        (float(case_scores[i]), _aware(r["decided_at"]).timestamp(), (i, r))
        for i, r in enumerate(kept)
    ]
    if include_memory and k > 0:
        if embedder is not None and qvec is None:
            qvec = embedder.embed([query])[0]
        embed = embedder.embed if embedder is not None else None
        hits += memory_hits(conn, constraints, terms, embed, qvec, text_weight, tiers)

    def key(h: tuple[float, float, Any]) -> tuple[float, float, str]:
        item = h[2]
        ident = item.id if isinstance(item, RecallHit) else str(item[1]["case_id"])
        return (-h[0], -h[1], ident)

    ordered = _distinct_texts(sorted((h for h in hits if h[0] > 0), key=key), k)
    made = {int(h[1]) for h in ordered if isinstance(h[2], RecallHit)}
    valid = episode_valid_times(conn, role_namespace(constraints.role), made)
    out: list[RecallHit] = []
    for score, episode, item in ordered:
        if isinstance(item, RecallHit):
            out.append(replace(item, valid_at=valid.get(int(episode))))
            continue
        i, r = item
        cid = str(r["case_id"])
        out.append(
            RecallHit(
                kind="case",
                id=cid,
                tier=Tier.EPISODIC,
                text=str(r["lesson"]),
                role=str(r["role_id"]),
                symbol=r["symbol"],
                scenario=r["scenario"],
                outcome_class=r["outcome_class"],
                decided_at=_aware(r["decided_at"]),
                score=score,
                match=float(case_match[i]),
                text_score=0.0 if r["text_score"] is None else float(r["text_score"]),
                vector_score=vec_scores.get(cid) if embedder else None,
                valid_at=_aware(r["valid_at"]),
                recorded_at=_aware(r["reflected_at"]),
            )
        )
    return RecallResult(
        constraints=constraints,
        query=query,
        terms=terms,
        hits=tuple(out),
        candidates=len(kept),
        backend=dialect,
        vector_backend=vector_backend,
    )
