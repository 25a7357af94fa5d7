"""Migrations that must rebuild a SQLite table keep every row, child row and trigger.

SQLite changes a CHECK constraint only by copying the table; done naively that drops
the table's triggers and, with foreign keys enforced, cascades into child rows. This
test fills a ledger at revision 0003, upgrades it, and checks what survived.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.migrations.sqlite_role_cases import TRIGGERS

NOW = "2025-02-01 00:00:00.000000"


def _fill(conn: sa.Connection) -> None:
    run = conn.exec_driver_sql
    run(
        "INSERT INTO trading_decisions (decision_id, agent_id, role_id, account, market, "
        "symbol, direction, decided_at, rationale) VALUES "
        f"('d1', 'a', 'momentum', 'acct', 'US', 'AAPL', 'long', '{NOW}', '')"
    )
    run(
        "INSERT INTO trade_executions (execution_id, decision_id, account, market, symbol, "
        "direction, instrument, origin, origin_verified, executed_at) VALUES "
        f"('e1', 'd1', 'acct', 'US', 'AAPL', 'long', 'spot', 'manual_agent', 0, '{NOW}')"
    )
    run(
        "INSERT INTO role_cases (case_id, execution_id, decision_id, role_id, symbol, "
        "decision_text, state, outcome_class, lesson, batch_id, decided_at, admitted_at) "
        "VALUES ('c1', 'e1', 'd1', 'momentum', 'AAPL', 'trend up', 'reflected', "
        f"'logic_error', 'went long against the tape', 'b1', '{NOW}', '{NOW}')"
    )
    run(
        "INSERT INTO memory_entries (entry_id, namespace, tier, state, text, tags, quality, "
        "created_episode, source_ids, support, confidence, created_at) VALUES "
        "('m1', 'role:momentum', 'semantic', 'active', 'x', '[]', 0.5, 0, '[]', 2, 1.0, "
        f"'{NOW}')"
    )
    run("INSERT INTO memory_sources (entry_id, source_id) VALUES ('m1', 'c1')")


def test_sqlite_rebuilds_keep_rows_children_triggers_and_the_text_index(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    migrate.upgrade(engine, "0003")
    with engine.begin() as conn:
        _fill(conn)
    migrate.upgrade(engine)
    with engine.connect() as conn:
        counts = {
            t: conn.exec_driver_sql(f"SELECT COUNT(*) FROM {t}").scalar_one()
            for t in ("role_cases", "case_reflections", "memory_entries", "memory_sources")
        }
        triggers = set(
            conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            .scalars()
            .all()
        )
        found = conn.exec_driver_sql(
            "SELECT rowid FROM role_cases_fts WHERE role_cases_fts MATCH 'tape'"
        ).all()
    assert counts == {
        "role_cases": 1,
        "case_reflections": 1,
        "memory_entries": 1,
        "memory_sources": 1,
    }
    assert set(TRIGGERS) <= triggers
    assert len(found) == 1
    # The rebuilt table still stamps reflections through its trigger, and accepts the
    # new pending reason.
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE role_cases SET state = 'pending', outcome_class = NULL, "
            "pending_reason = 'no_market_data' WHERE case_id = 'c1'"
        )
        conn.exec_driver_sql(
            "UPDATE role_cases SET state = 'reflected', pending_reason = NULL WHERE case_id = 'c1'"
        )
    engine.dispose()
