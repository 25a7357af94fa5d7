"""Full-text candidate queries per backend.

SQLite: the contentless FTS5 table `role_cases_fts` (migration 0002). Its `facets`
column holds one token per (role, state[, symbol][, scenario]) combination, so the
MATCH intersects the posting list of exactly the constrained slice with the query
terms instead of visiting every case that mentions a common word; the facet column has
no weight, so it only narrows, never scores. PostgreSQL: the stored `search` tsvector,
matched with `@@` on the slice the B-tree filters find (no text index: no plan used
one). Both take the newest `TEXT_SCORE_CAP` matches. On both, the full constraint predicates of
`constraints.case_filters` are in the WHERE clause (the index narrows, SQL decides), and
the matches are scored in Python by one function, `text_scores` (BM25 term frequency),
so both backends rank alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState
from reflexmem.recall.constraints import (
    CASE_COLUMNS,
    RecallConstraints,
    case_filters,
    case_joins,
    case_params,
    case_shape,
    rc,
)
from reflexmem.recall.query import fts5_terms, tsquery_terms

FTS_TABLE = "role_cases_fts"
TEXT_SCORE_CAP = 1000
"""With query terms, at most this many constrained matches (the newest) are scored by
`text_scores`; a role-and-symbol slice holds far fewer."""
SQLITE_MATCH_CAP = TEXT_SCORE_CAP
BM25_K1 = 1.2
BM25_B = 0.75
"""BM25's customary term-frequency saturation and length normalisation."""
PG_CONFIG = "english"

_US = "\x1f"


def facet_token(
    role: str, state: str, symbol: str | None = None, scenario: str | None = None
) -> str:
    """The FTS5 facet token of a slice; must equal the SQL expression of migration 0002."""
    parts = [role, state]
    if symbol is not None:
        parts += ["s", symbol]
    if scenario is not None:
        parts += ["c", scenario]
    return "f" + _US.join(parts).encode("utf-8").hex()


def sqlite_match(c: RecallConstraints, terms: Sequence[str]) -> str:
    """FTS5 MATCH text: the slice's facet AND any of the terms (all quoted)."""
    facet = facet_token(c.role, CaseState.REFLECTED.value, c.symbol, c.scenario)
    expr = f'facets : "{facet}"'
    if terms:
        expr += f" AND ({fts5_terms(tuple(terms))})"
    return expr


def _base_select(extra: Sequence[sa.ColumnElement[Any]], source: sa.FromClause) -> sa.Select[Any]:
    return sa.select(*CASE_COLUMNS, *extra).select_from(case_joins(source))


Query = tuple[sa.Select[Any], dict[str, Any]]
"""A statement and the values of its bound parameters."""

_BUILT: dict[tuple[Any, ...], sa.Select[Any]] = {}
_LIMIT = sa.bindparam("c_limit", type_=sa.Integer)


def _once(key: tuple[Any, ...], build: Callable[[], sa.Select[Any]]) -> sa.Select[Any]:
    """One statement per shape, built the first time.

    Building a statement costs more than running it on a recall's small slice, and
    SQLAlchemy keeps the compiled form of a statement object, so reusing the object
    also skips its cache-key walk.
    """
    stmt = _BUILT.get(key)
    if stmt is None:
        stmt = _BUILT.setdefault(key, build())
    return stmt


def candidate_query(dialect: str, c: RecallConstraints, terms: Sequence[str], limit: int) -> Query:
    """Constrained cases ordered by text score (recency when there are no terms)."""
    params = case_params(c)
    key = (dialect, case_shape(c), bool(terms))
    if dialect == "sqlite":
        # No FTS5 bm25 here: its document frequencies come from walking each term's
        # whole posting list (tens of ms for a word in most cases). FTS5 matches the
        # slice; `text_scores` scores the (at most TEXT_SCORE_CAP newest) matches.
        cap = max(limit, TEXT_SCORE_CAP) if terms else limit
        params |= {"fts_match": sqlite_match(c, terms), "c_limit": cap}
        return _once(key, lambda: _sqlite_candidates(c)), params
    params["c_limit"] = max(limit, TEXT_SCORE_CAP) if terms else limit
    if terms:
        params["tsq"] = tsquery_terms(tuple(terms))
    return _once(key, lambda: _pg_candidates(c, bool(terms))), params


