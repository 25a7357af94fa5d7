"""Migration 0019 (valid time) on both backends: defaults for rows written before it.

A reflected case becomes valid at its recorded reflection (recallable no earlier than
before the upgrade); a superseded memory version gets the episode clock of the write
that superseded it. The downgrade drops both columns and leaves every row.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import sqlalchemy as sa

from adapters import migrate
from reflexmem.ledger.bulk import bulk_insert
from tests.integration.recall_data import T0, good, insert_cases


def _entries(engine: sa.Engine) -> None:
    at = [T0 + timedelta(hours=h) for h in (1, 5, 5, 9)]
    with engine.begin() as conn:
        bulk_insert(
            conn,
            "memory_entries",
            pl.DataFrame(
                {
                    "entry_id": ["p1", "p2", "q1", "q2"],
                    "namespace": ["role:r1"] * 4,
                    "tier": ["semantic"] * 4,
                    "state": ["superseded", "active", "superseded", "active"],
                    "text": ["v1", "v2", "other v1", "other v2"],
                    "tags": ['["pattern:a"]', '["pattern:a"]', '["pattern:b"]', '["pattern:b"]'],
                    "quality": [0.8] * 4,
                    "created_episode": [3, 7, 5, 12],
                    "source_ids": ["[]"] * 4,
                    "support": [1] * 4,
                    "confidence": [1.0] * 4,
                    "created_at": pl.Series(at, dtype=pl.Datetime("us", "UTC")),
                    # p1 was replaced by the write that made p2; q1's successor q2 came
                    # in a write whose time matches nothing: the namespace's clock.
                    "superseded_at": pl.Series(
                        [at[1], None, T0 + timedelta(hours=8), None],
                        dtype=pl.Datetime("us", "UTC"),
                    ),
                }
            ),
        )
        bulk_insert(
            conn,
            "memory_namespaces",
            pl.DataFrame(
                {
                    "namespace": ["role:r1"],
                    "next_episode": [13],
                    "clock": [12],
                    "updated_at": pl.Series([at[3]], dtype=pl.Datetime("us", "UTC")),
                }
            ),
        )


def _triggers(engine: sa.Engine) -> set[str]:
    sql = (
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'role_cases'"
        if engine.dialect.name == "sqlite"
        else "SELECT DISTINCT trigger_name FROM information_schema.triggers "
        "WHERE event_object_table = 'role_cases'"
    )
    with engine.connect() as conn:
        return {str(r[0]) for r in conn.execute(sa.text(sql))}


def test_upgrade_gives_rows_written_before_it_their_valid_times(engine: sa.Engine) -> None:
    insert_cases(
        engine, [good(1, reflected=30), good(2, state="eligible", outcome_class=None, lesson=None)]
    )
    _entries(engine)
    triggers = _triggers(engine)
    assert triggers  # the reflection stamp (and on SQLite the full-text index) live on
    migrate.downgrade(engine, "0018_drop_search_gin")
    try:
        with engine.connect() as conn:
            cols = sa.inspect(conn).get_columns("role_cases")
        assert "matured_at" not in {c["name"] for c in cols}
    finally:
        migrate.upgrade(engine)
    with engine.connect() as conn:
        cases: dict[str, object] = dict(
            conn.execute(
                sa.text("SELECT case_id, matured_at FROM role_cases ORDER BY case_id")
            ).all()
        )
        reflected = conn.execute(
            sa.text("SELECT reflected_at FROM case_reflections WHERE case_id = 'c1'")
        ).scalar_one()
        episodes: dict[str, object] = dict(
            conn.execute(sa.text("SELECT entry_id, superseded_episode FROM memory_entries")).all()
        )
    assert _triggers(engine) == triggers  # no table was copied, no trigger lost
    assert cases["c1"] is not None
    assert str(cases["c1"]) == str(reflected)
    assert cases["c2"] is None
    assert episodes == {"p1": 7, "p2": None, "q1": 12, "q2": None}
