"""Full-text candidate queries per backend.

SQLite: the contentless FTS5 table `role_cases_fts` (migration 0002). Its `facets`
column holds one token per (role, state[, symbol][, scenario]) combination, so the
MATCH intersects the posting list of exactly the constrained slice with the query
terms instead of visiting every case that mentions a common word; the facet column has
no weight, so it only narrows, never scores. The matches are scored in Python by
IDF-weighted coverage over the matched batch (`sqlite_text_scores`), because FTS5's
bm25 computes its document frequencies by walking each term's entire posting list.
PostgreSQL: the stored `search` tsvector, matched with `@@` on the slice the B-tree
filters find and ranked by `ts_rank_cd` (no text index: no plan used one). On both,
the full constraint predicates of `constraints.case_filters` are in the WHERE clause:
the index narrows, SQL decides.
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
SQLITE_MATCH_CAP = 1000
"""SQLite: at most this many constrained matches (the newest) are text-scored."""
LESSON_WEIGHT = 1.0
CONTEXT_WEIGHT = 0.5
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
        # No bm25 here: its document frequencies come from walking each term's whole
        # posting list (tens of ms for a word in most cases). FTS5 matches the slice;
        # `sqlite_text_scores` scores the (at most SQLITE_MATCH_CAP newest) matches.
        cap = max(limit, SQLITE_MATCH_CAP) if terms else limit
        params |= {"fts_match": sqlite_match(c, terms), "c_limit": cap}
        return _once(key, lambda: _sqlite_candidates(c)), params
    params["c_limit"] = limit
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
    if with_terms:
        tsq = sa.func.to_tsquery(
            sa.literal_column(f"'{PG_CONFIG}'::regconfig"),
            sa.bindparam("tsq", type_=sa.String),
        )
        search: sa.ColumnElement[Any] = sa.literal_column("role_cases.search")
        score = sa.func.ts_rank_cd(search, tsq).label("text_score")
        stmt = _base_select([score], rc).where(search.op("@@")(tsq), *filters)
    else:
        stmt = _base_select([sa.literal(None).label("text_score")], rc).where(*filters)
    order: list[Any] = [sa.literal_column("text_score").desc()] if with_terms else []
    return stmt.order_by(*order, rc.c.decided_at.desc(), rc.c.case_id).limit(_LIMIT)


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


def sqlite_text_scores(rows: Sequence[Any], terms: Sequence[str]) -> list[float]:
    """IDF-weighted query coverage of each row (lesson hits 1, other text 0.5).

    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) over the N matched rows, as in
    `reflexmem.memory.ranking.TokenOverlapMatcher`; the result is in [0, 1].
    """
    from reflexmem.memory.ranking import tokenize

    wanted = list(dict.fromkeys(terms))
    if not rows or not wanted:
        return [0.0] * len(rows)
    index = {t: i for i, t in enumerate(wanted)}
    n = len(rows)
    weights = np.zeros((n, len(wanted)))
    for r, row in enumerate(rows):
        for tok in tokenize(f"{row['decision_text']} {row['symbol']} {row['scenario'] or ''}"):
            j = index.get(tok)
            if j is not None:
                weights[r, j] = CONTEXT_WEIGHT
        for tok in tokenize(row["lesson"] or ""):
            j = index.get(tok)
            if j is not None:
                weights[r, j] = LESSON_WEIGHT
    df = (weights > 0).sum(axis=0).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    return [float(x) for x in (weights @ idf) / idf.sum()]