def _sqlite_candidates(c: RecallConstraints) -> sa.Select[Any]:
    fts = sa.table(FTS_TABLE, sa.column("rowid"))
    rowid: sa.ColumnElement[Any] = sa.literal_column("role_cases.rowid")
    stmt = _base_select(
        [sa.literal(None).label("text_score")], fts.join(rc, rowid == fts.c.rowid)
    ).where(
        sa.literal_column(FTS_TABLE).op("MATCH")(sa.bindparam("fts_match", type_=sa.String)),
        *case_filters(c),
    )
    return stmt.order_by(fts.c.rowid.desc()).limit(_LIMIT)


def _pg_candidates(c: RecallConstraints, with_terms: bool) -> sa.Select[Any]:
    filters = case_filters(c)
    stmt = _base_select([sa.literal(None).label("text_score")], rc).where(*filters)
    if with_terms:
        tsq = sa.func.to_tsquery(
            sa.literal_column(f"'{PG_CONFIG}'::regconfig"),
            sa.bindparam("tsq", type_=sa.String),
        )
        stmt = stmt.where(sa.literal_column("role_cases.search").op("@@")(tsq))
    return stmt.order_by(rc.c.decided_at.desc(), rc.c.case_id).limit(_LIMIT)


def slice_query(c: RecallConstraints, limit: int) -> Query:
    """The constrained slice on the B-tree indexes alone, newest first (no text index).

    SQLite recall reads the slice this way when it holds at most `SQLITE_MATCH_CAP`
    cases (a role and symbol slice, typically): walking the FTS5 posting lists of the
    query terms costs more than reading the whole small slice (docs/recall.md).
    """

    def build() -> sa.Select[Any]:
        stmt = _base_select([sa.literal(None).label("text_score")], rc).where(*case_filters(c))
        return stmt.order_by(rc.c.decided_at.desc(), rc.c.case_id).limit(_LIMIT)

    return _once(("slice", case_shape(c)), build), case_params(c) | {"c_limit": limit}


def rebuild_sqlite_fts(conn: sa.Connection) -> int:
    """Re-index the reflected role cases (after a VACUUM, which may renumber rowids).

    Only reflected cases are indexed (recall reads no other; migration 0022).
    """
    conn.exec_driver_sql(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('delete-all')")
    us = "char(31)"
    base = f"role_id || {us} || state"
    sym = f"{base} || {us} || 's' || {us} || symbol"
    scen = f"{us} || 'c' || {us} || scenario"
    facets = (
        f"'f' || hex({base}) || ' f' || hex({sym}) || CASE WHEN scenario IS NULL THEN '' "
        f"ELSE ' f' || hex({base} || {scen}) || ' f' || hex({sym} || {scen}) END"
    )
    result = conn.exec_driver_sql(
        f"INSERT INTO {FTS_TABLE}(rowid, decision_text, lesson, symbol, scenario, facets) "
        f"SELECT rowid, decision_text, lesson, symbol, scenario, {facets} FROM role_cases "
        f"WHERE state = '{CaseState.REFLECTED.value}'"
    )
    return int(result.rowcount or 0)


def text_scores(rows: Sequence[Any], terms: Sequence[str]) -> list[float]:
    """Each row's BM25 term-frequency score for the query terms, without IDF.

    A term counts every time it occurs in the lesson and in the decision text (with
    symbol and scenario), saturating as BM25 does (`BM25_K1`) and normalised by the
    row's length against the batch's mean (`BM25_B`). There is no IDF: computed over the
    matched batch (a role and symbol slice of a few dozen cases) it is noise, and it
    ranked worse than none on the validation seed of the relevance benchmark
    (docs/recall.md). 0 when no term occurs.
    """
    from reflexmem.memory.ranking import tokenize

    wanted = list(dict.fromkeys(terms))
    if not rows or not wanted:
        return [0.0] * len(rows)
    index = {t: i for i, t in enumerate(wanted)}
    tf = np.zeros((len(rows), len(wanted)))
    length = np.zeros(len(rows))
    for r, row in enumerate(rows):
        tokens = tokenize(
            f"{row['lesson'] or ''} {row['decision_text']} {row['symbol']} {row['scenario'] or ''}"
        )
        length[r] = len(tokens)
        for tok in tokens:
            j = index.get(tok)
            if j is not None:
                tf[r, j] += 1.0
    norm = 1.0 - BM25_B + BM25_B * length / max(float(length.mean()), 1.0)
    saturated = tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm[:, None])
    return [float(x) for x in saturated.sum(axis=1)]
