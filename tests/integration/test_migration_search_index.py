"""Migrations of `role_cases.search`, the stored text vector that ranks recall on PostgreSQL.

0018 drops its GIN index (no recall plan used it; the downgrade restores it); 0022 computes
the vector only for reflected cases (recall reads no other), not at admission.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from tests.support import make_resources, seed_ledger


def _indexed(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'ix_role_cases_search'")
            ).scalar_one()
        )


@pytest.mark.postgres
def test_the_unused_search_index_is_dropped_and_comes_back_on_downgrade(pg_url: str) -> None:
    engine = make_engine(pg_url)
    assert _indexed(engine) == 0
    migrate.downgrade(engine, "0017_entry_stats")
    try:
        assert _indexed(engine) == 1
    finally:
        migrate.upgrade(engine)
    assert _indexed(engine) == 0
    with engine.connect() as conn:
        kind = conn.execute(
            sa.text(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_name = 'role_cases' AND column_name = 'search'"
            )
        ).scalar_one()
    assert kind == "tsvector"
    engine.dispose()


def _indexed_cases(conn: sa.Connection) -> tuple[int, int]:
    """(role cases, cases the text index holds) on either backend."""
    cases = conn.execute(sa.text("SELECT COUNT(*) FROM role_cases")).scalar_one()
    held = (
        "SELECT COUNT(search) FROM role_cases"
        if conn.dialect.name == "postgresql"
        else "SELECT COUNT(*) FROM role_cases_fts"
    )
    return int(cases), int(conn.execute(sa.text(held)).scalar_one())


def _text_hits(conn: sa.Connection, word: str) -> list[str]:
    if conn.dialect.name == "postgresql":
        sql = "SELECT case_id FROM role_cases WHERE search @@ to_tsquery('english', :w)"
    else:
        sql = (
            "SELECT c.case_id FROM role_cases_fts f JOIN role_cases c ON c.rowid = f.rowid "
            "WHERE role_cases_fts MATCH :w"
        )
    return [str(r) for r in conn.execute(sa.text(sql), {"w": word}).scalars()]


def test_cases_are_text_indexed_once_reflected_and_no_sooner(
    engine: sa.Engine, tmp_path: Path
) -> None:
    """Migration 0022: admission indexes nothing; reflection indexes; leaving it unindexes."""
    seed_ledger(make_resources(engine), tmp_path, n=200)
    with engine.begin() as conn:
        cases, held = _indexed_cases(conn)
        assert cases > 0
        assert held == 0
        case_id, state = conn.execute(
            sa.text("SELECT case_id, state FROM role_cases ORDER BY case_id LIMIT 1")
        ).one()
        reflect = (
            "UPDATE role_cases SET state = 'reflected', outcome_class = 'logic_error', "
            "lesson = 'chased a gap without volume' WHERE case_id = :c"
        )
        conn.execute(sa.text(reflect), {"c": case_id})
        assert _indexed_cases(conn) == (cases, 1)
        assert _text_hits(conn, "volume") == [case_id]
    migrate.downgrade(engine, "0021_distill_runs")
    try:
        with engine.connect() as conn:
            assert _indexed_cases(conn) == (cases, cases)  # the old index: every case
    finally:
        migrate.upgrade(engine)
    with engine.begin() as conn:
        assert _indexed_cases(conn) == (cases, 1)
        assert _text_hits(conn, "volume") == [case_id]
        conn.execute(
            sa.text(
                "UPDATE role_cases SET state = :s, outcome_class = NULL, lesson = NULL "
                "WHERE case_id = :c"
            ),
            {"c": case_id, "s": state},
        )
        assert _indexed_cases(conn) == (cases, 0)
        assert _text_hits(conn, "volume") == []
